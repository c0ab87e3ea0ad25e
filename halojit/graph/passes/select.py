"""A sort read only at a few positions becomes a selection of them.

``np.sort(x)[k]``, ``np.sort(x)[-5:]`` (the five largest),
``np.partition(x, k)[k]`` (traced as a sort) and ``np.sort(x, axis=1)[:, 0]``
need a few values of the sorted rows, not the rows: the ``select`` op finds
them by radix selection (lowering.lower_select) in a few passes over the
row, where the sort's bitonic network makes about log2(n)**2 / 2. The
values are the sort's, bit for bit (the same keys order -0.0 before +0.0
and NaN last). Rows too short for numpy_api.selects_rows keep the sort,
as np.median does.
"""

from __future__ import annotations

from ..ir import Graph, Node
from .rewrite import rebuild

# at most this many positions per slice
MAX_POSITIONS = 16


def _positions(sl: Node, src: Node) -> tuple | None:
    """The positions along the last axis a slice of ``src`` reads, or None
    when it is not such a slice (another axis cut, or too many)."""
    starts, steps, shape = sl.params["starts"], sl.params["steps"], sl.params["shape"]
    full = src.shape
    for d in range(len(full) - 1):
        if starts[d] != 0 or steps[d] != 1 or shape[d] != full[d]:
            return None
    count = shape[-1]
    if not 1 <= count <= MAX_POSITIONS:
        return None
    return tuple(starts[-1] + steps[-1] * i for i in range(count))


def select_sorted_positions(graph: Graph) -> Graph:
    """Every slice of a sort along its last axis, where all of the sort's
    users are such slices, becomes a select of the positions it reads."""
    from ..numpy_api import selects_rows
    users = graph.users()
    picked = {}
    for s in graph.nodes:
        if s.op != "sort" or s.params["axis"] != s.aval.ndim - 1 or not s.aval.ndim:
            continue
        if not selects_rows(s.shape) or s in graph.outputs:
            continue
        slices = users[s]
        found = {u: _positions(u, s) for u in slices if u.op == "slice"}
        if slices and len(found) == len(slices) and all(
                p is not None and selects_rows(s.shape, p) for p in found.values()):
            picked.update(found)
    if not picked:
        return graph

    def rewrite(n: Node):
        # (a slice rebuilt because something before its sort changed is not
        # in ``picked`` any more and keeps reading the sort)
        kth = picked.get(n)
        return None if kth is None else Node("select", (n.inputs[0].inputs[0],), {"kth": kth},
                                             n.aval, n.loc)
    return rebuild(graph, rewrite)
