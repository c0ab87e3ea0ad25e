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

from ..ir import Graph, Node, make_graph

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
