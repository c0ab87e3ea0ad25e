"""Slices move above the elementwise ops they read, when no element is
computed twice.

Code that keeps a state as columns (``x, y, z = s[:, 0], s[:, 1], s[:, 2]``
... ``np.stack([dx, dy, dz], axis=1)``) and steps it in a Python loop
traces to a chain in which every step slices columns out of the last
step's elementwise result and stacks new columns back. One kernel then
computes each (N, 3) value and reads it back with a stride of 3: Halide's
lowering searches every such read for interleaved loads, and its cost grew
faster than the chain (Lorenz RK4 on (100000, 3) float64, 2-core Intel VM,
cold cache: 10 steps 10 s, 50 steps 332 s).

Here a slice of an elementwise value whose every use is a slice (or
another such value), the slices pairwise disjoint, becomes the op applied
to slices of its operands; a slice of a concatenate that falls within one
part reads that part; a slice of a slice is one slice. The chain above
becomes three column chains that meet only where a whole value is used:
there the value is a concatenate of its columns, when those cover it.
Every element is computed the same way, so every value is numpy's.
"""

from __future__ import annotations

import numpy as np

from ..ir import AbstractArray, Const, Graph, Node, make_graph

# Elementwise ops whose every element numpy computes alone and exactly
# (IEEE arithmetic, comparisons, bit operations, selects, casts): computed on
# a slice they give the slice of the whole. numpy's exp, log, sin, ... pick
# a SIMD loop or a scalar one by the operands' strides, which differ in the
# last bit (np.exp of a reversed column against the column of np.exp), so
# the numpy backend's results would move.
MOVABLE = frozenset({
    "add", "subtract", "multiply", "divide", "negative", "positive", "absolute", "sign",
    "sqrt", "square", "reciprocal", "floor", "ceil", "trunc", "rint", "maximum", "minimum",
    "fmax", "fmin", "copysign", "floor_divide", "remainder", "fmod",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "invert", "left_shift", "right_shift", "isnan", "isinf", "isfinite",
    "signbit", "where", "astype", "bitcast"})
# A box: per axis (start, count, step), as the slice op's params.
Box = tuple[tuple[int, int, int], ...]
# More distinct slices of one value than this, and it stays whole.
MAX_PIECES = 64
# An elementwise op of concatenations of more parts than this stays one op:
# as a concatenation of its parts, a kernel that selects the part per
# element (the Elementwise template) would compute the op in every branch.
# Only cuts of the last axis sink, where the Concat template (one update per
# part) and stacked columns (_apply_columns) take the concatenation:
# ``np.concatenate([a, b]) * 2 + 1`` of two 2**21 float32, with out=, 2-core
# Intel VM: 11.0 -> 3.7 ms; of two (2048, 1024) along axis 1 8.9 -> 3.6 ms;
# along axis 0 Adams2019 schedules it either way, slower sunk (2.3-3.9 ->
# 3.9-4.5 ms).
SINK_MAX_PARTS = 16


def _box(n: Node) -> Box:
    p = n.params
    return _normal(tuple(zip(p["starts"], p["shape"], p["steps"])))


def _slice_node(src: Node, box: Box, loc) -> Node:
    """``src`` read at ``box``: a slice node."""
    params = {"starts": tuple(s for s, _, _ in box), "shape": _shape(box),
              "steps": tuple(t for _, _, t in box)}
    return Node("slice", (src,), params, AbstractArray(_shape(box), src.dtype, src.aval.weak), loc)


def _normal(box) -> Box:
    return tuple((s, c, t if c > 1 else 1) if c else (0, 0, 1) for s, c, t in box)


def _whole(shape) -> Box:
    return tuple((0, d, 1) for d in shape)


def _shape(box: Box) -> tuple[int, ...]:
    return tuple(c for _, c, _ in box)


def _disjoint_axis(a, b) -> bool:
    (s1, c1, t1), (s2, c2, t2) = a, b
    if not c1 or not c2:
        return True
    lo1, hi1 = sorted((s1, s1 + t1 * (c1 - 1)))
    lo2, hi2 = sorted((s2, s2 + t2 * (c2 - 1)))
    if hi1 < lo2 or hi2 < lo1:
        return True
    t = abs(t1)
    return t == abs(t2) and t > 1 and c1 > 1 and c2 > 1 and (s1 - s2) % t != 0


def _disjoint(a: Box, b: Box) -> bool:
    return any(_disjoint_axis(x, y) for x, y in zip(a, b))


def _within(box: Box, outer: Box) -> Box | None:
    """``box`` relative to ``outer`` when every index of it is in ``outer``."""
    rel = []
    for (s, c, t), (so, co, to) in zip(box, outer):
        if c == 1:
            t = to
        if (s - so) % to or t % to:
            return None
        r, q = (s - so) // to, t // to
        if not (0 <= r < co and 0 <= r + q * (c - 1) < co):
            return None
        rel.append((r, c, q if c > 1 else 1))
    return tuple(rel)


def _operand_box(box: Box, shape) -> Box:
    """The part of an operand of ``shape`` (broadcast against the result)
    that ``box`` of the result reads."""
    tail = box[len(box) - len(shape):] if shape else ()
    return tuple((0, 1, 1) if d == 1 else b for b, d in zip(tail, shape))


def _partition_axis(boxes, shape) -> int | None:
    """The axis along which ``boxes`` tile the whole of ``shape`` in unit
    steps, each whole along every other axis; None when they do not."""
    for k in range(len(shape)):
        if all(b[i] == (0, d, 1) for b in boxes for i, d in enumerate(shape) if i != k):
            ranges = sorted((b[k][0], b[k][1]) for b in boxes if b[k][2] == 1)
            if len(ranges) != len(boxes):
                continue
            end = 0
            for s, c in ranges:
                if s != end:
                    break
                end += c
            else:
                if end == shape[k]:
                    return k
    return None


def _pieces(graph: Graph) -> dict[Node, tuple[list[Box], int | None]]:
    """Elementwise values computed as pieces: node -> (its distinct boxes,
    the axis they tile it along when the whole value is also used, else
    None). Decided from the outputs up, as each value's users come first."""
    users = graph.users()
    outputs = set(graph.outputs)
    pieces: dict[Node, tuple[list[Box], int | None]] = {}
    for x in reversed(graph.nodes):
        if x.op not in MOVABLE or not x.aval.size or not x.shape:
            continue
        whole = _whole(x.shape)
        boxes: set[Box] = set()
        used_whole = x in outputs
        for u in users[x]:
            if u.op == "slice":
                boxes.add(_box(u))
            elif u in pieces:
                boxes.update(_operand_box(b, x.shape) for b in pieces[u][0])
            else:
                used_whole = True
        used_whole = used_whole or whole in boxes
        boxes = {b for b in boxes if b != whole and all(_shape(b))}
        if not boxes or len(boxes) > MAX_PIECES:
            continue
        ordered = sorted(boxes)
        if any(not _disjoint(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1:]):
            continue
        axis = None
        if used_whole:  # as a concatenation of its pieces: along the last axis only (see _sink)
            axis = _partition_axis(ordered, x.shape)
            if axis != x.aval.ndim - 1:
                continue
        pieces[x] = (ordered, axis)
    return pieces


def _sink(x: Node, inputs) -> Node | None:
    """An elementwise op of concatenations that all cut the same axis at the
    same places as a concatenation of the op on their parts, or None.
    Operands that broadcast along that axis join every part whole; others
    are read in the same cuts."""
    if x.op not in MOVABLE or not x.shape:
        return None
    cut = None
    for i in inputs:
        k = i.aval.ndim - x.aval.ndim  # x's axis a is i's axis a + k
        if i.op == "concatenate" and i.params["axis"] - k >= 0:
            a = i.params["axis"] - k
            if i.shape[a + k] == 1 and x.shape[a] != 1:
                continue
            sizes = tuple(p.shape[a + k] for p in i.inputs)
            if cut is not None and cut != (a, sizes):
                return None
            cut = (a, sizes)
    if cut is None or 0 in cut[1] or len(cut[1]) > SINK_MAX_PARTS or cut[0] != x.aval.ndim - 1:
        return None
    a, sizes = cut
    parts, start = [], 0
    for j, size in enumerate(sizes):
        operands = []
        for i in inputs:
            d = a + i.aval.ndim - x.aval.ndim
            if d < 0 or i.shape[d] == 1:
                operands.append(i)
            elif i.op == "concatenate" and i.params["axis"] == d:
                operands.append(i.inputs[j])
            else:  # read in the same cuts
                box = tuple((start, size, 1) if e == d else (0, n, 1) for e, n in enumerate(i.shape))
                operands.append(_slice_node(i, box, x.loc))
        start += size
        shape = x.shape[:a] + (size,) + x.shape[a + 1:]
        parts.append(Node(x.op, operands, x.params, AbstractArray(shape, x.dtype, x.aval.weak),
                          x.loc))
    return Node("concatenate", parts, {"axis": a}, x.aval, x.loc)


def push_slices(graph: Graph) -> Graph:
    pieces = _pieces(graph)
    env: dict[Node, Node] = {}
    memo: dict[tuple[int, Box], Node] = {}

    def piece(x: Node, box: Box) -> Node:
        if box == _whole(x.shape):
            return env[x]
        key = (id(x), box)
        if key not in memo:
            memo[key] = _piece(x, box)
        return memo[key]

    def _piece(x: Node, box: Box) -> Node:
        aval = AbstractArray(_shape(box), x.dtype, x.aval.weak)
        if x in pieces and box in pieces[x][0]:
            operands = [piece(i, _operand_box(box, i.shape)) if i.shape else env[i]
                        for i in x.inputs]
            return Node(x.op, operands, x.params, aval, x.loc)
        if x.op == "slice" and all(_shape(box)):
            inner = tuple((s + t * s2, c2, t * t2) for (s, _, t), (s2, c2, t2)
                          in zip(_box(x), box))
            return piece(x.inputs[0], _normal(inner))
        if x.op == "concatenate" and all(_shape(box)):
            k = x.params["axis"]
            s, c, t = box[k]
            lo, hi = sorted((s, s + t * (c - 1)))
            offset = 0
            for part in x.inputs:
                n = part.shape[k]
                if offset <= lo and hi < offset + n:
                    return piece(part, box[:k] + ((s - offset, c, t),) + box[k + 1:])
                offset += n
        if x in pieces and not all(_shape(box)):  # nothing read
            return Node("constant", (), {"value": Const(np.zeros(aval.shape, x.dtype))}, aval,
                        x.loc)
        src = env.get(x)
        if x in pieces:  # within one of x's pieces: a slice of the slice
            for b in pieces[x][0]:
                rel = _within(box, b)
                if rel is not None:
                    src, box = piece(x, b), rel
                    break
        assert src is not None, f"push_slices: no whole value of {x} to slice"
        return _slice_node(src, box, x.loc)

    for x in graph.nodes:
        if x.op == "input":
            env[x] = x
        elif x in pieces:
            boxes, axis = pieces[x]
            parts = [piece(x, b) for b in sorted(boxes, key=lambda b: b[axis or 0][0])]
            if axis is not None:
                env[x] = Node("concatenate", parts, {"axis": axis}, x.aval, x.loc)
        elif x.op == "slice":
            env[x] = piece(x.inputs[0], _box(x))
        else:
            inputs = tuple(env[i] for i in x.inputs)
            env[x] = _sink(x, inputs) or (
                x if all(a is b for a, b in zip(inputs, x.inputs)) else x.replace(inputs=inputs))
    return make_graph(graph.inputs, [env[o] for o in graph.outputs])
