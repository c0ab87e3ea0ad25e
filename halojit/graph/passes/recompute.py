"""Recompute cheap values behind full reductions instead of sharing them.

``y = x.astype(np.float32); (y - y.mean()) / y.std()`` reads ``y`` before
and after a reduction of all of it. Shared, ``y`` ties the three passes over
the data into one fusion group: partition's ``after_full`` cannot start a
second pass at ``y - mean``, since ``y`` is a large member of the first
group. Adams2019 then schedules chained full reductions in one pipeline,
which took 55 s to compile for a uint8 ``x.var()`` of (128, 128, 64) and
13.6 s for the line above at (2048, 2048) (2-core Zen 4 VM, one core).
Stored instead (the group writes ``y`` out for the next one), the calls got
1.3-3.4x slower: a float32 copy of uint8 data is four times its bytes.

So each value read after a full reduction of it gets its own copy of the
cheap work that made it: elementwise and movement ops back to the graph's
inputs, constants and one-element values. So does each full reduction of
such a value beside an earlier one (``y.min()`` and ``y.max()``): fused,
two reductions fit no template either. The pass runs on the graph the
Halide backend partitions (``codegen_graph``), after CSE, which would merge
the copies again.
"""

from __future__ import annotations

from ..fusion import FULL_REDUCE_MIN
from ..ir import Graph, Node, make_graph
from ..ops import ELEMENTWISE, MOVEMENT, REDUCTION, REGISTRY

# the most nodes one copied cone may hold; a larger one stays shared
MAX_CONE = 32


def _is_full_reduction(n: Node) -> bool:
    return (n.op in REGISTRY and REGISTRY[n.op].trait == REDUCTION and n.aval.size == 1
            and n.inputs[0].aval.size >= FULL_REDUCE_MIN)


def _cone(m: Node) -> list[Node] | None:
    """The cheap nodes that compute ``m`` from inputs, constants and
    one-element values, producers first; None when ``m`` is not cheap or
    the cone is larger than MAX_CONE."""
    order: list[Node] = []
    seen: set[Node] = set()

    def visit(n: Node) -> bool:
        if n in seen or n.op in ("input", "constant") or n.aval.size == 1:
            return True
        if n.op not in REGISTRY or REGISTRY[n.op].trait not in (ELEMENTWISE, MOVEMENT):
            return False
        seen.add(n)
        if len(seen) > MAX_CONE or not all(visit(i) for i in n.inputs):
            return False
        order.append(n)
        return True
    return order if visit(m) else None


def recompute_after_full_reductions(graph: Graph) -> Graph:
    """``graph`` where every large node that reads a cheap value ``m`` and
    also depends on a full reduction of a value of ``m``'s cone (``m`` or
    the cheap work behind it, which fusion would put in that reduction's
    group) reads a fresh copy of the cone instead: one copy per set of such
    reductions, shared by the users behind the same ones. A full reduction
    reading such a value beside an earlier full reduction of it gets a copy
    of its own. Returns ``graph`` itself when nothing applies."""
    fulls = [n for n in graph.nodes if _is_full_reduction(n)]
    if not fulls:
        return graph
    # the full reductions each node depends on, and the nodes each one reads
    after: dict[Node, frozenset] = {}
    below: dict[Node, set] = {}
    is_full = set(fulls)
    for n in graph.nodes:
        deps = frozenset().union(*(after.get(i, frozenset()) for i in n.inputs))
        after[n] = deps | {n} if n in is_full else deps
    for r in fulls:
        below[r] = set(_ancestors(r))
    env: dict[Node, Node] = {}
    copies: dict[tuple, Node] = {}
    cones: dict[Node, list | None] = {}
    changed = False

    def copy(m: Node, blocking: tuple) -> Node:
        key = (m, blocking)
        if key not in copies:
            for c in cones[m]:
                if (c, blocking) not in copies:
                    copies[(c, blocking)] = c.replace(inputs=tuple(
                        copies.get((i, blocking), env[i]) for i in c.inputs))
        return copies[key]

    seen_fulls: list[Node] = []
    for n in graph.nodes:
        if n.op == "input":
            env[n] = n
            continue
        # the full reductions that n's own group must not hold: the ones n
        # depends on and, for a full reduction, its siblings placed before it
        # (y.min() beside y.max(): one kernel reducing twice fits no template)
        others = after[n] - {n}
        if n in is_full:
            others = others.union(seen_fulls)
            seen_fulls.append(n)
        large = n.aval.size >= FULL_REDUCE_MIN or n in is_full
        inputs = []
        for i in n.inputs:
            if i not in cones:
                cones[i] = _cone(i)  # None: not cheap; []: an input or constant
            blocking = frozenset(r for r in others
                                 if any(c in below[r] for c in cones[i] or ()))
            if blocking and large and i.aval.size > 1:
                # a reduction's copy is its own: not shared with its siblings
                # nor with the values computed after it
                inputs.append(copy(i, (blocking, n if n in is_full else None)))
                changed = True
            else:
                inputs.append(env[i])
        same = all(a is b for a, b in zip(inputs, n.inputs))
        env[n] = n if same else n.replace(inputs=tuple(inputs))
    if not changed:
        return graph
    return make_graph(graph.inputs, [env[o] for o in graph.outputs])


def _ancestors(n: Node) -> list[Node]:
    out: list[Node] = []
    seen: set[int] = set()
    stack = list(n.inputs)
    while stack:
        m = stack.pop()
        if id(m) not in seen:
            seen.add(id(m))
            out.append(m)
            stack.extend(m.inputs)
    return out
