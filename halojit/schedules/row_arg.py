"""The RowArg template: argmax or argmin over the last axis of long rows
(``logits.argmax(-1)``), with several independent accumulator vectors per
row.

Lowering keeps per-lane (value, position) partials along the row
(lowering.lower_reduce). With one native vector of lanes, every step waits
on the previous one: a NaN-aware compare, a mask op, a second compare and a
blend, about 11 cycles per 16 float32 on Zen 4. Adams2019 scheduled it that
way, 4.3 ms for a (4096, 4096) float32 row argmax on one core where numpy
takes 1.8. Here the lowering keeps ``unroll`` native vectors of lanes per
row (lower_group), the template walks the row once with the vectors
unrolled side by side, and the per-row combine of the lanes runs vectorized
across ``rows`` rows.
"""

from __future__ import annotations

import halide as hl

from ..errors import HalojitError
from .col_reduce import CHUNKED_OPS, UNCHUNKED_OPS

ROW_ARG = ({"unroll": "4", "rows": "16", "parallel": "1"},
           "argmax/argmin over the last axis: unroll native vectors of per-lane partials "
           "per row side by side, the lanes combined vectorized across rows rows; "
           "parallel tasks of rows rows (parallel=0: one serial task)")

# rows at least this long take the template (shorter ones: Adams2019 was
# ahead on (300, 257) float32, 0.014 ms against 0.016-0.019)
ROW_ARG_MIN = 512


def row_arg_fits(graph) -> bool:
    """One output of an argmax or argmin over the last axis of rows of at
    least ROW_ARG_MIN elements, with at least one row kept, and no other
    reduction, scan, sort, scatter or matmul: the other ops inline into the
    partials or the output."""
    if len(graph.outputs) != 1:
        return False
    found = None
    for node in graph.nodes:
        if node.op in ("argmax", "argmin"):
            if found is not None:
                return False
            found = node
        elif node.op in UNCHUNKED_OPS or node.op in CHUNKED_OPS:
            return False
    if found is None or found.aval.ndim == 0:
        return False
    x = found.inputs[0].aval
    return found.params["axes"] == (x.ndim - 1,) and x.shape[-1] >= ROW_ARG_MIN \
        and graph.outputs[0].aval.shape == found.aval.shape


def arg_unroll(params) -> int:
    """Native vectors of lanes per row the lowering keeps (``unroll``)."""
    return max(1, int(params.get("unroll", ROW_ARG[0]["unroll"])))


def apply_row_arg(lowered, params) -> str:
    from .templates import _vectorize, fuse_loops
    parts = [st for st in lowered.stages if st.kind == "partial"]
    reduces = [st for st in lowered.stages if st.kind == "reduce"]
    others = [st for st in lowered.stages if st.kind not in ("partial", "reduce")]
    if len(parts) != 1 or len(reduces) != 1 \
            or any(st.func.has_update_definition() for st in others):
        raise HalojitError("RowArg does not apply to this group")
    part, red = parts[0].func, reduces[0].func
    native = max(1, parts[0].shape[0] // arg_unroll(params))  # lanes of one vector
    rows = max(1, int(params.get("rows", ROW_ARG[0]["rows"])))
    parallel = params.get("parallel", "1") != "0"
    lines = []
    for st in others:  # pure intermediates: recomputed where read
        st.func.compute_inline()
        lines.append(f"{st.func.name()}.compute_inline()")
    out = lowered.outputs[0]
    oargs = out.args()  # Halide order: oargs[0] is numpy's last output axis
    x = oargs[0]
    xo, xi = hl.Var("xo"), hl.Var("xi")
    out.split(x, xo, xi, rows, hl.TailStrategy.GuardWithIf).vectorize(xi)
    task = fuse_loops(out, xo, list(oargs[1:]), "task")
    if parallel:
        out.parallel(task)
    lines.append(f"{out.name()}.split({x.name()}, xo, xi, {rows}).vectorize(xi)"
                 f".fuse(xo, outer axes){'.parallel(task)' if parallel else ''}")
    # the lanes combined per row, vectorized across the task's rows
    red.compute_at(out, task)
    rx = red.args()[0]
    _vectorize(red, rx, rows)
    for u in range(red.num_update_definitions()):
        _vectorize(red.update(u), rx, rows)
    lines.append(f"{red.name()}.compute_at({out.name()}, task).vectorize({rx.name()}, {rows})"
                 " (every update too)")
    # the partials: the task's rows, each walked once with the lane vectors unrolled
    part.compute_at(out, task)
    pargs = part.args()  # lane, then the output axes
    lane = pargs[0]
    lo, li = hl.Var("lo"), hl.Var("li")
    part.split(lane, lo, li, native, hl.TailStrategy.GuardWithIf).vectorize(li).unroll(lo)
    upd = part.update()
    rk = parts[0].rdom
    rvars = [rk[i] for i in range(rk.dimensions())]
    upd.split(lane, lo, li, native, hl.TailStrategy.GuardWithIf)
    upd.reorder(li, lo, *rvars, *pargs[1:]).vectorize(li).unroll(lo)
    lines.append(f"{part.name()}.compute_at({out.name()}, task); update: split(lane, lo, li, "
                 f"{native}).reorder(li, lo, r, rows).vectorize(li).unroll(lo)")
    return "\n".join(lines)

