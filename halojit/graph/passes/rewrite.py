"""The simplification passes: constant folding, algebraic identities that are
exact in IEEE and two's-complement arithmetic, CSE and dead-code elimination.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np

from ..ir import AbstractArray, Const, Graph, Node, make_graph
from ..ops import REGISTRY
from ..ops.reduce import REDUCERS

# Folding a broadcast of a scalar would store a huge constant: cap it.
FOLD_MAX_ELEMENTS = 1 << 16


def rebuild(graph: Graph, fn: Callable[[Node], Node | None]) -> Graph:
    """Apply ``fn`` to each node (inputs already rebuilt); None keeps it."""
    env: dict[Node, Node] = {}
    for n in graph.nodes:
        if n.op == "input":
            env[n] = n
            continue
        inputs = tuple(env[i] for i in n.inputs)
        m = n if all(a is b for a, b in zip(inputs, n.inputs)) else n.replace(inputs=inputs)
        env[n] = fn(m) or m
    return make_graph(graph.inputs, [env[o] for o in graph.outputs])


def _const(n: Node):
    return n.params["value"].value if n.op == "constant" else None


def fold_constants(graph: Graph) -> Graph:
    def fold(n: Node):
        if n.op == "constant" or not n.inputs or any(i.op != "constant" for i in n.inputs):
            return None
        biggest = max(i.aval.size for i in n.inputs)
        if n.aval.size > max(FOLD_MAX_ELEMENTS, biggest):
            return None
        with np.errstate(all="ignore"):
            value = REGISTRY[n.op].reference([_const(i) for i in n.inputs], n.params)
        value = np.asarray(value).astype(n.dtype, copy=False)
        return Node("constant", (), {"value": Const(value)}, n.aval, n.loc)
    return rebuild(graph, fold)


def _identity_operand(n: Node):
    """x for x+(-0.0), x+0 (ints), x-0, x*1, x/1, when the result aval is x's."""
    if len(n.inputs) != 2:
        return None
    a, b = n.inputs
    if a.aval.shape != n.aval.shape or a.dtype != n.dtype:
        return None
    c = _const(b)
    if c is None:
        return None
    is_float = c.dtype.kind == "f"
    if n.op in ("multiply", "divide") and np.all(c == 1):
        return a
    if n.op == "subtract" and np.all(c == 0) and (not is_float or not np.any(np.signbit(c))):
        return a  # x - (+0.0) == x, also for x = -0.0
    if n.op == "add" and np.all(c == 0) and (not is_float or np.all(np.signbit(c))):
        return a  # x + (-0.0) == x; x + 0.0 would turn -0.0 into +0.0
    return None


def uniform_constant(n: Node) -> Node | None:
    """A constant array whose elements are all one value (``np.zeros(shape)``,
    ``np.full(shape, 7)`` made inside a traced function) as a broadcast of
    that scalar: kernels read it as a scalar instead of streaming the array
    as one more input (and CSE shares it). Equal means bitwise equal, so
    -0.0 and NaN payloads are kept."""
    value = n.params["value"].value
    if value.size < 2 or value.dtype.hasobject:
        return None
    size = value.dtype.itemsize
    flat = np.ascontiguousarray(value).reshape(-1)
    bits = flat.view(f"u{size}") if size in (1, 2, 4, 8) else \
        flat.view(np.uint8).reshape(flat.size, size)
    # a few elements first: an array of data fails there, without a full pass
    if not (np.all(bits[:64] == bits[0]) and np.all(bits == bits[0])):
        return None
    first = flat[:1]
    scalar = Node("constant", (), {"value": Const(first.reshape(()))},
                  AbstractArray((), n.dtype), n.loc)
    return Node("broadcast_to", (scalar,), {"shape": n.shape}, n.aval, n.loc)


def simplify(graph: Graph) -> Graph:
    def simp(n: Node):
        if n.op == "constant":
            return uniform_constant(n)
        x = _identity_operand(n)
        if x is not None:
            return x
        if n.op == "astype" and n.inputs[0].dtype == n.dtype and not n.inputs[0].aval.weak:
            return n.inputs[0]
        if n.op in ("negative", "logical_not") and n.inputs[0].op == n.op and \
                n.inputs[0].inputs[0].aval == n.aval:
            return n.inputs[0].inputs[0]
        if n.op == "reshape":
            src = n.inputs[0]
            if src.op == "reshape":
                src = src.inputs[0]
            if src.shape == n.shape:
                return src
            if src is not n.inputs[0]:
                return n.replace(inputs=(src,))
        if n.op == "transpose" and n.inputs[0].op == "transpose":
            inner = n.inputs[0]
            perm = tuple(inner.params["perm"][p] for p in n.params["perm"])
            src = inner.inputs[0]
            if perm == tuple(range(len(perm))):
                return src
            return n.replace(inputs=(src,), params={"perm": perm})
        if n.op == "power":
            return rewrite_power(n)
        if n.op in STACK_FOLDS:
            r = fold_stacked_reduction(n)
            if r is not None:
                return r
        if n.op in REDUCERS:
            return full_keepdims_as_reshape(n)
        return None
    return rebuild(graph, simp)


def full_keepdims_as_reshape(n: Node) -> Node | None:
    """A reduction over every axis with keepdims as a reshape of the one
    without: the same value, which CSE then shares with ``x.mean()``
    beside ``x.std()`` (numpy's var reduces with keepdims), and one sum
    fits the FullReduce template where two did not: (512, 512, 3) float32
    ``(y - y.mean()) / y.std()`` 1.46 -> 0.1 ms in its first kernel
    (2-core Zen 4 VM, one core)."""
    (x,) = n.inputs
    if not n.params["keepdims"] or x.aval.ndim == 0 or \
            tuple(sorted(n.params["axes"])) != tuple(range(x.aval.ndim)):
        return None
    r = _derived(n, n.op, (x,), AbstractArray((), n.dtype, n.aval.weak),
                 {**n.params, "keepdims": False})
    return _derived(n, "reshape", (r,), n.aval, {"shape": n.shape})


# reduction -> the elementwise op that numpy's reduction loop applies in order
STACK_FOLDS = {"sum": "add", "prod": "multiply"}
# numpy reduces a contiguous (last) axis pairwise from 8 elements on
PAIRWISE_FROM = 8


def fold_stacked_reduction(n: Node) -> Node | None:
    """``np.stack([a, b, c]).sum(0)`` as ``a + b + c``: a sum or product
    over the one axis a concatenate of 1-wide slabs built. numpy adds the
    slabs one after another along an outer axis (and along a last axis of
    fewer than 8), so the chain, in the result dtype, is numpy's own order
    and values; as a reduction it read a stacked copy through a column
    reduction (0.51x numpy for three (1000, 1000) float32 arrays; now
    5.8x). An integer sum's widening cast moves onto each slab."""
    (src,) = n.inputs
    axes = n.params["axes"]
    if src.op == "astype" and src.dtype == n.dtype:  # an integer sum's widening cast
        src = src.inputs[0]
    if src.op != "concatenate" or len(axes) != 1 or src.params["axis"] != axes[0] or \
            n.dtype == np.float16:  # numpy sums float16 in float32
        return None
    k = axes[0]
    parts = src.inputs
    if any(p.shape[k] != 1 for p in parts) or (
            k == src.aval.ndim - 1 and len(parts) >= PAIRWISE_FROM):
        return None
    terms = []
    for p in parts:
        if p.op == "reshape" and p.inputs[0].shape == n.shape:  # the stack's expand_dims
            p = p.inputs[0]
        if p.shape != n.shape:
            p = _derived(n, "reshape", (p,), AbstractArray(n.shape, p.dtype), {"shape": n.shape})
        if p.dtype != n.dtype:
            p = _derived(n, "astype", (p,), AbstractArray(n.shape, n.dtype), {"dtype": n.dtype})
        terms.append(p)
    out = terms[0]
    for t in terms[1:]:
        out = _derived(n, STACK_FOLDS[n.op], (out, t), n.aval)
    return out


# numpy's float power loop computes these scalar exponents with the matching
# ufunc, bit for bit (x ** 0.5 is sqrt: -0.0 stays -0.0, -inf gives NaN).
_FLOAT_POWER_UFUNC = {0.5: "sqrt", -1.0: "reciprocal", 1.0: "positive", 2.0: "square"}


def new_node(op: str, inputs, loc, **params) -> Node:
    """A node of ``op`` on ``inputs``, its aval inferred as tracing would."""
    aval = REGISTRY[op].infer([i.aval for i in inputs], params, loc)
    return Node(op, tuple(inputs), params, aval, loc)


def _derived(n: Node, op: str, inputs, aval: AbstractArray, params=None) -> Node:
    """A node that a rewrite of ``n`` builds, at ``n``'s source location."""
    return Node(op, tuple(inputs), params or {}, aval, n.loc)


def rewrite_power(n: Node) -> Node | None:
    """x ** c for a scalar constant c as multiplies: numpy's float32 x ** 3
    calls powf (~60x slower than x*x*x, measured). float16/32 cubes, 4th
    powers and x ** -2 are computed in float64 (x*x exact) and rounded once,
    within 1 ulp of numpy's powf; integer powers 1-4 wrap as numpy's do."""
    x, e = n.inputs
    c = _const(e)
    if c is None or c.ndim != 0 or x.aval != n.aval or x.aval.weak:
        return None
    c = c.item()
    node = partial(_derived, n)
    if n.dtype.kind == "f":
        if c in _FLOAT_POWER_UFUNC:
            return node(_FLOAT_POWER_UFUNC[c], (x,), n.aval)
        if c in (3.0, 4.0, -2.0) and n.dtype.itemsize <= 4:
            wide = AbstractArray(n.shape, np.float64)
            xd = node("astype", (x,), wide, {"dtype": np.dtype(np.float64)})
            sq = node("square", (xd,), wide)
            y = {3.0: lambda: node("multiply", (sq, xd), wide), 4.0: lambda: node("square", (sq,), wide),
                 -2.0: lambda: node("reciprocal", (sq,), wide)}[c]()
            return node("astype", (y,), n.aval, {"dtype": n.dtype})
        return None
    if n.dtype.kind in "iu" and isinstance(c, int) and 1 <= c <= 4:
        if c == 1:
            return node("positive", (x,), n.aval)
        sq = node("square", (x,), n.aval)
        return {2: sq, 3: node("multiply", (sq, x), n.aval), 4: node("square", (sq,), n.aval)}[c]
    return None


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    seen: dict[str, Node] = {}

    def cse(n: Node):
        k = n.key
        if k in seen:
            return seen[k]
        seen[k] = n
        return None
    return rebuild(graph, cse)


def eliminate_dead_code(graph: Graph) -> Graph:
    return make_graph(graph.inputs, graph.outputs)
