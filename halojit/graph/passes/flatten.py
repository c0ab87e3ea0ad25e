"""Full reductions of arrays with a short last axis reduce a 2-D view.

``img.mean()`` of a (512, 512, 3) image: per-lane partials need a last
axis of at least SPLIT_MIN elements (generators/chunks.py), so such a
reduction fit no template and Adams2019 took 0.64 ms where numpy takes
0.13 (float32; uint8 max 0.64 against 0.01; 2-core Zen 4 VM, one core).
Every element is reduced either way, so the reduction reads the array
reshaped to (rows, width), its trailing axes merged until the last is at
least SPLIT_MIN wide; the lowering reads a merge of axes as ``j % 3``,
``j / 3``, which the FullReduce template's dense specialization turns
back into one vector load. Sums then add in another order, as numpy's own
pairwise sums differ from a plain loop.

Reductions over leading axes that keep only a few elements (the mean of
an image's channels, ``x.mean(axis=(0, 1))`` of (1080, 1920, 3), or of
points, ``p.sum(axis=0)`` of (N, 3)) likewise reduce ``k`` rows at a time
as one row of ``col_width(kept)`` elements (flatten_col_reductions): the
ColReduce template vectorizes its accumulators along the kept axis, three
lanes of sixteen there.
"""

from __future__ import annotations

import math

from ...generators.chunks import SPLIT_MIN
from ..fusion import FULL_REDUCE_MIN
from ..ir import AbstractArray, Graph, Node
from ..ops.reduce import REDUCERS
from .rewrite import rebuild


def merge_trailing(shape, width_min: int) -> tuple[int, int]:
    """(k, width): the last ``k`` axes of ``shape`` merged into one of
    ``width`` elements, the fewest that reach ``width_min`` (all of them
    when none do)."""
    k, width = 1, shape[-1] if shape else 1
    while k < len(shape) and width < width_min:
        k += 1
        width *= shape[-k]
    return k, width


def flatten_full_reductions(graph: Graph) -> Graph:
    def flat(n: Node):
        if n.op not in REDUCERS:
            return None
        (x,) = n.inputs
        shape = x.shape
        if (len(shape) < 2 or shape[-1] >= SPLIT_MIN or x.aval.size < FULL_REDUCE_MIN
                or tuple(sorted(n.params["axes"])) != tuple(range(len(shape)))):
            return None
        k, _ = merge_trailing(shape, SPLIT_MIN)
        lead = 1
        for d in shape[:len(shape) - k]:
            lead *= d
        new_shape = (lead, x.aval.size // lead) if k < len(shape) else (x.aval.size,)
        view = Node("reshape", (x,), {"shape": new_shape},
                    AbstractArray(new_shape, x.dtype, x.aval.weak), n.loc)
        axes = tuple(range(len(new_shape)))
        r = Node(n.op, (view,), {**n.params, "axes": axes, "keepdims": False},
                 AbstractArray((), n.dtype, n.aval.weak), n.loc)
        if n.shape == ():
            return r
        return Node("reshape", (r,), {"shape": n.shape}, n.aval, n.loc)
    return rebuild(graph, flat)


# a reduction over leading axes keeping fewer elements than this reads its
# rows k at a time as rows of col_width elements (a multiple of the kept
# count and of 16 lanes, at least SPLIT_MIN); one ending in fewer than
# COL_ROWS_MIN such rows is left alone
COL_KEPT_MAX = 16
COL_ROWS_MIN = 64


def col_width(kept: int) -> int:
    width = kept * 16 // math.gcd(kept, 16)
    while width < SPLIT_MIN:
        width *= 2
    return width


def flatten_col_reductions(graph: Graph) -> Graph:
    """``r(x, axes=(0, ..., a-1))`` keeping W = prod(shape[a:]) < COL_KEPT_MAX
    elements: along the last reduced axis (m long), k rows of W are read
    as one of L = k * W elements (col_width), reduced to L partials, those
    reduced as (k, W); the last m % k rows join those partials. Only the
    last reduced axis is cut, so the lowering's index stays
    ``(r * k + j / W, j % W)``, which the dense
    specialization folds into one address (merging the leading axes too,
    a (1080, 1920, 3) image's mean took 4.0 ms against 0.5). With W of
    COL_KEPT_MAX or more but a short last axis, the kept axes merge into
    one: ``x.mean(axis=0)`` of (4096, 64, 3) 0.68 -> 0.073 ms (numpy
    0.12), of (64, 1080, 3) 0.19 -> 0.017 (0.016; one core)."""
    def node(op, inputs, params, shape, like):
        return Node(op, tuple(inputs), params, AbstractArray(shape, like.dtype, like.aval.weak),
                    like.loc)

    def flat(n: Node):
        if n.op not in REDUCERS:
            return None
        (x,) = n.inputs
        shape, axes = x.shape, tuple(sorted(n.params["axes"]))
        a = len(axes)
        if not axes or axes != tuple(range(a)) or a == len(shape):
            return None
        kept_shape, m = shape[a:], shape[a - 1]
        kept = math.prod(kept_shape)
        if x.aval.size < FULL_REDUCE_MIN or kept < 2:
            return None
        if kept >= COL_KEPT_MAX:
            if len(kept_shape) == 1 or shape[-1] >= COL_KEPT_MAX:
                return None
            # a short last axis among many kept elements, (4096, 64, 3) over
            # axis 0: the kept axes merged into one row of accumulators, as
            # vectors of 16 along all of them rather than 3 lanes at a time
            rows_shape = shape[:a] + (kept,)
            merged = node("reshape", (x,), {"shape": rows_shape}, rows_shape, x)
            return Node("reshape", (node(n.op, (merged,), {**n.params, "keepdims": False},
                                         (kept,), n),), {"shape": n.shape}, n.aval, n.loc)
        width = col_width(kept)
        k = width // kept
        head, rest = m // k, m % k
        if head * math.prod(shape[:a - 1]) < COL_ROWS_MIN:
            return None

        def rows(start, count):
            # rows [start, start + count) of the last reduced axis
            if count == m:
                return x
            cut = shape[:a - 1] + (count,) + kept_shape
            return node("slice", (x,), {
                "starts": (0,) * (a - 1) + (start,) + (0,) * len(kept_shape),
                "steps": (1,) * len(shape), "shape": cut}, cut, x)

        def reduce(v, lead):
            return node(n.op, (v,), {**n.params, "axes": tuple(range(lead)), "keepdims": False},
                        v.shape[lead:], n)

        block_shape = shape[:a - 1] + (head, width)
        block = node("reshape", (rows(0, head * k),), {"shape": block_shape}, block_shape, x)
        part = reduce(block, a)
        parts = node("reshape", (part,), {"shape": (k,) + kept_shape}, (k,) + kept_shape, part)
        if rest:
            # the last rows beside the partials, reduced with them; in the
            # first stage's group (which computes x), as one output with them
            left = math.prod(shape[:a - 1]) * rest
            tail = node("reshape", (rows(head * k, rest),), {"shape": (left,) + kept_shape},
                        (left,) + kept_shape, x)
            both = (k + left,) + kept_shape
            parts = node("concatenate", (parts, tail), {"axis": 0}, both, part)
        return Node("reshape", (reduce(parts, 1),), {"shape": n.shape}, n.aval, n.loc)
    return rebuild(graph, flat)
