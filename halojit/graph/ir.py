"""The graph IR: abstract arrays, immutable SSA nodes, graphs and their printer.

A Node is one SSA value (every op has exactly one result). Nodes are
immutable and compared by identity; ``node.key`` is a structural hash of
(op, params, input keys, aval) used for CSE, fusion-group identity and the
kernel cache.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

_SHORT = {
    "bool": "b1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "f16", "float32": "f32", "float64": "f64",
}


@dataclass(frozen=True)
class AbstractArray:
    """Shape and dtype of a value; ``weak`` marks a Python scalar (NEP 50)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    weak: bool = False

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def strong(self) -> "AbstractArray":
        return AbstractArray(self.shape, self.dtype) if self.weak else self

    def __str__(self) -> str:
        dims = ",".join(str(d) for d in self.shape)
        name = _SHORT.get(self.dtype.name, self.dtype.name)
        return f"{name}[{dims}]" + ("~weak" if self.weak else "")


class Const:
    """A constant array carried as a node parameter, hashed by content."""

    __slots__ = ("value", "digest")

    def __init__(self, value: np.ndarray):
        value = np.array(value, copy=True)  # own it: the user may mutate theirs
        value.setflags(write=False)
        self.value = value
        h = hashlib.blake2b(digest_size=16)
        h.update(f"{value.dtype.str}{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
        self.digest = h.hexdigest()

    def __eq__(self, other):
        return isinstance(other, Const) and other.digest == self.digest

    def __hash__(self):
        return hash(self.digest)

    def __repr__(self):
        if self.value.size <= 4:
            return np.array2string(self.value, separator=",").replace("\n", "")
        return f"<{self.value.dtype.name}{list(self.value.shape)} #{self.digest[:8]}>"

    def __reduce__(self):
        return (Const, (self.value,))


def _param_repr(v: Any) -> str:
    if isinstance(v, np.dtype):
        return v.str
    if isinstance(v, Const):
        return "C" + v.digest
    if isinstance(v, (tuple, list)):
        return "(" + ",".join(_param_repr(x) for x in v) + ")"
    if isinstance(v, float):
        return repr(float(v))
    return repr(v)


class Node:
    """One SSA value: ``op(inputs; params) -> aval``, recorded at ``loc``.

    Kinds: ``input`` (params: index), ``constant`` (params: value=Const),
    and every op of the registry. Treat as immutable.
    """

    __slots__ = ("op", "inputs", "params", "aval", "loc", "_key")

    def __init__(self, op: str, inputs: Iterable["Node"], params: dict | None,
                 aval: AbstractArray, loc: str | None = None):
        self.op = op
        self.inputs = tuple(inputs)
        self.params = dict(params or {})
        self.aval = aval
        self.loc = loc
        self._key = None

    @property
    def key(self) -> str:
        """Structural hash: equal keys compute equal values."""
        if self._key is None:
            h = hashlib.blake2b(digest_size=16)
            items = sorted(self.params.items())
            h.update(f"{self.op}|{_param_repr(items)}|{self.aval}|".encode())
            for i in self.inputs:
                h.update(i.key.encode())
            self._key = h.hexdigest()
        return self._key

    @property
    def shape(self):
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype

    def replace(self, **changes) -> "Node":
        fields = {"op": self.op, "inputs": self.inputs, "params": self.params,
                  "aval": self.aval, "loc": self.loc}
        fields.update(changes)
        return Node(**fields)

    def __repr__(self):
        return f"Node({self.op}, {self.aval})"


@dataclass(frozen=True, eq=False)
class Graph:
    """Inputs (``input`` nodes), all nodes in topological order, outputs."""

    inputs: tuple[Node, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[Node, ...]

    def users(self) -> dict[Node, list[Node]]:
        out: dict[Node, list[Node]] = {n: [] for n in self.nodes}
        for n in self.nodes:
            for i in n.inputs:
                out[i].append(n)
        return out

    def __str__(self) -> str:
        return format_graph(self)


def toposort(outputs: Iterable[Node], inputs: Iterable[Node] = (),
             stop=None) -> tuple[Node, ...]:
    """All nodes reachable from ``outputs`` (plus ``inputs``), producers first;
    the inputs of a node for which ``stop(node)`` is true are not visited."""
    order: list[Node] = []
    seen: set[int] = set()
    for root in list(inputs) + list(outputs):
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            if stop is None or not stop(node):
                stack.extend((i, False) for i in reversed(node.inputs) if id(i) not in seen)
    return tuple(order)


def make_graph(inputs: Iterable[Node], outputs: Iterable[Node]) -> Graph:
    inputs, outputs = tuple(inputs), tuple(outputs)
    return Graph(inputs, toposort(outputs, inputs), outputs)


def format_graph(g: Graph, annotate=None) -> str:
    """Text form; ``annotate(node) -> str`` adds a trailing comment."""
    names: dict[Node, str] = {}
    for n in g.nodes:
        names[n] = f"%{len(names)}"
    args = ", ".join(f"{names[i]}: {i.aval}" for i in g.inputs)
    lines = [f"graph({args}) {{"]
    for n in g.nodes:
        if n.op == "input":
            continue
        params = ", ".join(f"{k}={_pretty(v)}" for k, v in sorted(n.params.items()))
        operands = ", ".join(names[i] for i in n.inputs)
        sep = "; " if operands and params else ""
        text = f"  {names[n]} = {n.op}({operands}{sep}{params}) : {n.aval}"
        extra = annotate(n) if annotate else None
        if extra:
            text += f"  # {extra}"
        lines.append(text)
    lines.append("  return (" + ", ".join(names[o] for o in g.outputs) + ")")
    lines.append("}")
    return "\n".join(lines)


def _pretty(v):
    if isinstance(v, np.dtype):
        return v.name
    return repr(v)
