"""Hand schedule templates, applied to a lowered group instead of an
autoscheduler when they fit (``applicable``) and win by measurement.

Each template returns the schedule it applied as text (the group's
``.schedule`` in introspection). Times are medians of 11 warm runs, 2-core
x86-64 (AVX-512) CI machine, float32, strict_float, fresh outputs.
"""

from __future__ import annotations

import halide as hl

from ..errors import HalojitError

# name -> (defaults, doc)
TEMPLATES = {
    "RowReduce": ({"vector": "16", "rows_per_task": "8"},
                  "reductions over the last axis: one row per loop iteration, the row's "
                  "reductions and shared intermediates computed at that row and vectorized"),
    "Matmul": ({"tile_m": "32", "tile_n": "64", "vector": "16", "unroll_k": "4"},
               "tiled, vectorized, parallel matmul with its epilogue computed per tile"),
}


REDUCTIONS = ("sum", "prod", "max", "min", "any", "all", "argmax", "argmin")


def row_reduce_fits(graph) -> bool:
    """One output of full rows (ndim >= 2, last axis > 1), no matmul, and
    every reduction over the last axis only: softmax, layernorm, ...

    Row sums (1-D outputs) stay with Adams2019: under strict_float Halide
    cannot prove float adds associative, so atomic() vectorization of the
    reduction silently degrades to a serial loop (27 ms vs 4.7 ms on a
    4096x4096 row sum, measured)."""
    if len(graph.outputs) != 1:
        return False
    out = graph.outputs[0].aval
    if out.ndim < 2 or out.shape[-1] <= 1:
        return False
    found = False
    for node in graph.nodes:
        if node.op == "matmul":
            return False
        if node.op in REDUCTIONS:
            found = True
            if node.params["axes"] != (node.inputs[0].aval.ndim - 1,):
                return False
    return found


def _int(params, key):
    try:
        v = int(params[key])
    except (KeyError, ValueError):
        raise HalojitError(f"template parameter {key}={params.get(key)!r}: expected an integer.")
    if v < 1:
        raise HalojitError(f"template parameter {key}={v}: expected >= 1.")
    return v


def apply_row_reduce(lowered, params) -> str:
    """softmax (4096, 1024) 1.9 ms (Adams2019 1.7, numpy 9.4); layernorm 1.1 ms
    (Adams2019 1.0, numpy 10.9): a tuning candidate, not the default."""
    vector, rows = _int(params, "vector"), _int(params, "rows_per_task")
    out = lowered.outputs[0]
    shape = lowered.graph.outputs[0].shape
    args = out.args()  # Halide order: args[0] is numpy's last axis
    lines = []
    if len(args) >= 2 and shape[-1] > 1:
        x, outer = args[0], args[1:]
        row = outer[0]
        if len(outer) > 1:
            fused = hl.Var("row")
            out.fuse(outer[0], outer[1], fused)
            row = fused
            for v in outer[2:]:
                nxt = hl.Var(f"row{len(lines)}")
                out.fuse(row, v, nxt)
                row = nxt
            lines.append(f"{out.name()}.fuse(outer dims -> row)")
        ro, ri = hl.Var("ro"), hl.Var("ri")
        out.split(row, ro, ri, rows, hl.TailStrategy.GuardWithIf).parallel(ro)
        if shape[-1] >= vector:
            out.vectorize(x, vector, hl.TailStrategy.GuardWithIf)
        anchor = ri
        lines.append(f"{out.name()}.split(row, ro, ri, {rows}).parallel(ro).vectorize(x, {vector})")
    else:  # one value per row: the rows are the output's axes
        x = args[0]
        ro, ri = hl.Var("ro"), hl.Var("ri")
        out.split(x, ro, ri, rows, hl.TailStrategy.GuardWithIf).parallel(ro)
        anchor = ri
        lines.append(f"{out.name()}.split(x, ro, ri, {rows}).parallel(ro)")
    for st in lowered.stages:
        f = st.func
        f.compute_at(out, anchor)
        if st.kind == "materialized":
            if st.shape and st.shape[-1] >= vector:
                f.vectorize(f.args()[0], vector, hl.TailStrategy.GuardWithIf)
            lines.append(f"{f.name()}.compute_at({out.name()}, ri).vectorize(x, {vector})")
        elif st.kind == "partial":  # per-lane partial results: a pure, vector dimension
            lane = f.args()[0]
            f.vectorize(lane)
            f.update().vectorize(lane)
            lines.append(f"{f.name()}.compute_at({out.name()}, ri).vectorize(lane); "
                         "update().vectorize(lane)")
        else:
            # No atomic().vectorize(r.x): under strict_float Halide cannot prove
            # our NaN-propagating max or strict float adds associative.
            lines.append(f"{f.name()}.compute_at({out.name()}, ri)")
    return "\n".join(lines)


def matmul_fits(graph) -> bool:
    """One 2-D output computed from exactly one 2-D matmul (plus elementwise
    prologue/epilogue), no reductions."""
    if len(graph.outputs) != 1 or graph.outputs[0].aval.ndim != 2:
        return False
    mms = [n for n in graph.nodes if n.op == "matmul"]
    return len(mms) == 1 and mms[0].aval.ndim == 2 and not any(
        n.op in REDUCTIONS for n in graph.nodes)


def apply_matmul(lowered, params) -> str:
    """A register-blocked matmul: parallel (tile_m x tile_n) output tiles,
    each computed as (vector*2 x 4) accumulator blocks over all of k.

    Measured (dense + GELU, ms, numpy / Adams2019 / this): 256x512x512
    1.2 / 4.0 / 5.8; 512x1024x4096 21.6 / 87 / 151. Not yet competitive: a
    tuning candidate only; the default stays Adams2019 (issue: matmul speed)."""
    tm, tn, vec = _int(params, "tile_m"), _int(params, "tile_n"), _int(params, "vector")
    uk = _int(params, "unroll_k")
    out = lowered.outputs[0]
    (mm,) = [s for s in lowered.stages if s.kind == "matmul"]
    c = mm.func
    x, y = out.args()
    xo, yo, xi, yi, xii, yii, tile = (hl.Var(n) for n in ("xo", "yo", "xi", "yi", "xii", "yii", "tile"))
    g = hl.TailStrategy.GuardWithIf
    out.tile(x, y, xo, yo, xi, yi, tn, tm, g).fuse(xo, yo, tile).parallel(tile)
    out.tile(xi, yi, xii, yii, vec * 2, 4, g).vectorize(xii, vec, g).unroll(yii)
    cx, cy = c.args()
    c.compute_at(out, xi).vectorize(cx, vec, g).unroll(cy)
    r = mm.rdom
    upd = c.update()
    upd.reorder(cx, cy, r.x).vectorize(cx, vec, g).unroll(cy)
    if uk > 1:
        upd.unroll(r.x, uk, g)
    for st in lowered.stages:
        if st is not mm:
            st.func.compute_inline() if st.kind == "materialized" else st.func.compute_root()
    return (f"{out.name()}.tile(x, y, xo, yo, xi, yi, {tn}, {tm}).fuse(xo, yo, tile).parallel(tile)"
            f"\n    .tile(xi, yi, xii, yii, {vec * 2}, 4).vectorize(xii, {vec}).unroll(yii)"
            f"\n{c.name()}.compute_at({out.name()}, xi).vectorize(x, {vec}).unroll(y)"
            f"\n{c.name()}.update().reorder(x, y, k).vectorize(x, {vec}).unroll(y).unroll(k, {uk})")


def apply_template(lowered, name: str, params: dict) -> str:
    if name == "RowReduce":
        if not row_reduce_fits(lowered.graph):
            raise HalojitError("RowReduce does not apply to this group")
        return apply_row_reduce(lowered, params)
    if name == "Matmul":
        if not matmul_fits(lowered.graph):
            raise HalojitError("Matmul does not apply to this group")
        return apply_matmul(lowered, params)
    raise HalojitError(f"unknown template {name!r}; expected one of {sorted(TEMPLATES)}.")
