"""The Sort template: a group with one ``sort`` (lowering.lower_sort) and
elementwise or movement ops around it (a median, a percentile, a median
filter over a stack of shifted slices).

The sorted values are computed at root in parallel tasks of ``T`` lanes:
the axis at the end of the sort's shape other than the sorted one. Per
task, the network's keys (both slots) sit in one buffer of T x n x 2 keys,
stored lanes innermost, and every comparator step runs over it as vectors
across the lanes: a comparator is then an integer min or max of two
vectors, with no shuffles, whatever the distance between its elements.
Up to ``unroll`` elements the axis is unrolled, so each element's min or
max is known at compile time (no select) and the keys stay in registers
where LLVM can keep them. The group's outputs read the sorted values
(only the positions they need: a median's middle) vectorized along their
last axis, in parallel rows.
"""

from __future__ import annotations

import halide as hl

from ..errors import HalojitError

SORT = ({"vector": "16", "tile_kib": "64", "unroll": "32", "parallel": "1"},
        "sorts along one axis (np.sort, argsort, median, percentile): tasks of lanes along "
        "another axis, each a bitonic network over a tile_kib KiB buffer, vector lanes "
        "wide, unrolled up to unroll elements; parallel=0 runs one task at a time")

_REFUSED = ("matmul", "cumsum", "cumprod", "sum", "prod", "max", "min", "any", "all",
            "argmax", "argmin")


# keys (elements x network) per parallel task, at least
PARALLEL_KEYS = 1 << 15
# a sort along the last axis at least this long stores its rows in place
ROW_STORE_MIN = 16


def sort_fits(graph) -> bool:
    """Exactly one sort or argsort, and no reduction, scan or matmul (fusion
    keeps them out of a sort's group; a graph built otherwise takes
    Adams2019)."""
    sorts = 0
    for node in graph.nodes:
        if node.op in _REFUSED:
            return False
        sorts += node.op in ("sort", "argsort")
    return sorts == 1


def _floor_pow2(v: int) -> int:
    p = 1
    while p * 2 <= v:
        p *= 2
    return p


def apply_sort(lowered, params) -> str:
    from .templates import _int, _vectorize, fix_extents, fuse_loops
    vector, tile_kib, unroll = (_int(params, k) for k in ("vector", "tile_kib", "unroll"))
    parallel = params.get("parallel", "1") != "0"
    fix_extents(lowered)
    stages = {st.kind: st for st in lowered.stages if st.kind in ("sortnet", "sorted")}
    if len(stages) != 2:
        raise HalojitError("Sort does not apply to this group")
    net, srt = stages["sortnet"], stages["sorted"]
    shape, axis = srt.shape, srt.axis
    ndim, n = len(shape), shape[srt.axis]
    f, g = net.func, srt.func
    gargs, fargs = g.args(), f.args()  # Halide order: [numpy's last axis, ..., slot]
    lines = []
    for st in lowered.stages:
        if st.kind not in ("sortnet", "sorted"):
            st.func.compute_inline()
            lines.append(f"{st.func.name()}.compute_inline()")
    lanes = next((a for a in reversed(range(ndim)) if a != axis and shape[a] > 1), None)
    ax_g, ax_f = gargs[ndim - 1 - axis], fargs[ndim - 1 - axis]
    steps = [(k, r.x) for k, r in enumerate(net.rdom)]
    small = n <= unroll
    if lanes is None:  # one row: the whole network at root, vectors along the axis
        g.compute_root()
        f.compute_root()
        if n >= 16:
            _vectorize(g, ax_g, vector)
            _vectorize(f, ax_f, vector)
            # each step reads the other slot: its elements are independent
            chunk = max(vector, PARALLEL_KEYS)
            for k, rx in steps:
                u = f.update(k)
                if parallel and n >= 2 * chunk:
                    ro, ri = hl.RVar(f"{rx.name()}_o"), hl.RVar(f"{rx.name()}_i")
                    u.split(rx, ro, ri, chunk).parallel(ro).vectorize(ri, vector)
                else:
                    u.vectorize(rx, vector)
        lines.append(f"{g.name()}.compute_root(); {f.name()}.compute_root()  # one row")
    else:
        key_bytes = max(1, sum(t.bytes() for t in f.types()))
        extent = shape[lanes]
        v = min(vector, _floor_pow2(extent))
        # a short axis: one vector of lanes per network, whose keys LLVM
        # keeps in registers; else about tile_kib KiB of keys
        per_task = 1 if small else max(1, tile_kib * 1024 // (2 * n * key_bytes * v))
        tile = min(v * per_task, extent // v * v)
        ln_g, ln_f = gargs[ndim - 1 - lanes], fargs[ndim - 1 - lanes]
        others = [a for a in gargs if a.name() not in (ln_g.name(), ax_g.name())]
        lo, li = hl.Var("lo"), hl.Var("li")
        g.compute_root().split(ln_g, lo, li, tile, hl.TailStrategy.ShiftInwards)
        if axis == ndim - 1 and n >= ROW_STORE_MIN:
            # rows in place: vectors along them (read across the network's lanes)
            g.reorder(ax_g, li, lo)
            _vectorize(g, ax_g, min(vector, _floor_pow2(n)))
        else:
            # stored lanes innermost: a median's middle is one dense row of it
            g.reorder_storage(ln_g, ax_g, *others).reorder(li, ax_g, lo)
            _vectorize(g, li, v)
        task = fuse_loops(g, lo, others, "task")
        at = task
        if parallel:
            tasks = -(-extent // tile)
            for a in range(ndim):
                if a not in (axis, lanes):
                    tasks *= shape[a]
            per_par = max(1, min(tasks // 8, PARALLEL_KEYS // (tile * n)))
            par, at = hl.Var("par"), hl.Var("tin")
            g.split(task, par, at, per_par, hl.TailStrategy.GuardWithIf).parallel(par)
        f.compute_at(g, at)
        rest = [a for a in fargs if a.name() not in (ln_f.name(), ax_f.name())]
        f.reorder_storage(ln_f, ax_f, *rest)
        fo, fi = hl.Var("fo"), hl.Var("fi")
        f.split(ln_f, fo, fi, v).reorder(fi, ax_f, fo).vectorize(fi)
        slot = fargs[-1]
        f.unroll(slot)
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
        lines.append(f"{g.name()}.compute_root().reorder_storage(lanes, axis, ...)"
                     f".split(lanes, lo, li, {tile}).vectorize(li, {v})"
                     f"{'.parallel(tasks)' if parallel else ''}")
        lines.append(f"{f.name()}.compute_at({g.name()}, task).reorder_storage(lanes, axis, ...)")
        lines.append(f"    pure and {len(steps)} steps: .vectorize(lanes, {v})"
                     f"{'.unroll(axis)' if small else ''}")
    for out, node in zip(lowered.outputs, lowered.graph.outputs):
        oargs = out.args()
        if not oargs:
            continue
        if node.shape[-1] >= 8:
            _vectorize(out, oargs[0], min(vector, _floor_pow2(node.shape[-1])))
        if parallel and len(oargs) > 1:
            row = fuse_loops(out, oargs[1], list(oargs[2:]), "row")
            out.parallel(row)
        lines.append(f"{out.name()}: vectorized rows{', parallel' if parallel else ''}")
    return "\n".join(lines)
