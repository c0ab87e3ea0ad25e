"""numpy functions that are compositions of other traced numpy calls: the
NaN-ignoring reductions, ``isclose``, ``allclose``, ``array_equal``,
``nan_to_num``, ``select``, ``average``, ``ptp``, ``gradient``,
``trapezoid``, ``polyval``, ``cov``, ``corrcoef``, ``angle`` (of real
input), ``tensordot``, ``inner``, ``kron``, ``cross``, ``meshgrid``,
``partition``, ``diagonal`` and ``trace`` (also as ndarray methods),
``diag``, ``atleast_1d``/``2d``/``3d``, ``fliplr``, ``flipud``, ``rot90``,
the ufuncs ``logaddexp``, ``logaddexp2``, ``heaviside``, ``float_power``,
``fabs``, ``ldexp``, ``divmod``, ``modf`` and (from the float's bits, by
``ndarray.view``) ``frexp``, ``nextafter`` and ``spacing``, and the ufunc methods
``outer`` and ``accumulate``.

Each handler follows numpy's own definition step by step (the same
operations in the same dtypes), so values, dtypes and NaN/inf handling are
numpy's; the compiler fuses the pieces. Conditions numpy raises on from
values (an all-NaN slice for ``nanargmax``, weights summing to zero for
``average``) are checked at every call before the kernels run.
"""

from __future__ import annotations

import math
import operator
import warnings

import numpy as np

from ..errors import UnsupportedError, format_loc
from .numpy_api import (COMPOSITE_LOOPS, COMPOSITE_UFUNCS, _along_last, _array, _ctx_of, _flat_0d,
                        _tr, _unsupported_kw, common_dtype, implements, selects_rows, std_of_var)
from .ops import normalize_axes, normalize_axis
from .tracer import TracedArray, user_loc


def _no_extras(fname, **kwargs):
    """numpy's ``where=``/``initial=``/``out=`` style arguments, refused."""
    _unsupported_kw(fname, {k: v for k, v in kwargs.items() if v is not np._NoValue})


def _keep(keepdims):
    return False if keepdims is np._NoValue else bool(keepdims)


def _check_per_call(ctx, flag, error):
    """Raise ``error()`` at every call where the traced boolean ``flag`` is
    true, before any kernel runs (numpy raises from values here). The flag
    is computed in numpy from the inputs at each call: one extra pass over
    the data, the price of numpy's error. A ``flag`` made from constants
    alone (weights built inside the function) is a plain numpy value: it is
    decided now, while tracing, once."""
    if not hasattr(flag, "_node"):
        if np.any(flag):
            raise error()
        return

    def check(value):
        if np.any(value):
            raise error()
    ctx.add_check(flag._node, check)


def _traced(a):
    """``a`` as a TracedArray of the trace it belongs to."""
    return _tr(_ctx_of(a), a, user_loc())


def _is_float(a) -> bool:
    return np.dtype(a.dtype).kind == "f"


# -- NaN-ignoring reductions ---------------------------------------------------------
def _nan_filled(a, fill):
    """(a with NaN replaced by ``fill``, the NaN mask) for float arrays; (a, None) otherwise."""
    if not _is_float(a):
        return a, None
    mask = np.isnan(a)
    return np.where(mask, fill, a), mask


def _nan_fold(name, fold, fill):
    """np.nansum / np.nanprod: the fold with NaN replaced by its identity."""
    def fn(a, axis=None, dtype=None, out=None, keepdims=np._NoValue,
           initial=np._NoValue, where=np._NoValue):
        _no_extras(name, out=out, initial=initial, where=where)
        return fold(_nan_filled(_traced(a), fill)[0], axis=axis, dtype=dtype,
                    keepdims=_keep(keepdims))
    return fn


implements(np.nansum)(_nan_fold("nansum", np.sum, 0))
implements(np.nanprod)(_nan_fold("nanprod", np.prod, 1))


def _nan_scan(name, scan, fill):
    def fn(a, axis=None, dtype=None, out=None):
        _no_extras(name, out=out)
        a = _traced(a)
        return scan(_nan_filled(a, fill)[0], axis=axis, dtype=dtype)
    return fn


implements(np.nancumsum)(_nan_scan("nancumsum", np.cumsum, 0))
implements(np.nancumprod)(_nan_scan("nancumprod", np.cumprod, 1))


def _check_inexact(fname, dtype):
    """numpy's nanmean/nanvar/nanstd of a float array refuse an integer or bool dtype=."""
    if dtype is not None and np.dtype(dtype).kind != "f":
        raise TypeError(f"np.{fname}: if a is inexact, then dtype must be inexact; expected "
                        f"a float dtype=, got {np.dtype(dtype)}{format_loc(user_loc())}.")


def _divide_by_count(total, count):
    """numpy's nan-function division: computed in the promoted dtype (float32
    by an intp count is float64), stored back in the total's dtype."""
    return (total / count).astype(total.dtype)


@implements(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=np._NoValue, *, where=np._NoValue):
    _no_extras("nanmean", out=out, where=where)
    a = _traced(a)
    arr, mask = _nan_filled(a, 0)
    keep = _keep(keepdims)
    if mask is None:
        return np.mean(arr, axis=axis, dtype=dtype, keepdims=keep)
    _check_inexact("nanmean", dtype)
    count = np.sum(~mask, axis=axis, dtype=np.intp, keepdims=keep)
    total = np.sum(arr, axis=axis, dtype=dtype, keepdims=keep)
    return _divide_by_count(total, count)  # 0 / 0 for an all-NaN slice: NaN, as numpy


def _ddof(ddof, correction):
    if correction is np._NoValue:
        return ddof
    if ddof != 0:
        raise ValueError("ddof and correction can't be provided simultaneously.")
    return correction


@implements(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=np._NoValue, *,
           where=np._NoValue, mean=np._NoValue, correction=np._NoValue):
    _no_extras("nanvar", out=out, where=where, mean=mean)
    a = _traced(a)
    ddof = _ddof(ddof, correction)
    arr, mask = _nan_filled(a, 0)
    keep = _keep(keepdims)
    if mask is None:
        return np.var(arr, axis=axis, dtype=dtype, ddof=ddof, keepdims=keep)
    _check_inexact("nanvar", dtype)
    count = np.sum(~mask, axis=axis, dtype=np.intp, keepdims=True)
    avg = _divide_by_count(np.sum(arr, axis=axis, dtype=dtype, keepdims=True), count)
    dev = np.where(mask, 0, (arr - avg).astype(arr.dtype))  # numpy subtracts in place
    var = np.sum(dev * dev, axis=axis, dtype=dtype, keepdims=keep)
    dof = (count if keep else np.squeeze(count, axis=axis)) - ddof
    var = _divide_by_count(var, dof)
    return np.where(dof <= 0, np.nan, var).astype(var.dtype)


@implements(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=np._NoValue, *,
           where=np._NoValue, mean=np._NoValue, correction=np._NoValue):
    _no_extras("nanstd", out=out, where=where, mean=mean)
    if _is_float(_traced(a)):
        _check_inexact("nanstd", dtype)
    var = nanvar(a, axis, dtype, None, _ddof(ddof, correction), keepdims)
    return std_of_var(var, "nanstd", user_loc())


def _nan_extreme(name, skip_nan):
    """np.nanmax / np.nanmin: numpy's fmax/fmin.reduce, one pass (NaN only
    where a whole slice is NaN; the tracer takes max/min for integers)."""
    def fn(a, axis=None, out=None, keepdims=np._NoValue, initial=np._NoValue,
           where=np._NoValue):
        _no_extras(name, out=out, initial=initial, where=where)
        return skip_nan.reduce(_traced(a), axis=axis, keepdims=_keep(keepdims))
    return fn


implements(np.nanmax)(_nan_extreme("nanmax", np.fmax))
implements(np.nanmin)(_nan_extreme("nanmin", np.fmin))


def _nan_arg(name, arg, fill):
    def fn(a, axis=None, out=None, *, keepdims=np._NoValue):
        _no_extras(name, out=out)
        ctx = _ctx_of(a)
        a = _tr(ctx, a, user_loc())
        arr, mask = _nan_filled(a, fill)
        if mask is not None and a.size:
            _check_per_call(ctx, np.any(np.all(mask, axis=axis)),
                            lambda: ValueError("All-NaN slice encountered"))
        return arg(arr, axis=axis, keepdims=_keep(keepdims))
    return fn


implements(np.nanargmax)(_nan_arg("nanargmax", np.argmax, -np.inf))
implements(np.nanargmin)(_nan_arg("nanargmin", np.argmin, np.inf))


@implements(np.nanmedian)
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=np._NoValue):
    """The median of each slice's non-NaN values (NaN for an all-NaN slice):
    the middle one or two of the slice's first ``count`` values sorted (NaN
    last): selected from long slices, gathered from the sorted short ones."""
    _no_extras("nanmedian", out=out)
    loc = user_loc()
    ctx = _ctx_of(a)
    a = _tr(ctx, a, loc)
    if not _is_float(a):
        return np.median(a, axis=axis, keepdims=_keep(keepdims))
    s, keep_shape = _along_last(ctx, a, axis, "nanmedian", loc)
    n = s.shape[-1]
    if n == 0:  # numpy: the mean of nothing
        r = np.mean(s, axis=-1)
    else:
        count = np.count_nonzero(~np.isnan(s), axis=-1)
        lo = np.maximum((count - 1) // 2, 0)[..., None]
        if selects_rows(s.shape):
            # long rows: the two positions from lo on, by radix selection
            # (numpy_api._order_stats), not a sort
            pair = ctx.emit("select", [s, lo], {"kth": (0, 1)}, loc)
            low, high = pair[..., 0], pair[..., 1]
        else:
            s = np.sort(s, axis=-1)
            hi = np.minimum(count // 2, n - 1)[..., None]
            low = np.take_along_axis(s, lo, axis=-1)[..., 0]
            high = np.take_along_axis(s, hi, axis=-1)[..., 0]
        acc = np.float32 if s.dtype == np.float16 else s.dtype
        mid = ((low.astype(acc) + high.astype(acc)) / 2).astype(s.dtype)
        r = np.where(count % 2 == 1, low, mid)  # odd: the value itself (no x + x overflow)
        r = np.where(count == 0, np.nan, r).astype(s.dtype)
    return np.reshape(r, keep_shape) if _keep(keepdims) else r


# -- elementwise compositions --------------------------------------------------------
@implements(np.isclose)
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    x, y = (v if isinstance(v, (TracedArray, int, float)) else np.asarray(v) for v in (a, b))
    if isinstance(y, TracedArray) and y._node.aval.weak:  # a Python scalar argument: float(y)
        y = TracedArray(y._ctx.weak_cast(y, np.float64, user_loc()), y._ctx)
    elif isinstance(y, int):
        y = float(y)
    elif not isinstance(y, float):  # compared as float: numpy's result_type(y, 1.0)
        y = y.astype(np.result_type(y.dtype, 1.0))
    # builtin abs, as numpy's: abs of a Python float stays weak (np.abs would make it float64)
    r = (np.less_equal(abs(x - y), atol + rtol * abs(y)) & np.isfinite(y)) | (x == y)
    if equal_nan:
        r = r | (np.isnan(x) & np.isnan(y))
    return r


@implements(np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    x = _traced(x)
    if not _is_float(x):
        return np.copy(x)
    dt = x.dtype
    big = np.finfo(dt).max
    fill = [np.asarray(v, dtype=dt) for v in (nan, big if posinf is None else posinf,
                                               -big if neginf is None else neginf)]
    r = np.where(np.isnan(x), fill[0], x)
    r = np.where(x == np.inf, fill[1], r)
    r = np.where(x == -np.inf, fill[2], r)
    if not copy:  # numpy replaces in place and returns x itself
        return x._assign(r, "np.nan_to_num(..., copy=False)")
    return r


@implements(np.sinc)
def sinc(x):
    x = _array(x)
    if x.dtype.kind in "biu":
        x = x.astype(np.float64)
    y = np.pi * np.where(x == 0, 1.0e-20, x)  # numpy's own guard against 0 / 0
    return np.sin(y) / y


@implements(np.select)
def select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    loc = user_loc()
    ctx = _ctx_of(list(condlist), list(choicelist), default)
    choices = [ctx.as_node(c, loc) for c in [*choicelist, default]]
    dt, _ = common_dtype(choices)
    for i, c in enumerate(condlist):
        if (c.dtype if hasattr(c, "dtype") else np.asarray(c).dtype) != np.bool_:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    cast = [TracedArray(n, ctx).astype(dt) for n in choices]
    r = cast[-1]
    for cond, choice in zip(reversed(condlist), reversed(cast[:-1])):  # the first match wins
        r = np.where(cond, choice, r)
    shape = np.broadcast_shapes(*[np.shape(c) for c in condlist], *[c.shape for c in cast])
    return np.broadcast_to(r, shape)


@implements(np.piecewise)
def piecewise(x, condlist, funclist, *args, **kw):
    """Each function is applied to the whole of ``x`` and its values kept
    where its condition holds (numpy applies it to ``x[cond]`` only: the
    same for elementwise functions, which is what piecewise is for; a
    function that reduces over its argument would see all of ``x`` here).
    A later condition overrides an earlier one, as numpy's assignments do."""
    x = _tr(_ctx_of(x, condlist), x, user_loc())
    # numpy's rule: one condition unless the first entry is itself an array
    scalar = not isinstance(condlist, (list, tuple)) and np.ndim(condlist) == 0
    first = None if scalar else condlist[0]
    if scalar or (x.ndim != 0 and not isinstance(first, (list, np.ndarray)) and
                  not (isinstance(first, TracedArray) and first.ndim > 0)):
        condlist = [condlist]
    conds = [np.broadcast_to(condlist[i], x.shape) for i in range(len(condlist))]
    for i, c in enumerate(conds):
        if c.dtype != np.bool_:  # numpy converts with asarray(..., dtype=bool)
            conds[i] = c != 0
    n, n2 = len(conds), len(funclist)
    if n == n2 - 1:  # the last function is the "otherwise"
        conds.append(~np.any(np.stack(conds), axis=0) if conds else np.ones_like(x, bool))
    elif n != n2:
        raise ValueError(f"with {n} condition(s), either {n} or {n + 1} functions are expected")
    y = np.zeros_like(x)
    for cond, func in zip(conds, funclist):
        v = func(x, *args, **kw) if callable(func) else func
        v = _array(v).astype(x.dtype)
        y = np.where(cond, v, y)
    return y


@implements(np.ptp)
def ptp(a, axis=None, out=None, keepdims=np._NoValue):
    _no_extras("ptp", out=out)
    keep = _keep(keepdims)
    return np.subtract(np.max(a, axis=axis, keepdims=keep), np.min(a, axis=axis, keepdims=keep))


@implements(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=np._NoValue):
    loc = user_loc()
    ctx = _ctx_of(a, weights)
    a = _tr(ctx, a, loc)
    keep = _keep(keepdims)
    axes = None if axis is None else normalize_axes(axis, a.ndim, "average", loc)
    if weights is None:
        avg = np.mean(a, axis=axes, keepdims=keep)
        if avg.size == 0:  # numpy's scl = a.size / avg.size
            raise ZeroDivisionError(f"np.average: the result of shape {avg.shape} is empty, so "
                                    f"numpy's a.size / avg.size divides by zero{format_loc(loc)}; "
                                    "expected an axis= that leaves a non-empty result.")
        scl = avg.dtype.type(a.size / avg.size)
    else:
        w = _array(weights)
        res_dt = np.result_type(a.dtype, w.dtype, "f8") if a.dtype.kind in "biu" else \
            np.result_type(a.dtype, w.dtype)
        if tuple(a.shape) != tuple(w.shape):
            if axes is None:
                raise TypeError("Axis must be specified when shapes of a and weights differ.")
            if tuple(w.shape) != tuple(a.shape[ax] for ax in axes):
                raise ValueError("Shape of weights must be consistent with shape of a along "
                                 "specified axis.")
            w = np.transpose(w, np.argsort(axes))
            w = np.reshape(w, tuple(s if ax in axes else 1 for ax, s in enumerate(a.shape)))
        scl = np.sum(w, axis=axes, dtype=res_dt, keepdims=keep)
        _check_per_call(ctx, np.any(scl == 0.0),
                        lambda: ZeroDivisionError("Weights sum to zero, can't be normalized"))
        avg = np.sum(np.multiply(a, w, dtype=res_dt), axis=axes, keepdims=keep) / scl
    if not returned:
        return avg
    if np.shape(scl) != avg.shape:
        scl = np.broadcast_to(scl, avg.shape)
    return avg, scl


@implements(np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    """Uniform spacing (one scalar, or one per axis); second order inside,
    first or second order (``edge_order``) at the edges, as numpy."""
    loc = user_loc()
    f = _tr(_ctx_of(f), f, loc)
    axes = normalize_axes(axis, f.ndim, "gradient", loc)
    if len(varargs) == 0:
        dx = [1.0] * len(axes)
    elif len(varargs) == 1:
        dx = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        dx = list(varargs)
    else:
        raise TypeError("invalid number of arguments")
    for d in dx:
        if isinstance(d, TracedArray) or np.ndim(d) != 0:
            raise UnsupportedError(
                f"np.gradient: only scalar spacings are supported inside @halojit.trace, got "
                f"an array of coordinates{format_loc(loc)}; pass one number per axis.")
    if edge_order > 2:
        raise ValueError("'edge_order' greater than 2 not supported")
    otype = np.float64 if f.dtype.kind in "iu" else f.dtype
    if f.dtype.kind in "iu":
        f = f.astype(np.float64)
    outs = []
    for ax, h in zip(axes, dx):
        n = f.shape[ax]
        if n < edge_order + 1:
            raise ValueError("Shape of array too small to calculate a numerical gradient, "
                             "at least (edge_order + 1) elements are required.")

        def at(lo, hi, ax=ax):
            key = [slice(None)] * f.ndim
            key[ax] = slice(lo, hi)
            return f[tuple(key)]
        inner = (at(2, None) - at(None, -2)) / (2. * h)
        if edge_order == 1:
            first = (at(1, 2) - at(0, 1)) / h
            last = (at(-1, None) - at(-2, -1)) / h
        else:
            first = -1.5 / h * at(0, 1) + 2. / h * at(1, 2) + -0.5 / h * at(2, 3)
            last = 0.5 / h * at(-3, -2) + -2. / h * at(-2, -1) + 1.5 / h * at(-1, None)
        # numpy writes each piece into an array of the input's float dtype
        outs.append(np.concatenate([p.astype(otype) for p in (first, inner, last)], axis=ax))
    return outs[0] if len(outs) == 1 else tuple(outs)


@implements(np.trapezoid)
def trapezoid(y, x=None, dx=1.0, axis=-1):
    loc = user_loc()
    y = _tr(_ctx_of(y, x), y, loc)
    ax = normalize_axis(axis, y.ndim, "trapezoid", loc)
    if x is None:
        d = dx
    else:
        x = _array(x)
        if x.ndim == 1:
            d = np.diff(x)
            shape = [1] * y.ndim
            shape[ax] = d.shape[0]
            d = np.reshape(d, shape)
        else:
            d = np.diff(x, axis=ax)
    hi, lo = [slice(None)] * y.ndim, [slice(None)] * y.ndim
    hi[ax], lo[ax] = slice(1, None), slice(None, -1)
    return np.sum(d * (y[tuple(hi)] + y[tuple(lo)]) / 2.0, axis=ax)


@implements(np.polyval)
def polyval(p, x):
    p, x = _array(p), _array(x)
    y = np.zeros_like(x)
    for i in range(p.shape[0]):  # Horner's rule, numpy's order and dtypes
        y = y * x + p[i]
    return y


# -- products ---------------------------------------------------------------------------
@implements(np.tensordot)
def tensordot(a, b, axes=2):
    """numpy's reduction to one matrix product: the summed axes moved last in
    ``a`` and first in ``b``, both flattened to 2-D."""
    a, b = _array(a), _array(b)
    if isinstance(axes, (int, np.integer)):
        axes_a, axes_b = list(range(a.ndim - int(axes), a.ndim)), list(range(int(axes)))
    else:
        axes_a, axes_b = ([int(v)] if np.ndim(v) == 0 else [int(i) for i in v] for v in axes)
    if len(axes_a) != len(axes_b):
        raise ValueError("shape-mismatch for sum")
    loc = user_loc()
    axes_a = [normalize_axis(v, a.ndim, "tensordot", loc) for v in axes_a]
    axes_b = [normalize_axis(v, b.ndim, "tensordot", loc) for v in axes_b]
    if any(a.shape[i] != b.shape[j] for i, j in zip(axes_a, axes_b)):
        raise ValueError("shape-mismatch for sum")
    keep_a = [k for k in range(a.ndim) if k not in axes_a]
    keep_b = [k for k in range(b.ndim) if k not in axes_b]
    n = math.prod(a.shape[i] for i in axes_a)
    at = np.reshape(np.transpose(a, keep_a + axes_a), (math.prod(a.shape[k] for k in keep_a), n))
    bt = np.reshape(np.transpose(b, axes_b + keep_b), (n, math.prod(b.shape[k] for k in keep_b)))
    return np.reshape(np.dot(at, bt), tuple(a.shape[k] for k in keep_a) +
                      tuple(b.shape[k] for k in keep_b))


@implements(np.inner)
def inner(a, b):
    # numpy converts a Python scalar operand to an array: np.inner(x_f32, 2.0) is float64
    a, b = _array(a), _array(b)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return np.multiply(a, b)
    if np.ndim(a) == 1 and np.ndim(b) == 1:
        return np.matmul(a, b)
    if np.shape(a)[-1] != np.shape(b)[-1]:
        raise ValueError(f"shapes {np.shape(a)} and {np.shape(b)} not aligned: "
                         f"{np.shape(a)[-1]} (dim -1) != {np.shape(b)[-1]} (dim -1)")
    return tensordot(a, b, (-1, -1))


@implements(np.vdot)
def vdot(a, b):
    a, b = np.ravel(a), np.ravel(b)
    if a.shape != b.shape:
        raise ValueError("cannot reshape array: vdot needs the same number of elements, "
                         f"got {a.shape[0]} and {b.shape[0]}")
    return np.matmul(a, b)


@implements(np.kron)
def kron(a, b):
    """Every a[i] * b[j] at index i * b.shape + j: both operands padded to one
    rank, their axes interleaved (a's first), multiplied and flattened pairwise."""
    a, b = _array(a), _array(b)
    if a.ndim == 0 or b.ndim == 0:
        return np.multiply(a, b)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a.shape)
    sb = (1,) * (nd - b.ndim) + tuple(b.shape)
    ra = np.reshape(a, tuple(v for s in sa for v in (s, 1)))
    rb = np.reshape(b, tuple(v for s in sb for v in (1, s)))
    return np.reshape(np.multiply(ra, rb), tuple(x * y for x, y in zip(sa, sb)))


# numpy 2.5 expired the deprecation of 2-element vectors: the installed numpy decides
_CROSS_3_ONLY = np.lib.NumpyVersion(np.__version__) >= "2.5.0"


@implements(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = np.moveaxis(_array(a), axisa, -1), np.moveaxis(_array(b), axisb, -1)
    na, nb = a.shape[-1], b.shape[-1]
    sizes = (3,) if _CROSS_3_ONLY else (2, 3)
    if na not in sizes or nb not in sizes:
        raise ValueError("incompatible dimensions for cross product\n"
                         f"(dimension must be {' or '.join(map(str, sizes))})")
    if na == 2 or nb == 2:
        warnings.warn("Arrays of 2-dimensional vectors are deprecated. Use arrays of "
                      "3-dimensional vectors instead. (deprecated in NumPy 2.0)",
                      DeprecationWarning, stacklevel=3)
    dt = np.promote_types(a.dtype, b.dtype)
    a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    z = (a0 * b1 - a1 * b0).astype(dt)
    if na == 2 and nb == 2:
        return z
    if na == 2:
        b2 = b[..., 2]
        x, y = a1 * b2, -(a0 * b2)
    elif nb == 2:
        a2 = a[..., 2]
        x, y = -(a2 * b1), a2 * b0
    else:
        a2, b2 = a[..., 2], b[..., 2]
        x, y = a1 * b2 - a2 * b1, a2 * b0 - a0 * b2
    cp = np.stack(np.broadcast_arrays(x.astype(dt), y.astype(dt), z), axis=-1)
    return np.moveaxis(cp, -1, axisc)


@implements(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    nd = len(xi)
    shapes = [[1] * nd for _ in xi]
    for i in range(nd):
        shapes[i][i] = -1
    if indexing == "xy" and nd > 1:
        shapes[0][:2], shapes[1][:2] = [1, -1], [-1, 1]
    out = [np.reshape(_array(x), s)
           for x, s in zip(xi, shapes)]
    if not sparse:
        out = np.broadcast_arrays(*out)
    return tuple(np.copy(o) for o in out) if copy else tuple(out)


# -- diagonals, flips and rank -------------------------------------------------------
@implements(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonals of the (axis1, axis2) planes as the last axis, as numpy:
    both axes moved last and flattened together, then every (m + 1)-th
    element from the first diagonal one (basic slicing, no gather)."""
    loc = user_loc()
    a = _traced(_array(a))
    offset = operator.index(offset)  # numpy: TypeError for a float offset
    if a.ndim < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    i = normalize_axis(axis1, a.ndim, "diagonal", loc)
    j = normalize_axis(axis2, a.ndim, "diagonal", loc)
    if i == j:
        raise ValueError("axis1 and axis2 cannot be the same")
    b = np.moveaxis(a, (i, j), (-2, -1))
    n, m = b.shape[-2:]
    length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    flat = np.reshape(b, b.shape[:-2] + (n * m,))
    if length == 0:
        r = flat[..., :0]
    else:
        start, step = (offset if offset >= 0 else -offset * m), m + 1
        r = flat[..., start:start + (length - 1) * step + 1:step]
    r._readonly = "np.diagonal"  # a read-only view in numpy
    return r


@implements(np.trace)
def trace_(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """The sum of ``diagonal``, in np.sum's dtypes (bool and small ints sum
    to the platform int), as numpy's PyArray_Trace."""
    _unsupported_kw("trace", {"out": out})
    return np.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


@implements(np.diag)
def diag(v, k=0):
    """2-D: ``diagonal``. 1-D: the (n + |k|)-square matrix with ``v`` on the
    k-th diagonal and zeros elsewhere; the mask is computed from two iotas in
    the kernel (no n * n constant)."""
    loc = user_loc()
    ctx = _ctx_of(v)
    v = _traced(_array(v))
    k = operator.index(k)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = v.shape[0] + abs(k)
    row = np.pad(v, (k, 0) if k >= 0 else (0, -k))  # row[c] = v[c - k] for k >= 0
    col = _tr(ctx, np.arange(n), loc)
    on_diagonal = (col[None, :] - col[:, None]) == k
    return np.where(on_diagonal, row[None, :], v.dtype.type(0))


def _atleast(shape_of, arys):
    """numpy's atleast_nd: one array alone, several as a tuple; the missing
    axes of length 1 are added by a reshape (a view, as numpy's)."""
    ctx = _ctx_of(*arys)
    loc = user_loc()
    res = []
    for ary in arys:
        ary = _tr(ctx, _array(ary), loc)
        res.append(np.reshape(ary, shape_of(tuple(ary.shape))))
    return res[0] if len(res) == 1 else tuple(res)


@implements(np.atleast_1d)
def atleast_1d(*arys):
    return _atleast(lambda s: s or (1,), arys)


@implements(np.atleast_2d)
def atleast_2d(*arys):
    return _atleast(lambda s: (1,) * (2 - len(s)) + s if len(s) < 2 else s, arys)


@implements(np.atleast_3d)
def atleast_3d(*arys):
    return _atleast(lambda s: {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}.get(len(s), s),
                    arys)


def _flip_axis(m, axis):
    """np.flip along ``axis`` of an array with more than ``axis`` axes, with
    numpy's error for fewer (fliplr: axis 1, flipud: axis 0)."""
    m = _traced(_array(m))
    if m.ndim <= axis:
        raise ValueError(f"Input must be >= {axis + 1}-d.")
    return np.flip(m, axis=axis)


@implements(np.fliplr)
def fliplr(m):
    return _flip_axis(m, 1)


@implements(np.flipud)
def flipud(m):
    return _flip_axis(m, 0)


@implements(np.rot90)
def rot90(m, k=1, axes=(0, 1)):
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    m = _traced(_array(m))
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == m.ndim:
        raise ValueError("Axes must be different.")
    if not all(-m.ndim <= ax < m.ndim for ax in axes):
        raise ValueError(f"Axes={axes} out of range for array of ndim={m.ndim}.")
    k %= 4
    if k == 0:
        return m[:]
    if k == 2:
        return np.flip(np.flip(m, axes[0]), axes[1])
    perm = list(range(m.ndim))
    perm[axes[0]], perm[axes[1]] = perm[axes[1]], perm[axes[0]]
    if k == 1:
        return np.transpose(np.flip(m, axes[1]), perm)
    return np.flip(np.transpose(m, perm), axes[1])


# -- comparisons of whole arrays ------------------------------------------------------
@implements(np.allclose)
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """np.all of ``isclose``: a 0-d bool array inside the trace (numpy's
    Python bool would need the values while tracing)."""
    return np.all(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


@implements(np.array_equal)
def array_equal(a1, a2, equal_nan=False):
    """A 0-d bool array inside the trace; different shapes (known while
    tracing) give a constant False, as numpy. With ``equal_nan``, NaNs must
    sit at the same places and the other values be equal."""
    loc = user_loc()
    ctx = _ctx_of(a1, a2)
    a1, a2 = (_tr(ctx, _array(v), loc) for v in (a1, a2))
    if a1.shape != a2.shape:
        return _tr(ctx, np.asarray(False), loc)
    eq = a1 == a2
    if equal_nan and "f" in (a1.dtype.kind, a2.dtype.kind):
        eq = np.where(np.isnan(a1), np.isnan(a2), eq)
    return np.all(eq)


@implements(np.array_equiv)
def array_equiv(a1, a2):
    """A 0-d bool array inside the trace: whether the two broadcast to one
    shape with equal values; shapes that do not broadcast (known while
    tracing) give a constant False, as numpy. (numpy's own code asks
    ``np.broadcast`` of the arrays, which refuses traced ones: it returned
    False for every pair.)"""
    loc = user_loc()
    ctx = _ctx_of(a1, a2)
    a1, a2 = (_tr(ctx, _array(v), loc) for v in (a1, a2))
    try:
        np.broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return _tr(ctx, np.asarray(False), loc)
    return np.all(a1 == a2)


# -- covariance -----------------------------------------------------------------------
def _rows(x, dtype):
    """``np.array(x, ndmin=2, dtype=dtype)``: leading axes of length 1 added."""
    return np.reshape(x, (1,) * (2 - x.ndim) + tuple(x.shape)).astype(dtype)


@implements(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """numpy's cov without weights: the rows centred by their mean, ``X @
    X.T``, scaled by ``1 / (observations - ddof)`` (inf, with numpy's
    warning, when that is <= 0)."""
    _unsupported_kw("cov", {"fweights": fweights, "aweights": aweights})
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    loc = user_loc()
    ctx = _ctx_of(m, y)
    m = _tr(ctx, _array(m), loc)
    if m.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    if y is not None:
        y = _tr(ctx, _array(y), loc)
        if y.ndim > 2:
            raise ValueError("y has more than 2 dimensions")
    if dtype is None:
        dtype = np.result_type(m.dtype, np.float64) if y is None else \
            np.result_type(m.dtype, y.dtype, np.float64)
    X = _rows(m, dtype)
    if not rowvar and m.ndim != 1:
        X = X.T
    if X.shape[0] == 0:
        return _tr(ctx, np.array([]).reshape(0, 0), loc)
    if y is not None:
        Y = _rows(y, dtype)
        if not rowvar and Y.shape[0] != 1:
            Y = Y.T
        X = np.concatenate((X, Y), axis=0)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    fact = X.shape[1] - ddof
    if fact <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)
        fact = 0.0
    X = X - np.mean(X, axis=1)[:, None]  # numpy: average(X, axis=1) without weights
    c = np.dot(X, X.T)
    c = (c * np.true_divide(1, fact)).astype(c.dtype)  # numpy: c *= (a float64)
    return np.squeeze(c)


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim != 2:  # numpy: diag raises for a scalar covariance
        return c / c  # NaN for NaN, inf or 0; 1 otherwise
    stddev = np.sqrt(diagonal(c))
    c = c / stddev[:, None]
    c = c / stddev[None, :]
    return np.clip(c, -1, 1)


@implements(np.angle)
def angle(z, deg=False):
    """Real input only (halojit traces no complex numbers): numpy's
    ``arctan2(0, z)`` with the weak 0, so pi for negatives and -0.0, 0 for
    +0.0 and positives, NaN for NaN, in arctan2's float dtype."""
    a = np.arctan2(0, _traced(_array(z)))
    return a * (180 / np.pi) if deg else a


# -- partition: a full sort is a valid partition ------------------------------------
def _partition(fname, op, a, kth, axis, kind, order):
    loc = user_loc()
    if order is not None:
        raise UnsupportedError(f"np.{fname}: order= sorts structured arrays, which halojit "
                               f"does not trace{format_loc(loc)}.")
    if kind != "introselect":
        raise ValueError(f"{fname}: kind must be 'introselect', got {kind!r}")
    a = _tr(_ctx_of(a), a, loc)
    if axis is None or (fname == "argpartition" and _flat_0d(a, axis)):
        a, axis = np.reshape(a, (-1,)), 0
    n = a.shape[normalize_axis(axis, a.ndim, fname, loc)]
    for k in np.atleast_1d(np.asarray(kth)).ravel():
        if a.size and not -n <= int(k) < n:  # numpy checks no kth of an empty array
            raise ValueError(f"kth(={int(k)}) out of bounds ({n})")
    return op(a, axis=axis)


@implements(np.partition)
def partition(a, kth, axis=-1, kind="introselect", order=None):
    """np.partition as a full sort along the axis: every kth is in its sorted
    place with smaller values before it and larger after, which is all numpy
    promises about a partition (the order within each side is unspecified)."""
    return _partition("partition", np.sort, a, kth, axis, kind, order)


@implements(np.argpartition)
def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """np.argpartition as a full (stable) argsort: see ``partition``."""
    return _partition("argpartition", lambda x, axis: np.argsort(x, axis=axis, kind="stable"),
                      a, kth, axis, kind, order)


# -- ufuncs without a loop of their own ---------------------------------------------
_LN2 = math.log(2.0)


def _logaddexp(x, y):
    # numpy's npy_logaddexp: equal inputs (infinities too) add log(2); otherwise
    # the larger plus log1p(exp(-|x - y|)); a NaN difference is the result
    d = x - y
    r = np.where(d > 0, x + np.log1p(np.exp(-d)), y + np.log1p(np.exp(d)))
    r = np.where(np.isnan(d), d, r)
    return np.where(x == y, x + _LN2, r)


def _logaddexp2(x, y):
    d = x - y
    log2e = 1.0 / _LN2  # numpy's log2_1p(v) = log1p(v) / ln 2
    r = np.where(d > 0, x + log2e * np.log1p(np.exp2(-d)), y + log2e * np.log1p(np.exp2(d)))
    r = np.where(np.isnan(d), d, r)
    return np.where(x == y, x + 1.0, r)


def _heaviside(x, h0):
    r = np.where(x < 0, 0.0, np.where(x > 0, 1.0, h0))
    return np.where(np.isnan(x), x, r).astype(x.dtype)


def _divmod(x, y):
    # numpy's divmod loop and its floor_divide and remainder loops share npy_divmod
    return np.floor_divide(x, y), np.remainder(x, y)


def _modf(x):
    # C's modf: the fraction has x's sign (-0.0 for -3.0) and is +-0 for +-inf
    whole = np.trunc(x)
    frac = np.where(np.isinf(x), 0.0, x - whole)  # x - trunc(x) is exact
    return np.copysign(frac, x), whole


def _ldexp(x, i):
    """x * 2**i rounded once, as C's ldexp: in float64 (float16 and float32
    too: exact there, then one rounding to x's dtype), by three normal
    powers of two, smallest first. Every step is exact except the last
    unless an intermediate goes subnormal, and then the result is +-0
    anyway. Exponents beyond +-2200 give what +-2200 gives: +-0 or +-inf."""
    k = np.clip(i, -2200, 2200)
    k1 = np.clip(k, -1022, 1023)
    k2 = np.clip(k - k1, -1022, 1023)
    k3 = k - k1 - k2
    y = x.astype(np.float64)
    for e in (k3, k2, k1):
        y = y * np.exp2(e.astype(np.float64))  # exact: a power of two in range
    return y.astype(x.dtype)


# -- float bits: frexp, nextafter, spacing (ndarray.view as integers) -------------------
# float dtype -> (integer of its size, mantissa bits, exponent bias)
_FLOAT_BITS = {np.dtype(np.float16): (np.int16, 10, 15), np.dtype(np.float32): (np.int32, 23, 127),
               np.dtype(np.float64): (np.int64, 52, 1023)}


def _frexp(x):
    """(m, e) with x = m * 2**e and 0.5 <= |m| < 1 from x's bits: the
    exponent field less the bias, and the mantissa with the exponent of
    0.5; subnormals are first scaled into the normals by 2**(mant + 1)
    (exact). Zeros, infs and NaN give (x, 0), as C's frexp."""
    it, mant, bias = _FLOAT_BITS[x.dtype]
    ft = x.dtype.type
    field = (1 << (bias.bit_length() + 1)) - 1  # the exponent field's mask: 0x1f, 0xff, 0x7ff
    sub = np.abs(x) < ft(np.finfo(x.dtype).tiny)
    bits = np.where(sub, x * ft(2.0 ** (mant + 1)), x).view(it)
    e = ((bits >> mant) & field).astype(np.int32) - np.where(sub, bias + mant, bias - 1)
    m = ((bits & ~(field << mant)) | ((bias - 1) << mant)).view(x.dtype)
    special = (x == 0) | ~np.isfinite(x)
    return np.where(special, x, m), np.where(special, 0, e).astype(np.int32)


# numpy 2.5 made float16 nextafter return y when x == y, as C and its other loops do
_HALF_NEXTAFTER_KEEPS_X = not np.signbit(np.nextafter(np.float16(0.0), np.float16(-0.0)))


def _nextafter(x, y):
    """The float next to x towards y, as C's nextafter: one step of x's bit
    pattern (+1 moves away from zero, for either sign); y when x == y (so
    nextafter(0.0, -0.0) is -0.0; float16 follows the installed numpy, whose
    half loop keeps x before 2.5), +-the smallest subnormal from zero, NaN
    when either is NaN."""
    it = _FLOAT_BITS[x.dtype][0]
    away = (x < y) == (x > 0)
    r = (x.view(it) + np.where(away, it(1), it(-1))).view(x.dtype)
    r = np.where(x == 0, np.copysign(x.dtype.type(np.finfo(x.dtype).smallest_subnormal), y), r)
    # x == y: C's y; numpy's float16 loop kept x before 2.5 (nextafter(-0.0, 0.0) was -0.0)
    r = np.where(x == y, x if x.dtype == np.float16 and _HALF_NEXTAFTER_KEEPS_X else y, r)
    return np.where(np.isnan(x) | np.isnan(y), x + y, r)


def _spacing(x):
    """numpy's spacing: the step from x to the next float away from zero,
    negative for x < 0 (-0.0 counts as positive); NaN for inf and NaN.
    float16 follows numpy's own half loop: always positive, and at a
    negative power of two (and -0.0) the step towards zero."""
    ft = x.dtype.type
    inf = ft(np.inf)
    if x.dtype != np.float16:
        return _nextafter(x, np.where(x < 0, -inf, inf)) - x
    a = np.abs(x)
    biggest = ft(np.finfo(x.dtype).max)
    r = _nextafter(a, inf) - a  # one ulp of |x|'s binade, inf at +-the largest
    r = np.where(x == -biggest, biggest - _nextafter(biggest, ft(0)), r)
    boundary = np.signbit(x) & ((x.view(np.int16) & 0x3FF) == 0)  # -2**k and -0.0
    r = np.where(boundary, a - _nextafter(a, ft(0)), r)
    r = np.where(a == 0, ft(np.finfo(x.dtype).smallest_subnormal), r)
    return np.where(np.isfinite(x), r, ft(np.nan))


COMPOSITE_LOOPS.update({
    "divmod": "floor_divide",  # the same 'bb'...'dd' loops
    "modf": "sqrt",  # 'e', 'f', 'd' for real inputs: int8 -> float16, int32 -> float64
    "frexp": "sqrt",
})

COMPOSITE_UFUNCS.update({
    "divmod": _divmod,
    "modf": _modf,
    "ldexp": _ldexp,
    "frexp": _frexp,
    "nextafter": _nextafter,
    "spacing": _spacing,
    "logaddexp": _logaddexp,
    "logaddexp2": _logaddexp2,
    "heaviside": _heaviside,
    "float_power": np.power,  # operands already cast to float64 by the loop
    "fabs": np.absolute,
})


# -- methods ------------------------------------------------------------------------
TracedArray.diagonal = lambda self, offset=0, axis1=0, axis2=1: diagonal(self, offset, axis1,
                                                                         axis2)
TracedArray.trace = lambda self, offset=0, axis1=0, axis2=1, dtype=None, out=None: trace_(
    self, offset, axis1, axis2, dtype, out=out)
