"""The FullReduce template: a reduction to a few values (a full sum, max, ...
of a large array) whose per-lane partials lowering cut into chunks
(generators.chunks.chunking), scheduled with the chunks as parallel tasks.

Adams2019 parallelises the chunks for some shapes and not others (measured on
a float32 1-D sum with 16 chunks: 1 M and 16 M elements parallel, 1 M + 7 and
50 M elements serial, the partials computed per chunk inside the final
reduction's loop), so the chunked groups are scheduled by hand.
"""

from __future__ import annotations

from ..errors import HalojitError
from ..graph.ops.reduce import SCANS, SORTS

FULL_REDUCE = ({}, "reductions to a few values of a large array: the chunks of the "
                   "per-lane partials as parallel tasks, lanes vectorized, then a serial "
                   "combine of chunks x lanes")

_OPS = ("sum", "prod", "max", "min", "any", "all")


def full_reduce_fits(graph) -> bool:
    """One output, one reduction (no argmax/argmin, no matmul) that lowering
    chunks (generators.chunks.chunking) into at most CHUNKS outputs; the other nodes
    elementwise or movement (inlined into the partials or the output)."""
    from ..generators.chunks import CHUNKS, chunking
    if len(graph.outputs) != 1:
        return False
    found = None
    for node in graph.nodes:
        if node.op in ("matmul", "argmax", "argmin", *SCANS, *SORTS):
            return False
        if node.op in _OPS:
            if found is not None:
                return False
            found = node
    if found is None or found.aval.size >= CHUNKS:
        return False
    how, _ = chunking(found.inputs[0].aval.shape, found.params["axes"], found.aval.shape)
    return how is not None


def apply_full_reduce(lowered, params) -> str:
    parts = [st for st in lowered.stages if st.kind == "partial"]
    others = [st for st in lowered.stages if st.kind not in ("partial", "reduce")]
    if len(parts) != 1 or any(st.func.has_update_definition() for st in others):
        raise HalojitError("FullReduce does not apply to this group")
    part = parts[0].func
    pargs = part.args()  # Halide order: lane, chunk, output dims
    if len(pargs) < 2:
        raise HalojitError("FullReduce: the partials are not chunked")
    lane, chunk = pargs[0], pargs[1]
    lines = []
    for st in others:  # pure intermediates (values read twice): recomputed in the partials
        st.func.compute_inline()
        lines.append(f"{st.func.name()}.compute_inline()")
    for st in lowered.stages:
        if st.kind == "reduce":
            st.func.compute_root()
            lines.append(f"{st.func.name()}.compute_root()")
    part.compute_root().vectorize(lane).parallel(chunk)
    upd = part.update()
    rk = parts[0].rdom
    rvars = [rk[i] for i in range(rk.dimensions())]
    upd.reorder(lane, *rvars, *pargs[2:], chunk).vectorize(lane).parallel(chunk)
    lines.append(f"{part.name()}.compute_root().vectorize(lane).parallel(chunk)")
    lines.append(f"{part.name()}.update().reorder(lane, r..., outputs, chunk)"
                 ".vectorize(lane).parallel(chunk)")
    return "\n".join(lines)
