"""The op registry: one record per op (shape/dtype rule, numpy reference,
fusion trait, Halide lowering), defined together in one family module each.

Nothing else in halojit switches on op names: passes, fusion, the
interpreter and the code generator read these records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ...errors import AxisError, IndexShapeError, ShapeError, UnsupportedError, format_loc
from ..ir import AbstractArray

# Fusion traits.
ELEMENTWISE = "elementwise"
REDUCTION = "reduction"
SCAN = "scan"  # cumsum, cumprod, cummax...: serial along one axis, same shape out
SORT = "sort"  # a comparator network along one axis, same shape out
SCATTER = "scatter"  # a serial loop writing a 1-D base at indices read from an array
MOVEMENT = "movement"
LINALG = "linalg"
OPAQUE = "opaque"
SOURCE = "source"  # input and constant


@dataclass(frozen=True)
class OpDef:
    """Everything about one op.

    infer(avals, params, loc) -> AbstractArray
    reference(arrays, params) -> np.ndarray        numpy truth
    lower(ctx, node, operands) -> Lazy              Halide algorithm (no schedule)
    """

    name: str
    trait: str
    infer: Callable[..., AbstractArray]
    reference: Callable[..., np.ndarray]
    lower: Callable[..., Any] | None = None
    extra: dict = field(default_factory=dict)


REGISTRY: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in REGISTRY:
        raise ValueError(f"op {op.name!r} registered twice")
    REGISTRY[op.name] = op
    return op


def get(name: str) -> OpDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnsupportedError(f"halojit has no op named {name!r}") from None


def inlines(node) -> bool:
    """An elementwise op or a broadcast whose lowering is one expression per
    element (an integer power is a stage with an update): it inlines into
    whatever reads it, which then reads its operands in its own order."""
    return node.op == "broadcast_to" or (
        node.op in REGISTRY and REGISTRY[node.op].trait == ELEMENTWISE
        and not (node.op == "power" and node.dtype.kind in "iu"))


def frontier(node, through: Callable) -> list:
    """Where a walk up the graph from ``node`` stops: ``node`` and its
    ancestors reached only through nodes for which ``through`` holds, that
    do not satisfy it themselves (inputs and constants included)."""
    seen, todo, out = set(), [node], []
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op in ("input", "constant") or not through(n):
            out.append(n)
        else:
            todo.extend(n.inputs)
    return out


def broadcast_shapes(shapes, opname: str, loc: str | None) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        given = " and ".join(str(tuple(s)) for s in shapes)
        raise ShapeError(
            f"{opname}: shapes {given} do not broadcast{format_loc(loc)}; "
            "trailing dimensions must match or be 1."
        ) from None


def normalize_axis(axis: int, ndim: int, opname: str, loc: str | None) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"{opname}: axis must be an int, got {axis!r}{format_loc(loc)}.")
    if not -ndim <= axis < ndim:  # numpy's AxisError is an IndexError and a ValueError
        raise AxisError(
            f"{opname}: axis {axis} is out of bounds for an array of {ndim} "
            f"dimension{'s' if ndim != 1 else ''}{format_loc(loc)}; "
            f"expected an axis in [{-ndim}, {ndim})."
        )
    return int(axis) % ndim if ndim else 0


def normalize_axes(axis, ndim: int, opname: str, loc: str | None) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = tuple(normalize_axis(a, ndim, opname, loc) for a in axes)
    if len(set(out)) != len(out):
        raise ShapeError(f"{opname}: repeated axis in {axis!r}{format_loc(loc)}.")
    return tuple(sorted(out))


# Import the families so that they register themselves.
from . import elementwise, reduce, movement, linalg  # noqa: E402,F401
