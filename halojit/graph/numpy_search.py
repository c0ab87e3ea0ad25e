"""np.searchsorted, np.digitize, np.interp, np.convolve and np.correlate
inside traces, composed of other traced numpy calls.

The position of a value among n sorted ones is a branchless binary search
(``_search_sorted``): a static graph has no data-dependent loops, but it
has gathers, so the search is ceil(log2(n + 1)) unrolled steps of a
gather from the sorted array, a compare and a select, one elementwise
chain per looked-up value that fuses into one kernel (vector gathers, both
cores). On a sorted array the answer is numpy's, NaN sorting last as
numpy's; on an unsorted one (which numpy does not check) the two searches
may stop at different places.

np.correlate and np.convolve are ``MAX_TAPS`` shifted multiply-adds at most
(one per element of the shorter operand), summed in order; numpy sums
each output as a dot product (BLAS for floats), so float results may differ
in the last bits. Integer results wrap exactly as numpy's.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError, UnsupportedError, format_loc
from .numpy_api import _array, _ctx_of, _tr, _unsupported_kw, implements, reshape, take
from .tracer import TracedArray, user_loc

# Before the binary search, a value's position was a count of the sorted
# values below it (``(a < v[..., None]).sum(-1)``, len(a) compares each)
# and a was limited to 1024 values. 2-core AVX-512 VM (Zen 4),
# np.searchsorted of 2**20 random float32 values into n sorted ones,
# medians of 7 interleaved calls, count / search / numpy: n = 16 2.2 / 2.1
# / 20.7 ms, 64 5.6 / 2.1 / 35, 256 14.8 / 2.7 / 51, 1024 50 / 3.5 / 67;
# search / numpy: 4096 4.3 / 76, 65536 10.0 / 121, 2**20 24.5 / 235.
# Elements of the shorter convolve/correlate operand: each becomes a shifted
# multiply-add, and compile time grows with them. Same VM, float32 convolve
# of 2**20 values, mode "same": 8 taps 0.49 ms (numpy 1.65), first call
# 0.17 s; 32 taps 2.3 ms (12.1), 0.39 s; 64 taps 5.0 ms (14.3), 0.79 s;
# 256 taps compiled for 6.5 s.
MAX_TAPS = 64


def _vector(ctx, x, fname, what, loc, ndmin=False):
    """``x`` as a traced 1-D array (np.asarray semantics: Python scalars are
    strong); numpy's ValueError (a ShapeError) for any other rank."""
    x = _tr(ctx, _array(x), loc)
    if ndmin and x.ndim == 0:
        x = reshape(x, (1,))
    if x.ndim != 1:
        raise ShapeError(f"np.{fname}: {what} must be 1-D, got shape {x.shape}{format_loc(loc)}.")
    return x


def _limit(fname, what, n, limit, loc, why):
    if n > limit:
        raise UnsupportedError(
            f"np.{fname}: {what} has {n} elements, more than the {limit} halojit traces"
            f"{format_loc(loc)}; {why}. Compute it outside the traced function or in a "
            "`with halojit.exclude_from_trace():` block.")


def _isnan(x):
    return np.isnan(x) if x.dtype.kind == "f" else None


# -- searchsorted / digitize ---------------------------------------------------------
def _search_sorted(ctx, a, v, right, loc):
    """How many of the sorted 1-D ``a`` go before each ``v`` (numpy's
    searchsorted), by binary search. Both compare in their common dtype,
    ``v`` converted as np.asarray does (a Python float is float64 even
    beside a float32 ``a``: numpy's searchsorted does not follow NEP 50).

    ``pos`` counts the values known to go before ``v``; each step, from the
    largest power of two not above n down to 1, adds ``step`` when
    a[pos + step - 1] goes before ``v`` too (and pos + step <= n). Positions
    are int32 inside the chain (the gathers' own index type; half the
    vector registers of intp) and intp at the end.

    numpy's order puts NaN last. For a value that is not NaN, a[i] goes
    before it when a[i] < v (side 'left') or a[i] <= v ('right'), both
    false for a NaN a[i]: the steps need no NaN tests. A NaN ``v`` goes
    after every value that is not NaN ('left') or after all of them
    ('right'), set after the search: each NaN test in the steps had
    doubled the kernel (2.5 s to compile a search of 2**16 values)."""
    v = _tr(ctx, v, loc)
    dt = np.result_type(a.dtype, v.dtype)  # by dtype: a weak Python float is float64 here
    a, v = a.astype(dt), v.astype(dt)
    n = a.shape[0]
    if n >= 2 ** 31:
        raise UnsupportedError(f"np.searchsorted: the sorted array has {n} elements, more "
                               f"than the 2**31 - 1 halojit searches{format_loc(loc)}.")
    if n == 0:
        return np.zeros_like(v, dtype=np.intp)
    top = 1 << (n.bit_length() - 1)

    def before(ai):
        return (ai <= v) if right else (ai < v)

    # the first step compares with one element (a gather, not a slice: the
    # Elementwise template inlines gathers; a slice sent the search to
    # Adams2019, 5 s to schedule for 2**16 values)
    pos = np.where(before(_at(a, top - 1)), np.int32(top), np.int32(0))
    step = top >> 1
    while step:
        cand = pos + np.int32(step)
        ok = before(take(a, cand - np.int32(1), mode="clip"))
        if 2 * top - step > n:  # pos <= 2 * top - 2 * step here: cand may pass n
            ok = ok & (cand <= np.int32(n))
        pos = np.where(ok, cand, pos)
        step >>= 1
    if dt.kind == "f":  # a NaN v: past the values that are not NaN, or past all
        after_nan = np.int32(n) if right else np.sum(~np.isnan(a), dtype=np.int32)
        pos = np.where(np.isnan(v), after_nan, pos)
    return pos.astype(np.intp)


def _check_side(fname, side, loc):
    if not isinstance(side, str):
        raise TypeError(f"np.{fname}: side must be 'left' or 'right', got "
                        f"{type(side).__name__}{format_loc(loc)}.")
    if side not in ("left", "right"):
        raise ValueError(f"np.{fname}: search side must be one of 'left' or 'right', got "
                         f"{side!r}{format_loc(loc)}.")


def _sorter_range_check(n, loc):
    def check(s):
        s = np.asarray(s)
        if s.size and (s.min() < 0 or s.max() >= n):  # numpy: ValueError, no wrapping
            raise ValueError(f"np.searchsorted: Sorter index out of range: expected indices "
                             f"in [0, {n}), got {s.min()}..{s.max()}{format_loc(loc)}.")
    return check


@implements(np.searchsorted)
def searchsorted(a, v, side="left", sorter=None):
    loc = user_loc()
    _check_side("searchsorted", side, loc)
    ctx = _ctx_of(a, v, sorter)
    a = _vector(ctx, a, "searchsorted", "a", loc)
    n = a.shape[0]
    if sorter is not None:
        s = _array(sorter)
        if s.dtype.kind not in "iu":
            raise TypeError(f"np.searchsorted: sorter must only contain integers, got "
                            f"{s.dtype}{format_loc(loc)}.")
        if s.ndim != 1 or s.shape[0] != n:
            raise ValueError(f"np.searchsorted: sorter.size must equal a.size: expected shape "
                             f"({n},), got {s.shape}{format_loc(loc)}.")
        check = _sorter_range_check(n, loc)
        if isinstance(s, TracedArray):
            node = s._node
            if not (node.op == "argsort" and node.inputs[0].shape == (n,)):  # those fit
                ctx.add_check(node, check)  # before the call's kernels, as take's
        else:
            check(s)
        a = take(a, s, mode="clip")  # in range, checked above
    return _search_sorted(ctx, a, v, side == "right", loc)


def _monotonicity(b):
    """numpy's digitize rule, on the float64 values: 1 increasing (or all
    equal, or empty), -1 decreasing, 0 neither. Leading equal values are
    skipped; the first differing pair decides the direction (a NaN there
    counts as decreasing, as numpy's `last < next` test is false); every
    later pair must not go the other way."""
    b = np.asarray(b, dtype=np.float64)
    if b.size == 0:
        return 1
    differ = np.flatnonzero(b[1:] != b[0])
    if differ.size == 0:
        return 1
    i = differ[0] + 1
    last, nxt = b[i:-1], b[i + 1:]
    if b[0] < b[i]:
        return 0 if np.any(last > nxt) else 1
    return 0 if np.any(last < nxt) else -1


@implements(np.digitize)
def digitize(x, bins, right=False):
    loc = user_loc()
    if isinstance(bins, TracedArray):
        raise UnsupportedError(
            f"np.digitize: bins must be known while tracing (a numpy array or a list), got a "
            f"traced array{format_loc(loc)}; whether they increase or decrease decides the "
            "formula. Pass bins as a global, a closure or a static argument.")
    b = np.array(bins)  # a copy, embedded as a constant: the direction is decided now
    if b.ndim != 1:
        raise ShapeError(f"np.digitize: bins must be one-dimensional, got shape {b.shape}"
                         f"{format_loc(loc)}.")
    if b.dtype.kind == "c":
        raise DTypeError(f"np.digitize: bins must be real, got {b.dtype}{format_loc(loc)}.")
    mono = _monotonicity(b)
    if mono == 0:
        raise ValueError(f"np.digitize: bins must be monotonically increasing or decreasing, "
                         f"got {b!r}{format_loc(loc)}.")
    side = "left" if right else "right"  # swapped: digitize counts the bins at or below x
    if mono == -1:  # count on the reversed bins, from the other end
        return len(b) - searchsorted(b[::-1], x, side=side)
    return searchsorted(b, x, side=side)


def _at(a, i):
    """``a[i]`` of a 1-D traced array, as a gather."""
    return take(a, np.int32(i), mode="clip")


# -- interp -----------------------------------------------------------------------------
def _edge_value(ctx, value, default, what, loc):
    """left= / right=: a real scalar (numpy converts it with float()), or a
    0-d traced array."""
    if value is None:
        return default
    if isinstance(value, TracedArray):
        if value.ndim != 0:
            raise TypeError(f"np.interp: {what} must be a real number, got a traced array of "
                            f"shape {value.shape}{format_loc(loc)}.")
        return value.astype(np.float64)
    try:
        return np.float64(float(value))
    except TypeError:
        raise TypeError(f"np.interp: {what} must be a real number, got "
                        f"{type(value).__name__}{format_loc(loc)}.") from None


@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """numpy's arr_interp step by step, in float64: NaN x stays NaN; below
    xp[0] gives left, above xp[-1] right, at a sample point its fp; else
    the line through the neighbours (from the right one if the left one
    gives NaN, fp[j] where both do and fp[j] == fp[j+1])."""
    loc = user_loc()
    _unsupported_kw("interp", {"period": period})
    ctx = _ctx_of(x, xp, fp, left, right)
    xp = _vector(ctx, xp, "interp", "xp", loc).astype(np.float64)
    fp = _vector(ctx, fp, "interp", "fp", loc).astype(np.float64)
    n = xp.shape[0]
    if n == 0:
        raise ValueError(f"np.interp: array of sample points is empty: expected at least one "
                         f"xp{format_loc(loc)}.")
    if fp.shape[0] != n:
        raise ValueError(f"np.interp: fp and xp are not of the same length: {fp.shape[0]} and "
                         f"{n}{format_loc(loc)}.")
    x = _tr(ctx, x, loc).astype(np.float64)
    # single elements as gathers, not slices: the Elementwise template
    # inlines gathers (see _search_sorted)
    x_first, x_last, f_first, f_last = (_at(xp, 0), _at(xp, n - 1), _at(fp, 0), _at(fp, n - 1))
    lval = _edge_value(ctx, left, f_first, "left", loc)
    rval = _edge_value(ctx, right, f_last, "right", loc)
    if n == 1:  # numpy's special case: no NaN test, a NaN x gives fp[0]
        return np.where(x < x_first, lval, np.where(x > x_first, rval, f_first))
    # j: the last sample point at or below x (binary_search_with_guess on a sorted xp)
    count = _search_sorted(ctx, xp, x, True, loc)  # xp <= x (a NaN x is set apart below)
    j = np.clip(count - 1, 0, n - 2)
    x0, x1 = take(xp, j, mode="clip"), take(xp, j + 1, mode="clip")
    f0, f1 = take(fp, j, mode="clip"), take(fp, j + 1, mode="clip")
    slope = (f1 - f0) / (x1 - x0)
    r = slope * (x - x0) + f0
    r = np.where(np.isnan(r), slope * (x - x1) + f1, r)  # NaN one way: try the other
    r = np.where(np.isnan(r) & (f0 == f1), f0, r)
    r = np.where(x0 == x, f0, r)           # at a sample point: its value, no 0 * inf
    r = np.where(count == n, f_last, r)  # x at (or past) xp[-1]
    # numpy tests x > xp[-1] before x < xp[0]; the last where wins
    r = np.where(x < x_first, lval, r)
    r = np.where(x > x_last, rval, r)
    return np.where(np.isnan(x), x, r)


# -- correlate / convolve ------------------------------------------------------------------
_MODES = {"valid": 0, "same": 1, "full": 2}


def _mode(fname, mode, loc):
    if isinstance(mode, str):
        if mode not in _MODES:
            raise ValueError(f"np.{fname}: mode must be one of 'valid', 'same', or 'full', got "
                             f"{mode!r}{format_loc(loc)}.")
        return _MODES[mode]
    if isinstance(mode, (bool, np.bool_)) or not isinstance(mode, (int, np.integer)):
        raise TypeError(f"np.{fname}: mode not understood: expected 'valid', 'same', 'full' "
                        f"or 0, 1, 2, got {type(mode).__name__}{format_loc(loc)}.")
    if mode not in (0, 1, 2):
        raise ValueError(f"np.{fname}: integer mode must be 0, 1, or 2, got {mode}"
                         f"{format_loc(loc)}.")
    return int(mode)


def _correlate(ctx, a, v, mode, fname, loc):
    """numpy's correlate of non-empty 1-D ``a`` and ``v``: out[i] = sum_j
    xpad[i + j] * y[j], x the longer operand zero-padded by the mode, y the
    shorter; the result reversed when ``a`` was the shorter (numpy's
    ``inverted``)."""
    dt = np.result_type(a.dtype, v.dtype)
    inverted = a.shape[0] < v.shape[0]
    x, y = (v, a) if inverted else (a, v)
    n1, n2 = x.shape[0], y.shape[0]
    _limit(fname, "the shorter operand", n2, MAX_TAPS, loc,
           "each of its elements becomes a shifted multiply-add")
    n_left, n_right = [(0, 0), (n2 // 2, n2 - n2 // 2 - 1), (n2 - 1, n2 - 1)][mode]
    length = n1 - n2 + 1 + n_left + n_right
    # numpy's dot: float16 sums in float32; ints wrap in dt; for bool, * and +
    # are and / or, numpy's any(x & y)
    acc = np.dtype(np.float32) if dt == np.float16 else dt
    x, y = x.astype(acc), y.astype(acc)
    out = None
    for j in range(n2):
        # outputs i whose x index i + j - n_left falls inside x: numpy's dot
        # covers only the overlap, so the padding must not meet y[j] (0 * inf)
        lo, hi = max(0, n_left - j), min(length, n_left - j + n1)
        term = x[lo + j - n_left:hi + j - n_left]
        term = term * y[j]
        if lo or hi < length:
            term = np.pad(term, (lo, length - hi))
        out = term if out is None else out + term
    out = out.astype(dt)
    return out[::-1] if inverted else out


@implements(np.correlate)
def correlate(a, v, mode="valid"):
    loc = user_loc()
    m = _mode("correlate", mode, loc)
    ctx = _ctx_of(a, v)
    a = _vector(ctx, a, "correlate", "a", loc)
    v = _vector(ctx, v, "correlate", "v", loc)
    for what, arr in (("first", a), ("second", v)):
        if arr.shape[0] == 0:
            raise ValueError(f"np.correlate: {what} array argument cannot be empty: expected at "
                             f"least one element, got shape (0,){format_loc(loc)}.")
    return _correlate(ctx, a, v, m, "correlate", loc)


@implements(np.convolve)
def convolve(a, v, mode="full"):
    loc = user_loc()
    ctx = _ctx_of(a, v)
    a = _vector(ctx, a, "convolve", "a", loc, ndmin=True)  # numpy: ndmin=1
    v = _vector(ctx, v, "convolve", "v", loc, ndmin=True)
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    for what, arr in (("a", a), ("v", v)):
        if arr.shape[0] == 0:
            raise ValueError(f"np.convolve: {what} cannot be empty: expected at least one "
                             f"element, got shape (0,){format_loc(loc)}.")
    m = _mode("convolve", mode, loc)
    return _correlate(ctx, a, v[::-1], m, "convolve", loc)
