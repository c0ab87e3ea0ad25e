"""The Sort template: a group with one ``sort`` or ``argsort``
(lowering.lower_sort) and elementwise or movement ops around it (a median,
a percentile, a top-k pick, a median filter over a stack of shifted
slices).

A long axis sorts by radix passes (lowering.lower_radix_sort, scheduled by
``_radix``): its one Func at root, parallel over rows or over the chunks of
a lone row. The rest of this docstring is about the bitonic network of
shorter axes.

The sorted values are computed at root in parallel tasks of ``tile``
lanes: the last axis of the sort's shape other than the sorted one. Per
task, the network (both slots) sits in one buffer of tile x n x 2 keys,
stored lanes innermost, and every comparator step runs over it as vectors
across the lanes: a comparator is then an integer min or max of two
vectors (a select of pairs for argsort), with no shuffles, whatever the
distance between its elements. Up to ``unroll`` elements the axis is
unrolled, so each element's min or max is known at compile time and the
keys can stay in registers. The group's outputs read the sorted values
(only the positions they need: a median's middle) vectorized along their
last axis, in parallel rows. A 1-D sort has no lanes: its network runs at
root, vectors along the axis (``_one_row``).
"""

from __future__ import annotations

import halide as hl

from ..errors import HalojitError

SORT = ({"vector": "16", "tile_kib": "64", "unroll": "32", "parallel": "1", "radix": "auto",
         "chunks": "0"},
        "sorts along one axis (np.sort, argsort, median, percentile): long axes by LSD "
        "radix passes (radix=auto: a lone row of 256 or more, rows of 8192 or more; 1 "
        "always, 0 never), a lone row in chunks (0: one per thread) counted and scattered "
        "in parallel; other axes by tasks of lanes along another axis, each a bitonic "
        "network over a tile_kib KiB buffer, vector lanes wide, unrolled up to unroll "
        "elements; parallel=0 runs one task at a time")


def radix_params(params) -> tuple[str, int]:
    """The (radix, chunks) parameters of a Sort spec, checked."""
    radix, chunks = params.get("radix", "auto"), params.get("chunks", "0")
    if radix not in ("auto", "0", "1"):
        raise HalojitError(f"Sort: radix must be auto, 0 or 1, got {radix!r}")
    if not chunks.isdigit():
        raise HalojitError(f"Sort: chunks must be a whole number (0: one per thread), "
                           f"got {chunks!r}")
    return radix, int(chunks)


# keys (elements x network) per parallel task, at least
PARALLEL_KEYS = 1 << 15
# a sort along the last axis at least this long stores its rows in place
ROW_STORE_MIN = 16


def one_lone_loop(graph, ops) -> bool:
    """Whether the graph's only axis loop (reduction, scan, sort, scatter or
    matmul) is one node whose op is in ``ops``: the groups fusion builds
    around a sort or a scatter (fusion.LONE_LOOPS)."""
    from ..graph.ops import LINALG, REDUCTION, REGISTRY, SCAN, SCATTER, SORT
    loops = [n for n in graph.nodes if n.op not in ("input", "constant")
             and REGISTRY[n.op].trait in (REDUCTION, SCAN, SORT, SCATTER, LINALG)]
    return len(loops) == 1 and loops[0].op in ops


def sort_fits(graph) -> bool:
    """Exactly one sort or argsort, and no reduction, scan, scatter or matmul
    (fusion keeps them out of a sort's group; a graph built otherwise takes
    Adams2019)."""
    from ..graph.ops.reduce import SORTS
    return one_lone_loop(graph, SORTS)


def _floor_pow2(v: int) -> int:
    p = 1
    while p * 2 <= v:
        p *= 2
    return p


def _one_row(f, g, ax_f, ax_g, steps, n, vector, parallel) -> str:
    """No other axis to put lanes on (a 1-D sort): the network at root,
    vectors along the axis (gathers for the short distances), each step in
    parallel chunks: a step reads the other slot, so its elements are
    independent."""
    from .templates import _vectorize
    g.compute_root()
    f.compute_root()
    if n >= 16:
        _vectorize(g, ax_g, vector)
        _vectorize(f, ax_f, vector)
        chunk = max(vector, PARALLEL_KEYS)
        for k, rx in steps:
            u = f.update(k)
            if parallel and n >= 2 * chunk:
                ro, ri = hl.RVar(f"{rx.name()}_o"), hl.RVar(f"{rx.name()}_i")
                u.split(rx, ro, ri, chunk).parallel(ro).vectorize(ri, vector)
            else:
                u.vectorize(rx, vector)
    return f"{g.name()}.compute_root(); {f.name()}.compute_root()  # one row"


def _tiles(f, g, shape, axis, lanes, steps, params, parallel) -> list[str]:
    """The sorted values at root in tasks of ``tile`` lanes, the network
    computed per task over its own buffer (lanes innermost)."""
    from .templates import _int, _vectorize, fuse_loops
    vector, tile_kib, unroll = (_int(params, k) for k in ("vector", "tile_kib", "unroll"))
    ndim, n = len(shape), shape[axis]
    gargs, fargs = g.args(), f.args()  # Halide order: [numpy's last axis, ..., slot]
    ax_g, ax_f = gargs[ndim - 1 - axis], fargs[ndim - 1 - axis]
    ln_g, ln_f = gargs[ndim - 1 - lanes], fargs[ndim - 1 - lanes]
    small = n <= unroll
    key_bytes = max(1, sum(t.bytes() for t in f.types()))
    extent = shape[lanes]
    v = min(vector, _floor_pow2(extent))
    # a short axis: one vector of lanes per network, whose keys LLVM keeps
    # in registers; else about tile_kib KiB of keys
    per_task = 1 if small else max(1, tile_kib * 1024 // (2 * n * key_bytes * v))
    tile = min(v * per_task, extent // v * v)
    others = [a for a in gargs if a.name() not in (ln_g.name(), ax_g.name())]
    lo, li = hl.Var("lo"), hl.Var("li")
    # all lanes, whatever the outputs need: a tile shifted inwards over a
    # narrower region (one row of the sorted values, ``np.sort(x, 1)[12]``)
    # would start before lane 0 and read the input there
    g.compute_root().bound(ln_g, 0, extent).split(ln_g, lo, li, tile,
                                                  hl.TailStrategy.ShiftInwards)
    if axis == ndim - 1 and n >= ROW_STORE_MIN:
        # rows in place, vectors along them (read across the network's lanes)
        g.reorder(ax_g, li, lo)
        _vectorize(g, ax_g, min(vector, _floor_pow2(n)))
        lines = [f"{g.name()}.compute_root().split(lanes, lo, li, {tile})"
                 f".reorder(axis, li, lo).vectorize(axis)"]
    else:
        # stored lanes innermost: a median's middle is one dense row of it
        g.reorder_storage(ln_g, ax_g, *others).reorder(li, ax_g, lo)
        _vectorize(g, li, v)
        lines = [f"{g.name()}.compute_root().reorder_storage(lanes, axis, ...)"
                 f".split(lanes, lo, li, {tile}).vectorize(li, {v})"]
    at = fuse_loops(g, lo, others, "task")
    if parallel:
        tasks = -(-extent // tile)
        for a in range(ndim):
            if a not in (axis, lanes):
                tasks *= shape[a]
        per_par = max(1, min(tasks // 8, PARALLEL_KEYS // (tile * n)))
        par, inner = hl.Var("par"), hl.Var("tin")
        g.split(at, par, inner, per_par, hl.TailStrategy.GuardWithIf).parallel(par)
        at = inner
        lines.append(f"    .split(task, par, tin, {per_par}).parallel(par)")
    f.compute_at(g, at)
    rest = [a for a in fargs if a.name() not in (ln_f.name(), ax_f.name())]
    f.reorder_storage(ln_f, ax_f, *rest)
    fo, fi = hl.Var("fo"), hl.Var("fi")
    f.split(ln_f, fo, fi, v).reorder(fi, ax_f, fo).vectorize(fi)
    f.unroll(fargs[-1])  # the slot: keys computed for slot 0 only
    if small:
        f.unroll(ax_f)
    for k, rx in steps:
        u = f.update(k)
        u.split(ln_f, fo, fi, v).vectorize(fi)
        if small:
            u.reorder(fi, rx, fo).unroll(rx)
        else:  # the step's index arithmetic once per element for all the lanes
            u.reorder(fi, fo, rx)
            if per_task <= 8:
                u.unroll(fo)
    lines.append(f"{f.name()}.compute_at({g.name()}, {at.name()})"
                 ".reorder_storage(lanes, axis, ...)")
    lines.append(f"    pure and {len(steps)} steps: .vectorize(lanes, {v})"
                 f"{'.unroll(axis)' if small else ''}")
    return lines


def apply_sort(lowered, params) -> str:
    from .templates import _int, fix_extents
    vector = _int(params, "vector")
    parallel = params.get("parallel", "1") != "0"
    fix_extents(lowered)
    kinds = ("sortnet", "radixnet", "sorted")
    stages = {st.kind: st for st in lowered.stages if st.kind in kinds}
    if len(stages) != 2 or "sorted" not in stages:
        raise HalojitError("Sort does not apply to this group")
    srt = stages["sorted"]
    shape, axis = srt.shape, srt.axis
    lines = []
    for st in lowered.stages:
        if st.kind not in kinds:
            st.func.compute_inline()
            lines.append(f"{st.func.name()}.compute_inline()")
    if "radixnet" in stages:
        lines += _radix(stages["radixnet"], srt, vector, parallel)
        return _outputs(lowered, vector, parallel, lines)
    net = stages["sortnet"]
    f, g = net.func, srt.func
    steps = [(k, r.x) for k, r in enumerate(net.rdom)]
    lanes = next((a for a in reversed(range(len(shape))) if a != axis and shape[a] > 1), None)
    if lanes is None:
        ax = len(shape) - 1 - axis
        lines.append(_one_row(f, g, f.args()[ax], g.args()[ax], steps, shape[axis], vector,
                              parallel))
    else:
        lines += _tiles(f, g, shape, axis, lanes, steps, params, parallel)
    return _outputs(lowered, vector, parallel, lines)


def _radix(net, srt, vector: int, parallel: bool) -> list[str]:
    """A radix sort (lowering.lower_radix_sort): its Func at root, keys
    written in vectors, parallel over rows or over the chunks of a lone
    row (whose counts, cursors and keys are their own: the races Halide
    cannot rule out in a scatter do not happen), the scatter's two steps
    per key unrolled; the keys' span (which passes run) before it, a vector
    of lanes per chunk or row. The sorted values inline into the outputs."""
    from .templates import _vectorize, fuse_loops
    f, plan = net.func, net.rdom
    srt.func.compute_inline()
    # the keys' span: lanes in one vector, chunks (or rows) in parallel
    span, passes = plan.span, plan.passes
    span.compute_root()
    su = span.update(0)
    sargs = span.args()  # lane, chunk, rows
    su.vectorize(sargs[0])
    if parallel and (plan.rows or plan.chunks > 1):
        su.parallel(fuse_loops(su, sargs[1], list(sargs[2:]), "spanrow"))
    passes.compute_root()
    f.compute_root()
    args = f.args()  # Halide order: the key's place, the slot, then the rows
    row, inner = None, args[0]
    if parallel and plan.rows:
        row = fuse_loops(f, args[2], list(args[3:]), "row")
        f.parallel(row)
    elif parallel:
        jo, inner = hl.Var("jo"), hl.Var("ji")
        f.split(args[0], jo, inner, PARALLEL_KEYS, hl.TailStrategy.GuardWithIf).parallel(jo)
    _vectorize(f, inner, vector)
    for p, (clear, count, scan, scatter) in enumerate(plan.rdoms):
        ups = [f.update(4 * p + k) for k in range(4)]
        ups[0].vectorize(clear.x, vector)
        ups[3].unroll(scatter.x)
        if row is not None:
            for u in ups:
                u.parallel(fuse_loops(u, args[2], list(args[3:]), "row"))
        elif parallel and plan.chunks > 1:
            ups[1].allow_race_conditions().parallel(count.y)
            ups[3].allow_race_conditions().parallel(scatter.z)
    how = "rows" if row is not None else f"{plan.chunks} chunks" if parallel else "serial"
    return [f"{srt.func.name()}.compute_inline()",
            f"{f.name()}.compute_root()  # radix sort, {len(plan.rdoms)} passes, "
            f"parallel over {how}"]


def _outputs(lowered, vector: int, parallel: bool, lines: list[str]) -> str:
    """The group's outputs vectorized along rows, in parallel rows."""
    from .templates import _vectorize, fuse_loops
    for out, node in zip(lowered.outputs, lowered.graph.outputs):
        oargs = out.args()
        if not oargs:
            continue
        inner = oargs[0]
        if parallel and len(oargs) == 1 and node.shape[0] >= 2 * PARALLEL_KEYS:
            # a long 1-D output (a lone row's sort) in parallel chunks
            task, inner = hl.Var(f"{oargs[0].name()}_task"), hl.Var(f"{oargs[0].name()}_in")
            out.split(oargs[0], task, inner, PARALLEL_KEYS, hl.TailStrategy.GuardWithIf)
            out.parallel(task)
        if node.shape[-1] >= 8:
            _vectorize(out, inner, min(vector, _floor_pow2(node.shape[-1])))
        if parallel and len(oargs) > 1:
            out.parallel(fuse_loops(out, oargs[1], list(oargs[2:]), "row"))
        lines.append(f"{out.name()}: vectorized rows{', parallel' if parallel else ''}")
    return "\n".join(lines)
