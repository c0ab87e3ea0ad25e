"""numpy details the second API fuzz found halojit getting wrong: out= of
another dtype, Python scalars that do not fit, read-only views, copies that
may be views, in-place nan_to_num, matrices met inside a trace, and the
order of a replayed function's range checks and blocks."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from helpers import assert_same, jit

X = np.array([[0.1, 0.2, 0.3], [0.7, 0.5, 0.3]], np.float32)
ROWS = np.array([[70, -48, 96], [-1, 5, 3], [300, 2, 3]], np.int32)


def _same_as_numpy(fn, args, opt_level):
    got = jit(fn, opt_level)(*args)
    with np.errstate(all="ignore"):
        want = fn(*[a.copy() for a in args])
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert_same(g, w)


def test_out_of_another_dtype_computes_as_numpy(opt_level):
    def f(x, r):
        s = (x[0] * 0).astype(np.float64)
        np.sum(x, axis=0, out=s)  # summed in float64: out's dtype
        m = (r[:, 0] * 0).astype(np.int8)
        np.mean(r, axis=1, out=m)  # summed in int8
        rd = (x * 0).astype(np.float64)
        np.round(x, 1, out=rd)  # rounded in float64
        mx = (r[:, 0] * 0).astype(np.uint8)
        np.max(r, axis=1, out=mx)  # numpy starts from the first element stored in out
        mn = (r[0] * 0).astype(np.uint8)
        r.min(axis=0, out=mn)
        c = (x * 0).astype(np.float64)
        np.cumsum(x, axis=1, out=c)
        return s, m, rd, mx, mn, c

    _same_as_numpy(f, (X, ROWS), opt_level)


def test_out_of_argmax_and_take_casts_safely(opt_level):
    with pytest.raises(TypeError, match="safe"):
        jit(lambda x: np.argmax(x, axis=1, out=x[:, 0] * 0), opt_level)(X)
    with pytest.raises(TypeError, match="safe"):
        jit(lambda r: np.take(r, [0, 1], out=(r[0, :2] * 0.5)), opt_level)(ROWS)
    _same_as_numpy(lambda r: np.take(r, [0, 4], out=(r[0, :2] * 0).astype(np.int8)), (ROWS,),
                   opt_level)  # numpy takes a narrower integer out=


@pytest.mark.parametrize("fn,error", [
    (lambda r: np.max(r.astype(np.uint8), axis=1, initial=300), OverflowError),
    (lambda r: np.sum(r, initial=np.nan), ValueError),
    (lambda r: r.astype(np.uint8).fill(-1), OverflowError),
    (lambda r: np.copyto(r.astype(np.int8), 300), OverflowError),
    (lambda r: np.copyto(r * 1, 1.5), TypeError),  # float into int: not same_kind
], ids=["initial-300-u8", "initial-nan-int", "fill-minus-1-u8", "copyto-300-i8", "copyto-float"])
def test_python_scalars_that_do_not_fit_raise_as_numpy(fn, error, opt_level):
    with pytest.raises(error):
        fn(ROWS.copy())
    with pytest.raises(error):
        jit(fn, opt_level)(ROWS)


def test_scalar_writes_that_fit(opt_level):
    def f(x, r):
        b = x > 0.25
        b.fill(True)  # a bool stays bool
        c = x < 0
        np.copyto(c, x, casting="unsafe")
        i = r * 0
        np.copyto(i, 7)
        return b, c, i, np.sum(r, initial=1.5), np.max(x, axis=0, where=True)

    _same_as_numpy(f, (X, ROWS), opt_level)


@pytest.mark.parametrize("fn", [
    lambda x: np.broadcast_to((x * 1)[0], (2, 3)).__iadd__(1),
    lambda x: np.diagonal(x * 1).fill(0),
    lambda x: np.broadcast_to(x * 1, (2, 2, 3))[0].__imul__(2),
], ids=["broadcast_to", "diagonal", "view-of-broadcast"])
def test_writes_into_read_only_views_raise(fn, opt_level):
    with pytest.raises(ValueError, match="read-only"):
        fn(X.copy())
    with pytest.raises(ValueError, match="read-only"):
        jit(fn, opt_level)(X)


def test_ascontiguousarray_of_a_view_is_never_silently_stale(opt_level):
    def f(x):
        w = (x * 1).T
        v = np.ascontiguousarray(w)  # numpy: a copy (w is not contiguous)
        w += 10
        return v

    with pytest.raises(halojit.UnsupportedError, match="in-place"):
        jit(f, opt_level)(X)  # the trace cannot tell copy from view: it refuses

    def g(x):
        w = x * 1
        v = np.ascontiguousarray(w)  # w itself
        w += 1
        return v, np.ascontiguousarray(w.T) + 0

    _same_as_numpy(g, (X,), opt_level)


def test_nan_to_num_in_place(opt_level):
    def f(x):
        w = np.log(x - x) * (x - 0.2)  # nan and -inf
        r = np.nan_to_num(w, copy=False)
        return w, r

    _same_as_numpy(f, (X,), opt_level)


M = np.arange(4.0).reshape(2, 2).view(np.matrix)


def test_matrices_met_inside_a_trace_are_refused(opt_level):
    with pytest.raises(halojit.DTypeError, match="matrix"):
        jit(lambda x: x * M, opt_level)(np.ones((2, 2)))  # numpy: a matrix product
    with pytest.raises(halojit.DTypeError, match="matrix"):
        jit(lambda a: a[0] * a[0], opt_level)([M])


def test_replay_raises_before_the_block_as_numpy(opt_level):
    log = []

    def f(x, s):
        y = x + s
        with halojit.exclude_from_trace():
            log.append(1)
        return y

    g = jit(f, opt_level)
    x = ROWS.astype(np.int8)
    g(x, 1)
    with pytest.raises(OverflowError):
        g(x, 1000)  # numpy raises at x + s, before the block runs
    assert log == [1]


def test_packed_structured_fields_are_read_and_written():
    """A field of a packed structured array is a view whose rows are 17
    bytes apart, not a whole number of float32 items: it is copied in (and
    written through a copy as out=), where the plan refused it before."""
    dt = [("tag", "i1"), ("v", "f4", (4,))]
    rec = np.zeros(5, dtype=dt)
    rec["v"] = np.arange(20, dtype=np.float32).reshape(5, 4) - 7.5
    x = rec["v"]
    assert x.strides[0] % x.itemsize
    f = halojit.trace(lambda x: np.abs(x) * 2 + 1)
    for _ in range(3):  # the first call, the fast path, the C call path
        np.testing.assert_array_equal(f(x), np.abs(x) * 2 + 1)
    out = np.zeros(5, dtype=dt)
    for _ in range(2):
        assert f(x, out=out["v"]) is not None
        np.testing.assert_array_equal(out["v"], np.abs(x) * 2 + 1)
        assert (out["tag"] == 0).all()
        out["v"] = 0
    # one record: numpy calls a (1, 4) view with a 17-byte row stride
    # C-contiguous (a size-1 axis's stride is never used), so is it here
    one = rec[:1]["v"]
    np.testing.assert_array_equal(f(one), np.abs(one) * 2 + 1)
    # a column of packed records: (6, 1), strides (5, 5)
    col = np.zeros((6, 1), dtype=[("a", "i1"), ("b", "f4")])["b"]
    col[:, 0] = np.arange(6) - 2.5
    np.testing.assert_array_equal(f(col), np.abs(col) * 2 + 1)
