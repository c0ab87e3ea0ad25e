"""The FullReduce template: a reduction to a few values (a full sum, max, ...
of a large array) whose per-lane partials lowering cut into chunks
(generators.chunks.chunking), scheduled with the chunks as parallel tasks.

Adams2019 parallelises the chunks for some shapes and not others (measured on
a float32 1-D sum with 16 chunks: 1 M and 16 M elements parallel, 1 M + 7 and
50 M elements serial, the partials computed per chunk inside the final
reduction's loop), so the chunked groups are scheduled by hand.
"""

from __future__ import annotations

import halide as hl

from ..errors import HalojitError
from .col_reduce import CHUNKED_OPS, UNCHUNKED_OPS

FULL_REDUCE = ({"interleave": "0"},
               "reductions to a few values of a large array: the chunks of the per-lane "
               "partials as parallel tasks (interleave chunks side by side per task; 0: "
               "up to 8, keeping 8 tasks), lanes vectorized, then a serial combine of "
               "chunks x lanes")


def full_reduce_fits(graph) -> bool:
    """One reduction (argmax/argmin too; no matmul), or a min and a max of
    one value (``siblings``), that lowering chunks
    (generators.chunks.chunking) into at most CHUNKS outputs; the other
    nodes elementwise or movement (inlined into the partials or the
    outputs), any number of outputs (a histogram's max and max + 0.5; x -
    x.mean() beside the mean). Adams2019 took a (1024, 1024) uint8 max with
    two scalar outputs in 23.6 ms, this template 0.03."""
    from ..generators.chunks import CHUNKS, chunking
    from ..graph.fusion import SIBLING_REDUCERS
    from ..graph.ops.reduce import ARG_REDUCERS
    found = None
    for node in graph.nodes:
        arg = node.op in ARG_REDUCERS  # (value, position) pairs, chunked as sums are
        if node.op in UNCHUNKED_OPS and not arg:
            return False
        if node.op in CHUNKED_OPS or arg:
            if found is not None and not siblings(found, node, SIBLING_REDUCERS):
                return False
            found = node
    if found is None or found.aval.size >= CHUNKS:
        return False
    how, _ = chunking(found.inputs[0].aval.shape, found.params["axes"], found.aval.shape)
    return how is not None


def siblings(a, b, ops) -> bool:
    """Two reductions in ``ops`` of one value over the same axes
    (fusion._merge_sibling_extrema), whose partials lower_reduce computes
    over one RDom: the template fuses their loops."""
    from ..graph.fusion import same_value
    return (a.op in ops and b.op in ops and a.params == b.params
            and same_value(a.inputs[0], b.inputs[0]))


# Outputs of at least this many elements are scheduled as vectorized rows.
OUTPUT_ROWS_MIN = 1024
# Parallel tasks the interleaving leaves at least (see _interleave).
MIN_TASKS = 8


def _interleave(params, chunks: int) -> int:
    """How many chunks one task walks side by side (``interleave``; 0, the
    default: the most of 8, 4, 2 that leaves MIN_TASKS tasks): their
    accumulators are independent chains and their rows separate memory
    streams, where one chunk per task is one stream and one chain. Each
    chunk's own sum is unchanged, so are the results. 2-core AVX2 VM,
    (4096, 4096) float32 sum (64 chunks), min of 11 interleaved runs, three
    alternating processes: 2.26-2.58 ms -> 1.67-2.40 with 8 (16: one task
    per core, 2.6-3.6)."""
    given = int(params.get("interleave", 0))
    if given > 0:
        return given
    return next((k for k in (8, 4, 2) if -(-chunks // k) >= MIN_TASKS), 1)


def apply_full_reduce(lowered, params) -> str:
    from ..generators.lowering import TRIG_CHECK_KINDS
    from .templates import schedule_rows, specialize_dense_inputs, trig_fast_paths
    parts = [st for st in lowered.stages if st.kind == "partial"]
    others = [st for st in lowered.stages
              if st.kind not in ("partial", "reduce") and st.kind not in TRIG_CHECK_KINDS]
    if not parts or any(st.rdom is not parts[0].rdom or st.chunks != parts[0].chunks
                        for st in parts) \
            or any(st.func.has_update_definition() for st in others):
        raise HalojitError("FullReduce does not apply to this group")
    lines = []
    for st in others:  # pure intermediates (values read twice): recomputed in the partials
        st.func.compute_inline()
        lines.append(f"{st.func.name()}.compute_inline()")
    for st in lowered.stages:
        if st.kind == "reduce":
            st.func.compute_root()
            lines.append(f"{st.func.name()}.compute_root()")
    first = None
    for st in parts:
        part = st.func
        pargs = part.args()  # Halide order: lane, chunk, output dims
        if len(pargs) < 2:
            raise HalojitError("FullReduce: the partials are not chunked")
        lane, chunk = pargs[0], pargs[1]
        part.compute_root().vectorize(lane).parallel(chunk)
        upd = part.update()
        rk = st.rdom
        rvars = [rk[i] for i in range(rk.dimensions())]
        lines.append(f"{part.name()}.compute_root().vectorize(lane).parallel(chunk)")
        inter = _interleave(params, st.chunks)
        if inter > 1:
            co, ci = hl.Var("co"), hl.Var("ci")
            upd.split(chunk, co, ci, inter, hl.TailStrategy.GuardWithIf)
            upd.reorder(lane, ci, *rvars, *pargs[2:], co).vectorize(lane).unroll(ci).parallel(co)
            lines.append(f"{part.name()}.update().split(chunk, co, ci, {inter}).reorder(lane, "
                         f"ci, r..., outputs, co).vectorize(lane).unroll(ci).parallel(co)")
        else:
            upd.reorder(lane, *rvars, *pargs[2:], chunk).vectorize(lane).parallel(chunk)
            lines.append(f"{part.name()}.update().reorder(lane, r..., outputs, chunk)"
                         ".vectorize(lane).parallel(chunk)")
        if first is None:
            first = (part, upd)
            dense = specialize_dense_inputs(upd, lowered, f"{part.name()}.update()")
            lines += dense
        elif not dense:
            # a sibling (x.min() beside x.max()): its loops inside the
            # first's, down to the innermost reduction loop, so the array
            # is read once. 2-core Zen 4 VM beside a CI run, medians of 7,
            # ms, two groups -> one (numpy): x.max() - x.min() of 2**24
            # float32 4.4-4.6 -> 2.0-2.3 (3.9-5.0), of (4096, 4096) 5.0 ->
            # 2.7-3.5 (3.9-4.9); (x - x.min()) / (x.max() - x.min()) 8.4 ->
            # 5.7 (19.5)
            part.compute_with(first[0], chunk)
            upd.compute_with(first[1], rvars[0])
            lines.append(f"{part.name()}.compute_with({first[0].name()}, chunk).update()"
                         f".compute_with({first[0].name()}.update(), {rvars[0].name()})")
    for out, node in zip(lowered.outputs, lowered.graph.outputs):
        # an output of the array's size (x - x.min(), x / x.sum()): a second
        # pass, vectorized and in parallel. Unscheduled, it ran serially and
        # scalar: x / x.sum() of (4096, 4096) float32 took 22.6 ms, numpy 12.7
        if node.aval.size >= OUTPUT_ROWS_MIN:
            lines.append(schedule_rows(out, node.aval.size, node.shape[-1], 16, True))
    computed = [st.func for st in lowered.stages if st.kind in ("partial", "reduce")]
    lines += trig_fast_paths(lowered, computed + list(lowered.outputs))
    return "\n".join(lines)
