"""Reductions: sum, prod, max, min, nanmax, nanmin, any, all (over ``axes``) and argmax,
argmin (over one axis); the scans cumsum, cumprod (along one ``axis``,
same shape out), which fuse as reductions do; and ``sort`` and
``argsort`` (along one ``axis``, same shape out; argsort's int64), and
``select`` (a few positions of the sorted last axis). A scan runs serially along its axis, which no
template's loops allow: every template's fits refuses them, so their groups
take Adams2019. A sort is a comparator network (lowering.lower_sort) that
shares a group with elementwise and movement ops only (fusion.py), which
the Sort template schedules (schedules/sort.py). A ``scatter`` writes
values into a copy of a 1-D base at positions read from an index array,
in order (``x[idx] = v``, ``np.add.at``): a serial loop, alone in its
group beside elementwise and movement ops, which the Scatter template
schedules (schedules/scatter.py).

The tracer casts the operand to the accumulation dtype numpy would use
(``sum`` of int8 is int64, ``any`` works on bool), so a reduction's output
dtype is its input dtype except for arg-reductions (int64). ``mean``, ``var``
and ``std`` are composed from these in the tracer, the way numpy does.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError, format_loc
from ..ir import AbstractArray
from . import REDUCTION, SCAN, SCATTER, SORT, OpDef, register

REDUCERS = {
    "sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min,
    "any": np.any, "all": np.all,
    # NaN-ignoring extremes (np.fmax.reduce, np.nanmax): NaN only where every
    # value is NaN; the tracer emits them for float operands only
    "nanmax": np.fmax.reduce, "nanmin": np.fmin.reduce,
}
ARG_REDUCERS = {"argmax": np.argmax, "argmin": np.argmin}
_NO_IDENTITY = ("max", "min", "nanmax", "nanmin", "argmax", "argmin")


def reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _infer(name):
    def infer(avals, params, loc=None):
        (a,) = avals
        axes = params["axes"]
        if name in _NO_IDENTITY and any(a.shape[i] == 0 for i in axes):
            raise ShapeError(
                f"{name}: zero-size array to a reduction with no identity: shape "
                f"{a.shape}, axes {axes}{format_loc(loc)}; expected every reduced "
                "axis to have at least one element."
            )
        dtype = np.dtype(np.int64) if name in ARG_REDUCERS else a.dtype
        return AbstractArray(reduced_shape(a.shape, axes, params["keepdims"]), dtype)
    return infer


def _reference(name):
    fn = REDUCERS[name]

    def reference(arrays, params):
        (a,) = arrays
        # dtype=: numpy would widen int8 sums to int64; the tracer already cast
        # the operand to the accumulation dtype, which is the output dtype.
        kw = {"dtype": a.dtype} if name in ("sum", "prod") else {}
        return np.asarray(fn(a, axis=params["axes"], keepdims=params["keepdims"], **kw))
    return reference


def _arg_reference(name):
    fn = ARG_REDUCERS[name]

    def reference(arrays, params):
        (a,) = arrays
        (axis,) = params["axes"]
        return np.asarray(fn(a, axis=axis, keepdims=params["keepdims"])).astype(np.int64)
    return reference


for _name in REDUCERS:
    register(OpDef(_name, REDUCTION, _infer(_name), _reference(_name)))
for _name in ARG_REDUCERS:
    register(OpDef(_name, REDUCTION, _infer(_name), _arg_reference(_name)))


SCANS = {"cumsum": np.cumsum, "cumprod": np.cumprod,
         # np.maximum.accumulate and kin: numpy has no cummax
         "cummax": np.maximum.accumulate, "cummin": np.minimum.accumulate,
         "cumfmax": np.fmax.accumulate, "cumfmin": np.fmin.accumulate}
SORTS = ("sort", "argsort")


def _scan_infer(avals, params, loc=None):
    (a,) = avals
    return AbstractArray(a.shape, a.dtype)


def _scan_reference(name):
    fn = SCANS[name]

    def reference(arrays, params):
        (a,) = arrays
        return np.asarray(fn(a, axis=params["axis"], dtype=a.dtype))
    return reference


for _name in SCANS:
    register(OpDef(_name, SCAN, _scan_infer, _scan_reference(_name)))


def _sort_reference(arrays, params):
    (a,) = arrays
    return np.sort(a, axis=params["axis"])


def _argsort_infer(avals, params, loc=None):
    (a,) = avals
    return AbstractArray(a.shape, np.dtype(np.int64))


def _argsort_reference(arrays, params):
    (a,) = arrays
    # the network orders equal keys by position; -0.0 equals +0.0 there
    return np.argsort(a, axis=params["axis"], kind="stable").astype(np.int64)


# same shape and dtype out, as a scan
register(OpDef("sort", SORT, _scan_infer, _sort_reference))
register(OpDef("argsort", SORT, _argsort_infer, _argsort_reference))


# ``select``: the values at positions ``kth`` of the last axis sorted (NaN
# last), without sorting it: (..., n) -> (..., len(kth)), a radix selection.
# With a second operand of shape (..., 1), each row's positions are its
# value plus kth, clipped to the axis (np.nanmedian: the middle of a row's
# non-NaN values, which sort first)
# (lowering.lower_select, schedules/select.py). np.median and np.quantile
# of long rows take it; numpy's own median partitions (introselect).
SELECTS = ("select",)
# every op with the SORT trait: what the other templates' fits refuse
SORTING = (*SORTS, *SELECTS)


def _select_infer(avals, params, loc=None):
    a = avals[0]
    kth = params["kth"]
    n = a.shape[-1] if a.ndim else 0
    if not a.ndim or not kth or not all(0 <= k < n for k in kth):
        raise ShapeError(f"select: positions {kth} of an axis of {n}{format_loc(loc)}.")
    if len(avals) > 1 and (avals[1].shape != a.shape[:-1] + (1,) or avals[1].dtype.kind != "i"):
        raise ShapeError(f"select: ranks of shape {a.shape[:-1] + (1,)} (integers) expected, "
                         f"got {avals[1].shape} {avals[1].dtype}{format_loc(loc)}.")
    return AbstractArray(a.shape[:-1] + (len(kth),), a.dtype)


def _select_reference(arrays, params):
    a = arrays[0]
    srt = np.sort(a, axis=-1)
    kth = np.asarray(params["kth"], np.int64)
    if len(arrays) == 1:
        return srt[..., kth]
    # a second operand: each row's positions are its rank plus kth, clipped
    at = np.clip(np.asarray(arrays[1], np.int64) + kth, 0, a.shape[-1] - 1)
    return np.take_along_axis(srt, at, axis=-1)


register(OpDef("select", SORT, _select_infer, _select_reference))


# -- scatter ------------------------------------------------------------------------------
# base (n,), index (any shape) of integers in [0, n) (the tracer checks the range), values
# of the index's shape (none for a unary ufunc): out = base.copy(), then for each position k
# of the index in C order out[index[k]] = values[k] ("ufunc": None) or out[index[k]] =
# ufunc(out[index[k]], values[k]) computed in the ufunc's loop dtypes ("loop": input dtypes,
# then the output's) and cast back to base's dtype, as numpy's unbuffered ufunc.at does
SCATTERS = ("scatter",)


def _scatter_infer(avals, params, loc=None):
    base, index, *values = avals
    if base.ndim != 1 or index.dtype.kind not in "iu" or any(
            v.shape != index.shape for v in values):
        raise ShapeError(f"scatter: expected a 1-D base, integer indices and values of their "
                         f"shape, got {base}, {index} and {', '.join(map(str, values))}"
                         f"{format_loc(loc)}.")
    return AbstractArray(base.shape, base.dtype)


def _scatter_reference(arrays, params):
    base, index, *values = arrays
    out = np.array(base, copy=True)
    index = np.ravel(index)
    values = [np.ravel(v) for v in values]
    name = params["ufunc"]
    if name is None:
        out[index] = values[0]
    else:  # values come in the loop's input dtype, so numpy picks the same loop
        getattr(np, name).at(out, index, *values)
    return out


register(OpDef("scatter", SCATTER, _scatter_infer, _scatter_reference))
