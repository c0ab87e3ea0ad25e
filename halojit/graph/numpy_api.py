"""numpy's API on traced arrays: ufunc dispatch, the ``__array_function__``
handlers, ndarray methods, and basic indexing, all composed from registry ops
with numpy 2's dtype rules.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import operator

import numpy as np

from ..errors import (DTypeError, IndexOutOfBoundsError, IndexShapeError, IndexTypeError,
                      ShapeError,
                      TraceError, UnsupportedError, format_loc)
from .ops import broadcast_shapes, normalize_axes, normalize_axis
from .ops.elementwise import UFUNCS, resolve_ufunc
from .passes.matmul import IN_PLACE_COLUMNS, SHORT_CHANNELS
from .tracer import TracedArray, check_dtype, current, user_loc, with_zero_d_kind, zero_d_kind

HANDLERS: dict = {}


def implements(*funcs):
    def deco(fn):
        fn = _with_out(fn, funcs[0])
        for f in funcs:
            HANDLERS[f] = fn
        return fn
    return deco


# numpy functions whose result is an ndarray even when 0-d; those whose 0-d
# result is what their first argument was (ndarray methods underneath: a
# numpy scalar's reshape is a scalar, a 0-d array's a 0-d array); the rest
# return a numpy scalar, as ufuncs and reductions do (tracer.zero_d_kind)
_ZERO_D_ARRAYS = {np.where, np.select, np.piecewise, np.copy, np.broadcast_to,
                  np.broadcast_arrays, np.zeros_like, np.ones_like, np.empty_like, np.full_like,
                  np.roll, np.pad, np.tile,
                  # their last step reshapes or squeezes an array: np.cov of 1-D, np.tensordot
                  # of two 1-D, np.isin and np.i0 of a 0-d value, np.cross of two 2-vectors
                  np.cov, np.tensordot, np.isin, np.i0, np.cross}
_ZERO_D_AS_FIRST = {np.reshape, np.transpose, np.squeeze, np.swapaxes, np.moveaxis, np.real,
                    np.imag, np.astype}


def with_zero_d_kinds(result, kind):
    """Every 0-d traced array of ``result`` (a tuple or list: each) returned
    as ``kind`` (tracer.zero_d_kind)."""
    if isinstance(result, TracedArray):
        return with_zero_d_kind(result, result, kind) if result.ndim == 0 else result
    if type(result) in (tuple, list):
        return type(result)(with_zero_d_kinds(r, kind) for r in result)
    return result


def zero_d_result(func, args, result):
    """``result`` of the numpy function ``func`` on ``args``, a 0-d part as
    numpy returns it: what a handler built it from (np.where inside
    np.median) does not count, only the function the user called."""
    if func in _ZERO_D_ARRAYS:
        kind = False
    elif func in _ZERO_D_AS_FIRST and args:
        kind = zero_d_kind(args[0])
    else:
        kind = True
    return with_zero_d_kinds(result, kind)


# numpy computes these reductions and scans in out='s dtype where the input
# casts to it safely (round: the input cast first; max/min: see
# _first_through) and casts unsafely into it; argmax
# and take need an out= their result casts to safely; the rest (clip,
# concatenate, ...) cast their result with 'same_kind', as ufuncs do
_IN_OUT_DTYPE = {"sum", "prod", "mean", "max", "min", "amax", "amin", "var", "std", "cumsum",
                 "cumprod", "nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin",
                 "nancumsum", "nancumprod", "trace", "round", "around"}
_SAFE_OUT = {"argmax", "argmin", "take"}
_CAST_FIRST = {"max", "min", "amax", "amin", "nanmax", "nanmin", "round", "around"}


def _with_out(fn, func):
    """``fn`` (a handler whose numpy function has ``out=``) computing its
    result and then writing it into a traced ``out`` array as numpy would:
    an input refuses the write (TraceError), and a view's base sees it."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn
    if "out" not in sig.parameters:
        return fn
    name = getattr(func, "__name__", "function")
    casting = "unsafe" if name in _IN_OUT_DTYPE else "safe" if name in _SAFE_OUT else "same_kind"

    @functools.wraps(fn)
    def handler(*args, **kwargs):
        out = kwargs.get("out")
        if out is None:
            return fn(*args, **kwargs)
        kwargs["out"] = None
        o = out[0] if isinstance(out, tuple) and len(out) == 1 else out
        if name in _IN_OUT_DTYPE and isinstance(o, TracedArray) and args:
            bound = sig.bind(*args, **kwargs)  # dtype and axis may come by position
            given = bound.arguments
            first = next(iter(sig.parameters))
            if name == "mean" and given.get("dtype") is None and not given.get("kwargs") and \
                    isinstance(given[first], TracedArray) and given[first].dtype != o.dtype:
                result = _mean_into(given[first], given.get("axis"),
                                    bool(given.get("keepdims", False)), o.dtype)
                return _write_out(f"np.{name}(..., out=...)", result, out, casting)
            if "dtype" in sig.parameters and given.get("dtype") is None and \
                    name not in _CAST_FIRST:
                # numpy accumulates in out's dtype where the input casts to it
                # safely, else in its own and casts the result: np.sum of
                # float32 [0.6, 0.6] into int32 is 1, of int64 [2**40 + 1,
                # -2**40] into float32 1.0
                src = getattr(given[first], "dtype", None)
                if src is None or np.can_cast(src, o.dtype, "safe"):
                    given["dtype"] = o.dtype
            elif isinstance(given[first], TracedArray) and given[first].dtype != o.dtype:
                if name in ("round", "around"):  # computed in out's dtype
                    given[first] = astype(given[first], o.dtype)
                else:  # max, min: numpy's accumulator is out itself
                    given[first] = _first_through(given[first], given.get("axis"), o.dtype)
            args, kwargs = bound.args, bound.kwargs
        return _write_out(f"np.{name}(..., out=...)", fn(*args, **kwargs), out, casting)
    return handler


def _mean_into(a, axis, keepdims, dtype):
    """np.mean(a, out=o) for an ``o`` of another ``dtype``, in numpy's steps:
    the sum (in float64 for integer and bool input, float32 for float16,
    else as a sum into o: in o's dtype where a casts to it safely) stored
    into o's dtype, then divided by the count there (np.mean of int64 rows
    into int8 divides the wrapped sum; of float64 [0.6, 0.7] into int64,
    the sum truncated to 1, then 1 / 2 truncated to 0)."""
    loc = user_loc()
    if a.dtype.kind in "biu":
        acc = np.dtype(np.float64)
    elif a.dtype == np.float16:
        acc = np.dtype(np.float32)
    else:
        acc = dtype if np.can_cast(a.dtype, dtype, "safe") else None
    total = astype(reduction("sum", a, axis, keepdims, acc), dtype)
    n = np.intp(_count(a.shape, normalize_axes(axis, a.ndim, "mean", loc)))
    return astype(np.true_divide(total, n), dtype)


def _first_through(a, axis, dtype):
    """``a`` with the first element of each reduced slice cast to ``dtype`` and
    back: numpy's max/min into an out= of another dtype start from that
    element stored in out (np.max([[-1, 5]], axis=1, out=uint8) is 255) and
    compare the others in a's dtype."""
    loc = user_loc()
    axes = normalize_axes(axis, a.ndim, "max", loc)
    first = np.ones((), bool)
    for ax in axes:
        at = np.zeros(a.shape[ax], bool)
        if a.shape[ax]:
            at[0] = True
        first = first & at.reshape([-1 if i == ax else 1 for i in range(a.ndim)])
    return where(first, astype(astype(a, dtype), a.dtype), a)


def _write_out(what, result, out, casting="same_kind"):
    loc = user_loc()
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != 1 or not isinstance(outs[0], TracedArray):
        hint = "return the result instead"
        if len(outs) == 1 and isinstance(outs[0], np.ndarray):
            # y = np.zeros(x.shape); y += x: numpy calls np.add(y, x, out=y)
            hint = ("the target is a plain numpy array (such as np.zeros(x.shape), whose "
                    "values the trace does not follow, also as the left side of `y += x`); "
                    "make it from a traced array (np.zeros_like(x)) or write `y = y + x`")
        raise UnsupportedError(
            f"{what} into a non-traced array is not supported inside @halojit.trace"
            f"{format_loc(loc)}; {hint}.")
    o = outs[0]
    o._check_writable(what)
    result = _tr(o._ctx, result, loc)
    if casting == "safe" and not np.can_cast(o.dtype, result.dtype, "safe"):
        raise DTypeError(f"{what}: cannot cast array data from {o.dtype} to {result.dtype} "
                         f"according to the rule 'safe'{format_loc(loc)}.")
    if casting in ("unsafe", "safe") and result.dtype != o.dtype:
        result = astype(result, o.dtype)
    return o._assign(result, what)


def _check_casting(fname, src, dst, casting, loc):
    """numpy's TypeError where ``src`` may not become ``dst`` under ``casting``."""
    if casting != "unsafe" and not np.can_cast(src, dst, casting):
        raise DTypeError(f"{fname}: cannot cast array data from {src} to {dst} according to "
                         f"the rule {casting!r}{format_loc(loc)}, as numpy.")


def _ctx_of(*xs):
    for x in xs:
        if isinstance(x, TracedArray):
            return x._ctx
        if isinstance(x, (list, tuple)):
            c = _ctx_of(*x)
            if c is not None:
                return c
    return current()


def _unsupported_kw(fname, kwargs, allowed=()):
    for k, v in kwargs.items():
        if k not in allowed and v is not None and v is not np._NoValue:
            raise UnsupportedError(
                f"np.{fname}: argument {k}={v!r} is not supported inside @halojit.trace"
                f"{format_loc(user_loc())}."
            )


# -- dtypes --------------------------------------------------------------------
def _weak_repr(node):
    if node.aval.weak:
        return {"f": 0.0, "i": 0, "u": 0, "b": False}[node.dtype.kind]
    return node.dtype


def common_dtype(nodes):
    """numpy's result_type of ``nodes`` with weak Python scalars (NEP 50)."""
    if all(n.aval.weak for n in nodes):
        return np.result_type(*[n.dtype for n in nodes]), True
    return np.result_type(*[_weak_repr(n) for n in nodes]), False


def _as_strong(ctx, x, loc):
    """``np.asarray(x)``: a weak Python scalar becomes a strong 0-d array."""
    node = ctx.as_node(x, loc)
    if not node.aval.weak:
        return node
    return ctx.emit("astype", [node], {"dtype": node.dtype}, loc)._node


def _cast_all(ctx, xs, loc, dtype=None):
    nodes = [ctx.as_node(x, loc) for x in xs]
    dt, weak = common_dtype(nodes) if dtype is None else (np.dtype(dtype), False)
    check_dtype(dt, "result", loc)
    if weak:
        return [ctx.weak_cast(n, dt, loc) for n in nodes]
    return [ctx.cast(n, dt, loc) for n in nodes]


# -- ufuncs --------------------------------------------------------------------
_REDUCE_UFUNCS = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
                  "fmax": "nanmax", "fmin": "nanmin", "logical_and": "all", "logical_or": "any"}
_ACCUMULATE_UFUNCS = {"add": "cumsum", "multiply": "cumprod", "maximum": "cummax",
                      "minimum": "cummin", "fmax": "cumfmax", "fmin": "cumfmin"}
# ufuncs with no graph op of their own: name -> a function of the operands
# (TracedArrays already cast to numpy's loop dtypes), filled in by numpy_composite
COMPOSITE_UFUNCS: dict = {}
# a two-output composite (divmod, modf) -> a one-output ufunc with the same input
# loops: resolve_ufunc asks numpy for one output only
COMPOSITE_LOOPS: dict = {}
# generalized ufuncs (vecdot, matvec, vecmat) -> a function of the raw operands
# and keyword arguments, filled in by numpy_more
GUFUNCS: dict = {}


# numpy ufuncs that compute another one's values (the same loops, bit for bit)
UFUNC_ALIASES = {"radians": "deg2rad", "degrees": "rad2deg"}


def apply_ufunc(ctx, ufunc, method, inputs, kwargs):
    loc = user_loc()
    ctx = _ctx_of(*inputs) or ctx
    out = kwargs.pop("out", None)
    name = UFUNC_ALIASES.get(ufunc.__name__, ufunc.__name__)
    for o in (out if isinstance(out, tuple) else (out,)):
        if isinstance(o, TracedArray):
            o._check_writable(f"np.{name}(..., out=...)")
    if method == "reduce" and name in _REDUCE_UFUNCS:
        axis = kwargs.pop("axis", 0)
        _unsupported_kw(f"{name}.reduce", kwargs, ("keepdims", "dtype"))
        result = reduction(_REDUCE_UFUNCS[name], inputs[0], axis,
                           kwargs.get("keepdims", False), kwargs.get("dtype"))
    elif method == "accumulate" and name in _ACCUMULATE_UFUNCS:
        _unsupported_kw(f"{name}.accumulate", kwargs, ("axis", "dtype"))
        result = _scan(_ACCUMULATE_UFUNCS[name])(inputs[0], kwargs.get("axis", 0),
                                                  kwargs.get("dtype"))
    elif method == "outer" and (name in UFUNCS or name in COMPOSITE_UFUNCS) and \
            len(inputs) == 2:
        a, b = (_tr(ctx, _array(v), loc) for v in inputs)  # numpy's asarray of each
        return ufunc(reshape(a, tuple(a.shape) + (1,) * b.ndim), b, **kwargs)
    elif method == "at":
        from .numpy_scatter import ufunc_at
        return ufunc_at(ctx, ufunc, inputs, kwargs)
    elif method != "__call__":
        raise UnsupportedError(f"np.{name}.{method} is not supported inside @halojit.trace"
                               f"{format_loc(loc)}.")
    elif name in GUFUNCS:
        result = GUFUNCS[name](*inputs, **kwargs)
    elif name in COMPOSITE_UFUNCS:
        dtype = kwargs.pop("dtype", None)
        _unsupported_kw(name, kwargs, ("casting", "order", "subok"))
        nodes = _cast_all(ctx, inputs, loc, dtype) if dtype is not None else \
            [ctx.as_node(x, loc) for x in inputs]
        in_dts, _, weak = resolve_ufunc(COMPOSITE_LOOPS.get(name, name),
                                        [n.aval for n in nodes], loc)
        cast = ctx.weak_cast if weak else ctx.cast
        result = COMPOSITE_UFUNCS[name](*[TracedArray(cast(n, dt, loc), ctx)
                                          for n, dt in zip(nodes, in_dts)])
    else:
        dtype = kwargs.pop("dtype", None)
        _unsupported_kw(name, kwargs, ("casting", "order", "subok"))
        if name == "matmul":
            result = matmul(inputs[0], inputs[1])
        elif name in UFUNCS:
            operands = inputs
            if dtype is not None:
                operands = [TracedArray(n, ctx) for n in _cast_all(ctx, inputs, loc, dtype)]
            result = ctx.ufunc(name, operands, loc)
        else:
            raise UnsupportedError(f"np.{name} is not supported inside @halojit.trace"
                                   f"{format_loc(loc)}.")
    if out is not None:
        casting = kwargs.get("casting", "same_kind")
        o = out[0] if isinstance(out, tuple) and len(out) == 1 else out
        if casting != "same_kind" and isinstance(o, TracedArray) and \
                isinstance(result, TracedArray):
            _check_casting(f"np.{name}(..., out=...)", result.dtype, o.dtype, casting, loc)
        return _write_out(f"np.{name}(..., out=...)", result, out,
                          "unsafe" if casting == "unsafe" else "same_kind")
    return result


# -- reductions ------------------------------------------------------------------
def _sum_dtype(dt):
    if dt.kind == "b" or (dt.kind == "i" and dt.itemsize < 8):
        return np.dtype(np.int64)
    if dt.kind == "u" and dt.itemsize < 8:
        return np.dtype(np.uint64)
    return dt


def _array(x):
    """``x`` as numpy's asarray makes it: a Python scalar, also one passed
    as an argument (a weak traced value), becomes a strong 0-d array, as
    numpy's own code has it (np.dot(x_f32, s) is float64 for s=1.5)."""
    if isinstance(x, TracedArray):
        if not x._node.aval.weak:
            return x
        return TracedArray(_as_strong(x._ctx, x, user_loc()), x._ctx)
    return np.asarray(x)


def _tr(ctx, x, loc):
    return x if isinstance(x, TracedArray) else TracedArray(ctx.as_node(x, loc), ctx)


def reduction(name, x, axis=None, keepdims=False, dtype=None, ddof=0):
    loc = user_loc()
    ctx = _ctx_of(x)
    x = _tr(ctx, x, loc)
    node = x._node
    if node.aval.ndim == 0 and name not in ("mean", "var", "std") and _is_int_index(axis) \
            and axis in (0, -1):
        axis = ()  # numpy's ufunc.reduce accepts axis 0 or -1 on a 0-d array
    axes = normalize_axes(axis, node.aval.ndim, name, loc)
    keepdims = bool(keepdims)
    if name in ("sum", "prod"):
        acc = np.dtype(dtype) if dtype is not None else _sum_dtype(node.dtype)
        return ctx.emit(name, [ctx.cast(node, acc, loc)], {"axes": axes, "keepdims": keepdims}, loc)
    if name in ("nanmax", "nanmin") and node.dtype.kind != "f":
        name = name[3:]  # no NaN to skip
    if name in ("max", "min", "nanmax", "nanmin"):
        return ctx.emit(name, [ctx.cast(node, node.dtype, loc)], {"axes": axes, "keepdims": keepdims}, loc)
    if name in ("any", "all"):
        return ctx.emit(name, [ctx.cast(node, np.bool_, loc)], {"axes": axes, "keepdims": keepdims}, loc)
    if name == "mean":
        return _mean(ctx, x, axes, keepdims, dtype, loc)
    if name in ("var", "std"):
        v = _var(ctx, x, axes, keepdims, dtype, ddof, loc)
        return std_of_var(v, "std", loc) if name == "std" else v
    raise UnsupportedError(f"reduction {name!r}")


def std_of_var(v, fname, loc):
    """np.sqrt of a variance as numpy's std takes it: in place, so a variance
    in an integer or bool dtype= raises when it is an array; a 0-d one is a
    numpy scalar and is cast back to its dtype (np.int32(sqrt(v)))."""
    r = np.sqrt(v)
    if r.dtype == v.dtype:
        return r
    if v.ndim:
        raise DTypeError(f"np.{fname}: cannot cast ufunc 'sqrt' output from {r.dtype} to the "
                         f"dtype= {v.dtype} with casting rule 'same_kind'{format_loc(loc)}; "
                         "expected an inexact dtype= (float16, float32 or float64).")
    return r.astype(v.dtype)


def _count(shape, axes):
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


def _mean(ctx, x, axes, keepdims, dtype, loc, mask=None):
    f16 = dtype is None and x.dtype == np.float16
    acc = np.dtype(np.float32) if f16 else (
        np.dtype(dtype) if dtype is not None else
        np.dtype(np.float64) if x.dtype.kind in "biu" else x.dtype)
    if mask is None:
        s = reduction("sum", x, axes, keepdims, acc)
        # numpy divides by an intp count (strong): in float64 for a float32 sum
        r = ctx.ufunc("divide", (s, np.intp(_count(x.shape, axes))), loc)
    else:  # numpy divides by the mask's intp count: float64 for a float32 sum, then cast back
        s = reduction("sum", _masked_fill(x, mask, 0), axes, keepdims, acc)
        r = ctx.ufunc("divide", (s, reduction("sum", mask, axes, keepdims, np.intp)), loc)
    r = r if r.dtype == s.dtype else r.astype(s.dtype)
    return r.astype(np.float16) if f16 else r


def _var(ctx, x, axes, keepdims, dtype, ddof, loc, mask=None):
    acc = np.dtype(dtype) if dtype is not None else (
        np.dtype(np.float64) if x.dtype.kind in "biu" else None)
    if mask is None:
        # an intp count, as numpy's: float16 / 65536 divides in float64, where
        # a weak Python int made the count float16 inf (and the variance 0)
        n = n_kept = np.intp(_count(x.shape, axes))
        xm = x
    else:
        n = reduction("sum", mask, axes, True, np.intp)
        n_kept = n if keepdims else reduction("sum", mask, axes, False, np.intp)
        xm = _masked_fill(x, mask, 0)
    mean = reduction("sum", xm, axes, True, acc if acc is not None else x.dtype)
    mean = (mean / n).astype(mean.dtype)
    d = x - mean
    d = d * d
    if mask is not None:
        d = _masked_fill(d, mask, 0)
    s = reduction("sum", d, axes, keepdims, acc if acc is not None else d.dtype)
    denom = np.intp(max(n_kept - ddof, 0)) if mask is None else np.maximum(n_kept - ddof, 0)
    return (s / denom).astype(s.dtype)


def _scalar_as(value, dtype):
    """A static value in ``dtype`` as numpy assigns one: a Python int that does
    not fit raises OverflowError, NaN into an integer ValueError."""
    if isinstance(value, TracedArray):  # a Python int argument: range-checked per call
        return TracedArray(value._ctx.cast(value, dtype, user_loc()), value._ctx)
    return np.array(value, dtype=dtype)


def stored_as(value, dtype, what, loc):
    """A static ``value`` stored into a ``dtype`` array as numpy's setitem
    stores it (``a[0] = value``): NaN into an integer array is numpy's
    ValueError, a value out of a signed type's range its OverflowError, an
    unsigned type wraps. Returns the stored value as a Python scalar."""
    cell = np.zeros(1, dtype)
    try:
        with np.errstate(all="ignore"):
            cell[0] = np.asarray(value).ravel()[0]
    except (ValueError, OverflowError) as ex:
        raise type(ex)(f"{what}={value!r} cannot be stored in an array of {np.dtype(dtype)} "
                       f"({ex}){format_loc(loc)}; expected a value that fits "
                       f"{np.dtype(dtype)}.") from None
    return cell[0].item()


def _masked_fill(x, mask, fill):
    """x where ``mask``, else ``fill`` in x's own dtype (the reduction's identity)."""
    return where(mask, x, np.asarray(fill).astype(x.dtype))


def _reduce_where_initial(name, a, axis, keepdims, dtype, ddof, initial, where_):
    """A reduction with numpy's ``initial=`` and ``where=``: elements the mask
    leaves out are replaced by the identity (by ``initial`` for max and min,
    which have none), and ``initial`` joins every output element once, first,
    as numpy's reduce starts from it."""
    loc = user_loc()
    ctx = _ctx_of(a, where_)
    a = _tr(ctx, a, loc)
    has_init = initial is not np._NoValue
    if has_init and name in ("mean", "var", "std", "any", "all"):
        raise TypeError(f"{name}() got an unexpected keyword argument 'initial'")
    mask = None
    if where_ is not np._NoValue and where_ is not True:
        mask = _tr(ctx, where_, loc)
        if mask.dtype != np.bool_:
            raise DTypeError(f"np.{name}: where= must be a boolean array, got "
                             f"{mask.dtype}{format_loc(loc)}.")
        mask = broadcast_to(mask, a.shape)
    if name in ("mean", "var", "std"):
        axes = normalize_axes(axis, a.ndim, name, loc)
        if name == "mean":
            return _mean(ctx, a, axes, bool(keepdims), dtype, loc, mask)
        v = _var(ctx, a, axes, bool(keepdims), dtype, ddof, loc, mask)
        return std_of_var(v, "std", loc) if name == "std" else v
    if name in ("max", "min"):
        ufunc = np.maximum if name == "max" else np.minimum
        if not has_init:
            if mask is None:  # where=True: a plain reduction
                return reduction(name, a, axis, keepdims, dtype)
            raise ValueError(f"reduction operation '{ufunc.__name__}' does not have an "
                             "identity, so to use a where mask one has to specify 'initial'")
        init = _scalar_as(initial, a.dtype)
        if mask is not None:
            a = _masked_fill(a, mask, init)
        axes = normalize_axes(axis, a.ndim, name, loc)
        if _count(a.shape, axes) == 0:  # nothing to reduce: initial everywhere
            shape = tuple(1 if i in axes else n for i, n in enumerate(a.shape)
                          if keepdims or i not in axes)
            return _tr(ctx, np.full(shape, init, a.dtype), loc)
        return ufunc(init, reduction(name, a, axis, keepdims, dtype))
    identity = {"sum": 0, "prod": 1, "any": 0, "all": 1}[name]
    if mask is not None:
        a = _masked_fill(a, mask, identity)
    r = reduction(name, a, axis, keepdims, dtype)
    if has_init:
        init = _scalar_as(initial, r.dtype)
        r = (np.add if name == "sum" else np.multiply)(init, r)
    return r


def _arg(name):
    def fn(a, axis=None, out=None, *, keepdims=False):
        _unsupported_kw(name, {"out": out})
        loc = user_loc()
        ctx = _ctx_of(a)
        a = _tr(ctx, a, loc)
        if a.ndim == 0 and _is_int_index(axis) and axis in (0, -1):
            axis = None  # as numpy: a 0-d array accepts axis 0 or -1
        if axis is None:
            flat = reshape(a, (-1,))
            r = ctx.emit(name, [flat], {"axes": (0,), "keepdims": False}, loc)
            return reshape(r, (1,) * a.ndim) if keepdims else r
        ax = normalize_axis(axis, a.ndim, name, loc)
        return ctx.emit(name, [a], {"axes": (ax,), "keepdims": bool(keepdims)}, loc)
    return fn


argmax = implements(np.argmax)(_arg("argmax"))
argmin = implements(np.argmin)(_arg("argmin"))


def _reducer(name):
    def fn(a, axis=None, dtype=None, out=None, keepdims=False, ddof=0, **kwargs):
        _unsupported_kw(name, dict(kwargs, out=out), ("initial", "where"))
        initial, where_ = kwargs.get("initial", np._NoValue), kwargs.get("where", np._NoValue)
        if initial is not np._NoValue or where_ is not np._NoValue:
            return _reduce_where_initial(name, a, axis, keepdims, dtype, ddof, initial, where_)
        return reduction(name, a, axis, keepdims, dtype, ddof)
    return fn


for _n, _fs in [("sum", (np.sum,)), ("prod", (np.prod,)), ("mean", (np.mean,)),
                ("max", (np.max, np.amax)), ("min", (np.min, np.amin)),
                ("any", (np.any,)), ("all", (np.all,)), ("var", (np.var,)), ("std", (np.std,))]:
    implements(*_fs)(_reducer(_n))


def _flat_0d(a, axis) -> bool:
    """Whether a 0-d ``a`` with ``axis`` 0 or -1 is taken as one element, as
    numpy's cumsum, cumprod, argsort and argpartition take it (sort and
    partition refuse it: the axis is out of bounds)."""
    return a.ndim == 0 and not isinstance(axis, (tuple, list)) and operator.index(axis) in (0, -1)


def _scan(name):
    def fn(a, axis=None, dtype=None, out=None):
        _unsupported_kw(name, {"out": out})
        loc = user_loc()
        ctx = _ctx_of(a)
        a = _tr(ctx, a, loc)
        if axis is None or _flat_0d(a, axis):  # numpy scans the flattened array
            a, axis = reshape(a, (-1,)), 0
        ax = normalize_axis(axis, a.ndim, name, loc)
        acc = np.dtype(dtype) if dtype is not None else \
            _sum_dtype(a.dtype) if name in ("cumsum", "cumprod") else a.dtype
        return ctx.emit(name, [ctx.cast(a._node, acc, loc)], {"axis": ax}, loc)
    return fn


cumsum = implements(np.cumsum)(_scan("cumsum"))
cumprod = implements(np.cumprod)(_scan("cumprod"))


# -- sorting and order statistics ------------------------------------------------------
_SORT_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable")


def _sorting(op, a, axis, kind, order, loc):
    fname = "np." + op
    if order is not None:
        raise UnsupportedError(f"{fname}: order= sorts structured arrays, which halojit does "
                               f"not trace{format_loc(loc)}.")
    if kind not in _SORT_KINDS:
        raise ValueError(f"{fname}: kind must be one of {_SORT_KINDS[1:]}, got {kind!r}.")
    ctx = _ctx_of(a)
    a = _tr(ctx, a, loc)
    if axis is None or (op == "argsort" and _flat_0d(a, axis)):  # numpy sorts the flattened array
        a, axis = reshape(a, (-1,)), 0
    if a.dtype.kind not in "biuf":
        raise UnsupportedError(f"{fname}: {a.dtype} arrays are not supported{format_loc(loc)}; "
                               "expected bool, integer or float.")
    ax = normalize_axis(axis, a.ndim, op, loc)  # refuses a 0-d array
    return ctx.emit(op, [a._node], {"axis": ax}, loc)


@implements(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """np.sort: every kind gives the same values, NaN last (a bitonic
    network, lowering.lower_sort). -0.0 sorts before +0.0, where numpy
    leaves equal zeros in an order of its algorithm's choosing."""
    return _sorting("sort", a, axis, kind, order, user_loc())


@implements(np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """np.argsort: the stable order for every kind (equal values, -0.0 and
    +0.0 among them, keep their order), which is numpy's kind="stable"; its
    default quicksort may order ties differently."""
    return _sorting("argsort", a, axis, kind, order, user_loc())


def _along_last(ctx, a, axis, fname, loc):
    """``a`` with the ``axis`` (None: all; an int or a tuple) merged into one
    last axis, as numpy's median and quantile reduce several axes; and the
    shape keepdims gives."""
    a = _tr(ctx, a, loc)
    axes = normalize_axes(axis, a.ndim, fname, loc)
    kept = [d for d in range(a.ndim) if d not in axes]
    keep_shape = tuple(1 if d in axes else n for d, n in enumerate(a.shape))
    moved = transpose(a, kept + list(axes)) if a.ndim else a
    merged = reshape(moved, tuple(a.shape[d] for d in kept) + (_count(a.shape, axes),))
    return merged, keep_shape


# Rows at least this long (a lone row: SELECT_MIN_ONE) are not sorted for a
# median or a quantile: their few order statistics come from a radix
# selection (the ``select`` op, schedules/select.py). np.median of float32,
# ms, sort -> select (numpy), 2-core Zen 4 VM, medians of 7 interleaved:
# (512,) 0.011 -> 0.010 (0.025); (4096,) 0.11 -> 0.009 (0.023); (2**20,)
# 44 -> 1.6 (12.4); (1000, 1000) 3.4 -> 2.7 (11.8); (500, 2048) 4.2 -> 3.0
# (11.8); (100, 10000) 8.8 -> 1.8 (11.6); but many short rows sort faster,
# the Sort template vectorizing across rows: (2000, 512) 4.1 against 4.6.
SELECT_MIN = 1000
SELECT_MIN_ONE = 512
# Each position the select finds by its own counting passes (a "base": not
# the one right after another selected position) costs about a sort of
# rows of its length over SELECT_ROW_PER_BASE: rows of fewer than that many
# values per base sort (one base: SELECT_MIN; a lone row always selects).
# Float32, 2-core Zen 4 VM, medians of 7 interleaved, select / sort
# (numpy) in ms: (1024, 1024) top 5 (3 bases) 8.7 / 3.9 (8.1), 10th, 50th
# and 90th percentiles (3) 12.0 / 4.7 (21), top 16 (8) 19.0 / 4.8 (6.6);
# (256, 4096) top 5 3.6 / 6.0 (12.3), top 16 9.1 / 6.0 (15.0); (64,
# 16384) top 16 4.1 / 5.8 (17).
SELECT_ROW_PER_BASE = 1024


def select_bases(positions) -> int:
    """How many of the sorted ``positions`` the select finds by counting
    passes: in each run of consecutive ones, every other (lower_select)."""
    bases, prev_base = 0, None
    for k in sorted(set(int(p) for p in positions)):
        if prev_base is not None and k == prev_base + 1:
            prev_base = None  # the one after a base: from its count
        else:
            bases, prev_base = bases + 1, k
    return bases


def selects_rows(shape, positions=None) -> bool:
    """Whether order statistics of rows of ``shape`` (the last axis) come
    from the select op rather than a sort (SELECT_MIN, SELECT_MIN_ONE; for
    several rows and the ``positions`` wanted, SELECT_ROW_PER_BASE)."""
    n = shape[-1]
    if int(np.prod(shape)) == n:
        return n >= SELECT_MIN_ONE
    bases = 1 if positions is None else select_bases(positions)
    return n >= SELECT_MIN and (bases <= 1 or n >= bases * SELECT_ROW_PER_BASE)


def _order_stats(s, index):
    """``np.sort(s, axis=-1)[..., index]`` (index: ints of any shape, -1 the
    last) and whether ``s`` holds a NaN along its last axis (sorted last:
    numpy's median and quantile then answer NaN), as traced arrays."""
    n = s.shape[-1]
    index = np.asarray(index, np.intp)
    index = np.where(index < 0, index + n, index)  # numpy's quantile helpers give -1 for the last
    if not selects_rows(s.shape, index.reshape(-1)):
        srt = sort(s, axis=-1)
        nan = np.isnan(srt[..., n - 1]) if s.dtype.kind == "f" else None
        return take(srt, index, axis=-1), nan
    ks, pos = np.unique(index, return_inverse=True)
    picked = s._ctx.emit("select", [s], {"kth": tuple(int(k) for k in ks)})
    nan = np.isnan(s).any(axis=-1) if s.dtype.kind == "f" else None
    return take(picked, pos.reshape(index.shape), axis=-1), nan


@implements(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """np.median as numpy computes it: the middle of the sorted values, the
    mean of the two middle ones for an even count (in mean's dtype: float64
    for integers, float16 through float32), NaN where the values hold one."""
    _unsupported_kw("median", {"out": out})
    loc = user_loc()
    ctx = _ctx_of(a)
    s, keep_shape = _along_last(ctx, a, axis, "median", loc)
    n = s.shape[-1]
    acc = np.dtype(np.float64) if s.dtype.kind in "biu" else (
        np.dtype(np.float32) if s.dtype == np.float16 else s.dtype)
    if n == 0:  # numpy: the mean of nothing
        r = reduction("mean", s, -1)
    else:
        even = n % 2 == 0
        mids, nan = _order_stats(s, [n // 2 - 1, n // 2] if even else [n // 2])
        mid = mids[..., -1].astype(acc)
        r = (mids[..., 0].astype(acc) + mid) / 2 if even else mid
        r = r.astype(np.float16 if s.dtype == np.float16 else acc)
        if nan is not None:
            r = where(nan, np.array(np.nan, r.dtype), r)
    return reshape(r, keep_shape) if keepdims else r


def _quantile(fname, a, q, axis, method, keepdims, weights, scale):
    """np.quantile / np.percentile with numpy's own index and weight
    arithmetic (its private helpers, run at trace time on the static
    count and q) and numpy's interpolation written with traced ops, so
    every method gives numpy's values and dtypes."""
    loc = user_loc()
    if weights is not None:
        raise UnsupportedError(f"np.{fname}: weights= is not supported inside @halojit.trace"
                               f"{format_loc(loc)}.")
    if isinstance(q, TracedArray):
        raise UnsupportedError(
            f"np.{fname}: q must be known while tracing (a number or a numpy array), got a "
            f"traced array{format_loc(loc)}; pass q as a static argument.")
    try:
        from numpy.lib import _function_base_impl as impl
        props = impl._QuantileMethods
    except (ImportError, AttributeError):  # pragma: no cover - numpy's layout moved
        raise UnsupportedError(f"np.{fname} needs numpy 2's quantile helpers; this numpy "
                               f"{np.__version__} has none.") from None
    weak_q = type(q) in (int, float)
    qa = np.true_divide(q, 100) if scale == 100 else np.asanyarray(q)
    if qa.ndim > 2:
        raise ValueError(f"np.{fname}: q must be a scalar, 1-d or 2-d, got {qa.ndim} "
                         f"dimensions{format_loc(loc)}.")
    q_shape = qa.shape  # a 2-d q: computed flat, its shape leads the result
    if qa.ndim > 1:
        qa = qa.reshape(-1)
    if not impl._quantile_is_valid(qa):
        lo, hi = (0, 100) if scale == 100 else (0, 1)
        raise ValueError(f"{'Percentiles' if scale == 100 else 'Quantiles'} must be in the "
                         f"range [{lo}, {hi}]")
    if method not in props:
        raise ValueError(f"{method!r} is not a valid method. Use one of: {props.keys()}")
    ctx = _ctx_of(a)
    s, keep_shape = _along_last(ctx, a, axis, fname, loc)
    n = s.shape[-1]
    if n == 0:
        raise IndexOutOfBoundsError(f"np.{fname}: the values along axis {axis} are empty"
                                    f"{format_loc(loc)}; expected at least one.")
    m = props[method]
    vi = np.asanyarray(m["get_virtual_index"](n, qa))

    def at(index):  # the sorted values at index, its axes first as numpy's take
        index = np.asarray(index, np.intp)
        got, nan = _order_stats(s, index)
        return moveaxis(got, list(range(got.ndim - index.ndim, got.ndim)),
                        list(range(index.ndim))), nan
    if m["fix_gamma"] is None or (method == "linear" and vi.dtype.kind in "iu"):
        r, nan = at(vi)
    else:
        prev, nxt = impl._get_indexes(np.empty(0, s.dtype), vi, n)
        both, nan = at(np.stack([prev, nxt]))
        before, after = both[0], both[1]
        gamma = impl._get_gamma(vi, prev, m)
        gamma = float(gamma) if weak_q else gamma.reshape(vi.shape + (1,) * (s.ndim - 1))
        diff = after - before
        lerp = before + diff * gamma
        high = np.asarray(gamma) >= 0.5
        r = where(high, (after - diff * (1 - gamma)).astype(lerp.dtype), lerp)
    if nan is not None:
        r = where(nan, np.array(np.nan, r.dtype), r)
    if keepdims:
        return reshape(r, q_shape + keep_shape)
    return reshape(r, q_shape + tuple(r.shape[qa.ndim:])) if len(q_shape) > 1 else r


@implements(np.quantile)
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
    _unsupported_kw("quantile", {"out": out, "interpolation": interpolation})
    return _quantile("quantile", a, q, axis, method, keepdims, weights, 1)


@implements(np.percentile)
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, interpolation=None):
    _unsupported_kw("percentile", {"out": out, "interpolation": interpolation})
    return _quantile("percentile", a, q, axis, method, keepdims, weights, 100)


# -- elementwise functions ----------------------------------------------------------
def _where_checks_int_range() -> bool:
    """Whether the installed numpy's np.where raises OverflowError for a
    Python int that does not fit the result (numpy >= 2.5) or wraps it."""
    try:
        np.where(True, 2**63, 0)
    except OverflowError:
        return True
    return False


_WHERE_CHECKS_INT_RANGE = _where_checks_int_range()


def _check_where_int_range(nodes, dt, loc) -> None:
    """np.where of Python ints alone: numpy 2.5 raises where one does not fit
    the result dtype (2**63 as int64), earlier versions wrap it."""
    if not _WHERE_CHECKS_INT_RANGE or dt.kind not in "iu":
        return
    info = np.iinfo(dt)
    for n in nodes:
        if n.dtype.kind not in "iu":
            continue
        if n.op == "constant":
            v = int(n.params["value"].value)
            if info.min <= v <= info.max:
                continue
            what = str(v)
        elif n.dtype == np.uint64 and dt != np.uint64:
            what = "a Python int argument >= 2**63"  # such an argument is weak uint64 only then
        else:
            continue
        raise OverflowError(f"Python int too large to convert to C long: np.where's {what} "
                            f"does not fit its result dtype {dt}{format_loc(loc)}")


@implements(np.where)
def where(cond, x=None, y=None):
    loc = user_loc()
    if x is None or y is None:
        raise UnsupportedError(
            f"np.where(cond) with one argument has a value-dependent shape{format_loc(loc)}; "
            "use np.where(cond, x, y).")
    ctx = _ctx_of(cond, x, y)
    c = ctx.cast(cond, np.bool_, loc)
    nodes = [ctx.as_node(v, loc) for v in (x, y)]
    dt, weak = common_dtype(nodes)
    if weak:  # Python scalars only: numpy promotes them by kind, so 2**63 with 0 is int64 (wrapped)
        dt = np.result_type(*[_weak_repr(n) for n in nodes])
    check_dtype(dt, "np.where", loc)
    if weak:
        _check_where_int_range(nodes, dt, loc)
        nodes = [ctx.weak_cast(n, dt, loc) for n in nodes]
    else:
        # np.where casts a Python int branch like astype, wrapping where it does
        # not fit (np.where(c, x_uint8, -3) holds 253), never an OverflowError.
        nodes = [n if n.dtype == dt and not n.aval.weak else
                 ctx.emit("astype", [n], {"dtype": dt}, loc)._node for n in nodes]
    # an ndarray even when 0-d (numpy's where is no ufunc): np.where(c, a, b)
    # of 0-d arrays is array(v), not a numpy scalar
    return with_zero_d_kind(None, ctx.emit("where", [c, *nodes], None, loc), False)


@implements(np.clip)
def clip(a, a_min=np._NoValue, a_max=np._NoValue, out=None, *, min=np._NoValue,
         max=np._NoValue, **kwargs):
    _unsupported_kw("clip", dict(kwargs, out=out))
    lo = a_min if a_min is not np._NoValue else min
    hi = a_max if a_max is not np._NoValue else max
    lo = None if lo is np._NoValue else lo
    hi = None if hi is np._NoValue else hi
    ctx = _ctx_of(a, lo, hi)
    loc = user_loc()
    if type(a) in (bool, int, float):  # np.clip takes asarray(a): a strong int64/float64
        a = TracedArray(_as_strong(ctx, a, loc), ctx)
    a_dtype = a.dtype if isinstance(a, TracedArray) else np.asarray(a).dtype
    if a_dtype.kind in "iu":  # numpy 2 drops Python int bounds beyond the dtype's range
        info = np.iinfo(a_dtype)
        lo = None if type(lo) is int and lo <= info.min else lo
        hi = None if type(hi) is int and hi >= info.max else hi
        # a Python int argument: its value is known per call, so it is moved
        # into the range there (a bound beyond the other end still raises
        # numpy's OverflowError, from the range check of its cast)
        lo = _into_range(ctx, lo, "maximum", info.min, loc)
        if a_dtype != np.uint64:  # uint64's max is beyond int64: the meeting would be float64
            hi = _into_range(ctx, hi, "minimum", info.max, loc)
    if lo is None and hi is None:
        return ctx.ufunc("positive", (a,), loc)
    parts = [p for p in (a, lo, hi) if p is not None]
    nodes = _cast_all(ctx, parts, loc)
    r = TracedArray(nodes[0], ctx)
    k = 1
    if lo is not None:
        r = ctx.ufunc("maximum", (r, TracedArray(nodes[k], ctx)), loc)
        k += 1
    if hi is not None:
        r = ctx.ufunc("minimum", (r, TracedArray(nodes[k], ctx)), loc)
    return r


def _into_range(ctx, bound, ufunc, end, loc):
    """``bound`` itself, or for a Python int argument (a weak int64 value)
    ``ufunc(bound, end)``, still a weak Python int."""
    if not isinstance(bound, TracedArray):
        return bound
    node = bound._node
    if not node.aval.weak or node.dtype != np.int64 or node.op == "constant":
        return bound
    return ctx.ufunc(ufunc, (bound, int(end)), loc)


@implements(np.astype)
def astype(x, dtype, copy=True, casting="unsafe", **kw):
    loc = user_loc()
    ctx = _ctx_of(x)
    dt = check_dtype(dtype, "astype", loc)
    node = ctx.as_node(x, loc)
    _check_casting("astype", node.dtype, dt, casting, loc)
    if node.dtype == dt and not node.aval.weak:
        # copy=False hands back x itself, as numpy does: writes through it are x's
        if not copy and isinstance(x, TracedArray):
            return x
        return with_zero_d_kind(x, TracedArray(node, ctx), zero_d_kind(x))
    # a scalar's astype is a scalar, a 0-d array's a 0-d array
    return with_zero_d_kind(x, ctx.emit("astype", [node], {"dtype": dt}, loc), zero_d_kind(x))


def view(x, dtype=None, type=None):
    """``ndarray.view``: the same bits as another dtype of the same itemsize
    (a value inside the trace, as every result). A bool array views as
    int8/uint8 (its bytes are 0 and 1); viewing bytes as bool, a dtype of
    another itemsize (which reshapes the last axis) and ndarray subclasses
    are refused."""
    loc = user_loc()
    ctx = _ctx_of(x)
    if type is None and isinstance(dtype, builtins.type) and issubclass(dtype, np.ndarray):
        dtype, type = None, dtype
    if type is not None and type is not np.ndarray:
        raise UnsupportedError(f"x.view(type={getattr(type, '__name__', type)!r}): only "
                               f"np.ndarray results are supported inside @halojit.trace"
                               f"{format_loc(loc)}.")
    node = ctx.as_node(x, loc)
    r = TracedArray(node, ctx) if dtype is None else _bits_as(ctx, node, dtype, loc)
    return with_zero_d_kind(x, _view(x, r), zero_d_kind(x))


def _bits_as(ctx, node, dtype, loc):
    """``node``'s bits as ``dtype`` (x.view(dtype)'s value)."""
    dt = check_dtype(dtype, "view", loc)
    src = node.dtype
    if dt.itemsize != src.itemsize:
        raise UnsupportedError(
            f"x.view({dt}) of a {src} array: a dtype of another itemsize ({dt.itemsize} vs "
            f"{src.itemsize} bytes) changes the last axis and is not supported inside "
            f"@halojit.trace{format_loc(loc)}; view as a dtype of {src.itemsize} bytes "
            f"or use astype.")
    if dt == src:
        return TracedArray(node, ctx)
    if dt.kind == "b":
        raise UnsupportedError(f"x.view(bool) of a {src} array is not supported inside "
                               f"@halojit.trace{format_loc(loc)}: bytes other than 0 and 1 "
                               f"make bools numpy itself treats inconsistently; use x != 0.")
    if src.kind == "b":  # its bytes are 0 and 1
        return ctx.emit("astype", [node], {"dtype": dt}, loc)
    return ctx.emit("bitcast", [node], {"dtype": dt}, loc)


@implements(np.round, np.around)
def round_(a, decimals=0, out=None):
    _unsupported_kw("round", {"out": out})
    ctx = _ctx_of(a)
    a = _tr(ctx, a, user_loc())
    if a.dtype.kind == "b" and decimals != 0:
        raise DTypeError(f"np.round: a bool array with decimals={decimals}: numpy cannot cast "
                         f"the float64 result back to bool{format_loc(user_loc())}.")
    if a.dtype.kind in "iu":
        if decimals >= 0:
            return a
        # numpy: in float64 by a Python float 10.0 ** -decimals (so decimals=-20
        # gives 0), then cast back (np.round(1250, -2) is 1200)
        scale = 10.0 ** -decimals
        r = np.rint(a.astype(np.float64) / scale).__mul__(scale)
        if a.dtype.itemsize <= 2:  # numpy's C cast goes through a C int: 260 wraps to uint8 4
            r = r.astype(np.int32)
        return r.astype(a.dtype)
    if decimals == 0:
        return np.rint(a)
    scale = 10.0 ** abs(decimals)
    if decimals > 0:
        return np.rint(a * scale) / scale
    return np.rint(a / scale) * scale


def _like_factory(kind):
    def fn(a, *args, dtype=None, order="K", subok=True, shape=None, **kw):
        loc = user_loc()
        ctx = _ctx_of(a)
        if kind == "full":
            fill = args[0] if args else kw.pop("fill_value")
        else:
            fill = 1 if kind == "ones" else 0
        dt = check_dtype(dtype if dtype is not None else a.dtype, f"np.{kind}_like", loc)
        shape = tuple(a.shape) if shape is None else tuple(int(s) for s in np.atleast_1d(shape))
        if isinstance(fill, TracedArray):  # a value known per call: numpy copies it in, unsafe cast
            c = ctx.cast(fill, dt, loc)
            if not shape:
                return TracedArray(c, ctx)
            return ctx.emit("broadcast_to", [c], {"shape": shape}, loc)
        c = ctx.constant(np.asarray(fill, dtype=dt))
        if not shape:
            return with_zero_d_kind(None, TracedArray(c, ctx), False)  # ones_like(0-d): array(1.)
        return ctx.emit("broadcast_to", [c], {"shape": shape}, loc)
    return fn


for _kind, _f in [("zeros", np.zeros_like), ("zeros", np.empty_like),
                  ("ones", np.ones_like), ("full", np.full_like)]:
    HANDLERS[_f] = _like_factory(_kind)


@implements(np.shape)
def _shape(a):
    return tuple(a.shape)


@implements(np.ndim)
def _ndim(a):
    return a.ndim


@implements(np.size)
def _size(a, axis=None):
    return a.size if axis is None else a.shape[axis]


# -- movement --------------------------------------------------------------------
def _view(src, result):
    """``result`` is a view of ``src`` in numpy: writing into a view of an input
    writes into the input, so it is refused like a write into the input; a
    view of an intermediate records its base (TracedArray._check_fresh says why)."""
    if getattr(src, "_readonly", None) and isinstance(result, TracedArray) and result is not src:
        result._readonly = src._readonly  # a view of a read-only array is read-only
    if getattr(src, "_is_input", False):
        result._is_input = True
    elif isinstance(src, TracedArray) and isinstance(result, TracedArray) and result is not src:
        root = src._root
        result._base, result._seen = root, root._writes
    return result


def _resolve_shape(shape, size, loc):
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: can only specify one unknown dimension, got {shape}{format_loc(loc)}.")
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        if known == 0 or size % known:
            raise ShapeError(f"reshape: cannot reshape an array of size {size} into shape "
                             f"{shape}{format_loc(loc)}.")
        shape = tuple(size // known if s == -1 else s for s in shape)
    return shape


@implements(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    loc = user_loc()
    ctx = _ctx_of(a)
    a = _tr(ctx, a, loc)
    shape = _resolve_shape(shape if shape is not None else newshape, a.size, loc)
    if order != "C":
        if int(np.prod(shape, dtype=np.int64)) != a.size:  # numpy's ValueError, in any order
            raise ShapeError(f"reshape: cannot reshape an array of size {a.size} into shape "
                             f"{shape}{format_loc(loc)}; the element counts must match.")
        if order != "F":  # 'A' follows the memory layout of an input: not known when tracing
            raise UnsupportedError(f"reshape: order={order!r} is not supported; only 'C' and "
                                   f"'F'{format_loc(loc)}.")
        if a.ndim > 1 or len(shape) > 1:  # Fortran order: the axes reversed on both sides
            return transpose(reshape(transpose(a), tuple(reversed(shape))))
    if shape == a.shape:
        return a
    # 0-d: a scalar's reshape is a scalar; an array's (x.reshape(()), np.squeeze) an array
    return with_zero_d_kind(a, _view(a, ctx.emit("reshape", [a], {"shape": shape}, loc)),
                            zero_d_kind(a))


@implements(np.transpose)
def transpose(a, axes=None):
    loc = user_loc()
    ctx = _ctx_of(a)
    a = _tr(ctx, a, loc)
    if axes is None:
        perm = tuple(reversed(range(a.ndim)))
    else:
        if len(axes) != a.ndim:
            raise ShapeError(f"transpose: axes {tuple(axes)} do not match an array of "
                             f"{a.ndim} dimensions{format_loc(loc)}.")
        perm = tuple(normalize_axis(p, a.ndim, "transpose", loc) for p in axes)
    if perm == tuple(range(a.ndim)):
        return a
    return _view(a, ctx.emit("transpose", [a], {"perm": perm}, loc))


@implements(np.swapaxes)
def swapaxes(a, axis1, axis2):
    loc = user_loc()
    perm = list(range(a.ndim))
    i, j = normalize_axis(axis1, a.ndim, "swapaxes", loc), normalize_axis(axis2, a.ndim, "swapaxes", loc)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    loc = user_loc()
    src = normalize_axes(source, a.ndim, "moveaxis", loc) if not isinstance(source, int) else \
        (normalize_axis(source, a.ndim, "moveaxis", loc),)
    dst = [normalize_axis(d, a.ndim, "moveaxis", loc) for d in
           (destination if isinstance(destination, (tuple, list)) else (destination,))]
    if isinstance(source, (tuple, list)):
        src = [normalize_axis(s, a.ndim, "moveaxis", loc) for s in source]
    order = [n for n in range(a.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, order)


@implements(np.expand_dims)
def expand_dims(a, axis):
    loc = user_loc()
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    nd = a.ndim + len(axes)
    axes = normalize_axes(axes, nd, "expand_dims", loc)
    it = iter(a.shape)
    shape = tuple(1 if i in axes else next(it) for i in range(nd))
    return reshape(a, shape)


@implements(np.squeeze)
def squeeze(a, axis=None):
    loc = user_loc()
    if axis is None:
        axes = tuple(i for i, d in enumerate(a.shape) if d == 1)
    else:
        axes = normalize_axes(axis, a.ndim, "squeeze", loc)
        for i in axes:
            if a.shape[i] != 1:
                raise ShapeError(f"squeeze: cannot select an axis to squeeze out which has size "
                                 f"not equal to one: axis {i} of shape {a.shape}{format_loc(loc)}.")
    return reshape(a, tuple(d for i, d in enumerate(a.shape) if i not in axes))


@implements(np.ravel)
def ravel(a, order="C"):
    return reshape(a, (-1,), order)


@implements(np.copy)
def copy(a, order="K", subok=False):
    ctx = _ctx_of(a)
    # a new array, writable, an ndarray even of a scalar (x.copy() keeps the kind)
    r = TracedArray(ctx.as_node(a, user_loc()), ctx)
    return with_zero_d_kind(None, contiguous(r) if order == "C" else r, False)


def contiguous(a: TracedArray) -> TracedArray:
    """``a`` promised C-contiguous where it is returned (np.ascontiguousarray,
    ``x.copy()``): a ``copy`` node, which keeps the Halide backend from
    handing the value back as a view of another layout (passes/views.py).
    Values of fewer than 2 axes are contiguous whatever their history."""
    if a.ndim < 2 or a._node.op in ("input", "constant", "copy"):
        return a
    return a._ctx.emit("copy", [a._node], None, user_loc())


@implements(np.broadcast_to)
def broadcast_to(a, shape, subok=False):
    loc = user_loc()
    ctx = _ctx_of(a)
    a = _tr(ctx, a, loc)
    shape = tuple(int(s) for s in ((shape,) if isinstance(shape, (int, np.integer)) else shape))
    if shape == a.shape:
        return with_zero_d_kind(a, a, False)  # np.broadcast_to(scalar, ()): a 0-d array
    r = _view(a, ctx.emit("broadcast_to", [a], {"shape": shape}, loc))
    r._readonly = "np.broadcast_to"  # numpy's result is read-only too
    return r


def _full_of(dst, v):
    """``v`` cast (as numpy assigns: unsafe) and broadcast to ``dst``'s shape:
    a fresh array, not a view of ``v``."""
    v = astype(v, dst.dtype) if v.dtype != dst.dtype or v._node.aval.weak else v
    return copy(v if v.shape == dst.shape else broadcast_to(v, dst.shape))


@implements(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    """np.copyto into an array made inside the trace (numpy's casting rule
    checked, ``where=`` kept): an update in place, as ``x[...] = src``."""
    loc = user_loc()
    what = "np.copyto"
    if not isinstance(dst, TracedArray):
        raise UnsupportedError(f"{what} into a non-traced array is not supported inside "
                               f"@halojit.trace{format_loc(loc)}; return the result instead.")
    dst._check_writable(what)
    if isinstance(src, (int, float, bool)):  # a Python scalar: numpy's value checks
        if not np.can_cast(np.asarray(src).dtype, dst.dtype, casting) and casting != "unsafe" \
                and not (isinstance(src, int) and dst.dtype.kind in "iuf"):
            raise DTypeError(f"{what}: cannot cast {type(src).__name__} to {dst.dtype} "
                             f"according to the rule {casting!r}{format_loc(loc)}.")
        src = _scalar_as(src, dst.dtype)
    s = _tr(dst._ctx, src if isinstance(src, TracedArray) else np.asarray(src), loc)
    if not np.can_cast(s.dtype, dst.dtype, casting):
        raise DTypeError(f"{what}: cannot cast from {s.dtype} to {dst.dtype} according to the "
                         f"rule {casting!r}{format_loc(loc)}.")
    if broadcast_shapes([s.shape, dst.shape], what, loc) != dst.shape:
        raise ShapeError(f"{what}: could not broadcast input array from shape {s.shape} into "
                         f"shape {dst.shape}{format_loc(loc)}.")
    new = _full_of(dst, s)
    if where is not True:
        new = np.where(where, new, dst)
    dst._assign(new, what)


@implements(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    shape = broadcast_shapes([np.shape(a) if not isinstance(a, TracedArray) else a.shape
                              for a in args], "broadcast_arrays", user_loc())
    return tuple(broadcast_to(a, shape) for a in args)


@implements(np.flip)
def flip(m, axis=None):
    loc = user_loc()
    axes = normalize_axes(axis, m.ndim, "flip", loc)
    return getitem(m, tuple(slice(None, None, -1) if i in axes else slice(None)
                            for i in range(m.ndim)))


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    _unsupported_kw("concatenate", {"out": out})
    loc = user_loc()
    ctx = _ctx_of(arrays)
    arrays = list(arrays)
    if not arrays:
        raise ShapeError(f"concatenate: need at least one array{format_loc(loc)}.")
    if axis is None:
        arrays = [ravel(_tr(ctx, a, loc)) for a in arrays]
        axis = 0
    # np.concatenate (and stack) convert with np.asarray: Python scalars are strong here
    strong = [_as_strong(ctx, a, loc) for a in arrays]
    if dtype is not None:  # numpy checks each input against dtype= (none without it)
        for a in strong:
            _check_casting("concatenate", a.dtype, np.dtype(dtype), casting, loc)
    nodes = _cast_all(ctx, strong, loc, dtype)
    nd = nodes[0].aval.ndim
    if nd == 0:
        raise ShapeError(f"concatenate: zero-dimensional arrays cannot be concatenated{format_loc(loc)}.")
    for n in nodes:
        if n.aval.ndim != nd:
            raise ShapeError(
                f"concatenate: all inputs must have the same number of dimensions; got "
                f"{nodes[0].shape} and {n.shape}{format_loc(loc)}.")
    ax = normalize_axis(axis, nd, "concatenate", loc)
    if len(nodes) == 1:
        return TracedArray(nodes[0], ctx)
    return ctx.emit("concatenate", nodes, {"axis": ax}, loc)


def _static_ints(values, fname, what, loc) -> tuple:
    """Python (or numpy) ints known while tracing; a traced value is refused."""
    values = tuple(values) if isinstance(values, (tuple, list)) else (values,)
    for v in values:
        if not _is_int_index(v):
            raise UnsupportedError(
                f"{fname}: {what} must be integers known while tracing, got "
                f"{type(v).__name__}{format_loc(loc)}; pass it as a static keyword argument.")
    return tuple(int(v) for v in values)


@implements(np.roll)
def roll(a, shift, axis=None):
    """Two slices concatenated per rolled axis (shifts on one axis add up)."""
    loc = user_loc()
    ctx = _ctx_of(a)
    a = _tr(ctx, a, loc)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.shape)
    shifts = _static_ints(shift, "roll", "shift", loc)
    axes = _static_ints(axis, "roll", "axis", loc)
    if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)):
        raise ShapeError(f"roll: shift {shifts} and axis {axes} do not broadcast together"
                         f"{format_loc(loc)}; expected equal lengths or one of length 1.")
    total: dict = {}
    for s, ax in zip(shifts * (len(axes) if len(shifts) == 1 else 1),
                     axes * (len(shifts) if len(axes) == 1 else 1)):
        ax = normalize_axis(ax, a.ndim, "roll", loc)
        total[ax] = total.get(ax, 0) + s
    out = a
    for ax, s in sorted(total.items()):
        n = a.shape[ax]
        if n == 0 or s % n == 0:
            continue
        cut = n - s % n
        head = getitem(out, tuple(slice(cut, None) if i == ax else slice(None) for i in range(a.ndim)))
        tail = getitem(out, tuple(slice(None, cut) if i == ax else slice(None) for i in range(a.ndim)))
        out = concatenate([head, tail], ax)
    return copy(out)  # a new array, as numpy's


@implements(np.diff)
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    """Differences of neighbours along ``axis`` (``!=`` for bool, as numpy),
    ``n`` times, after concatenating ``prepend`` / ``append`` (a scalar is
    broadcast to one slice)."""
    loc = user_loc()
    ctx = _ctx_of(a, prepend, append)
    a = _tr(ctx, a, loc)
    (n,) = _static_ints(n, "diff", "n", loc)
    if n == 0:  # numpy returns a itself, before it looks at its shape, axis or prepend/append
        return a
    if n < 0:
        raise ValueError(f"diff: order must be non-negative but got {n}{format_loc(loc)}.")
    if a.ndim == 0:
        raise ValueError(f"diff requires input that is at least one dimensional{format_loc(loc)}.")
    ax = normalize_axis(axis, a.ndim, "diff", loc)
    parts = []
    for extra in (prepend, append):
        if extra is np._NoValue:
            parts.append(None)
            continue
        e = _tr(ctx, extra if isinstance(extra, TracedArray) else np.asarray(extra), loc)
        if e.ndim == 0:
            e = broadcast_to(e, a.shape[:ax] + (1,) + a.shape[ax + 1:])
        parts.append(e)
    if parts != [None, None]:
        a = concatenate([p for p in (parts[0], a, parts[1]) if p is not None], ax)

    def cut(start, stop):
        return tuple(slice(start, stop) if i == ax else slice(None) for i in range(a.ndim))
    for _ in range(n):
        hi, lo = getitem(a, cut(1, None)), getitem(a, cut(None, -1))
        a = hi != lo if a.dtype == np.bool_ else hi - lo
    return a


@implements(np.count_nonzero)
def count_nonzero(a, axis=None, *, keepdims=False):
    loc = user_loc()
    ctx = _ctx_of(a)
    a = _tr(ctx, a, loc)
    return reduction("sum", a != 0, axis, keepdims, np.intp)


def _triangle(m, k, upper: bool, fname: str):
    """numpy's triu/tril: zeros where the column is below (triu) or above
    (tril) the k-th diagonal, from two index vectors (no N x M mask constant)."""
    loc = user_loc()
    ctx = _ctx_of(m)
    m = _tr(ctx, m, loc)
    (k,) = _static_ints(k, fname, "k", loc)
    if m.ndim == 0:  # numpy's TypeError: tri() of m.shape[-2:] misses its N
        raise TypeError(f"{fname}: expected an array of at least 1 dimension, got a 0-d one"
                         f"{format_loc(loc)}.")
    rows, cols = m.shape[-2:] if m.ndim >= 2 else (m.shape[-1], m.shape[-1])
    i = _tr(ctx, np.arange(rows, dtype=np.int64).reshape(rows, 1), loc)
    j = _tr(ctx, np.arange(cols, dtype=np.int64), loc)
    keep = (j - i >= k) if upper else (j - i <= k)
    return where(keep, m, np.zeros((), m.dtype))


@implements(np.triu)
def triu(m, k=0):
    return _triangle(m, k, True, "triu")


@implements(np.tril)
def tril(m, k=0):
    return _triangle(m, k, False, "tril")


# np.tile along the last axis alone, at most this many copies: a concatenation
_TILE_CONCAT_MAX = 16


@implements(np.tile)
def tile(A, reps):
    """A broadcast over a new axis before each tiled one, then one reshape."""
    loc = user_loc()
    ctx = _ctx_of(A)
    a = _tr(ctx, A, loc)
    reps = _static_ints(reps, "tile", "reps", loc)
    if any(r < 0 for r in reps):
        raise ShapeError(f"tile: reps {reps} must be >= 0{format_loc(loc)}.")
    d = max(len(reps), a.ndim)
    reps = (1,) * (d - len(reps)) + reps
    shape = (1,) * (d - a.ndim) + a.shape
    a = reshape(a, shape)
    if d and all(r == 1 for r in reps[:-1]) and 1 < reps[-1] <= _TILE_CONCAT_MAX:
        # copies side by side along the last axis: a concatenation, which
        # the Concat template writes as plain vector copies, where the index
        # through the merged axes was a per-lane gather ((2048, 2048)
        # float32, tile (1, 2) 2.0 -> 1.2 ms, (1, 3) 3.0 -> 1.8; numpy 4.3
        # and 6.3)
        return concatenate([a] * reps[-1], d - 1)
    if any(r != 1 for r in reps):
        spread = broadcast_to(reshape(a, tuple(x for n in shape for x in (1, n))),
                              tuple(x for r, n in zip(reps, shape) for x in (r, n)))
        a = reshape(spread, tuple(r * n for r, n in zip(reps, shape)))
    return copy(a)  # a new array, as numpy's


@implements(np.stack)
def stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    loc = user_loc()
    ctx = _ctx_of(arrays)
    arrays = [_tr(ctx, a, loc) for a in arrays]
    if not arrays:
        raise ShapeError(f"stack: need at least one array{format_loc(loc)}.")
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise ShapeError(f"stack: all input arrays must have the same shape, got "
                         f"{sorted(shapes)}{format_loc(loc)}.")
    ax = normalize_axis(axis, arrays[0].ndim + 1, "stack", loc)
    return concatenate([expand_dims(a, ax) for a in arrays], ax, out, dtype, casting)


@implements(np.hstack)
def hstack(tup, *, dtype=None, casting="same_kind"):
    arrs = [a if a.ndim else reshape(a, (1,)) for a in tup]
    return concatenate(arrs, 0 if arrs[0].ndim == 1 else 1, dtype=dtype, casting=casting)


@implements(np.vstack)
def vstack(tup, *, dtype=None, casting="same_kind"):
    arrs = [reshape(a, (1, -1)) if a.ndim < 2 else a for a in tup]
    return concatenate(arrs, 0, dtype=dtype, casting=casting)


def _split(fname, ary, indices_or_sections, axis, equal, min_ndim=1):
    """Sub-arrays as slices along ``axis``: n sections (equal ones for
    np.split; np.array_split gives the first len % n one more element) or
    the pieces between static indices, with slice semantics (an index past
    the end gives empty pieces, as numpy's)."""
    loc = user_loc()
    ctx = _ctx_of(ary)
    a = _tr(ctx, ary, loc)
    if a.ndim < min_ndim:  # an IndexError too, as numpy's split of a 0-d array
        raise IndexShapeError(f"{fname}: expected an array of at least {min_ndim} dimension"
                         f"{'s' if min_ndim > 1 else ''}, got shape {a.shape}{format_loc(loc)}.")
    ax = normalize_axis(axis, a.ndim, fname, loc)
    n = a.shape[ax]
    if isinstance(indices_or_sections, (tuple, list, np.ndarray)):
        bounds = [None, *_static_ints(list(np.asarray(indices_or_sections).ravel()), fname,
                                      "indices", loc), None]
    else:
        (sections,) = _static_ints(indices_or_sections, fname, "sections", loc)
        if sections <= 0:
            raise ShapeError(f"{fname}: the number of sections must be larger than 0, got "
                             f"{sections}{format_loc(loc)}.")
        if equal and n % sections:
            raise ShapeError(f"{fname}: an axis of length {n} does not split into {sections} "
                             f"equal sections{format_loc(loc)}; np.array_split allows "
                             f"unequal ones.")
        size, extra = divmod(n, sections)
        bounds = [0]
        for i in range(sections):
            bounds.append(bounds[-1] + size + (i < extra))
    pieces = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        key = tuple(slice(lo, hi) if i == ax else slice(None) for i in range(a.ndim))
        pieces.append(getitem(a, key))
    return pieces


@implements(np.split)
def split(ary, indices_or_sections, axis=0):
    return _split("split", ary, indices_or_sections, axis, equal=True)


@implements(np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    return _split("array_split", ary, indices_or_sections, axis, equal=False)


@implements(np.hsplit)
def hsplit(ary, indices_or_sections):
    return _split("hsplit", ary, indices_or_sections, 1 if np.ndim(ary) > 1 else 0, equal=True)


@implements(np.vsplit)
def vsplit(ary, indices_or_sections):
    return _split("vsplit", ary, indices_or_sections, 0, equal=True, min_ndim=2)


@implements(np.dsplit)
def dsplit(ary, indices_or_sections):
    return _split("dsplit", ary, indices_or_sections, 2, equal=True, min_ndim=3)


@implements(np.pad)
def pad(array, pad_width, mode="constant", **kwargs):
    from .ops.movement import PAD_MODES
    loc = user_loc()
    ctx = _ctx_of(array)
    a = _tr(ctx, array, loc)
    modes = PAD_MODES + tuple(_PAD_STATS) + ("linear_ramp", "empty")
    if callable(mode):
        raise UnsupportedError(f"np.pad: a function as mode is not supported (numpy calls it "
                               f"on each 1-D slice, in Python); expected one of {modes}"
                               f"{format_loc(loc)}.")
    if not isinstance(mode, str) or mode not in modes:
        raise UnsupportedError(f"np.pad: mode={mode!r} is not supported; expected one of "
                               f"{modes}{format_loc(loc)}.")
    stat_length = kwargs.pop("stat_length", None) if mode in _PAD_STATS else None
    end_values = kwargs.pop("end_values", 0) if mode == "linear_ramp" else None
    value = kwargs.pop("constant_values", 0) if mode in ("constant", "empty") else 0
    if kwargs:
        raise UnsupportedError(f"np.pad: arguments {sorted(kwargs)} are not supported{format_loc(loc)}.")
    if isinstance(pad_width, dict):  # numpy >= 2.3: {axis: width or (before, after)}, others 0
        seq = [(0, 0)] * a.ndim
        for axis, width in pad_width.items():
            if type(width) is int:
                width = (width, width)
            if not (type(width) is tuple and len(width) == 2
                    and all(type(w) is int for w in width)):
                raise TypeError(f"np.pad: a dict pad_width maps an axis to an int or a tuple "
                                f"(before, after) of ints; got {width!r} for axis {axis}"
                                f"{format_loc(loc)}.")
            seq[normalize_axis(axis, a.ndim, "pad", loc)] = width
        pad_width = seq
    if np.asarray(pad_width).dtype.kind not in "iu":
        raise TypeError(f"np.pad: `pad_width` must be of integral type, got "
                        f"{pad_width!r}{format_loc(loc)}.")
    try:
        widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (a.ndim, 2))
    except ValueError:
        raise ShapeError(f"np.pad: pad_width {pad_width!r} does not fit an array of "
                         f"{a.ndim} dimensions{format_loc(loc)}.") from None
    if (widths < 0).any():
        raise ShapeError(f"np.pad: pad_width must be non-negative, got {pad_width!r}{format_loc(loc)}.")
    pairs = None
    if not np.isscalar(value) and mode == "constant":  # numpy's per-axis (before, after) values
        if isinstance(value, TracedArray):
            raise UnsupportedError(f"np.pad: constant_values must be known while tracing"
                                   f"{format_loc(loc)}; pad with 0 and add the values.")
        pairs = [tuple(_stored_pad_value(v, a.dtype, loc) for v in pair)
                 for pair in _end_value_pairs(value, a.ndim, loc, "constant_values")]
        if len({v for pair in pairs for v in pair}) == 1:
            value, pairs = pairs[0][0], None
    widths = tuple((int(lo), int(hi)) for lo, hi in widths)
    if a.ndim == 0:
        return a  # numpy pads no axis of a 0-d array
    if pairs is not None and mode == "constant":
        # numpy fills axis after axis over the whole padded extent of the
        # others: the corners take the later axis' values
        for axis, ((lo, hi), (v_lo, v_hi)) in enumerate(zip(widths, pairs)):
            for width, v in (((lo, 0), v_lo), ((0, hi), v_hi)):
                if width != (0, 0):
                    w = tuple(width if d == axis else (0, 0) for d in range(a.ndim))
                    a = pad(a, w, "constant", constant_values=v)
        return a
    if mode in _PAD_STATS:
        return _pad_stat(a, widths, mode, stat_length, loc)
    if mode == "linear_ramp":
        return _pad_linear_ramp(a, widths, end_values, loc)
    if mode == "empty":  # numpy leaves the pads undefined: zeros here
        mode = "constant"
    v = stored_as(value, a.dtype, "np.pad: constant_values", loc) if mode == "constant" else 0
    return ctx.emit("pad", [a], {"pad_width": widths, "mode": mode, "value": v}, loc)


def _stored_pad_value(v, dtype, loc):
    """One of np.pad's per-axis constant values stored as numpy stores it
    (padded[...] = v): a Python int out of range is numpy's OverflowError, a
    numpy scalar casts. Returns the stored value as a Python scalar."""
    cell = np.zeros(1, dtype)
    try:
        with np.errstate(all="ignore"):
            cell[0] = v
    except (ValueError, OverflowError) as ex:
        raise type(ex)(f"np.pad: constant_values {v!r} cannot be stored in an array of "
                       f"{np.dtype(dtype)} ({ex}){format_loc(loc)}.") from None
    return cell[0].item()


def _end_value_pairs(end_values, ndim: int, loc, what: str = "end_values") -> list:
    """np.pad's (before, after) end values (or constant values: ``what``)
    per axis, as numpy reads them (_as_pairs): one or two values become
    numpy scalars of their array's dtype, which take part in the ramp's
    dtype; a per-axis table becomes Python numbers, which do not."""
    x = np.array(end_values)
    if x.dtype.kind not in "biuf":
        raise UnsupportedError(f"np.pad: {what} of dtype {x.dtype} are not supported; "
                               f"expected real numbers{format_loc(loc)}.")
    if x.ndim < 3 and x.size == 1:
        v = x.ravel()[0]
        return [(v, v)] * ndim
    if x.ndim < 3 and x.size == 2 and x.shape != (2, 1):
        v = x.ravel()
        return [(v[0], v[1])] * ndim
    try:
        return np.broadcast_to(x, (ndim, 2)).tolist()
    except ValueError:
        raise ValueError(f"np.pad: {what} of shape {x.shape} do not fit an array of {ndim} "
                         f"dimensions{format_loc(loc)}") from None


def _pad_linear_ramp(a, widths, end_values, loc):
    """np.pad's linear_ramp, as numpy computes it: axis by axis over the
    array padded so far, each side np.linspace(end value, edge, width,
    endpoint=False) in its dtype (the end value's and the array's, at least
    a float; ``y * step``, or ``y / width * delta`` where any step is 0),
    floored for integer arrays, then cast; the after side reversed."""
    pairs = _end_value_pairs(end_values, a.ndim, loc)
    x = a
    for axis, ((lo, hi), ends) in enumerate(zip(widths, pairs)):
        if not lo and not hi:
            continue
        n = a.shape[axis]
        if n == 0:
            raise ValueError(f"can't extend empty axis {axis} using modes other than 'constant' "
                             f"or 'empty'{format_loc(loc)}")
        parts = []
        for width, end, side in ((lo, ends[0], 0), (hi, ends[1], 1)):
            if not width:
                continue
            # numpy's own choice of linspace's dtype for these operands
            dt = np.linspace(end, np.zeros(1, a.dtype), 1, endpoint=False).dtype
            if dt.kind not in "f":
                raise UnsupportedError(f"np.pad: a linear ramp in {dt} is not supported"
                                       f"{format_loc(loc)}.")
            key = [slice(None)] * a.ndim
            key[axis] = slice(0, 1) if side == 0 else slice(n - 1, n)
            start = np.asarray(end).astype(dt)
            delta = astype(x[tuple(key)], dt) - start
            step = delta / width
            shape = [1] * a.ndim
            shape[axis] = width
            y = np.arange(width, dtype=dt).reshape(shape)
            ramp = np.where(np.any(step == 0), (y / dt.type(width)) * delta, y * step) + start
            if a.dtype.kind in "iu":
                ramp = np.floor(ramp)
            ramp = astype(ramp, a.dtype)
            if side == 1:
                key[axis] = slice(None, None, -1)
                ramp = ramp[tuple(key)]
            parts.append((side, ramp))
        x = concatenate([p for side, p in parts if side == 0] + [x] +
                        [p for side, p in parts if side == 1], axis=axis)
    return x


_PAD_STATS = {"maximum": np.max, "minimum": np.min, "mean": np.mean, "median": np.median}


def _pad_stat(a, widths, mode, stat_length, loc):
    """np.pad's statistic modes, as numpy computes them: axis by axis, each
    side a block of the statistic over the first (last) ``stat_length``
    values along the axis (all of them by default) of the array padded so
    far, rounded to the nearest integer for integer arrays, then cast."""
    func = _PAD_STATS[mode]
    if stat_length is None:
        lengths = [(None, None)] * a.ndim
    else:
        arr = np.asarray(stat_length)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"np.pad: `stat_length` must be of integral type, got "
                            f"{stat_length!r}{format_loc(loc)}.")
        if (arr < 0).any():
            raise ValueError(f"index can't contain negative values{format_loc(loc)}")
        try:
            lengths = [(int(lo), int(hi)) for lo, hi in np.broadcast_to(arr, (a.ndim, 2))]
        except ValueError:
            raise ShapeError(f"np.pad: stat_length {stat_length!r} does not fit an array of "
                             f"{a.ndim} dimensions{format_loc(loc)}.") from None
    x = a
    for axis, ((lo, hi), pair) in enumerate(zip(widths, lengths)):
        if not lo and not hi:
            continue
        n = a.shape[axis]
        if n == 0:
            raise ValueError(f"can't extend empty axis {axis} using modes other than 'constant' "
                             f"or 'empty'{format_loc(loc)}")
        parts = []
        for width, length, side in ((lo, pair[0], 0), (hi, pair[1], 1)):
            if not width:
                continue
            length = n if length is None else min(length, n)
            if length == 0:
                if mode in ("maximum", "minimum"):
                    raise ValueError(f"stat_length of 0 yields no value for padding{format_loc(loc)}")
                if a.dtype.kind != "f":
                    raise UnsupportedError(f"np.pad: mode={mode!r} with a stat_length of 0 on "
                                           f"{a.dtype} data (numpy casts NaN){format_loc(loc)}.")
            key = [slice(None)] * a.ndim
            key[axis] = slice(0, length) if side == 0 else slice(n - length, n)
            stat = func(x[tuple(key)], axis=axis, keepdims=True)
            if a.dtype.kind in "iu":
                stat = np.around(stat)
            stat = astype(stat, a.dtype)
            shape = list(x.shape)
            shape[axis] = width
            parts.append((side, broadcast_to(stat, tuple(shape))))
        x = concatenate([p for side, p in parts if side == 0] + [x] +
                        [p for side, p in parts if side == 1], axis=axis)
    return x


# -- indexing ----------------------------------------------------------------------
def _is_int_index(k):
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def _expand_key(key, ndim: int, loc) -> list:
    """``key`` with its ``...`` (or the axes it leaves out at the end) as
    full slices: one entry per axis of the array, plus any Nones."""
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexShapeError(f"an index can only have a single ellipsis ('...')"
                              f"{format_loc(loc)}.")
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > ndim:
        raise IndexShapeError(f"too many indices: array is {ndim}-dimensional, but {n_real} "
                              f"were indexed{format_loc(loc)}.")
    rest = [slice(None)] * (ndim - n_real)
    expanded = []
    for k in key:
        expanded.extend(rest if k is Ellipsis else [k])
    if not any(k is Ellipsis for k in key):
        expanded.extend(rest)
    return expanded


def _int_position(k, dim: int, axis: int, loc) -> int:
    """An int index ``k`` into an axis of ``dim``, as a position in [0, dim)."""
    i = int(k)
    if not -dim <= i < dim:
        raise IndexShapeError(f"index {i} is out of bounds for axis {axis} with size "
                              f"{dim}{format_loc(loc)}.")
    return i % dim


def _const_mask(k) -> bool:
    """A boolean array of one or more axes known while tracing (a numpy
    array or a list of bools)."""
    if isinstance(k, list):
        k = np.asarray(k)
    return isinstance(k, np.ndarray) and k.dtype == np.bool_ and k.ndim >= 1


def _const_masks_as_positions(key: tuple, shape: tuple, loc) -> tuple:
    """``key`` with each boolean array known while tracing replaced by its
    nonzero() positions, one integer array per axis it covers (numpy's
    rule); the mask's shape must match those axes, as numpy checks."""
    if not any(_const_mask(k) for k in key):
        return key
    widths = [np.ndim(k) if _const_mask(k) else 0 if k is None or k is Ellipsis else 1
              for k in key]
    out, axis = [], 0
    for k, w in zip(key, widths):
        if k is Ellipsis:
            axis += max(0, len(shape) - sum(widths))
        elif _const_mask(k):
            m = np.asarray(k)
            for d, n in enumerate(m.shape):
                if axis + d < len(shape) and n != shape[axis + d]:
                    raise IndexShapeError(
                        f"boolean index did not match indexed array along axis {axis + d}; "
                        f"size of axis is {shape[axis + d]} but size of corresponding boolean "
                        f"axis is {n}{format_loc(loc)}.")
            out.extend(np.nonzero(m))
            axis += w
            continue
        out.append(k)
        axis += w
    return tuple(out)


def getitem(x, key):
    loc = user_loc()
    ctx = x._ctx
    key = key if isinstance(key, tuple) else (key,)
    # a mask known while tracing selects known positions: a gather
    key = _const_masks_as_positions(key, x.shape, loc)
    # A 0-d integer traced array (x[x.argmax()]) indexes like an int in
    # numpy; its value is known at call time only, so it is a gather (the
    # same values and shape, range-checked at every call)
    if any(_is_array_index(k) for k in key):  # x[i] of a 0-d integer array i: a numpy scalar
        return with_zero_d_kinds(_advanced_getitem(ctx, x, key, loc),
                                 not any(k is Ellipsis for k in key))
    for k in key:
        if not (k is None or k is Ellipsis or isinstance(k, slice) or _is_int_index(k)):
            raise UnsupportedError(
                f"indexing with {type(k).__name__} is not supported inside @halojit.trace"
                f"{format_loc(loc)}; use slices, ints, None, ..., and integer arrays.")
    starts, steps, sizes, out_shape = [], [], [], []
    axis = 0
    for k in _expand_key(key, x.ndim, loc):
        if k is None:
            out_shape.append(1)
            continue
        dim = x.shape[axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(dim)
            n = len(range(start, stop, step))
            starts.append(start if n else 0)
            steps.append(step if n else 1)
            sizes.append(n)
            out_shape.append(n)
        else:
            starts.append(_int_position(k, dim, axis, loc))
            steps.append(1)
            sizes.append(1)
        axis += 1
    r = x
    if tuple(sizes) != x.shape or any(s != 0 for s in starts) or any(t != 1 for t in steps):
        r = ctx.emit("slice", [x], {"starts": tuple(starts), "steps": tuple(steps),
                                    "shape": tuple(sizes)}, loc)
    r = _view(x, reshape(r, tuple(out_shape)))
    # 0-d: integers (or ()) pick a numpy scalar, an index with ... a 0-d view
    return with_zero_d_kind(x, r, not any(k is Ellipsis for k in key)) if not out_shape else r


def _is_array_index(k) -> bool:
    return isinstance(k, (TracedArray, np.ndarray, list)) or (
        isinstance(k, (bool, np.bool_)))


def _advanced_getitem(ctx, x, key, loc):
    """``x[key]`` where some entries are integer arrays (numpy's advanced
    indexing; ints count as 0-d arrays beside them). The arrays broadcast
    together; their result axes replace the indexed axes where those are
    adjacent in the key, else they come first (numpy's rule). Built from
    basic slicing, a transpose that brings the indexed axes together, a
    reshape that merges them into one, and one gather along it at the
    flattened position (each index range-checked on its own axis)."""
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > x.ndim:  # numpy's IndexError comes before anything else
        raise IndexShapeError(f"too many indices: array is {x.ndim}-dimensional, but {n_real} "
                              f"were indexed{format_loc(loc)}.")
    if any(k is None for k in key):
        raise UnsupportedError(
            f"indexing with both integer arrays and None (np.newaxis) is not supported inside "
            f"@halojit.trace{format_loc(loc)}; index first, then add axes with "
            "np.expand_dims or a reshape.")
    key = tuple(_index_node(ctx, k, "indexing", loc) if _is_array_index(k) else k for k in key)
    entries = _expand_key(key, x.ndim, loc)  # per axis of x: a slice, an int or an index node
    adv = [ax for ax, k in enumerate(entries) if not isinstance(k, slice)]
    # adjacent as written: a `...` between two of them separates them even
    # where it stands for no axis (x[:, 1, ..., [0, 2]] on 3-D puts the
    # result axes first, as numpy does)
    written = [i for i, k in enumerate(key) if k is not Ellipsis and not isinstance(k, slice)]
    adjacent = written == list(range(written[0], written[0] + len(written)))
    r = getitem(x, tuple(k if isinstance(k, slice) else slice(None) for k in entries))
    sizes = [r.shape[ax] for ax in adv]
    first = adv[0]
    if not adjacent:  # result axes first
        r = transpose(r, tuple(adv) + tuple(ax for ax in range(r.ndim) if ax not in adv))
        first = 0
    merged = reshape(r, r.shape[:first] + (int(np.prod(sizes)),) + r.shape[first + len(adv):])
    shape = index_broadcast_shape([() if _is_int_index(entries[ax]) else entries[ax].shape
                                   for ax in adv], loc)
    flat = None
    for ax, size in zip(adv, sizes):
        pos = _position(ctx, entries[ax], size, ax, len(adv) == 1, loc)
        flat = pos if flat is None else flat * size + pos
    flat = broadcast_to(_tr(ctx, flat, loc), shape)
    return ctx.emit("take", [merged, flat], {"axis": first, "mode": "raise", "along": False}, loc)


def _position(ctx, k, size: int, axis: int, alone: bool, loc):
    """One advanced index entry's position along its axis (of ``size``),
    range-checked: an int as an int, an index array as a traced array,
    negative values wrapped unless the entry is the only one (the gather's
    "raise" mode wraps those itself)."""
    if _is_int_index(k):
        if not -size <= int(k) < size:
            raise IndexOutOfBoundsError(f"index {int(k)} is out of bounds for axis {axis} with "
                                        f"size {size}{format_loc(loc)}.")
        return int(k) % size
    _check_indices(ctx, k, size, axis, loc)
    t = TracedArray(k, ctx)
    if alone:
        return t
    t = t.astype(np.int64)  # the flattened position may pass 2**31
    return where(t < 0, t + size, t)


def setitem(x, key, value):
    """``x[key] = value`` on an array made inside the trace, as a new value of
    x: basic keys (ints, slices, None, ...) place the value by a small gather
    per sliced axis and a mask; a traced boolean mask of x's shape with a
    scalar value is np.where; index arrays known at call time or on several
    axes are a scatter (numpy_scatter: numpy's order, the last of repeated
    positions wins). ``x[key] += v`` (numpy: a write through the view
    x[key], then this) works too."""
    loc = user_loc()
    what = "item assignment"
    if x._is_input:
        raise TraceError(
            f"item assignment writes into an input argument or a view of one{format_loc(loc)}; "
            "traced functions must not modify their inputs. Work on a copy, or build the "
            "result with np.where or np.concatenate.")
    if getattr(x, "_readonly", None):
        x._check_writable(what)
    ctx = x._ctx
    key = _const_masks_as_positions(key if isinstance(key, tuple) else (key,), x.shape, loc)
    # x[k] += v: the view x[k] was written in place just before; x takes its value now
    if x._base is None and isinstance(value, TracedArray) and value._base is x and \
            value._seen == x._writes and x._view_writes == 1:
        x._through_view = ""
    v = _assigned_value(ctx, x, value, loc)
    if len(key) == 1 and isinstance(key[0], TracedArray) and key[0].dtype == np.bool_:
        if key[0].shape != x.shape:
            raise UnsupportedError(f"item assignment through a boolean mask of shape "
                                   f"{key[0].shape} into shape {x.shape}{format_loc(loc)}: "
                                   "only a mask of the array's own shape is supported.")
        if v.ndim:
            raise UnsupportedError(f"item assignment of an array through a traced boolean "
                                   f"mask{format_loc(loc)}: its size depends on the values; "
                                   "use np.where(mask, values, x).")
        new = where(key[0], v, x)
    elif any(_is_array_index(k) for k in key) and not _one_static_axis_index(key):
        # index arrays known at call time, or on several axes: a scatter
        from .numpy_scatter import scattered
        new = scattered(ctx, x, key, v, loc)
    else:
        for k in key:
            if isinstance(k, (np.ndarray, list)):
                continue
            if not (k is None or k is Ellipsis or isinstance(k, slice) or _is_int_index(k)):
                raise UnsupportedError(f"item assignment with a {type(k).__name__} index is "
                                       f"not supported inside @halojit.trace{format_loc(loc)}.")
        new = _placed(ctx, x, key, v, loc)
    root = x._root
    x._assign(new, what)
    if isinstance(value, TracedArray) and value._base is root:
        value._seen = root._writes  # the view still shows x[key]


def _assigned_value(ctx, x, value, loc):
    """``value`` in x's dtype as numpy's setitem casts it (unsafe; a Python
    int that does not fit raises OverflowError)."""
    if isinstance(value, TracedArray):
        return value if value.dtype == x.dtype else astype(value, x.dtype)
    if isinstance(value, (bool, int, float, np.generic)):
        return _tr(ctx, _scalar_as(value, x.dtype), loc)
    return _tr(ctx, np.asarray(value).astype(x.dtype), loc)


def _one_static_axis_index(key) -> bool:
    """Whether ``key``'s only array index is one 1-D list or numpy array (of
    positions, or a boolean mask of one axis): it places like a slice."""
    arrays = [k for k in key if _is_array_index(k)]
    return len(arrays) == 1 and isinstance(arrays[0], (np.ndarray, list)) and \
        np.ndim(arrays[0]) == 1


def _placed(ctx, x, key, v, loc):
    """x with ``v`` placed at a basic index ``key`` (or one with a single 1-D
    list of positions: numpy's order, the last of repeated positions wins)."""
    sel_shape, axes = [], []  # the shape x[key] has; per axis of x: positions or an int
    axis = 0
    for k in _expand_key(key, x.ndim, loc):
        if k is None:
            sel_shape.append(1)
            continue
        dim = x.shape[axis]
        if isinstance(k, (slice, np.ndarray, list)):
            if isinstance(k, slice):
                pos = np.arange(dim)[k]
            else:
                k = np.asarray(k)
                pos = np.arange(dim)[k if k.size else k.astype(np.intp)]  # numpy's IndexError
            sel_shape.append(len(pos))
            axes.append(pos)
        else:
            axes.append(_int_position(k, dim, axis, loc))
        axis += 1
    while v.ndim > len(sel_shape) and v.shape[0] == 1:  # numpy drops leading 1s
        v = reshape(v, v.shape[1:])
    try:
        v = broadcast_to(v, tuple(sel_shape))
    except ShapeError:
        raise ShapeError(f"could not broadcast input array from shape {v.shape} into shape "
                         f"{tuple(sel_shape)}{format_loc(loc)}.") from None
    # the value over x's axes: a length-1 axis where an int picks, no None axes
    v = reshape(v, tuple(1 if isinstance(a, int) else len(a) for a in axes))
    mask = None
    for ax, (a, dim) in enumerate(zip(axes, x.shape)):
        shape = [1] * x.ndim
        shape[ax] = dim
        hit = np.zeros(dim, bool)
        hit[a] = True
        if isinstance(a, int) or len(a) != dim or np.any(a != np.arange(dim)):
            if not isinstance(a, int) and len(a) > 0 and \
                    np.array_equal(a, np.arange(a[0], a[0] + len(a))):
                # a unit-step slice: the values shifted into place, a clamped
                # read (np.pad's edge mode) where a gather from a table of
                # positions kept a stencil loop from vectorizing: ten Jacobi
                # steps u[1:-1, 1:-1] = ... on (512, 512) float64 ran 16x
                # slower than numpy with the gather (2-core Intel VM)
                widths = [(0, 0)] * x.ndim
                widths[ax] = (int(a[0]), dim - int(a[0]) - len(a))
                v = ctx.emit("pad", [v], {"pad_width": tuple(widths), "mode": "edge",
                                          "value": 0}, loc)
            elif not isinstance(a, int) and len(a) > 0:  # spread the values out (last one wins)
                spot = np.zeros(dim, np.intp)
                spot[a] = np.arange(len(a))
                v = _take(ctx, v, ctx.constant(spot), ax, "clip", loc)
            m = _tr(ctx, hit.reshape(shape), loc)
            mask = m if mask is None else mask & m
    if mask is None:  # the whole array
        return copy(broadcast_to(v, x.shape))
    if v.size == 0:
        return copy(x)
    return where(mask, v, x)


# -- integer-array indexing (gathers) ----------------------------------------------------
def _index_node(ctx, indices, fname, loc):
    """``indices`` as an integer node: a traced array as it is, anything
    else (a list, a numpy array, an int) as a constant."""
    if isinstance(indices, TracedArray):
        node = indices._node
    else:
        arr = np.asarray(indices)
        if arr.dtype.kind == "f" and arr.size == 0:
            arr = arr.astype(np.intp)  # numpy accepts an empty list as indices
        node = ctx.constant(arr) if arr.dtype.kind in "iub" else None
        if node is None:
            raise _index_dtype_error(fname, arr.dtype, loc)
    if node.dtype.kind == "b":
        raise UnsupportedError(
            f"{fname}: boolean mask indexing gives a result whose shape depends on the "
            f"values, which a static trace cannot have{format_loc(loc)}; use "
            "np.where(mask, x, fill) instead (np.where(mask, x, 0).sum() for a masked sum).")
    if node.dtype.kind not in "iu":
        raise _index_dtype_error(fname, node.dtype, loc)
    return node


def _index_dtype_error(fname, dtype, loc):
    """numpy's IndexError for float index arrays in ``x[...]`` (a TypeError
    in np.take and friends)."""
    if fname == "indexing":
        return IndexTypeError(f"arrays used as indices must be of integer (or boolean) type, "
                              f"got {dtype}{format_loc(loc)}.")
    return DTypeError(f"{fname}: indices must be integers, got {dtype}{format_loc(loc)}.")


def index_broadcast_shape(shapes, loc) -> tuple:
    """The shape index arrays broadcast to, or numpy's IndexError."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        given = " ".join(str(tuple(s)) for s in shapes)
        raise IndexShapeError(f"shape mismatch: indexing arrays could not be broadcast together "
                              f"with shapes {given}{format_loc(loc)}.") from None


def _bounded_by(node, n: int) -> bool:
    """Whether ``node``'s values are known to lie in [0, n): an argmax or
    argmin over an axis no longer than n, seen through views."""
    while node.op in ("reshape", "broadcast_to", "transpose", "slice"):
        node = node.inputs[0]
    if node.op in ("argmax", "argmin"):
        (ax,) = node.params["axes"]
        return node.inputs[0].shape[ax] <= n
    return False


def _raise_out_of_bounds(values, n: int, axis: int, loc):
    if not values.size:
        return
    if values.dtype == np.uint64:  # numpy converts indices to intp: 2**64 - 1 is -1
        values = values.astype(np.int64)
    lo, hi = values.min(), values.max()
    bad = lo if lo < -n else hi if hi >= n else None
    if bad is not None:
        raise IndexOutOfBoundsError(f"index {bad} is out of bounds for axis {axis} with size "
                                    f"{n}{format_loc(loc)}.")


def _check_indices(ctx, node, n: int, axis: int, loc):
    """numpy's IndexError for indices outside [-n, n): now for constants,
    before every call's kernels for anything else (ctx.checks), unless the
    values are known to fit."""
    if node.op == "constant":
        _raise_out_of_bounds(node.params["value"].value, n, axis, loc)
    elif not _bounded_by(node, n):
        ctx.add_check(node, lambda v: _raise_out_of_bounds(v, n, axis, loc))


def _take(ctx, x, index, axis, mode, loc, along=False):
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}"
                         f"{format_loc(loc)}.")
    if mode == "raise":
        _check_indices(ctx, index, x.shape[axis], axis, loc)
    return ctx.emit("take", [x, index], {"axis": axis, "mode": mode, "along": along}, loc)


@implements(np.take)
def take(a, indices, axis=None, out=None, mode="raise"):
    _unsupported_kw("take", {"out": out})
    loc = user_loc()
    ctx = _ctx_of(a, indices)
    a = _tr(ctx, a, loc)
    ind = indices if isinstance(indices, TracedArray) else np.asarray(indices)
    if ind.dtype == np.bool_:  # np.take casts bools to intp: indices 0 and 1, not a mask
        indices = ind.astype(np.intp)
    index = _index_node(ctx, indices, "np.take", loc)
    if axis is None:
        a, axis = ravel(a), 0
    axis = normalize_axis(axis, a.ndim, "take", loc)
    return _take(ctx, a, index, axis, mode, loc)


@implements(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    loc = user_loc()
    ctx = _ctx_of(arr, indices)
    arr = _tr(ctx, arr, loc)
    ind = indices if isinstance(indices, TracedArray) else np.asarray(indices)
    if ind.dtype == np.bool_:
        raise IndexTypeError(f"np.take_along_axis: `indices` must be an integer array, got "
                             f"bool{format_loc(loc)}.")
    index = _index_node(ctx, indices, "np.take_along_axis", loc)
    if axis is None:
        if index.aval.ndim != 1:
            raise ShapeError(f"take_along_axis: with axis=None the indices must be 1-D, got "
                             f"{index.shape}{format_loc(loc)}.")
        arr, axis = ravel(arr), 0
    axis = normalize_axis(axis, arr.ndim, "take_along_axis", loc)
    return _take(ctx, arr, index, axis, "raise", loc, along=True)


@implements(np.repeat)
def repeat(a, repeats, axis=None):
    """A gather with a constant index vector: each position i appears
    repeats[i] times (the output's length must be known while tracing)."""
    loc = user_loc()
    ctx = _ctx_of(a)
    if isinstance(repeats, TracedArray):
        raise UnsupportedError(f"np.repeat: repeats must be known while tracing (the output's "
                               f"length depends on them){format_loc(loc)}; pass a Python int "
                               "or a numpy array.")
    a = _tr(ctx, a, loc)
    if axis is None:
        a, axis = ravel(a), 0
    elif a.ndim == 0:  # numpy repeats a 0-d array as a 1-d one (axis 0 or -1)
        a = reshape(a, (1,))
    axis = normalize_axis(axis, a.ndim, "repeat", loc)
    reps = np.asarray(repeats)
    if reps.dtype.kind not in "iu" and not (reps.dtype.kind == "b" or reps.size == 0):
        raise TypeError(f"np.repeat: repeats must be integers, got {reps.dtype}{format_loc(loc)}.")
    n = a.shape[axis]
    if reps.size == 1:
        # every element r times: a broadcast along a new axis, merged back
        # (a view, no index vector)
        r = int(reps.reshape(-1)[0])
        if r < 0:
            raise ShapeError(f"np.repeat: negative dimensions are not allowed{format_loc(loc)}.")
        shape = a.shape[:axis + 1] + (1,) + a.shape[axis + 1:]
        wide = broadcast_to(reshape(a, shape), shape[:axis + 1] + (r,) + shape[axis + 2:])
        return reshape(wide, a.shape[:axis] + (n * r,) + a.shape[axis + 1:])
    try:
        index = np.repeat(np.arange(n, dtype=np.intp), reps.astype(np.intp))
    except ValueError as e:  # negative counts, a length mismatch: numpy's message
        raise ShapeError(f"np.repeat: {e}{format_loc(loc)}.") from None
    small = np.int32 if n < 2**31 else np.intp
    return _take(ctx, a, ctx.constant(index.astype(small)), axis, "clip", loc)


# -- linear algebra -------------------------------------------------------------------
# A matrix-vector product at or above this many matrix elements is a product
# and a column sum (ColReduce) rather than a matmul; below it the Matmul
# template's one serial task wins (u @ W for (256, 256): 3.4 us against 5.9).
VECMAT_MIN_ELEMENTS = 1 << 20
# ... unless its columns are a multiple of this (the Matmul template's
# column block on every target): a one-row matmul then reads B in place, K
# split per task (templates.few_rows_mode). Float32, medians of 9
# interleaved, 2-core Zen 4 VM, ColReduce -> Matmul (numpy): (4096, 1024)
# 0.56 -> 0.14 ms (0.19), (2048, 2048) 0.48 -> 0.13 (0.145), (1024, 4096)
# 0.60 -> 0.34 (0.16), (4096, 4096) 3.0 -> 1.8 (1.6).
VECMAT_MATMUL_COLUMNS = IN_PLACE_COLUMNS
# ... or when it is at least this wide: passes.matmul.split_ragged_columns
# then reads all but its last columns in place. Column sum -> matmul
# (numpy), float32, medians of 9 interleaved, same VM: (4096, 1000) 0.50 ->
# 0.29 ms (0.19), (2048, 1500) 0.29 -> 0.17 (0.14), (2048, 1000) 0.12 ->
# 0.09 (0.07); at (4096, 800) equal (0.15-0.16), narrower the column sum
# won: (8192, 400) 0.25 against 0.31, (16384, 100) 0.13 against 0.18.
VECMAT_SPLIT_COLUMNS = 960


def _vector_product(ctx, a, b, dtype, loc):
    """A matmul with a 1-D operand as a product and a sum, or None to keep the
    Matmul template. A 1 x N or M x 1 matmul fills one lane of the
    template's register block and reads the matrix once per block; the
    product fuses into the reduction and streams it. Measured (2-core VM,
    float32, min of interleaved runs, numpy = OpenBLAS sgemv): a dot of 4096
    15 -> 0.7 us (numpy 0.9); x @ v for (4096, 4096) 3.8 -> 1.3 ms (numpy
    1.2), (256, 256) 16 -> 7 us (numpy 3.4), (100000, 3) 118 -> 63 us
    (numpy 46); u @ x for (4096, 4096) 3.8 -> 1.2 ms (numpy 1.0). A large u @ x
    whose width is a multiple of VECMAT_MATMUL_COLUMNS is a one-row matmul
    again, which now reads B in place (templates._apply_few_rows)."""
    a = TracedArray(ctx.cast(a, dtype, loc), ctx)
    b = TracedArray(ctx.cast(b, dtype, loc), ctx)
    if b.ndim == 1 and a.ndim > 1 and 1 <= b.size <= SHORT_CHANNELS:
        # X @ v over a few columns (an RGB image @ luma weights, points @ a
        # 3-vector): an elementwise sum of X's columns (see SHORT_CHANNELS),
        # from +0.0 as numpy's matmul sums (products of -0.0 give +0.0)
        acc = TracedArray(ctx.constant(np.zeros((), dtype)), ctx)
        for j in range(b.size):
            acc = acc + a[..., j] * b[j]
        return acc
    if b.ndim == 1:  # x @ v and the dot product: a row reduction of x * v
        return reduction("sum", a * b, -1, False, dtype)
    if b.size < VECMAT_MIN_ELEMENTS or (b.ndim == 2 and (
            b.shape[-1] % VECMAT_MATMUL_COLUMNS == 0 or b.shape[-1] >= VECMAT_SPLIT_COLUMNS)):
        return None  # the Matmul template (one row: B read in place, K split per task)
    # u @ x of a ragged width: a column reduction of u[:, None] * x
    return reduction("sum", reshape(a, (-1, 1)) * b, -2, False, dtype)


def _plain_transpose(x) -> bool:
    """x is the transpose of a 2-D value (x.T, np.transpose(x))."""
    node = x._node
    return node.op == "transpose" and node.params["perm"] == (1, 0)


@implements(np.matmul)
def matmul(a, b):
    loc = user_loc()
    ctx = _ctx_of(a, b)
    a, b = _tr(ctx, a, loc), _tr(ctx, b, loc)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: operands must have at least one dimension, got {a.shape} "
                         f"and {b.shape}{format_loc(loc)}; use * for scalars.")
    try:
        in_dts = np.matmul.resolve_dtypes((a.dtype, b.dtype, None))[:2]
    except Exception as e:
        raise DTypeError(f"matmul: no loop for {a.dtype} and {b.dtype}{format_loc(loc)}: {e}") from None
    if in_dts[0] == in_dts[1] and in_dts[0] in (np.float32, np.float64) and \
            (a.ndim == 1 or b.ndim == 1) and a.shape[-1] == b.shape[max(0, b.ndim - 2)]:
        # A.T @ v is v @ A, and v @ A.T is A @ v: the product then runs along
        # A's rows as it lies in memory, not down its columns (X.T @ r for X
        # (100000, 64): a row sum of X.T * r striding over X, 4.4 ms, against
        # r @ X read in place, numpy 1.4)
        if a.ndim == 2 and b.ndim == 1 and _plain_transpose(a):
            return matmul(b, TracedArray(a._node.inputs[0], ctx))
        if a.ndim == 1 and b.ndim == 2 and _plain_transpose(b):
            return matmul(TracedArray(b._node.inputs[0], ctx), a)
        vector = _vector_product(ctx, a, b, in_dts[0], loc)
        if vector is not None:
            return vector
    a2 = reshape(a, (1, a.shape[0])) if a.ndim == 1 else a
    b2 = reshape(b, (b.shape[0], 1)) if b.ndim == 1 else b
    r = ctx.emit("matmul", [ctx.cast(a2, in_dts[0], loc), ctx.cast(b2, in_dts[1], loc)], None, loc)
    if a.ndim == 1 or b.ndim == 1:
        shape = r.shape[:-2] + ((r.shape[-2],) if a.ndim > 1 else ()) + ((r.shape[-1],) if b.ndim > 1 else ())
        r = reshape(r, shape)
    return r


@implements(np.dot)
def dot(a, b, out=None):
    _unsupported_kw("dot", {"out": out})
    # numpy converts a Python scalar operand to an array: np.dot(x_f32, 2.0) is float64
    a, b = _array(a), _array(b)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return np.multiply(a, b)
    if np.ndim(b) <= 2:
        return matmul(a, b)
    # dot(a, b)[i, j, k, m] = sum(a[i, j, :] * b[k, :, m]): a's last axis
    # against b's second-to-last, the free axes of a then of b
    return np.tensordot(a, b, axes=([np.ndim(a) - 1], [np.ndim(b) - 2]))


@implements(np.outer)
def outer(a, b, out=None):
    return np.multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


@implements(np.einsum)
def einsum(subscripts, *operands, out=None, dtype=None, optimize=False, casting="safe", **kw):
    from .einsum import einsum as _einsum
    _unsupported_kw("einsum", dict(kw, out=out))
    if not isinstance(subscripts, str):  # einsum(a, [0, 1], b, [1, 2], [0, 2])
        subscripts, operands = _einsum_sublists((subscripts,) + operands)
    return _einsum(subscripts, operands, dtype, casting)


def _einsum_sublists(args) -> tuple[str, tuple]:
    """np.einsum's operand-and-sublist form as (subscripts, operands): axis
    numbers 0-25 as A-Z and 26-51 as a-z (numpy's own letters, so an
    implicit output keeps its order), Ellipsis as '...'."""
    def term(sub):
        out = []
        for k in sub:
            if k is Ellipsis:
                out.append("...")
            elif isinstance(k, (int, np.integer)) and 0 <= k < 52:
                out.append(chr(ord("A") + k) if k < 26 else chr(ord("a") + k - 26))
            else:
                raise ValueError(f"np.einsum: subscript {k!r} in a sublist: expected integers "
                                 f"in [0, 52) or Ellipsis{format_loc(user_loc())}.")
        return "".join(out)
    ops, terms = args[0::2], [term(sub) for sub in args[1::2]]
    if len(args) % 2:  # an output sublist ends the list
        ops, rhs = ops[:-1], "->" + term(args[-1])
    else:
        rhs = ""
    return ",".join(terms) + rhs, tuple(ops)


def _norm_axes(x, axis, fname, loc):
    if axis is None:
        return tuple(range(x.ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    if not all(_is_int_index(a) for a in axes):
        raise TypeError(f"np.linalg.{fname}: axis must be an int or a tuple of ints, got "
                        f"{axis!r}{format_loc(loc)}.")
    return tuple(normalize_axis(a, x.ndim, fname, loc) for a in axes)


def _zero_if_empty(x, *axes):
    """numpy's norms take max(..., initial=0): 0 over an empty axis. Of
    absolute values the initial changes nothing else, so it is passed only
    where an axis is empty."""
    return {"initial": 0} if any(x.shape[ax] == 0 for ax in axes) else {}


def _vector_norm(x, axes, ord, keepdims):
    """numpy's vector norms over ``axes`` (ord None or 2, 1, inf, -inf, 0 or any p)."""
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    if ord == np.inf:
        return np.abs(x).max(axis=axes, keepdims=keepdims, **_zero_if_empty(x, *axes))
    if ord == -np.inf:
        return np.abs(x).min(axis=axes, keepdims=keepdims)
    if ord == 0:
        return (x != 0).astype(x.dtype).sum(axis=axes, keepdims=keepdims)
    if ord == 1:
        return np.abs(x).sum(axis=axes, keepdims=keepdims)
    if ord is None or ord == 2:
        return np.sqrt((x * x).sum(axis=axes, keepdims=keepdims))
    s = (np.abs(x) ** ord).sum(axis=axes, keepdims=keepdims)
    return s ** np.reciprocal(np.asarray(ord, dtype=s.dtype))


def _matrix_norm(x, axes, ord, keepdims, loc):
    """numpy's matrix norms over two axes: 'fro', 1, -1, inf, -inf (2, -2 and
    'nuc' need an SVD: not traced)."""
    row, col = axes
    if row == col:
        raise ValueError("Duplicate axes given.")
    if ord in (2, -2, "nuc"):
        raise UnsupportedError(
            f"np.linalg.norm: ord={ord!r} of a matrix needs its singular values, which "
            f"halojit does not trace{format_loc(loc)}; use ord='fro', 1 or inf, or compute it "
            "in a `with halojit.exclude_from_trace():` block.")
    if ord in (None, "fro", "f"):
        r = np.sqrt((x * x).sum(axis=axes))
    elif ord in (1, -1):
        r = np.abs(x).sum(axis=row)
        r = r.max(axis=col - (col > row), **_zero_if_empty(r, col - (col > row))) \
            if ord == 1 else r.min(axis=col - (col > row))
    elif ord in (np.inf, -np.inf):
        r = np.abs(x).sum(axis=col)
        r = r.max(axis=row - (row > col), **_zero_if_empty(r, row - (row > col))) \
            if ord == np.inf else r.min(axis=row - (row > col))
    else:
        raise ValueError("Invalid norm order for matrices.")
    if keepdims:
        r = np.expand_dims(r, tuple(sorted(axes)))
    return r


def _norm_operand(x, loc):
    ctx = _ctx_of(x)
    x = _tr(ctx, x, loc)
    return x if x.dtype.kind in "fc" else x.astype(np.float64)  # numpy: ints as float64


@implements(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    """np.linalg.norm: vector norms over one axis (or of a flattened array),
    matrix norms over two, numpy's result dtype (float64 for integers)."""
    loc = user_loc()
    x = _norm_operand(x, loc)
    if axis is None and (ord is None or (ord in ("f", "fro") and x.ndim == 2)
                         or (ord == 2 and x.ndim == 1)):
        r = np.sqrt((x * x).sum())
        return reshape(r, (1,) * x.ndim) if keepdims else r
    axes = _norm_axes(x, axis, "norm", loc)
    if len(axes) == 1:
        return _vector_norm(x, axes, ord, keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, axes, ord, keepdims, loc)
    raise ValueError("Improper number of dimensions to norm.")


@implements(np.linalg.vector_norm)
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    loc = user_loc()
    x = _norm_operand(x, loc)
    if axis is None:
        r = _vector_norm(reshape(x, (-1,)), (0,), ord, False)
        return reshape(r, (1,) * x.ndim) if keepdims else r
    return _vector_norm(x, _norm_axes(x, axis, "vector_norm", loc), ord, keepdims)


@implements(np.linalg.matrix_norm)
def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    loc = user_loc()
    x = _norm_operand(x, loc)
    if x.ndim < 2:
        raise ValueError(f"np.linalg.matrix_norm: expected an array of at least 2 dimensions, "
                         f"got {x.ndim}{format_loc(loc)}.")
    return _matrix_norm(x, (x.ndim - 2, x.ndim - 1), ord, keepdims, loc)


# -- methods -------------------------------------------------------------------------
def _method_shape(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return args


def _scalar_method(fn):
    """An ndarray method that computes (x.max(), x.clip()): its 0-d result
    is a numpy scalar, whatever its handler built it from (a where)."""
    def method(*args, **kwargs):
        r = fn(*args, **kwargs)
        return r if kwargs.get("out") is not None else with_zero_d_kinds(r, True)
    return method


def _install_methods():
    T = TracedArray
    for name in ("sum", "mean", "max", "min", "prod", "any", "all", "var", "std"):
        setattr(T, name, (lambda n: lambda self, axis=None, dtype=None, out=None,
                          keepdims=False, **kw: HANDLERS[getattr(np, n)](
                              self, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)
                          if n not in ("max", "min", "any", "all") else
                          HANDLERS[getattr(np, n)](self, axis=axis, out=out, keepdims=keepdims, **kw))(name))
    T.argmax = lambda self, axis=None, out=None, *, keepdims=False: argmax(self, axis, out=out,
                                                                             keepdims=keepdims)
    T.argmin = lambda self, axis=None, out=None, *, keepdims=False: argmin(self, axis, out=out,
                                                                             keepdims=keepdims)
    T.cumsum = lambda self, axis=None, dtype=None, out=None: cumsum(self, axis, dtype, out=out)
    T.cumprod = lambda self, axis=None, dtype=None, out=None: cumprod(self, axis, dtype, out=out)
    T.reshape = lambda self, *shape, order="C": reshape(self, _method_shape(shape), order)
    T.transpose = lambda self, *axes: transpose(self, _method_shape(axes) or None)
    T.T = property(lambda self: transpose(self))
    T.mT = property(lambda self: swapaxes(self, -1, -2))
    T.astype = lambda self, dtype, order="K", casting="unsafe", subok=True, copy=True: astype(
        self, dtype, copy, casting)
    T.view = lambda self, dtype=None, type=None: view(self, dtype, type)
    T.clip = lambda self, min=None, max=None, out=None, **kw: clip(self, min, max, out=out, **kw)
    T.squeeze = lambda self, axis=None: squeeze(self, axis)
    T.take = lambda self, indices, axis=None, out=None, mode="raise": take(
        self, indices, axis, out=out, mode=mode)
    T.repeat = lambda self, repeats, axis=None: repeat(self, repeats, axis)
    T.flatten = lambda self, order="C": copy(reshape(self, (-1,), order))  # always a copy
    T.ravel = lambda self, order="C": reshape(self, (-1,), order)
    T.copy = lambda self, order="C": with_zero_d_kind(self, copy(self, order), zero_d_kind(self))
    T.swapaxes = swapaxes
    T.dot = lambda self, b, out=None: dot(self, b, out=out)
    T.round = lambda self, decimals=0, out=None: round_(self, decimals, out=out)
    T.__getitem__ = getitem

    def sort_in_place(self, axis=-1, kind=None, order=None, *, stable=None):
        self._check_writable("`x.sort()`")
        self._assign(sort(self, axis, kind, order, stable=stable), "`x.sort()`")
    T.sort = sort_in_place
    T.argsort = lambda self, axis=-1, kind=None, order=None, *, stable=None: argsort(
        self, axis, kind, order, stable=stable)
    T.__matmul__ = lambda self, other: matmul(self, other)
    T.__rmatmul__ = lambda self, other: matmul(other, self)

    def imatmul(self, other):
        self._check_writable("an in-place `@=`")
        return self._assign(matmul(self, other), "an in-place `@=`")
    T.__imatmul__ = imatmul

    def fill(self, value):
        self._check_writable("`x.fill()`")
        v = _tr(self._ctx, value if isinstance(value, TracedArray) else
                _scalar_as(value, self.dtype), user_loc())
        if v.ndim:
            raise ValueError("Input object to FillWithScalar is not a scalar")
        self._assign(_full_of(self, v), "`x.fill()`")
    T.fill = fill
    for name in ("sum", "mean", "max", "min", "prod", "any", "all", "var", "std", "argmax",
                 "argmin", "clip", "take", "dot", "round", "__matmul__", "__rmatmul__"):
        setattr(T, name, _scalar_method(getattr(T, name)))


_install_methods()


# -- np.asarray / np.array and friends on traced values ---------------------------------------
def holds_traced(a, depth: int = 0) -> bool:
    """Whether ``a`` is a traced array or a (nested) list/tuple holding one."""
    if isinstance(a, TracedArray):
        return True
    if isinstance(a, (list, tuple)) and depth < 32:
        return any(holds_traced(e, depth + 1) for e in a)
    return False


def _build_array(ctx, a, loc):
    if isinstance(a, TracedArray):
        return a
    if isinstance(a, (list, tuple)):
        if not a:
            raise UnsupportedError(f"np.array: an empty list beside traced arrays{format_loc(loc)}.")
        # numpy's list coercion: Python scalars in a list count as float64/int64 (not weak)
        return stack([_build_array(ctx, e, loc) for e in a])
    return TracedArray(ctx.as_node(np.asarray(a), loc), ctx)


def array_of_traced(fname: str, a, dtype=None, *, copy=np._NoValue, order=None, ndmin=0, **kw):
    """``np.asarray``, ``np.array``, ``np.asanyarray`` and ``np.ascontiguousarray``
    of a traced array or of lists holding some (tracer.trace_context routes
    them here while a trace runs): the value itself, as numpy returns the
    array itself when nothing needs converting; ``np.array`` copies (a new
    array object, so an in-place update of one leaves the other); a list
    stacks its elements, as numpy builds an array from one."""
    loc = user_loc()
    ctx = _ctx_of(a)
    _unsupported_kw(fname, {k: v for k, v in kw.items() if k not in ("like", "subok")})
    if order not in (None, "K", "A", "C"):
        raise UnsupportedError(f"np.{fname}(..., order={order!r}): only C order exists inside "
                               f"@halojit.trace{format_loc(loc)}.")
    r = _build_array(ctx, a, loc)
    if r is a and r._base is not None and (fname == "ascontiguousarray" or order in ("C", "F")):
        # numpy copies a view that is not contiguous and returns one that is:
        # the trace knows no layouts, so the result counts as a view (a later
        # write to either side makes the other refuse to be used)
        r = _view(a, TracedArray(a._node, ctx))
    if dtype is not None and (np.dtype(dtype) != r.dtype or r._node.aval.weak):
        r = astype(r, dtype)
    if fname == "ascontiguousarray":
        ndmin = max(ndmin, 1)
    if r.ndim < ndmin:
        r = reshape(r, (1,) * (ndmin - r.ndim) + tuple(r.shape))
    if fname == "ascontiguousarray" or order == "C":
        c = contiguous(r)
        if c is r:
            pass
        elif r._base is not None:  # a view (above): so is its copy
            r = _view(r, c)
        elif r is a:
            # numpy returns a contiguous array itself, as computed values
            # are: the same array, now promised C order where it is returned
            r._node = c._node
        else:
            r = c
    # np.array copies unless told copy=None/False; the others only for copy=True
    copies = (fname == "array") if copy is np._NoValue else bool(copy)
    if copies and (r is a or r._base is not None):
        r = TracedArray(r._node, ctx)  # a copy: no view of anything
    return with_zero_d_kind(a, r, False)  # np.asarray of a scalar: a 0-d array
