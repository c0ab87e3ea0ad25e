"""Runs a Graph op by op with each op's numpy reference: the numpy backend
and the oracle of every test.
"""

from __future__ import annotations

import numpy as np

from ..errors import InternalError
from .ir import Graph, Node
from .ops import REGISTRY


def last_uses(graph: Graph) -> dict[Node, list[Node]]:
    """node -> values whose last reader it is (memory planning: free early)."""
    last: dict[Node, Node] = {}
    for n in graph.nodes:
        for i in n.inputs:
            last[i] = n
    keep = set(graph.outputs)
    out: dict[Node, list[Node]] = {}
    for value, reader in last.items():
        if value not in keep and value.op not in ("input", "constant"):
            out.setdefault(reader, []).append(value)
    return out


def interpret(graph: Graph, inputs, free_early: dict | None = None,
              check: bool = False) -> list[np.ndarray]:
    """Values of ``graph.outputs`` for concrete ``inputs`` (one per graph input).

    ``free_early`` (from ``last_uses``) drops intermediates after their last
    reader, so peak memory follows the live set rather than the graph size.
    ``check`` raises InternalError where a reference's result disagrees with
    its node's aval (a bug in the op's infer or reference).
    """
    env: dict[Node, np.ndarray] = {}
    for node, value in zip(graph.inputs, inputs):
        env[node] = value
    with np.errstate(all="ignore"):
        for node in graph.nodes:
            if node.op == "input":
                continue
            if node.op == "constant":
                env[node] = node.params["value"].value
                continue
            env[node] = REGISTRY[node.op].reference([env[i] for i in node.inputs], node.params)
            if check:
                _check_value(node, env[node])
            if free_early:
                for dead in free_early.get(node, ()):
                    del env[dead]
    return [env[o] for o in graph.outputs]


def _check_value(node: Node, value):
    v = np.asarray(value)
    if v.shape != node.shape or v.dtype != node.dtype:
        raise InternalError(
            f"interpret: {node.op} at {node.loc} computed {v.dtype}{v.shape}, but its aval "
            f"is {node.aval}; the op's infer and reference disagree.")
