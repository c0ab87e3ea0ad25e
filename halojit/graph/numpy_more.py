"""More numpy functions as compositions of traced calls: the stacking helpers
``dstack``, ``column_stack``, ``block`` and ``append``; ``ediff1d``,
``fix``, ``resize``, ``delete`` and ``insert`` (positions known while
tracing); ``isin`` and ``choose``; ``real``/``imag``/``conj`` and friends
of real arrays; the array-API spellings ``matrix_transpose``, ``vecdot``,
``matvec``, ``vecmat`` and ``np.linalg``'s ``matmul``, ``vecdot``,
``outer``, ``trace``, ``diagonal``, ``tensordot``, ``cross``,
``matrix_transpose`` and ``matrix_power`` (a static, non-negative power);
``sliding_window_view`` (read-only windows as stacked shifted slices),
``unwrap``, ``lexsort`` and calls of ``np.vectorize`` objects; ``result_type`` and ``can_cast`` of traced arrays; and numpy
functions whose own Python code needs nothing more (``_NUMPY_PYTHON``).

As in numpy_composite, each follows numpy's own definition, so dtypes,
shapes and errors are numpy's.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedError, format_loc
from .numpy_api import COMPOSITE_UFUNCS, GUFUNCS, _array, _ctx_of, _tr, common_dtype, implements
from .numpy_composite import _check_per_call, _traced
from .ops import normalize_axis
from .tracer import TracedArray, user_loc


def _filled(like, shape, value, dtype):
    """A constant array inside the trace ``like`` belongs to."""
    return _tr(_ctx_of(like), np.full(shape, value, dtype), user_loc())


def _static_positions(obj, fname):
    """``obj`` as numpy has it (ints, a list, a slice), refusing traced positions."""
    if isinstance(obj, TracedArray):
        raise UnsupportedError(f"np.{fname}: positions computed inside the trace are not "
                               f"supported{format_loc(user_loc())}; pass Python ints.")
    return obj


# -- stacking ---------------------------------------------------------------------------
@implements(np.dstack)
def dstack(tup):
    arrs = np.atleast_3d(*tup)
    return np.concatenate(arrs if isinstance(arrs, tuple) else (arrs,), axis=2)


@implements(np.column_stack)
def column_stack(tup):
    cols = []
    for v in tup:
        a = _traced(_array(v))
        cols.append(np.reshape(a, (-1, 1)) if a.ndim < 2 else a)
    return np.concatenate(cols, axis=1)


def _block_depth(arrays, path=()):
    """(nesting depth of the lists, largest ndim of an array), numpy's checks."""
    if isinstance(arrays, tuple):
        raise TypeError(f"arrays{''.join(f'[{i}]' for i in path)} is a tuple. Only lists can be "
                        "used to arrange blocks, and np.block does not allow implicit "
                        "conversion from tuple to ndarray.")
    if isinstance(arrays, list):
        if not arrays:
            raise ValueError(f"List at arrays{''.join(f'[{i}]' for i in path)} cannot be empty")
        found = [_block_depth(a, path + (i,)) for i, a in enumerate(arrays)]
        if len({d for d, _ in found}) > 1:
            raise ValueError("List depths are mismatched. First element was at depth "
                             f"{found[0][0] + len(path) + 1}, but there is an element at a "
                             "different depth.")
        return found[0][0] + 1, max(n for _, n in found)
    return 0, np.ndim(arrays)


@implements(np.block)
def block(arrays):
    depth, max_ndim = _block_depth(arrays)
    ndim = max(depth, max_ndim)

    def build(a, level):
        if level == depth:
            a = _traced(_array(a))
            return np.reshape(a, (1,) * (ndim - a.ndim) + tuple(a.shape))
        return np.concatenate([build(x, level + 1) for x in a], axis=-(depth - level))
    return build(arrays, 0)


@implements(np.append)
def append(arr, values, axis=None):
    arr, values = _traced(_array(arr)), _array(values)
    if axis is None:
        return np.concatenate((np.ravel(arr), np.ravel(values)), axis=0)
    return np.concatenate((arr, values), axis=axis)


# -- differences, rounding, resizing ------------------------------------------------------------
@implements(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    a = np.ravel(_traced(_array(ary)))
    parts = []
    for extra, what in ((to_begin, "to_begin"), (to_end, "to_end")):
        if extra is None:
            parts.append(None)
            continue
        e = _array(extra)
        if not np.can_cast(e.dtype, a.dtype, casting="same_kind"):
            raise TypeError(f"dtype of `{what}` must be compatible with input `ary` under the "
                            "`same_kind` rule.")
        parts.append(np.ravel(e).astype(a.dtype))
    d = a[1:] - a[:-1]
    pieces = [p for p in (parts[0], d, parts[1]) if p is not None]
    return np.concatenate(pieces) if len(pieces) > 1 else d


@implements(np.fix)
def fix(x, out=None):
    x = _traced(_array(x))
    return np.where(x >= 0, np.floor(x), np.ceil(x))


@implements(np.resize)
def resize(a, new_shape):
    a = np.ravel(_traced(_array(a)))
    shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(new_shape)
    if any(s < 0 for s in shape):
        raise ValueError("all elements of `new_shape` must be non-negative")
    total = int(np.prod(shape, dtype=np.int64))
    if a.size == 0 or total == 0:  # numpy: zeros
        return _filled(a, shape, 0, a.dtype)
    reps = -(-total // a.size)
    return np.reshape(np.concatenate((a,) * reps)[:total], shape)


def _along(arr, axis, fname):
    """(arr, axis): flattened for axis None, as numpy's delete and insert do."""
    arr = _traced(_array(arr))
    if axis is None:
        return np.ravel(arr), 0
    return arr, normalize_axis(axis, arr.ndim, fname, user_loc())


@implements(np.delete)
def delete(arr, obj, axis=None):
    arr, axis = _along(arr, axis, "delete")
    keep = np.delete(np.arange(arr.shape[axis]), _static_positions(obj, "delete"))
    return np.take(arr, keep, axis=axis) if keep.size != arr.shape[axis] else np.copy(arr)


@implements(np.insert)
def insert(arr, obj, values, axis=None):
    arr, axis = _along(arr, axis, "insert")
    n = arr.shape[axis]
    pos = _static_positions(obj, "insert")
    idx = pos if isinstance(pos, slice) else np.asarray(pos)
    if isinstance(values, TracedArray):
        vals = _traced(_array(values)).astype(arr.dtype)
    else:  # numpy's own np.array(values, dtype=): -1.5 into uint16 is its OverflowError
        try:
            vals = np.array(values, dtype=arr.dtype)
        except (ValueError, OverflowError) as ex:
            raise type(ex)(f"np.insert: values {values!r} cannot be stored in an array of "
                           f"{arr.dtype} ({ex}){format_loc(user_loc())}; expected values that fit "
                           f"{arr.dtype}.") from None
    vals = np.reshape(vals, (1,) * (arr.ndim - vals.ndim) + tuple(np.shape(vals)))
    if not isinstance(idx, slice) and idx.size == 1:
        if idx.ndim == 0:  # numpy: values[0] goes along the axis (a[:, 0:1] = ...)
            vals = np.moveaxis(vals, 0, axis)
        count = vals.shape[axis]  # every value, at the one position
    else:
        count = len(np.arange(n)[idx]) if isinstance(idx, slice) else idx.size
    shape = list(arr.shape)
    shape[axis] = count
    vals = np.broadcast_to(_tr(_ctx_of(arr), vals, user_loc()), tuple(shape))
    order = np.insert(np.arange(n), pos, n + np.arange(count))  # numpy's own placement
    return np.take(np.concatenate((arr, vals), axis=axis), order, axis=axis)


# -- membership and choice -------------------------------------------------------------------
@implements(np.isin)
def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    e = _traced(_array(element))
    t = np.ravel(_array(test_elements))
    if t.size == 0:
        hit = _filled(e, e.shape, False, bool)
    else:
        hit = np.any(np.expand_dims(e, -1) == t, axis=-1)
    return ~hit if invert else hit


@implements(np.choose)
def choose(a, choices, out=None, mode="raise"):
    loc = user_loc()
    ctx = _ctx_of(a, choices)
    idx = _tr(ctx, _array(a), loc)
    if not np.can_cast(idx.dtype, np.intp, "safe"):  # numpy's cast: uint64 is not safe either
        raise TypeError(f"np.choose: cannot cast the index array from {idx.dtype} to "
                        f"{np.dtype(np.intp)} according to the rule 'safe'{format_loc(loc)}; "
                        "expected a bool or an integer array that fits int64.")
    opts = [_tr(ctx, c, loc) for c in choices]  # Python numbers stay weak, as in numpy
    n = len(opts)
    if mode == "wrap":
        idx = idx % n
    elif mode == "clip":
        idx = np.clip(idx, 0, n - 1)
    elif mode == "raise":
        _check_per_call(ctx, np.any((idx < 0) | (idx >= n)),
                        lambda: ValueError("invalid entry in choice array"))
    else:
        raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    dt, _ = common_dtype([o._node for o in opts])
    r = opts[-1].astype(dt)
    for k in range(n - 2, -1, -1):
        r = np.where(idx == k, opts[k].astype(dt), r)
    return r


# -- real arrays: real, imag, conj ------------------------------------------------------------
@implements(np.real)
def real(val):
    return _traced(_array(val)).real


@implements(np.imag)
def imag(val):
    return _traced(_array(val)).imag


@implements(np.iscomplexobj)
def iscomplexobj(x):
    return False


@implements(np.isrealobj)
def isrealobj(x):
    return True


@implements(np.iscomplex)
def iscomplex(x):
    return _filled(x, np.shape(x), False, bool)


@implements(np.isreal)
def isreal(x):
    return _filled(x, np.shape(x), True, bool)


def _real_part(self):
    from .numpy_api import _view
    return _view(self, TracedArray(self._node, self._ctx))  # a view, as numpy's


def _imag_part(self):
    return _filled(self, self.shape, 0, self.dtype)  # numpy: zeros (read-only there)


TracedArray.real = property(_real_part)
TracedArray.imag = property(_imag_part)
TracedArray.conj = TracedArray.conjugate = lambda self: self  # numpy: a real array itself
COMPOSITE_UFUNCS["conjugate"] = lambda x: np.copy(x)  # real: a copy (bool: int8, numpy's loop)


# -- array-API spellings ----------------------------------------------------------------
def _matrix_transpose(x):
    x = _traced(_array(x))
    if x.ndim < 2:
        raise ValueError(f"Input array must be at least 2-dimensional, but it is {x.ndim}")
    return np.swapaxes(x, -1, -2)


implements(np.matrix_transpose, np.linalg.matrix_transpose)(_matrix_transpose)


def _vecdot(x1, x2, axis=-1):
    """sum(x1 * x2) over ``axis`` in the common dtype (int8 stays int8, bool is any(and))."""
    ctx = _ctx_of(x1, x2)
    loc = user_loc()
    a, b = _tr(ctx, _array(x1), loc), _tr(ctx, _array(x2), loc)
    for t in (a, b):
        if t.ndim == 0:
            raise ValueError("vecdot: Input operand does not have enough dimensions")
    a, b = np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1)
    if a.shape[-1] != b.shape[-1]:
        raise ShapeError(f"vecdot: the vectors have lengths {a.shape[-1]} and {b.shape[-1]}"
                         f"{format_loc(loc)}.")
    dt, _ = common_dtype([a._node, b._node])
    if dt.kind == "b":
        return np.any(a & b, axis=-1)
    if dt == np.float16:  # numpy's half loop sums in float32, rounds once
        return _vecdot(a.astype(np.float32), b.astype(np.float32)).astype(dt)
    return np.sum(a.astype(dt) * b.astype(dt), axis=-1, dtype=dt)


@implements(np.linalg.vecdot)
def linalg_vecdot(x1, x2, /, *, axis=-1):
    return _vecdot(x1, x2, axis)


def _gufunc_axis(name, kwargs):
    axis = kwargs.pop("axis", None)
    if kwargs:
        raise UnsupportedError(f"np.{name}: arguments {sorted(kwargs)} are not supported inside "
                               f"@halojit.trace{format_loc(user_loc())}.")
    return -1 if axis is None else axis


def vecdot_ufunc(x1, x2, **kwargs):
    return _vecdot(x1, x2, _gufunc_axis("vecdot", kwargs))


def matvec_ufunc(x1, x2, **kwargs):
    _gufunc_axis("matvec", kwargs)
    return _vecdot(x1, np.expand_dims(_traced(_array(x2)), -2), -1)


def vecmat_ufunc(x1, x2, **kwargs):
    _gufunc_axis("vecmat", kwargs)
    return _vecdot(np.expand_dims(_traced(_array(x1)), -1), x2, -2)


# gufuncs: numpy_api.apply_ufunc sends them here with the raw operands
GUFUNCS.update({"vecdot": vecdot_ufunc, "matvec": matvec_ufunc, "vecmat": vecmat_ufunc})


@implements(np.linalg.matmul)
def linalg_matmul(x1, x2, /):
    return np.matmul(x1, x2)


@implements(np.linalg.outer)
def linalg_outer(x1, x2, /):
    if np.ndim(x1) != 1 or np.ndim(x2) != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are {np.ndim(x1)}D "
                         f"and {np.ndim(x2)}D.")
    return np.outer(x1, x2)


@implements(np.linalg.trace)
def linalg_trace(x, /, *, offset=0, dtype=None):
    return np.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


@implements(np.linalg.diagonal)
def linalg_diagonal(x, /, *, offset=0):
    return np.diagonal(x, offset=offset, axis1=-2, axis2=-1)


@implements(np.linalg.tensordot)
def linalg_tensordot(x1, x2, /, *, axes=2):
    return np.tensordot(x1, x2, axes=axes)


@implements(np.linalg.cross)
def linalg_cross(x1, x2, /, *, axis=-1):
    if np.shape(x1)[axis] != 3 or np.shape(x2)[axis] != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but they "
                         f"are {np.shape(x1)[axis]} and {np.shape(x2)[axis]} dimensional instead.")
    return np.cross(x1, x2, axis=axis)


@implements(np.linalg.matrix_power)
def matrix_power(a, n):
    a = _traced(_array(a))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
    if not isinstance(n, (int, np.integer)):
        raise TypeError("exponent must be an integer")
    if n < 0:
        raise UnsupportedError(f"np.linalg.matrix_power with a negative power needs the "
                               f"inverse, which halojit does not trace{format_loc(user_loc())}.")
    if n == 0:
        eye = _filled(a, (a.shape[-1],) * 2, 0, a.dtype) + np.eye(a.shape[-1], dtype=a.dtype)
        return np.copy(np.broadcast_to(eye, a.shape))
    result, square = None, a
    while n:  # binary powers, as numpy's
        if n & 1:
            result = square if result is None else np.matmul(result, square)
        n >>= 1
        if n:
            square = np.matmul(square, square)
    return result if result is not a else np.copy(a)



# -- windows ------------------------------------------------------------------------------
@implements(np.lib.stride_tricks.sliding_window_view)
def sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    """numpy's windows view as a new (read-only) array: for each windowed
    axis, the window's offsets are unit-step slices stacked along a new last
    axis (a 1-D moving window is then an elementwise kernel of shifted
    reads). Checks and messages as numpy's."""
    if writeable:
        raise UnsupportedError("sliding_window_view(writeable=True) is not supported inside "
                               f"@halojit.trace{format_loc(user_loc())}: its windows share memory.")
    x = _traced(_array(x))
    window = tuple(window_shape) if np.iterable(window_shape) else (window_shape,)
    window = tuple(int(w) for w in window)
    if any(w < 0 for w in window):
        raise ValueError("`window_shape` cannot contain negative values")
    if axis is None:
        axes = tuple(range(x.ndim))
        if len(window) != len(axes):
            raise ValueError(f"Since axis is `None`, must provide window_shape for all "
                             f"dimensions of `x`; got {len(window)} window_shape elements "
                             f"and `x.ndim` is {x.ndim}.")
    else:
        axes = tuple(normalize_axis(a, x.ndim, "sliding_window_view", user_loc())
                     for a in (axis if np.iterable(axis) else (axis,)))
        if len(window) != len(axes):
            raise ValueError(f"Must provide matching length window_shape and axis; got "
                             f"{len(window)} window_shape elements and {len(axes)} axes "
                             "elements.")
    trimmed = list(x.shape)
    for ax, w in zip(axes, window):
        if trimmed[ax] < w:
            raise ValueError("window shape cannot be larger than input array shape")
        trimmed[ax] -= w - 1
    if 0 in window:
        r = np.zeros_like(x, shape=tuple(trimmed) + window)
        r._readonly = "sliding_window_view"
        return r
    y = x
    for ax, w in zip(axes, window):
        n = y.shape[ax] - w + 1
        def cut(j, ax=ax, n=n):
            return tuple(slice(j, j + n) if d == ax else slice(None) for d in range(y.ndim))
        y = np.stack([y[cut(j)] for j in range(w)], axis=-1)
    r = np.copy(y)
    r._readonly = "sliding_window_view"  # numpy's windows are a read-only view
    return r


def vectorize_call(vf, args, kwargs):
    """``np.vectorize(pyfunc)(*args)`` with traced arguments (tracer wraps
    np.vectorize's __call__ while a trace runs): ``pyfunc`` is traced once
    on the whole broadcast arrays rather than called per element, which
    gives numpy's result wherever pyfunc is made of array operations (its
    arithmetic promotes as on numpy scalars, NEP 50). A Python ``if`` on a
    value raises TraceError at that line (np.where instead), as a math.*
    function of a value does. ``otypes`` cast the outputs; ``excluded``
    arguments pass as they are; a ``signature`` is refused."""
    loc = user_loc()
    if vf.signature is not None:
        raise UnsupportedError(f"np.vectorize with a signature is not supported inside "
                               f"@halojit.trace{format_loc(loc)}; write the function with "
                               "array operations over the core axes instead.")
    excluded = vf.excluded
    pos = [i for i in range(len(args)) if i not in excluded]
    names = [k for k in kwargs if k not in excluded]
    values = [_traced(_array(args[i])) for i in pos] + [_traced(_array(kwargs[k])) for k in names]
    shape = np.broadcast_shapes(*[v.shape for v in values]) if values else ()
    if not vf.otypes and 0 in shape:
        raise ValueError("cannot call `vectorize` on size 0 inputs unless `otypes` is set")
    values = [np.broadcast_to(v, shape) for v in values]
    call_args, call_kwargs = list(args), dict(kwargs)
    for i, v in zip(pos, values):
        call_args[i] = v
    for k, v in zip(names, values[len(pos):]):
        call_kwargs[k] = v
    result = vf.pyfunc(*call_args, **call_kwargs)
    outs = result if isinstance(result, tuple) else (result,)
    types = vf.otypes or ""
    if types and len(types) != len(outs):
        raise ValueError(f"Invalid number of outputs: np.vectorize's otypes {types!r} name "
                         f"{len(types)}, the function returned {len(outs)}{format_loc(loc)}.")
    fixed = []
    for k, r in enumerate(outs):
        if not isinstance(r, TracedArray):  # a constant result (lambda x: 3)
            r = np.asarray(r)
        r = _traced(_array(r))  # a weak Python scalar made strong, as numpy's
        if types:
            r = r.astype(np.dtype(types[k]))
        fixed.append(np.copy(np.broadcast_to(r, shape)))  # a fresh array, as numpy's
    return tuple(fixed) if isinstance(result, tuple) else fixed[0]


@implements(np.lexsort)
def lexsort(keys, axis=-1):
    """numpy's lexsort: the last key sorts first. As successive stable
    argsorts, from the first key to the last, each of the next key's values
    in the order so far (stability keeps the earlier keys' order among its
    ties)."""
    if isinstance(keys, (TracedArray, np.ndarray)):
        keys = [keys[i] for i in range(keys.shape[0])] if np.ndim(keys) > 0 else [keys]
    keys = [_traced(_array(k)) for k in keys]
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    shape = keys[0].shape
    if any(k.shape != shape for k in keys):
        raise ValueError("all keys need to be the same shape")
    if not shape:  # numpy sorts 0-d keys as one value: position 0
        return np.zeros_like(keys[0], dtype=np.intp)
    order = np.argsort(keys[0], axis=axis, kind="stable")
    for k in keys[1:]:
        step = np.argsort(np.take_along_axis(k, order, axis=axis), axis=axis, kind="stable")
        order = np.take_along_axis(order, step, axis=axis)
    return order


@implements(np.unwrap)
def unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """numpy's unwrap, step for step (its masked copies as np.where): each
    jump between neighbours larger than ``discont`` is brought back within
    half a ``period``, the corrections summed along ``axis``."""
    p = _traced(_array(p))
    dd = np.diff(p, axis=axis)
    if discont is None:
        discont = period / 2
    ax = normalize_axis(axis, p.ndim, "unwrap", user_loc())
    later = tuple(slice(1, None) if d == ax else slice(None) for d in range(p.ndim))
    dtype = np.result_type(dd, period)
    if np.issubdtype(dtype, np.integer):
        high, rem = divmod(period, 2)
        ambiguous = rem == 0
    else:
        high, ambiguous = period / 2, True
    low = -high
    ddmod = np.mod(dd - low, period) + low
    if ambiguous:  # a jump of exactly half a period keeps its sign
        ddmod = np.where((ddmod == low) & (dd > 0), np.asarray(high).astype(ddmod.dtype), ddmod)
    correct = ddmod - dd
    correct = np.where(abs(dd) < discont, np.zeros((), correct.dtype), correct)
    up = p.astype(dtype)  # a copy, as numpy's array(p, copy=True, dtype=dtype)
    up[later] = p[later] + correct.cumsum(axis)
    return up


# -- numpy's own Python code, run on traced arrays ----------------------------------------
# These numpy functions are Python compositions of calls halojit traces; their
# ``_implementation`` (the function behind numpy's dispatcher) runs as is.
# Each is checked against numpy in tests/ops/test_more_numpy.py.
_NUMPY_PYTHON = ("cumulative_sum", "cumulative_prod", "i0", "polyadd", "polysub",
                 "rollaxis", "tril_indices_from", "triu_indices_from", "diag_indices_from",
                 "unstack", "ix_", "isposinf", "isneginf", "histogram_bin_edges")
for _name in _NUMPY_PYTHON:
    _f = getattr(np, _name, None)
    if _f is not None and hasattr(_f, "_implementation"):
        implements(_f)(_f._implementation)


def _dtype_of(x):
    """What numpy's dtype functions see for ``x``: a traced array's dtype, or
    for a weak Python scalar the Python type (NEP 50: it adapts)."""
    if isinstance(x, TracedArray):
        if x._node.aval.weak:
            return {"b": bool, "i": int, "u": int, "f": float}[x.dtype.kind]
        return x.dtype
    return x


@implements(np.result_type)
def result_type(*arrays_and_dtypes):
    return np.result_type(*[_dtype_of(x) for x in arrays_and_dtypes])


@implements(np.can_cast)
def can_cast(from_, to, casting="safe"):
    return np.can_cast(from_.dtype if isinstance(from_, TracedArray) else from_, to, casting)
