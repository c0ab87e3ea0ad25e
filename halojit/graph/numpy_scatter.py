"""Writes at positions known only at call time, as one ``scatter`` op (a
serial loop in the kernel, ops/reduce.py): item assignment through index
arrays (``y[idx] = v``, ``y[rows, cols] += 1`` on arrays made inside the
trace), ``ufunc.at`` (``np.add.at(h, idx, w)``, ``np.maximum.at``) and
``np.histogram``, ``np.histogramdd`` and ``np.histogram2d``.

Every form reduces to one flat scatter: the positions that ``x[key]``
selects are ``x``'s C-order position grid indexed with ``key`` by the
traced getitem, so numpy's rules for advanced indices (broadcasting,
negative indices, where the result axes go, IndexError at every call) hold
as they do for reads; the values are broadcast to those positions' shape
and both are raveled in C order, the order numpy applies them in.

``np.bincount`` stays refused: its length is the largest value plus one,
which a static trace cannot have.
"""

from __future__ import annotations

import builtins
import operator
import warnings

import numpy as np

from ..errors import DTypeError, ShapeError, TraceError, UnsupportedError, format_loc
from .numpy_api import (_array, _ctx_of, _expand_key, _index_node, _is_array_index, _is_int_index,
                        _position, _take, _tr, astype, broadcast_to, getitem, implements,
                        index_broadcast_shape, ravel, reshape, where)
from .ops.elementwise import UFUNCS, resolve_ufunc
from .tracer import TracedArray, user_loc


def positions(ctx, x, key, loc):
    """The flat (C-order) positions of the elements ``x[key]`` selects, with
    ``x[key]``'s shape: an int64 grid of x's shape built from one small
    iota per axis (computed in the kernel, no x.size constant), indexed
    with ``key``."""
    entries = _expand_key(key, x.ndim, loc)
    if all(k is not None and not isinstance(k, slice) for k in entries):
        return _flat_positions(ctx, x, entries, loc)
    grid, stride = None, 1
    for ax in reversed(range(x.ndim)):
        shape = [1] * x.ndim
        shape[ax] = x.shape[ax]
        step = _tr(ctx, (np.arange(x.shape[ax], dtype=np.int64) * stride).reshape(shape), loc)
        grid = step if grid is None else step + grid
        stride *= x.shape[ax]
    if grid is None:
        grid = _tr(ctx, np.zeros((), np.int64), loc)
    return getitem(broadcast_to(grid, x.shape), key)


def _flat_positions(ctx, x, entries, loc):
    """An index array (or an int) on every axis: the flat position is their
    arithmetic, each range-checked and wrapped where negative, no gather."""
    nodes = [_index_node(ctx, k, "indexing", loc) if _is_array_index(k) else k for k in entries]
    shape = index_broadcast_shape([k.shape for k in nodes if not _is_int_index(k)], loc)
    flat, stride = None, 1
    for ax in reversed(range(x.ndim)):
        k = nodes[ax]
        term = _position(ctx, k, x.shape[ax], ax, False, loc)
        term = term * stride if stride != 1 else term
        flat = term if flat is None else term + flat
        stride *= x.shape[ax]
    return broadcast_to(astype(_tr(ctx, flat, loc), np.int64), shape)


def _spread(v, shape, loc, numpy_drops_ones: bool):
    """``v`` broadcast to ``shape``; item assignment first drops leading
    length-1 axes of the value, as numpy's setitem does."""
    if numpy_drops_ones:
        while v.ndim > len(shape) and v.shape[0] == 1:
            v = reshape(v, v.shape[1:])
    try:
        return broadcast_to(v, tuple(shape))
    except ShapeError:
        raise ShapeError(f"shape mismatch: value array of shape {v.shape} could not be "
                         f"broadcast to indexing result of shape {tuple(shape)}"
                         f"{format_loc(loc)}.") from None


def scattered(ctx, x, key, value, loc, ufunc=None, loop=None):
    """``x`` with ``value`` written at ``x[key]`` (already in x's dtype), or
    with ``ufunc(x[key], value)`` applied one index at a time (``value``
    in the loop's second input dtype, None for a unary ufunc)."""
    pos = positions(ctx, x, key, loc)
    operands = [ravel(x), pos]
    if value is not None:
        operands.append(_spread(value, pos.shape, loc, ufunc is None))
    params = {"ufunc": ufunc, "loop": None if loop is None else tuple(str(d) for d in loop)}
    return reshape(ctx.emit("scatter", operands, params, loc), x.shape)


# -- ufunc.at ----------------------------------------------------------------------------
def ufunc_at(ctx, ufunc, inputs, kwargs):
    """``ufunc.at(a, indices[, b])`` into an array made inside the trace:
    numpy's unbuffered in-place application (a repeated index applies the
    ufunc once per occurrence, in order), computed in the ufunc's loop
    dtypes and cast back to ``a``'s dtype unsafely, as numpy's ufunc.at
    does (np.add.at of 1.5 into int64 adds 1). A Python scalar ``b`` is an
    array first, as numpy makes it: 300 added into uint8 wraps to 44."""
    loc = user_loc()
    name = ufunc.__name__
    what = f"np.{name}.at"
    if kwargs:
        raise TypeError(f"{what}() takes no keyword arguments, got {sorted(kwargs)}.")
    if len(inputs) not in (2, 3):
        raise TypeError(f"{what}() takes 2 or 3 arguments (a, indices, b), got {len(inputs)}.")
    a, indices, *b = inputs
    if name not in UFUNCS:
        raise UnsupportedError(f"{what} is not supported inside @halojit.trace{format_loc(loc)}; "
                               "ufunc.at works for numpy's built-in elementwise ufuncs.")
    if ufunc.nin != len(inputs) - 1:
        raise ValueError(f"{what}: the ufunc takes {ufunc.nin} input(s); expected "
                         f"{'no' if ufunc.nin == 1 else 'a'} second operand b, got "
                         f"{len(inputs) - 2}.")
    if not isinstance(a, TracedArray):
        raise UnsupportedError(
            f"{what} into a numpy array inside @halojit.trace{format_loc(loc)}: the array "
            "cannot hold values computed at call time. Make it inside the trace from a traced "
            "array, e.g. `h = np.zeros_like(x, shape=(n,))`, then call np.add.at(h, ...).")
    _check_target(a, what, loc)
    key = indices if isinstance(indices, tuple) else (indices,)
    value = None
    if b:
        v = b[0] if isinstance(b[0], TracedArray) else np.asarray(b[0])
        b_node = ctx.as_node(v, loc)
        in_dts, out_dt, _ = resolve_ufunc(name, [a._node.aval, b_node.aval], loc)
        value = TracedArray(ctx.cast(b_node, in_dts[1], loc), ctx)
    else:
        in_dts, out_dt, _ = resolve_ufunc(name, [a._node.aval], loc)
    if name == "power" and out_dt.kind in "iu":
        raise UnsupportedError(f"{what} on integers is not supported inside @halojit.trace"
                               f"{format_loc(loc)}; use `h[idx] **= k` (one power per "
                               "distinct position) or a float array.")
    new = scattered(ctx, a, key, value, loc, name, (*in_dts, out_dt))
    a._assign(new, what)


def _check_target(x, what, loc):
    if x._is_input:
        raise TraceError(
            f"{what} writes into an input argument or a view of one{format_loc(loc)}; traced "
            "functions must not modify their inputs. Work on a copy (`h = x.copy()`).")
    if getattr(x, "_readonly", None):
        x._check_writable(what)


# -- np.histogram -------------------------------------------------------------------------
# numpy's histogram sums weights 65536 values at a time (in float64, as
# bincount does), then adds each block's sums to the result in its dtype:
# the weighted sums follow the same blocks, so float results match numpy's
BLOCK = 65536


@implements(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    """numpy's histogram: equal bins (an int, with a ``range`` or the data's
    min and max) computed by numpy's own index formula and its edge
    corrections, or bin edges given as an array (searchsorted); then one
    scatter-add of ones (or of the weights) into the bins. Bin edges that
    depend on the data (no ``range``) are computed in the kernel as
    np.linspace does; numpy's errors for a non-finite range or too many
    bins for it are checked at every call."""
    loc = user_loc()
    ctx = _ctx_of(a, weights, bins)
    a = _tr(ctx, _array(a), loc)
    if a.dtype == np.bool_:
        warnings.warn(f"Converting input from {a.dtype} to {np.uint8} for compatibility.",
                      RuntimeWarning, stacklevel=3)
        a = astype(a, np.uint8)
    if a.dtype.kind not in "iuf":
        raise DTypeError(f"np.histogram: expected an integer or float array, got {a.dtype}"
                         f"{format_loc(loc)}.")
    w = None
    if weights is not None:
        w = _tr(ctx, _array(weights), loc)
        if w.shape != a.shape:
            raise ValueError("weights should have the same shape as a.")
        if w.dtype.kind not in "biuf":
            raise DTypeError(f"np.histogram: expected integer, float or bool weights, got "
                             f"{w.dtype}{format_loc(loc)}.")
    # a and w keep their shape: the scatter walks them in C order, numpy's
    # order of a.ravel() (a flat copy would cost a division per element)
    if isinstance(bins, str):
        raise UnsupportedError(
            f"np.histogram(bins={bins!r}) is not supported inside @halojit.trace"
            f"{format_loc(loc)}: the number of bins would depend on the values. Pass a number "
            "of bins or the bin edges.")
    if isinstance(range, TracedArray) or any(
            isinstance(r, TracedArray) for r in (() if range is None else range)):
        raise UnsupportedError(f"np.histogram: a range computed inside the trace is not "
                               f"supported{format_loc(loc)}; pass numbers or range=None.")
    if np.ndim(bins) == 0:
        try:
            n = operator.index(bins)
        except TypeError as e:
            raise TypeError("`bins` must be an integer, a string, or an array") from e
        if n < 1:
            raise ValueError("`bins` must be positive, when an integer")
        bin_index, edges = _equal_bins(ctx, a, n, range, loc)
    elif np.ndim(bins) == 1:
        if w is not None:
            raise UnsupportedError(
                f"np.histogram with weights and bin edges given as an array is not supported "
                f"inside @halojit.trace{format_loc(loc)}: numpy sums those weights through a "
                "sort, in an order a scatter cannot follow. Use equal bins (an int and "
                "range=), or np.add.at into bins found with np.searchsorted.")
        bin_index, edges, n = _given_edges(ctx, a, bins, loc)
    else:
        raise ValueError("`bins` must be 1d, when an array")
    if bin_index is None:  # fewer than two edges
        counts = _tr(ctx, np.zeros(0, np.intp if w is None else w.dtype), loc)
    else:
        counts = _count(ctx, bin_index, n, w, loc)
    if density:
        db = astype(np.diff(edges), np.float64)
        return counts / db / counts.sum(), edges
    return counts, edges


def _outer_edges(range, size):
    """numpy's _get_outer_edges where no value decides them: (first, last)
    of a ``range`` given as numbers (checked as numpy checks it) or (0, 1)
    for no data, widened by 0.5 each way when equal; None when the data's
    min and max decide (computed in the kernel)."""
    if range is not None:
        first, last = range
        if first > last:
            raise ValueError("max must be larger than min in range parameter.")
        if not (np.isfinite(first) and np.isfinite(last)):
            raise ValueError(f"supplied range of [{first}, {last}] is not finite")
    elif size == 0:
        first, last = 0, 1
    else:
        return None
    if first == last:
        first, last = first - 0.5, last + 0.5
    return first, last


def _equal_bins(ctx, a, n, range, loc):
    """(each value's bin, n for values outside the range; the edges), as
    numpy's histogram computes them for equal bins."""
    ends = _outer_edges(range, a.size)
    if ends is None:
        return _data_bins(ctx, a, n, loc)
    first, last = ends
    bin_type = np.result_type(first, last, np.empty(0, a.dtype))
    if np.issubdtype(bin_type, np.integer):
        bin_type = np.result_type(bin_type, float)
    edges = np.linspace(first, last, n + 1, endpoint=True, dtype=bin_type)
    if np.any(edges[:-1] >= edges[1:]):
        raise ValueError(f"Too many bins for data range. Cannot create {n} finite-sized bins.")
    denom = _unsigned_subtract(last, first)
    return _bin_of(ctx, a, first, last, denom, _tr(ctx, edges, loc), n, bin_type, loc), \
        _tr(ctx, edges, loc)


def _data_bins(ctx, a, n, loc):
    """Equal bins over the data's min and max, known at call time: the
    outer edges, the linspace of the edges and the bins computed in the
    kernel, in the dtypes numpy's code gives them (the data's float dtype;
    float64 for integer data, where every step is exact)."""
    from .numpy_composite import _check_per_call
    lo, hi = a.min(), a.max()
    if a.dtype.kind == "f":
        bin_type = a.dtype

        def not_finite(values):
            if not np.all(np.isfinite(values)):
                raise ValueError(f"autodetected range of [{values[0]}, {values[1]}] is not "
                                 "finite")
        ctx.add_check(np.stack([lo, hi])._node, not_finite)
    else:
        bin_type = np.dtype(np.float64)
        lo, hi = astype(lo, bin_type), astype(hi, bin_type)
    same = lo == hi
    first, last = where(same, lo - 0.5, lo), where(same, hi + 0.5, hi)
    edges = _linspace(ctx, first, last, n, bin_type, loc)
    if a.dtype.kind == "f" or a.dtype.itemsize > 4 or n > 1 << 16:
        # integer data up to 32 bits spans a range of at least 1 with
        # edges below 2**32: float64 keeps 2**16 bins of it distinct
        _check_per_call(ctx, np.any(edges[:-1] >= edges[1:]), lambda: ValueError(
            f"Too many bins for data range. Cannot create {n} finite-sized bins."))
    return _bin_of(ctx, a, first, last, last - first, edges, n, bin_type, loc), edges


def _linspace(ctx, first, last, n, dt, loc):
    """np.linspace(first, last, n + 1) of traced ends, as numpy computes it:
    in ``dt``, i * step + first (i / n * (last - first) + first where the
    step underflows to 0), the last edge exactly ``last``."""
    step = (last - first) / n
    grid = _tr(ctx, np.arange(n + 1, dtype=dt), loc)
    body = where(step == 0, grid / n * (last - first), grid * step) + first
    return np.concatenate([body[:-1], reshape(astype(last, dt), (1,))])


def _unsigned_subtract(hi, lo):
    """numpy's histogram subtracts two ends of a range in their common dtype,
    signed integers as unsigned (exact, since hi >= lo)."""
    dt = np.result_type(hi, lo)
    if dt.kind == "i":
        unsigned = np.dtype(f"u{dt.itemsize}")
        return np.subtract(np.asarray(hi, dt), np.asarray(lo, dt), casting="unsafe",
                           dtype=unsigned)
    return np.subtract(hi, lo, dtype=dt)


def _bin_of(ctx, a, first, last, denom, edges, n, bin_type, loc):
    """numpy's bin index of each value: (a - first) / denom * n truncated,
    the last edge counted in the last bin, then moved by one where rounding
    put a value on the wrong side of its bin's edges; n where the value is
    outside [first, last] (NaN included)."""
    keep = (a >= first) & (a <= last)
    ta = astype(a, bin_type)
    # outside values never reach numpy's formula: first in their place
    ta = astype(where(keep, ta, first), bin_type)
    f = (ta - first) / denom * n
    index = astype(f, np.intp)
    index = where(index == n, n - 1, index)
    index = where(ta < _take(ctx, edges, index, 0, "clip", loc), index - 1, index)
    above = (ta >= _take(ctx, edges, index + 1, 0, "clip", loc)) & (index != n - 1)
    index = where(above, index + 1, index)
    return where(keep, index, n)


def _given_edges(ctx, a, bins, loc):
    """Bins between edges given as an array: the last edge is inside the
    last bin, the others open on the right (numpy counts a sorted copy with
    searchsorted, which gives the same counts)."""
    from .numpy_composite import _check_per_call
    edges = _array(bins)
    if isinstance(edges, TracedArray):
        _check_per_call(ctx, np.any(edges[:-1] > edges[1:]), lambda: ValueError(
            "`bins` must increase monotonically, when an array"))
    elif np.any(edges[:-1] > edges[1:]):
        raise ValueError("`bins` must increase monotonically, when an array")
    n = edges.shape[0] - 1
    edges = _tr(ctx, edges, loc)
    if n < 1:  # numpy: no bins, no counts
        return None, edges, max(n, 0)
    keep = (a >= edges[0]) & (a <= edges[-1])
    index = np.searchsorted(edges, a, side="right") - 1
    index = where(index == n, n - 1, index)
    return where(keep, index, n), edges, n


def _count(ctx, bin_index, n, w, loc):
    """Scatter-add ones (int64 counts) or the weights into n bins plus one
    for the values outside them, dropped. Weights sum in float64 per
    BLOCK of values, and the blocks add up in the weights' dtype, as
    numpy's blocked bincount does."""
    size = bin_index.size
    if w is None:
        zeros = broadcast_to(_tr(ctx, np.zeros((), np.intp), loc), (n + 1,))
        ones = broadcast_to(_tr(ctx, np.ones((), np.intp), loc), bin_index.shape)
        return getitem(_scatter_add(ctx, zeros, bin_index, ones, loc), slice(0, n))
    blocks = max(1, -(-size // BLOCK))
    if blocks > 1:  # block k's bins at k * (n + 1): a broadcast iota, no size-long constant
        first = _tr(ctx, (np.arange(blocks, dtype=np.intp) * (n + 1)).reshape(blocks, 1), loc)
        start = getitem(ravel(broadcast_to(first, (blocks, BLOCK))), slice(0, size))
        bin_index, w = ravel(bin_index) + start, ravel(w)
    zeros = broadcast_to(_tr(ctx, np.zeros((), np.float64), loc), (blocks * (n + 1),))
    sums = _scatter_add(ctx, zeros, bin_index, astype(w, np.float64), loc)
    sums = getitem(reshape(sums, (blocks, n + 1)), (slice(None), slice(0, n)))
    per_block = astype(sums, w.dtype)
    if blocks == 1:
        return reshape(per_block, (n,))
    if w.dtype == np.bool_:
        return np.any(per_block, axis=0)
    return getitem(np.cumsum(per_block, axis=0, dtype=w.dtype), -1)


@implements(np.histogramdd)
def histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """numpy's histogramdd: per dimension the bin edges (np.linspace over a
    ``range`` or the data's min and max, or edges given as arrays), each
    value's bin by searchsorted (a value on the last edge counted in the
    last bin), the flat bin of each sample (an outlier bin on either side
    of each dimension), then one scatter-add into them, weights summed in
    float64 in the samples' order as numpy's bincount sums them."""
    loc = user_loc()
    ctx = _ctx_of(sample, weights, bins)
    if isinstance(sample, (list, tuple)):  # a sequence of 1-D arrays: numpy's atleast_2d(s).T
        sample = np.stack([_tr(ctx, _array(x), loc) for x in sample], axis=-1)
    else:
        sample = _tr(ctx, _array(sample), loc)
        if sample.ndim != 2:
            sample = np.atleast_2d(sample).T
    if sample.ndim != 2:
        raise ValueError(f"np.histogramdd: expected samples of shape (N, D), got "
                         f"{sample.shape}{format_loc(loc)}.")
    if sample.dtype.kind not in "biuf":
        raise DTypeError(f"np.histogramdd: expected a numeric sample, got {sample.dtype}"
                         f"{format_loc(loc)}.")
    n_samples, dims = sample.shape
    w = None
    if weights is not None:
        w = _tr(ctx, _array(weights), loc)
        if w.shape != (n_samples,):
            raise ValueError(f"np.histogramdd: weights of shape {w.shape} for {n_samples} "
                             f"samples{format_loc(loc)}.")
    if isinstance(bins, str) or (isinstance(bins, (list, tuple))
                                 and any(isinstance(b, str) for b in bins)):
        raise UnsupportedError(f"np.histogramdd with bins given by name is not supported inside "
                               f"@halojit.trace{format_loc(loc)}; pass numbers of bins or edges.")
    try:
        if len(bins) != dims:
            raise ValueError("The dimension of bins must be equal to the dimension of the "
                             "sample x.")
    except TypeError:
        bins = dims * [bins]
    if range is None:
        range = (None,) * dims
    elif len(range) != dims:
        raise ValueError("range argument must have one entry per dimension")
    edges, index, nbin = [], None, []
    for i in builtins.range(dims):  # (``range`` is numpy's argument here)
        col = sample[:, i]
        e = _dd_edges(ctx, col, bins[i], range[i], i, loc)
        count = np.searchsorted(e, col, side="right")
        count = where(col == e[-1], count - 1, count)  # the last edge: in the last bin
        edges.append(e)
        nbin.append(e.shape[0] + 1)  # an outlier bin on each end
        index = count if index is None else index * nbin[-1] + count
    total = int(np.prod(nbin))
    if w is None:
        zeros = broadcast_to(_tr(ctx, np.zeros((), np.intp), loc), (total,))
        values = broadcast_to(_tr(ctx, np.ones((), np.intp), loc), (n_samples,))
    else:
        zeros = broadcast_to(_tr(ctx, np.zeros((), np.float64), loc), (total,))
        values = astype(w, np.float64)
    hist = _scatter_add(ctx, zeros, index, values, loc) if n_samples else zeros
    hist = astype(reshape(hist, tuple(nbin)), np.float64)
    hist = getitem(hist, dims * (slice(1, -1),))
    if density:
        s = hist.sum()
        for i, e in enumerate(edges):
            shape = [1] * dims
            shape[i] = nbin[i] - 2
            hist = hist / reshape(np.diff(e), tuple(shape))
        hist = hist / s
    return hist, edges


def _dd_edges(ctx, col, bins_i, range_i, i, loc):
    """One dimension's edges, as numpy's histogramdd makes them."""
    if np.ndim(bins_i) == 0:
        if isinstance(bins_i, TracedArray):
            raise UnsupportedError(f"np.histogramdd: a number of bins computed inside the trace "
                                   f"is not supported{format_loc(loc)}.")
        if bins_i < 1:
            raise ValueError(f"`bins[{i}]` must be positive, when an integer")
        try:
            n = operator.index(bins_i)
        except TypeError as e:
            raise TypeError(f"`bins[{i}]` must be an integer, when a scalar") from e
        if range_i is not None and any(isinstance(r, TracedArray) for r in range_i):
            raise UnsupportedError(f"np.histogramdd: a range computed inside the trace is "
                                   f"not supported{format_loc(loc)}; pass numbers.")
        ends = _outer_edges(range_i, col.size)
        if ends is None:
            return _dd_data_edges(ctx, col, n, loc)
        return _tr(ctx, np.linspace(*ends, n + 1), loc)
    if np.ndim(bins_i) == 1:
        e = _array(bins_i)
        if isinstance(e, TracedArray):
            from .numpy_composite import _check_per_call
            _check_per_call(ctx, np.any(e[:-1] > e[1:]), lambda: ValueError(
                f"`bins[{i}]` must be monotonically increasing, when an array"))
        elif np.any(e[:-1] > e[1:]):
            raise ValueError(f"`bins[{i}]` must be monotonically increasing, when an array")
        return _tr(ctx, e, loc)
    raise ValueError(f"`bins[{i}]` must be a scalar or 1d array")


def _dd_data_edges(ctx, col, n, loc):
    """Edges over the data's min and max, computed in the kernel: numpy's
    np.linspace(min, max, n + 1) of the column's numpy scalars (their
    dtype, float64 for integer columns), a NaN or inf end refused per call."""
    lo, hi = col.min(), col.max()
    dt = col.dtype if col.dtype.kind == "f" else np.dtype(np.float64)
    lo, hi = astype(lo, dt), astype(hi, dt)

    def not_finite(values):
        if not np.all(np.isfinite(values)):
            raise ValueError(f"autodetected range of [{values[0]}, {values[1]}] is not finite")
    ctx.add_check(np.stack([lo, hi])._node, not_finite)
    same = lo == hi
    first, last = where(same, lo - 0.5, lo), where(same, hi + 0.5, hi)
    return _linspace(ctx, first, last, n, dt, loc)


@implements(np.histogram2d)
def histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    """numpy's histogram2d: histogramdd of the (x, y) pairs."""
    if np.shape(x)[:1] != np.shape(y)[:1]:
        raise ValueError("x and y must have the same length.")
    try:
        nb = len(bins)
    except TypeError:
        nb = 1
    if nb not in (1, 2):
        bins = [bins, bins]
    hist, edges = histogramdd([x, y], bins, range, density, weights)
    return hist, edges[0], edges[1]


def _scatter_add(ctx, base, index, values, loc):
    dt = str(base.dtype)
    return ctx.emit("scatter", [base, index, values], {"ufunc": "add", "loop": (dt, dt, dt)}, loc)


@implements(np.bincount)
def bincount(x, weights=None, minlength=0):
    raise UnsupportedError(
        f"np.bincount is not supported inside @halojit.trace{format_loc(user_loc())}: its "
        "length is the largest value plus one, which depends on the values. Count into a "
        "known number of bins with np.histogram(x, bins=n, range=(0, n)), or "
        "`h = np.zeros_like(x, shape=(n,)); np.add.at(h, x, 1)`.")
