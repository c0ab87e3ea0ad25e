"""The Scatter template: a group with one ``scatter`` (lowering.lower_scatter:
``x[idx] = v``, ``np.add.at``, a histogram's counts) and elementwise or
movement ops around it.

The positions and the values (unless made of constants) are computed at
root first, vectorized and in parallel chunks when long, with everything
that feeds them inlined (a histogram's bin formula). Then the scatter: its
copy of the base vectorized, and the update over the indices as one serial
loop, in the indices' order, which numpy's results depend on (the last of
repeated positions wins; float sums round in that order). The group's
outputs read the scattered values vectorized, in parallel rows when large.
"""

from __future__ import annotations

import numpy as np

from ..errors import HalojitError

SCATTER = ({"vector": "16", "parallel": "1"},
           "scatters (x[idx] = v, np.add.at, np.histogram): the copy of the base and the "
           "outputs vectorized vector lanes wide, in parallel chunks when large "
           "(parallel=0: none); the update over the indices one serial loop")

# elements of the base copy or an output per parallel task, at least
PARALLEL_ELEMENTS = 1 << 16


def scatter_fits(graph) -> bool:
    """Exactly one scatter, and no reduction, scan, sort or matmul (fusion
    keeps them out of a scatter's group)."""
    from ..graph.ops import LINALG, REDUCTION, REGISTRY, SCAN, SORT
    from ..graph.ops.reduce import SCATTERS
    found = 0
    for node in graph.nodes:
        if node.op in ("input", "constant"):
            continue
        if REGISTRY[node.op].trait in (REDUCTION, SCAN, SORT, LINALG):
            return False
        found += node.op in SCATTERS
    return found == 1


def _rows(f, size: int, last: int, vector: int, parallel: bool) -> str:
    """``f`` vectorized along its last numpy axis and, when it holds at least
    two tasks' worth of elements, parallel over chunks of rows (or of a 1-D
    axis)."""
    import halide as hl

    from .templates import _vectorize, fuse_loops
    args = f.args()  # Halide order: args[0] is numpy's last axis
    if not args:
        return f"{f.name()}: scalar"
    x = args[0]
    parts = []
    if parallel and size >= 2 * PARALLEL_ELEMENTS:
        if len(args) > 1:
            row = fuse_loops(f, args[1], list(args[2:]), "row")
            rows = max(1, PARALLEL_ELEMENTS // max(1, last))
            ro, ri = hl.Var("ro"), hl.Var("ri")
            f.split(row, ro, ri, rows, hl.TailStrategy.GuardWithIf).parallel(ro)
            parts.append(f".split(row, ro, ri, {rows}).parallel(ro)")
        else:
            xo, xi = hl.Var("xo"), hl.Var("xi")
            f.split(x, xo, xi, PARALLEL_ELEMENTS, hl.TailStrategy.GuardWithIf).parallel(xo)
            parts.append(f".split({x.name()}, xo, xi, {PARALLEL_ELEMENTS}).parallel(xo)")
            x = xi
    if last >= vector:
        _vectorize(f, x, vector)
        parts.append(f".vectorize({x.name()}, {vector})")
    return f.name() + "".join(parts)


def apply_scatter(lowered, params) -> str:
    from .templates import _int, fix_extents
    vector = _int(params, "vector")
    parallel = params.get("parallel", "1") != "0"
    fix_extents(lowered)
    stages = [st for st in lowered.stages if st.kind == "scatter"]
    if len(stages) != 1:
        raise HalojitError("Scatter does not apply to this group")
    (st,) = stages
    lines = []
    for other in lowered.stages:
        if other.kind in ("scatter_index", "scatter_value"):
            other.func.compute_root()
            size = int(np.prod(other.shape))
            last = other.shape[-1] if other.shape else 1
            lines.append(_rows(other.func, size, last, vector, parallel) + ".compute_root()")
        elif other is not st:
            other.func.compute_inline()
            lines.append(f"{other.func.name()}.compute_inline()")
    f = st.func
    f.compute_root()
    n = st.shape[0]
    lines.append(_rows(f, n, n, vector, parallel) + ".compute_root()  # then a serial update")
    for out, node in zip(lowered.outputs, lowered.graph.outputs):
        last = node.shape[-1] if node.shape else 1
        lines.append(_rows(out, node.aval.size, last, vector, parallel))
    return "\n".join(lines)
