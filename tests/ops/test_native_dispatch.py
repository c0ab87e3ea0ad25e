"""The C call path (_rt.Dispatcher, csrc/python/dispatch.cpp): plain ndarray
arguments of a registered shape and dtype run the plan from C; everything
else reaches TracedFunction._call. Each test checks which path served a call
(dispatch_info's hit count) as well as the values against numpy."""

from __future__ import annotations


import numpy as np
import pytest

import halojit
from halojit import _rt

from helpers import run_in_threads

pytestmark = pytest.mark.level3


def _c_hits(f) -> int:
    return _rt.dispatch_info(f)[1]


def _warm(fn, *args, **opts):
    f = halojit.trace(fn, **opts)
    f(*args)
    f(*args)  # the second call registers the signature with the C path
    assert _rt.dispatch_info(f)[0] == 1
    return f


def test_repeat_calls_run_from_c_fresh_and_right():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 1024)).astype(np.float32)
    b = rng.standard_normal(1024).astype(np.float32)
    f = _warm(lambda a, c: np.maximum(a + c, 0), x, b)
    x0, b0 = x.copy(), b.copy()
    before, hits = _c_hits(f), f.stats()["hits"]
    r1, r2 = f(x, b), f(x, b)
    assert _c_hits(f) == before + 2 and f.stats()["hits"] == hits + 2
    assert type(r1) is np.ndarray and r1.flags.writeable and r1.flags.c_contiguous
    assert r1 is not r2 and not np.shares_memory(r1, r2) and not np.shares_memory(r1, x)
    np.testing.assert_array_equal(r1, np.maximum(x + b, 0))
    np.testing.assert_array_equal(x, x0)  # inputs are never written
    np.testing.assert_array_equal(b, b0)
    # read-only inputs are fine: the kernels only read them
    x.flags.writeable = False
    np.testing.assert_array_equal(f(x, b), np.maximum(x + b, 0))
    assert _c_hits(f) == before + 3


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float64, np.float16])
def test_dtypes_and_specials_match_numpy(dtype):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 50)) * 20).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    f = _warm(lambda a: (a * 3 - a, a > 1), x)
    before = _c_hits(f)
    y, m = f(x)
    with np.errstate(invalid="ignore"):
        want_y, want_m = x * 3 - x, x > 1
    assert _c_hits(f) == before + 1
    assert y.dtype == want_y.dtype and m.dtype == np.bool_
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(m, want_m)


def test_zero_d_results_are_numpy_scalars_and_trees_unflatten():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = _warm(lambda a: a.sum(), x)
    s = f(x)
    assert type(s) is np.float32 and s == 66
    g = _warm(lambda a: {"row": a.sum(axis=1), "total": a.max(), "twice": a * 2}, x)
    before = _c_hits(g)
    r = g(x)
    assert _c_hits(g) == before + 1
    assert set(r) == {"row", "total", "twice"}
    np.testing.assert_array_equal(r["row"], x.sum(axis=1))
    assert type(r["total"]) is np.float32 and r["total"] == 11
    np.testing.assert_array_equal(r["twice"], x * 2)


def test_row_strided_views_run_from_c_and_strided_last_axes_do_not():
    base = np.arange(128, dtype=np.float32).reshape(16, 8)
    x = base[::2]  # rows 2 apart, unit last axis: the kernel reads it in place
    f = _warm(lambda a: a * 2 + 1, np.ascontiguousarray(x))
    before = _c_hits(f)
    np.testing.assert_array_equal(f(x), x * 2 + 1)
    assert _c_hits(f) == before + 1
    t = np.arange(64, dtype=np.float32).reshape(8, 8).T  # strided last axis: copied by the general path
    g = _warm(lambda a: a * 2 + 1, np.ascontiguousarray(t))
    before = _c_hits(g)
    np.testing.assert_array_equal(g(t), t * 2 + 1)
    assert _c_hits(g) == before


def test_other_calls_take_the_general_path():
    x = np.ones((4, 4), np.float32)
    f = _warm(lambda a: a * 3, x)
    before = _c_hits(f)
    assert type(f(x.view(np.memmap))) is np.ndarray  # an ndarray subclass
    np.testing.assert_array_equal(f(x.astype(">f4")), x * 3)  # big-endian: converted first
    assert f(np.float32(2)) == 6  # a scalar
    np.testing.assert_array_equal(f(np.ones(5, np.float32)), np.full(5, 3.0))  # a new shape
    with pytest.raises(TypeError):
        f(x, x)  # the general path explains the arity
    with pytest.raises(TypeError):
        f(x, scale=2)  # keyword arguments other than out=
    assert _c_hits(f) == before


def test_constants_captured_by_the_trace_travel_with_the_entry():
    w = np.linspace(-1, 1, 256, dtype=np.float32)
    f = _warm(lambda a: a * w + w[::-1], np.ones(256, np.float32), capture_as_const=True)
    x = np.random.default_rng(2).standard_normal(256).astype(np.float32)
    before = _c_hits(f)
    np.testing.assert_array_equal(f(x), x * w + w[::-1])
    assert _c_hits(f) == before + 1


def test_large_outputs_keep_the_pooled_python_call():
    x = np.random.default_rng(3).standard_normal((512, 1024)).astype(np.float32)  # 2 MiB out
    f = _warm(lambda a: a * 2, x)
    before = _c_hits(f)
    r1 = f(x)
    r2 = f(x)  # r1 is alive: the pool must hand out another block
    assert _c_hits(f) == before + 2
    assert not np.shares_memory(r1, r2)
    np.testing.assert_array_equal(r1, x * 2)
    np.testing.assert_array_equal(r2, x * 2)


def test_changing_the_cache_clears_the_c_entries():
    x = np.ones(32, np.float32)
    f = _warm(lambda a: a - 1, x)
    f._cache.pop(next(iter(f._cache)))  # what a tuning run does to use its new recipe
    assert _rt.dispatch_info(f)[0] == 0
    np.testing.assert_array_equal(f(x), np.zeros(32))
    f(x)
    assert _rt.dispatch_info(f)[0] == 1


def test_no_c_path_while_a_trace_records():
    w = np.arange(8, dtype=np.float32)
    inner = _warm(lambda a: a * 2, w)
    before = _c_hits(inner)
    outer = halojit.trace(lambda a: a + inner(w))  # inner gets a concrete array mid-trace
    x = np.ones(8, np.float32)
    np.testing.assert_array_equal(outer(x), x + w * 2)
    assert _c_hits(inner) == before


def test_concurrent_calls_from_threads():
    f = _warm(lambda a: np.exp(a) - a, np.zeros((8, 64), np.float32))
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(200):
            x = rng.standard_normal((8, 64)).astype(np.float32)
            got = f(x)
            if not np.allclose(got, np.exp(x) - x, rtol=1e-6, atol=1e-6):
                errors.append(seed)

    run_in_threads(work, 4)
    assert not errors


def test_out_argument_runs_from_c_when_it_fits():
    x = np.random.default_rng(4).standard_normal((4, 64)).astype(np.float32)
    f = _warm(lambda a: np.maximum(a, 0) * 2, x)
    before = _c_hits(f)
    out = np.full((4, 64), np.nan, np.float32)
    assert f(x, out=out) is out
    assert f(x, out=None) is not out
    assert _c_hits(f) == before + 2
    np.testing.assert_array_equal(out, np.maximum(x, 0) * 2)
    # what does not fit goes to the general path, which writes or explains
    y = x.copy()
    assert f(y, out=y) is y  # out= is the input
    np.testing.assert_array_equal(y, np.maximum(x, 0) * 2)
    wide = np.zeros((4, 128), np.float32)
    assert f(x, out=wide[:, ::2]) is not None  # a strided last axis
    np.testing.assert_array_equal(wide[:, ::2], np.maximum(x, 0) * 2)
    ro = np.empty((4, 64), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        f(x, out=ro)
    with pytest.raises(ValueError):
        f(x, out=np.empty((4, 32), np.float32))
    with pytest.raises(halojit.errors.DTypeError):
        f(x, out=np.empty((4, 64), np.float64))
    assert _c_hits(f) == before + 2
    # a 0-d output written into out= comes back as the array, not a scalar
    g = _warm(lambda a: a.sum(), x)
    s = np.empty((), np.float32)
    assert g(x, out=s) is s
    np.testing.assert_allclose(s, x.sum(), rtol=1e-5)
    # a tree result with one output
    h = _warm(lambda a: (a * 2,), x)
    o = np.empty_like(x)
    (r,) = h(x, out=o)
    assert r is o
    np.testing.assert_array_equal(o, x * 2)


def test_gil_is_released_for_big_work_even_from_tiny_inputs():
    small = _warm(lambda a: a + 1, np.ones(64, np.float32))
    assert _rt.dispatch_info(small)[2] == [False]
    x = np.linspace(0, 1, 1024, dtype=np.float32)
    outer = _warm(lambda a, b: (a[:, None] * b[None, :]).sum(axis=1), x, x)  # 4 MiB of products
    assert _rt.dispatch_info(outer)[2] == [True]
    np.testing.assert_allclose(outer(x, x), x * x.sum(), rtol=1e-5)
    big = _warm(lambda a: a * 2, np.ones((512, 1024), np.float32))
    assert _rt.dispatch_info(big)[2] == [None]  # pooled outputs: the Python call
