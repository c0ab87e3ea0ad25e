"""The ColReduce template: reductions over leading axes with the last axis
kept (``x.sum(axis=0)``, ``x.mean(axis=0)``, a softmax over axis 0, a 3-D
mean over axis 1).

Lowering (generators.lowering.lower_col_reduce) cuts the outermost reduced
axis into ``chunks`` runs of consecutive rows. Each chunk is a parallel task
that keeps one accumulator per kept element and walks its rows in memory
order, ``unroll`` rows at a time per accumulator vector (one load and store
of the accumulators per ``unroll`` rows); the chunks' partials are combined
in chunk order afterwards. Every read streams, where the autoscheduler
walked columns (a 16 KiB stride per element on a (4096, 4096) float32).

Measured on the 2-core AVX-512 KVM VM, float32, medians of 21 warm calls:
``x.sum(axis=0)`` of (4096, 4096) Adams2019 3.7 ms (numpy 2.85), this
schedule as a Halide JIT prototype with 8 chunks: one row at a time 1.5-1.8
ms, 4 or 8 rows per accumulator load 1.25-1.3 ms (the read roof is 1.15).
Through halojit, three alternating runs: 8 rows and 32 lanes 1.26-1.37 ms
against 4 rows and 16 lanes 1.33-1.51 on the column sum, but 2.1-4.3
against 1.6-2.1 on ``x.mean(axis=1)`` of (256, 1024, 64): the defaults stay
4 and 16, the tuner tries the rest.
"""

from __future__ import annotations

import halide as hl

from ..errors import HalojitError
from ..graph.ops.reduce import ARG_REDUCERS, REDUCERS, SCANS, SCATTERS, SORTING

COL_REDUCE = ({"chunks": "8", "unroll": "4", "vector": "16", "inline": "1", "parallel": "1"},
              "reductions over leading axes (last axis kept): chunks of rows as parallel "
              "tasks, each streaming its rows into a row of accumulators, unroll rows "
              "per accumulator vector, then the chunks combined; inline=1 recomputes "
              "values read twice (x - mean, softmax's exp) instead of storing them")

# the reductions the chunked lowerings handle, and the ops that keep a group
# from ColReduce and FullReduce
CHUNKED_OPS = tuple(REDUCERS)
UNCHUNKED_OPS = ("matmul", *ARG_REDUCERS, *SCANS, *SORTING, *SCATTERS)


def col_reduce_fits(graph) -> bool:
    """One output; at least one reduction, each over leading axes of an
    input of two or more dimensions whose last axis it keeps; no matmul or
    arg-reduction."""
    if len(graph.outputs) != 1:
        return False
    found = False
    for node in graph.nodes:
        if node.op in UNCHUNKED_OPS:
            return False
        if node.op in CHUNKED_OPS:
            axes = node.params["axes"]
            shape = node.inputs[0].aval.shape
            if not axes or len(shape) < 2 or len(shape) - 1 in axes:
                return False
            found = True
    return found


# The default takes ColReduce when a chunk's row of accumulators (the kept
# elements inside the outermost reduced axis) has at most ACC_MAX elements and
# the reduction at least REDUCED_MIN: a (64, 512, 512) mean over axis 0 (a
# 256K-element row) ran 2.1-3.0 ms here against Adams2019's 1.35, whose tiles
# keep their accumulators in registers.
ACC_MAX = 1 << 16
REDUCED_MIN = 64
CHUNKS_MAX = 8
CHUNK_MIN = 128  # reduced elements per accumulator and chunk, at least


def default_params(graph, serial: bool) -> dict | None:
    """The ColReduce parameters the default schedule uses for ``graph``, or
    None where the template does not fit or is not expected to win."""
    if not col_reduce_fits(graph):
        return None
    chunks = CHUNKS_MAX
    for node in graph.nodes:
        if node.op not in CHUNKED_OPS:
            continue
        shape, axes = node.inputs[0].aval.shape, node.params["axes"]
        o = min(axes)
        acc = reduced = 1
        for d in range(len(shape)):
            if d in axes:
                reduced *= shape[d]
            elif d > o:
                acc *= shape[d]
        if acc > ACC_MAX or reduced < REDUCED_MIN:
            return None
        chunks = min(chunks, shape[o], max(1, reduced // CHUNK_MIN))
    if serial:
        return {"chunks": "1", "parallel": "0"}
    return {"chunks": str(chunks)}


def col_chunks_of(params) -> int:
    return _int({**COL_REDUCE[0], **params}, "chunks")


def _int(params, key) -> int:
    """A count (>= 1, templates._int) or a 0/1 switch (inline, parallel)."""
    from .templates import _int as count
    if key not in ("inline", "parallel"):
        return count(params, key)
    raw = params.get(key)
    try:
        v = int(raw)
    except (TypeError, ValueError):
        raise HalojitError(f"template parameter {key}={raw!r}: expected an integer.")
    if v < 0:
        raise HalojitError(f"template parameter {key}={v}: expected >= 0.")
    return v


def _vectorize(stage, var, factor: int, lines: list, what: str):
    from .templates import _vectorize as vectorize
    vectorize(stage, var, factor)
    lines.append(f"{what}.vectorize({var.name()}, {factor})")


def apply_col_reduce(lowered, params) -> str:
    from ..generators.lowering import TRIG_CHECK_KINDS
    from .templates import fix_extents, trig_fast_paths
    params = {**COL_REDUCE[0], **params}  # a spec's are complete (make_spec); direct calls
    vector, unroll = _int(params, "vector"), _int(params, "unroll")
    inline, parallel = _int(params, "inline"), _int(params, "parallel")
    parts = [st for st in lowered.stages if st.kind == "colpart"]
    if not parts:
        raise HalojitError("ColReduce needs the chunked lowering (lower_group(spec=ColReduce))")
    fix_extents(lowered)
    lines = []
    computed = list(lowered.outputs)
    for st in lowered.stages:
        f = st.func
        if st.kind in TRIG_CHECK_KINDS:
            continue  # trig_fast_paths
        if st.kind != "materialized" or f.has_update_definition() or not inline:
            computed.append(f)
        if st.kind == "colpart":
            lines += _schedule_part(st, vector, unroll, parallel, lowered)
        elif st.kind == "reduce":  # the chunks combined: a row of accumulators
            f.compute_root()
            lines.append(f"{f.name()}.compute_root()")
            lines += _rows_parallel(f, st.shape, vector, parallel)
            lines += _rows_parallel(f, st.shape, vector, parallel, f.update(),
                                    f"{f.name()}.update()")
        elif st.kind == "materialized" and not f.has_update_definition() and inline:
            # recomputed where read: stored, a value the size of the input
            # costs a fresh buffer and a pass over memory (x.std(axis=0) of
            # (4096, 4096): 2.7 ms inlined, 23 ms stored); storing pays only
            # for costly values in small arrays (the tuner's inline=0)
            f.compute_inline()
            lines.append(f"{f.name()}.compute_inline()")
        elif st.kind == "materialized":
            f.compute_root()
            lines += _rows_parallel(f, st.shape, vector, parallel)
        else:
            raise HalojitError(f"ColReduce does not schedule {st.kind} stages")
    for out, node in zip(lowered.outputs, lowered.graph.outputs):
        lines += _rows_parallel(out, node.aval.shape, vector, parallel)
    lines += trig_fast_paths(lowered, computed)
    return "\n".join(lines)


def _rows_parallel(f, shape, vector: int, parallel: int, stage=None, what=None) -> list:
    """An elementwise stage, the output, or a pure or update definition of a
    row of accumulators (``stage``): the last axis vectorized, the outermost
    in parallel tasks of about 16K elements."""
    lines = []
    args = f.args()
    stage = f if stage is None else stage
    what = what or f.name()
    if not args:
        return lines
    if shape[-1] > 1:
        _vectorize(stage, args[0], vector, lines, what)
    if parallel and len(args) > 1 and shape[0] > 1:
        inner = 1
        for d in shape[1:]:
            inner *= d
        per = max(1, min(shape[0], -(-16384 // max(1, inner))))
        if per < shape[0]:
            outer, rest = args[-1], hl.Var(f"{args[-1].name()}_t")
            stage.split(outer, outer, rest, per, hl.TailStrategy.GuardWithIf).parallel(outer)
            lines.append(f"{what}.split({outer.name()}, {per}).parallel()")
    return lines


def _extent(args, shape, var) -> int:
    """The extent of one of a Func's pure Vars (shape in numpy order)."""
    return next(n for a, n in zip(args, reversed(shape)) if a.name() == var.name())


def _schedule_part(st, vector: int, unroll: int, parallel: int, lowered) -> list:
    """The chunk partials: computed at root; the update walks the input in
    memory order with the last axis vectorized and, inside each vector of
    accumulators, ``unroll`` rows of the innermost reduced axis unrolled."""
    part = st.func
    order = list(st.loop_order)  # innermost first: x, ..., chunk
    chunk = order[-1]
    part.compute_root()
    lines = [f"{part.name()}.compute_root()"]
    args = part.args()  # Halide order: the last axis first, the chunk last
    width = st.shape[-1]
    lines += _rows_parallel(part, st.shape, vector, parallel)
    upd = part.update()
    rdom = st.rdom
    rvar_names = {rdom[i].name() for i in range(rdom.dimensions())}
    unit = {a.name() for a, n in zip(args, reversed(st.shape)) if n == 1}
    kept = [v for v in order[1:-1] if v.name() not in rvar_names and v.name() not in unit]
    chunks = st.shape[0]
    # the parallel loop: the chunks, or with one chunk the outermost kept
    # axis, moved outside the reduction (a pure Var may go anywhere)
    par = None
    if parallel:
        par = chunk if chunks > 1 else (kept[-1] if kept else None)
    loops = list(order[:-1])
    if par is not None and par.name() != chunk.name():
        at = next(i for i, v in enumerate(loops) if v.name() == par.name())
        last_r = max(i for i, v in enumerate(loops) if v.name() in rvar_names)
        if at < last_r:
            # inside the reduction: tiles of it in parallel, each tile's rows
            # kept in place so that a reduced row reads a contiguous run and
            # the tile's accumulators (about 32 KiB) stay in L1
            acc = 1
            for v in loops[:at]:
                if v.name() not in rvar_names:
                    acc *= _extent(args, st.shape, v)
            tile = max(1, min(_extent(args, st.shape, par), 4096 // max(1, acc)))
            po = hl.Var(f"{par.name()}_t")
            upd.split(par, po, par, tile, hl.TailStrategy.GuardWithIf)
            lines.append(f"{part.name()}.update().split({par.name()}, {tile})")
            par = po
        else:
            del loops[at]
        loops.append(par)
    loops.append(chunk)
    k = next(i for i, v in enumerate(loops) if v.name() in rvar_names)  # innermost RVar
    if width > 1 and unroll > 1:
        r_in = loops[k]
        ro, ri = hl.RVar(f"{r_in.name()}_o"), hl.RVar(f"{r_in.name()}_i")
        xv, xl = hl.Var("xv"), hl.Var("xl")
        upd.split(r_in, ro, ri, unroll, hl.TailStrategy.GuardWithIf)
        upd.split(loops[0], xv, xl, vector, hl.TailStrategy.GuardWithIf)
        upd.reorder(xl, ri, xv, *loops[1:k], ro, *loops[k + 1:])
        upd.vectorize(xl).unroll(ri)
        lines.append(f"{part.name()}.update().split(r, {unroll}).split(x, {vector})"
                     f".reorder(x lanes, r rows, x vectors, ..., r outer, ..., chunk)"
                     f".vectorize(x lanes).unroll(r rows)")
    else:
        upd.reorder(*loops)
        if width > 1:
            _vectorize(upd, loops[0], vector, lines, f"{part.name()}.update()")
        lines.append(f"{part.name()}.update().reorder(memory order)")
    if par is not None:
        upd.parallel(par)
        lines.append(f"{part.name()}.update().parallel({par.name()})")
    from .templates import specialize_dense_inputs
    return lines + specialize_dense_inputs(upd, lowered, f"{part.name()}.update()")

