"""The Transpose template: elementwise groups that read an input through a
transpose moving its last (contiguous) axis: ``x.T * 1``, ``x.T + y``,
``(x * 2).T``, a CHW -> HWC image.

Walking the output in row order reads such an input down its columns, one
cache line per element. Here the output is cut into ``tile`` x ``tile``
tiles over its last axis and the axis holding the input's rows (parallel
tasks), each walked in ``block`` x ``block`` blocks: ``block``-lane vectors
along the output's rows, the block's rows unrolled, so both arrays are
touched a tile's worth of cache lines at a time. An output whose last axis
is narrow (at most 4: channels last) is instead vectorized along the
input's rows with the narrow axis unrolled inside (interleaving stores).

Measured on the 2-core AVX-512 KVM VM, float32, medians of 15, Halide JIT
prototype of ``x.T * 1`` (4096, 4096): Adams2019's schedule 77 ms, 64-wide
tiles of 8x8 blocks 13.5 ms, 16x16 blocks 14.7, 8x8 blocks with the input
staged per block or both block axes vectorized 13.1-16 (no better), one
thread 22 ms. numpy's ``x.T * 1`` takes 13 ms, but it returns a Fortran-
ordered array (its output follows the input's layout); a C-ordered one
costs numpy 118 ms (``np.copyto(o, x.T)``).
"""

from __future__ import annotations

import halide as hl

from ..graph.ops import frontier, inlines

TRANSPOSE = ({"tile": "64", "block": "8"},
             "elementwise groups reading an input through a transpose of its last "
             "axis: parallel tile x tile tiles of the output, each walked in block x "
             "block blocks (block-lane vectors, rows unrolled); a narrow last axis "
             "(channels) is unrolled inside vectors along the input's rows")

# the output axis that holds the transposed input's rows must be longer than
# this for a tile (a shorter one, HWC -> CHW, reads as a few strided vectors)
_MIN_EXTENT = 4


def transposed_axis(graph):
    """The output axis (numpy order) that a group input's last axis lands on
    through a transpose, when it is not the output's last axis; None when
    the group is not elementwise ops, broadcasts and transposes (of inputs,
    or of values computed from them elementwise: ``(x * 2).T``), or no
    transpose moves an input's last axis. The largest such input decides."""
    if len(graph.outputs) != 1:
        return None
    out = graph.outputs[0].aval
    if out.ndim < 2:
        return None
    best = None
    for n in graph.nodes:
        if n.op in ("input", "constant") or inlines(n):
            continue
        if n.op == "transpose":
            src = n.inputs[0]
            perm = n.params["perm"]
            # an input, or a value computed from inputs elementwise (inlined,
            # it reads them through the same transpose)
            if any(f.op not in ("input", "constant") for f in frontier(src, inlines)):
                return None
            last = perm.index(len(perm) - 1)
            if last == len(perm) - 1:
                continue
            axis = last + out.ndim - len(perm)  # broadcasting aligns trailing axes
            if best is None or src.aval.size > best[0]:
                best = (src.aval.size, axis)
            continue
        return None  # anything else
    if best is None or out.shape[best[1]] <= _MIN_EXTENT:
        return None
    return best[1]


def transpose_fits(graph) -> bool:
    return transposed_axis(graph) is not None


def apply_transpose(lowered, params) -> str:
    from .templates import _int, _vectorize, fix_extents, fuse_loops
    tile, block = _int(params, "tile"), _int(params, "block")
    fix_extents(lowered)
    out = lowered.outputs[0]
    node = lowered.graph.outputs[0]
    shape = node.shape
    axis = transposed_axis(lowered.graph)
    args = out.args()  # Halide order: args[0] is numpy's last axis
    x, y = args[0], args[len(shape) - 1 - axis]
    others = [a for a in args if a.name() not in (x.name(), y.name())]
    guard = hl.TailStrategy.GuardWithIf
    name = out.name()
    if shape[-1] <= _MIN_EXTENT:
        # channels last: vectors along the input's rows, the channels
        # unrolled inside them (the stores interleave)
        vector = max(8, 64 // node.dtype.itemsize)
        out.reorder(x, y, *others)
        _vectorize(out, y, vector)
        out.unroll(x)
        if others:
            task = fuse_loops(out, others[0], others[1:], "task")
        else:
            yo = hl.Var("yo")  # tasks of ``tile`` vectors
            out.split(y, yo, y, tile, guard)
            task = yo
        out.parallel(task)
        return (f"{name}.reorder(c, rows, ...).vectorize(rows, {vector}).unroll(c)"
                f".parallel(outer)  # a narrow last axis of {shape[-1]}")
    tile_blocks(out, x, y, others, tile, block)
    return (f"{name}.tile(x, axis {axis}, {tile}, {tile}).tile({block}, {block})"
            f".vectorize(xi).unroll(yi).fuse(tiles, outer dims).parallel()")


def tile_blocks(f, x, y, others, tile: int, block: int, parallel: bool = True):
    """Schedule ``f`` (written along ``x``, its source read along ``y``) as
    ``tile`` x ``tile`` tiles (parallel tasks unless not ``parallel``), each
    walked in ``block`` x ``block`` blocks: ``block``-lane vectors along x,
    the block's rows along y unrolled. ``others``: the remaining Vars,
    fused into the task loop."""
    from .templates import fuse_loops
    guard = hl.TailStrategy.GuardWithIf
    xo, xi, xb, yo, yi, yb = (hl.Var(v) for v in ("xo", "xi", "xb", "yo", "yi", "yb"))
    f.split(x, xo, xi, tile, guard).split(y, yo, yi, tile, guard)
    f.split(xi, xb, xi, block, guard).split(yi, yb, yi, block, guard)
    f.reorder(xi, yi, xb, yb, xo, yo, *others)
    task = fuse_loops(f, xo, [yo, *others], "task")
    if parallel:
        f.parallel(task)
    f.vectorize(xi)
    f.unroll(yi)
