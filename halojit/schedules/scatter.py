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

def scatter_fits(graph) -> bool:
    """Exactly one scatter, and no reduction, scan, sort or matmul (fusion
    keeps them out of a scatter's group)."""
    from ..graph.ops.reduce import SCATTERS
    from .sort import one_lone_loop
    return one_lone_loop(graph, SCATTERS)


def apply_scatter(lowered, params) -> str:
    from .templates import _int, fix_extents, schedule_rows
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
            lines.append(schedule_rows(other.func, size, last, vector, parallel)
                         + ".compute_root()")
        elif other is not st:
            other.func.compute_inline()
            lines.append(f"{other.func.name()}.compute_inline()")
    f = st.func
    f.compute_root()
    n = st.shape[0]
    lines.append(schedule_rows(f, n, n, vector, parallel)
                 + ".compute_root()  # then a serial update")
    for out, node in zip(lowered.outputs, lowered.graph.outputs):
        last = node.shape[-1] if node.shape else 1
        lines.append(schedule_rows(out, node.aval.size, last, vector, parallel))
    return "\n".join(lines)
