"""Movement ops: reshape, transpose, broadcast_to, slice, concatenate, pad.

Higher-level numpy calls (``squeeze``, ``expand_dims``, ``stack``, basic
indexing with ints and ``None``) are composed from these in the tracer.
``slice`` keeps, per axis, the elements ``start + i * step`` for
``i < shape[axis]`` (steps may be negative).
"""

from __future__ import annotations

import numpy as np

from ...errors import IndexOutOfBoundsError, IndexShapeError, ShapeError, format_loc
from ..ir import AbstractArray
from . import MOVEMENT, OpDef, register


def _reshape_infer(avals, params, loc=None):
    (a,) = avals
    shape = params["shape"]
    if int(np.prod(shape, dtype=np.int64)) != a.size:
        raise ShapeError(
            f"reshape: cannot reshape an array of shape {a.shape} ({a.size} elements) "
            f"into shape {shape}{format_loc(loc)}; the element counts must match."
        )
    return AbstractArray(shape, a.dtype, a.weak)


register(OpDef("reshape", MOVEMENT, _reshape_infer,
               lambda arrays, p: np.reshape(arrays[0], p["shape"])))


def _transpose_infer(avals, params, loc=None):
    (a,) = avals
    perm = params["perm"]
    if sorted(perm) != list(range(a.ndim)):
        raise ShapeError(
            f"transpose: axes {perm} are not a permutation of {tuple(range(a.ndim))}"
            f"{format_loc(loc)}."
        )
    return AbstractArray(tuple(a.shape[p] for p in perm), a.dtype, a.weak)


register(OpDef("transpose", MOVEMENT, _transpose_infer,
               lambda arrays, p: np.transpose(arrays[0], p["perm"])))


def _broadcast_infer(avals, params, loc=None):
    (a,) = avals
    shape = params["shape"]
    ok = len(shape) >= a.ndim and all(
        s == d or s == 1 for s, d in zip(a.shape[::-1], shape[::-1]))
    if not ok:
        raise ShapeError(
            f"broadcast_to: cannot broadcast shape {a.shape} to {shape}{format_loc(loc)}; "
            "each trailing dimension must equal the target's or be 1."
        )
    return AbstractArray(shape, a.dtype, a.weak)


register(OpDef("broadcast_to", MOVEMENT, _broadcast_infer,
               lambda arrays, p: np.broadcast_to(arrays[0], p["shape"])))


def slice_bounds(start: int, step: int, n: int) -> slice:
    if n == 0:
        return slice(0, 0, 1)
    stop = start + step * (n - 1) + (1 if step > 0 else -1)
    return slice(start, None if stop < 0 else stop, step)


def _slice_infer(avals, params, loc=None):
    (a,) = avals
    return AbstractArray(params["shape"], a.dtype, a.weak)


def _slice_reference(arrays, params):
    index = tuple(slice_bounds(s, t, n) for s, t, n in
                  zip(params["starts"], params["steps"], params["shape"]))
    return arrays[0][index]


register(OpDef("slice", MOVEMENT, _slice_infer, _slice_reference))


def _concat_infer(avals, params, loc=None):
    axis = params["axis"]
    first = avals[0]
    for a in avals[1:]:
        same = a.ndim == first.ndim and all(
            x == y for i, (x, y) in enumerate(zip(a.shape, first.shape)) if i != axis)
        if not same:
            raise ShapeError(
                f"concatenate: all input shapes must match except along axis {axis}; "
                f"got {first.shape} and {a.shape}{format_loc(loc)}."
            )
    shape = list(first.shape)
    shape[axis] = sum(a.shape[axis] for a in avals)
    return AbstractArray(tuple(shape), first.dtype)


register(OpDef("concatenate", MOVEMENT, _concat_infer,
               lambda arrays, p: np.concatenate(arrays, axis=p["axis"])))

PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def _pad_infer(avals, params, loc=None):
    (a,) = avals
    widths = params["pad_width"]
    if params["mode"] in ("reflect", "symmetric", "wrap"):
        for d, (lo, hi) in zip(a.shape, widths):
            if (lo or hi) and d == 0:
                raise ShapeError(f"pad: cannot pad an empty axis with mode "
                                 f"{params['mode']!r}{format_loc(loc)}.")
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(a.shape, widths))
    return AbstractArray(shape, a.dtype)


def _pad_reference(arrays, params):
    kwargs = {}
    if params["mode"] == "constant":
        kwargs["constant_values"] = params["value"]
    return np.pad(arrays[0], params["pad_width"], mode=params["mode"], **kwargs)


register(OpDef("pad", MOVEMENT, _pad_infer, _pad_reference))


# -- gathers ------------------------------------------------------------------------
# ``take`` reads ``x`` at integer positions along one axis. Without
# ``along`` (np.take), the index array's axes replace that axis:
#     out[pre..., j..., post...] = x[pre..., index[j...], post...]
# With ``along`` (np.take_along_axis), the index array has x's number of
# axes and broadcasts against it everywhere but ``axis``:
#     out[..., j, ...] = x[..., index[..., j, ...], ...]
# ``mode`` is numpy's: "wrap" (modulo), "clip" (clamped; negative indices
# read the first element), or "raise" (negative indices count from the end;
# the tracer checks the range before any kernel runs, the kernel clamps).
TAKE_MODES = ("raise", "wrap", "clip")


def take_shape(x_shape, index_shape, axis: int, along: bool, loc=None) -> tuple:
    if not along:
        return tuple(x_shape[:axis]) + tuple(index_shape) + tuple(x_shape[axis + 1:])
    if len(index_shape) != len(x_shape):
        raise ShapeError(f"take_along_axis: the indices need the array's {len(x_shape)} "
                         f"dimensions, got {len(index_shape)}{format_loc(loc)}.")
    others = [(1 if k == axis else d) for k, d in enumerate(x_shape)]
    iothers = [(1 if k == axis else d) for k, d in enumerate(index_shape)]
    try:
        shape = list(np.broadcast_shapes(tuple(others), tuple(iothers)))
    except ValueError:  # numpy's IndexError (its fancy indexing does not broadcast)
        raise IndexShapeError(f"take_along_axis: indices of shape {tuple(index_shape)} do not "
                         f"broadcast against an array of shape {tuple(x_shape)} outside "
                         f"axis {axis}{format_loc(loc)}.") from None
    shape[axis] = index_shape[axis]
    return tuple(shape)


def _take_infer(avals, params, loc=None):
    x, index = avals
    if index.dtype.kind not in "iu":
        raise TypeError(f"take: indices must be integers, got {index.dtype}{format_loc(loc)}.")
    axis = params["axis"]
    if x.shape[axis] == 0 and index.size:
        raise IndexOutOfBoundsError(f"take: cannot take elements from the empty axis {axis} "
                                    f"of an array of shape {x.shape}{format_loc(loc)}.")
    return AbstractArray(take_shape(x.shape, index.shape, axis, params["along"], loc), x.dtype)


def _take_reference(arrays, params):
    x, index = arrays
    axis, mode = params["axis"], params["mode"]
    n = x.shape[axis]
    index = index.astype(np.int64)  # numpy's intp: a uint64 2**64 - 1 is -1
    if mode == "wrap" and n:  # (np.take's own wrap loops once per n below 0)
        index = index % n
    elif mode == "clip":
        index = np.clip(index, 0, n - 1)
    if params["along"]:
        shape = take_shape(x.shape, index.shape, axis, True)
        bx = [d if k != axis else x.shape[axis] for k, d in enumerate(shape)]
        return np.take_along_axis(np.broadcast_to(x, bx), np.broadcast_to(index, shape), axis)
    return np.take(x, index, axis=axis)


register(OpDef("take", MOVEMENT, _take_infer, _take_reference))
