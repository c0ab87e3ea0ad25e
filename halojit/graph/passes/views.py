"""Reshapes and transposes at a graph's outputs, returned as numpy views.

In numpy ``softmax(x).reshape(-1)``, ``blur(img).reshape(-1)`` or ``y.T``
cost nothing: a view of the value. Inside a kernel the same ops change the
output's indexing, so the group no longer fits the template of its work
and falls to Adams2019 (or to Transpose, a strided pass). 2-core AVX-512
VM, (4096, 1024) float32, fresh outputs, medians of 11 interleaved calls,
in the kernel -> peeled, two alternating runs: softmax then
``.reshape(-1)`` 8.2-11.5 -> 3.8-4.6 ms (the softmax alone 3.6-5.8);
``.reshape(64, 64, 1024)`` 4.5-5.7 -> 3.8-5.5; ``.T`` 28-45 -> 3.6-4.2;
the 3x3 blur then ``.reshape(-1)`` 10.5-14.9 -> 1.8-3.2 (the blur alone
1.9-3.7); ``(x + 1).T`` 5.8-12.0 (Transpose) -> 1.6-2.3.

So the Halide backend peels them (``peel_output_views``): the kernels
write the value before them, and the executor hands back a view of it, as
numpy would. Only chains numpy always answers with a view are peeled:
reshapes of the (C-contiguous) kernel output, then transposes. A value that
is a graph input or constant keeps its kernel (a view of an input would be
copied anyway), as does a 0-d one, one that is itself returned, or one
that two outputs view.
"""

from __future__ import annotations

import numpy as np

from ..ir import AbstractArray, Graph, Node, make_graph
from ..ops import inlines

VIEW_OPS = ("reshape", "transpose")


def _chain(o: Node) -> list[Node]:
    """The view ops on top of ``o``, outermost first, in the order numpy
    always answers with views when applied to a C-contiguous array:
    transposes outermost, reshapes inside them."""
    chain: list[Node] = []
    seen_reshape = False
    n = o
    while n.op in VIEW_OPS:
        if n.op == "transpose" and seen_reshape:
            break  # a reshape of a transposed array may copy
        seen_reshape |= n.op == "reshape"
        chain.append(n)
        n = n.inputs[0]
    return chain


class OutputView:
    """The numpy view ops that turn a kernel's output into a graph output,
    and back (for an ``out=`` array the kernel may write through)."""

    __slots__ = ("steps", "base_shape", "shape")

    def __init__(self, chain: list[Node]):
        # innermost first, as numpy applies them
        self.steps = tuple((n.op, n.params["perm"] if n.op == "transpose" else n.shape)
                           for n in reversed(chain))
        self.base_shape = chain[-1].inputs[0].shape
        self.shape = chain[0].shape

    def __call__(self, a: np.ndarray) -> np.ndarray:
        for op, arg in self.steps:
            a = a.reshape(arg) if op == "reshape" else a.transpose(arg)
        return a

    def inverse(self, out: np.ndarray) -> np.ndarray | None:
        """A view of ``out`` (of the graph output's shape) with the kernel
        output's shape, or None when there is none (``out`` is not laid out
        so that the reshapes are views)."""
        a = out
        shapes = [self.base_shape] + [arg for op, arg in self.steps if op == "reshape"]
        for op, arg in reversed(self.steps):
            if op == "transpose":
                a = a.transpose(np.argsort(arg))
            else:
                shapes.pop()
                a = a.reshape(shapes[-1])
                if not np.may_share_memory(a, out):
                    return None
        return a

    def strides(self, itemsize: int) -> tuple[int, ...]:
        """The graph output's byte strides as a view of a C-contiguous
        kernel output (reshapes first, then transposes)."""
        shape = self.base_shape
        for op, arg in self.steps:
            if op == "reshape":
                shape = arg
        strides = [itemsize] * len(shape)
        for d in range(len(shape) - 2, -1, -1):
            strides[d] = strides[d + 1] * max(1, shape[d + 1])
        for op, arg in self.steps:
            if op == "transpose":
                strides = [strides[p] for p in arg]
        return tuple(strides)

    def __repr__(self):
        return "".join(f".{op}{tuple(arg)}" for op, arg in self.steps)


def peel_output_views(graph: Graph) -> tuple[Graph, dict[int, OutputView]]:
    """``graph`` with each output that is a chain of view ops (``_chain``)
    over a computed value replaced by that value, and per output position
    the OutputView that gives it back."""
    outputs = list(graph.outputs)
    views: dict[int, OutputView] = {}
    bases: set[Node] = set()
    for k, o in enumerate(graph.outputs):
        chain = _chain(o)
        if not chain:
            continue
        base = chain[-1].inputs[0]
        if (base.op in ("input", "constant") or not base.shape or not o.shape
                or base in graph.outputs or base in bases):
            continue
        bases.add(base)
        outputs[k] = base
        views[k] = OutputView(chain)
    if not views:
        return graph, {}
    return make_graph(graph.inputs, outputs), views


def strip_copies(graph: Graph, keep_outputs: bool = True) -> Graph:
    """``graph`` with each ``copy`` node (ops/elementwise.py) replaced by its
    operand, except, with ``keep_outputs``, a returned copy of a computed
    value: its C order still matters to sink_output_transposes and
    peel_output_views."""
    outputs = set(graph.outputs) if keep_outputs else set()
    if not any(n.op == "copy" for n in graph.nodes):
        return graph
    env: dict[Node, Node] = {}
    for n in graph.nodes:
        inputs = tuple(env[i] for i in n.inputs)
        if n.op == "copy" and (n not in outputs or inputs[0].op in ("input", "constant", "copy")):
            env[n] = inputs[0]
            continue
        env[n] = n if all(a is b for a, b in zip(inputs, n.inputs)) else n.replace(inputs=inputs)
    return make_graph(graph.inputs, [env[o] for o in graph.outputs])


def _transposed_cone(o: Node, users: dict, outputs: set):
    """(perm, cone, leaves) when ``o`` is elementwise work whose operands of
    its full shape are all ``transpose(x, perm)`` for one perm: ``cone``
    the elementwise nodes between (each read only inside the cone), in
    ``leaves`` the transposes and the smaller (broadcast) operands. Else
    None."""
    if o.op == "copy" or not inlines(o) or o.op == "broadcast_to" or o.aval.ndim < 2 \
            or users[o]:
        return None  # (a value also read inside the graph keeps its order)
    perm, cone, leaves, todo = None, {o}, set(), [o]
    while todo:
        for i in todo.pop().inputs:
            if i in cone or i in leaves:
                continue
            if i.shape != o.shape:
                leaves.add(i)  # a broadcast operand: read through the new order
            elif i.op == "transpose":
                if perm is not None and i.params["perm"] != perm:
                    return None
                perm = i.params["perm"]
                leaves.add(i)
            elif inlines(i) and i.op not in ("copy", "broadcast_to") and i not in outputs:
                cone.add(i)
                todo.append(i)
            else:
                return None  # a full-size operand in C order: no order suits both
    # every node of the cone is read only inside it (else it would be computed twice)
    if perm is None or any(u not in cone for m in cone if m is not o for u in users[m]):
        return None
    return perm, cone, leaves


def sink_output_transposes(graph: Graph) -> Graph:
    """Each output computed elementwise from operands transposed one way
    (``_transposed_cone``) as that transpose of the work on the untransposed
    operands; peel_output_views then hands it back as a view (see the
    module's docstring). Broadcast operands are read through the inverse
    permutation: a reshape when their long axes keep their order, else a
    transpose."""
    users = graph.users()
    outputs = set(graph.outputs)
    new_outputs, changed = list(graph.outputs), False
    for k, o in enumerate(graph.outputs):
        found = _transposed_cone(o, users, outputs)
        if found is None:
            continue
        perm, cone, leaves = found
        inv = tuple(int(a) for a in np.argsort(perm))
        rank = len(perm)
        env: dict[Node, Node] = {}

        def moved(leaf: Node) -> Node:
            if leaf.op == "transpose" and leaf.shape == o.shape:
                return leaf.inputs[0]
            if leaf.aval.ndim == 0:
                return leaf
            full = (1,) * (rank - leaf.aval.ndim) + leaf.shape
            shape = tuple(full[a] for a in inv)
            long_axes = [a for a in inv if full[a] != 1]
            if long_axes == sorted(long_axes):  # only size-1 axes move: a reshape
                return Node("reshape", (leaf,), {"shape": shape},
                            AbstractArray(shape, leaf.dtype, leaf.aval.weak), leaf.loc)
            x = leaf
            if leaf.aval.ndim < rank:
                x = Node("reshape", (leaf,), {"shape": full},
                         AbstractArray(full, leaf.dtype, leaf.aval.weak), leaf.loc)
            return Node("transpose", (x,), {"perm": inv},
                        AbstractArray(shape, leaf.dtype, leaf.aval.weak), leaf.loc)

        for m in graph.nodes:  # producers first (no recursion down long chains)
            if m in leaves:
                env[m] = moved(m)
            elif m in cone:
                shape = tuple(m.shape[a] for a in inv)
                env[m] = Node(m.op, tuple(env[i] for i in m.inputs), m.params,
                              AbstractArray(shape, m.dtype, m.aval.weak), m.loc)
        new_outputs[k] = Node("transpose", (env[o],), {"perm": tuple(perm)}, o.aval, o.loc)
        changed = True
    return make_graph(graph.inputs, new_outputs) if changed else graph
