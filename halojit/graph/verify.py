"""Graph invariants: SSA order, inputs listed, avals agree with each op's infer."""

from __future__ import annotations

from ..errors import InternalError
from .ir import Graph
from .ops import REGISTRY


def verify(graph: Graph) -> Graph:
    """Raise InternalError naming the first broken invariant; return graph."""
    seen = set()
    inputs = set(graph.inputs)
    for n in graph.nodes:
        for i in n.inputs:
            if i not in seen:
                raise InternalError(f"verify: {n.op} at {n.loc} reads a value defined later "
                                    "or outside the graph; nodes must be in topological order.")
        if n.op == "input":
            if n not in inputs:
                raise InternalError("verify: an input node is missing from graph.inputs.")
        elif n.op == "constant":
            v = n.params["value"].value
            if v.shape != n.shape or v.dtype != n.dtype:
                raise InternalError(f"verify: constant holds {v.dtype}{v.shape}, aval says {n.aval}.")
        else:
            opdef = REGISTRY.get(n.op)
            if opdef is None:
                raise InternalError(f"verify: unknown op {n.op!r}.")
            aval = opdef.infer([i.aval for i in n.inputs], n.params, n.loc)
            if aval.shape != n.aval.shape or aval.dtype != n.aval.dtype:
                raise InternalError(f"verify: {n.op} at {n.loc} records {n.aval} but infers {aval}.")
        seen.add(n)
    for i in graph.inputs:
        if i not in seen:
            raise InternalError("verify: a graph input is not among the nodes.")
    for o in graph.outputs:
        if o not in seen:
            raise InternalError("verify: an output is not among the nodes.")
    return graph
