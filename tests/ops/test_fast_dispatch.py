"""The call fast path (plain ndarrays of a seen shape and dtype go straight to
the executor) keeps every check of the slow path, and small groups compile
without parallel loops."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.errors import DTypeError

pytestmark = pytest.mark.level3


def _warm(fn, *args):
    f = halojit.trace(fn)
    f(*args)
    f(*args)  # the second call fills the fast path
    assert f._cache.fast
    return f


def test_fast_path_results_are_fresh_and_right():
    x = np.arange(1024, dtype=np.float32)
    f = _warm(lambda a: a * 2 + 1, x)
    r1, r2 = f(x), f(x)
    assert r1 is not r2 and not np.shares_memory(r1, r2) and not np.shares_memory(r1, x)
    np.testing.assert_array_equal(r1, x * 2 + 1)
    assert f.stats()["hits"] >= 3


def test_fast_path_keeps_validation():
    x = np.ones(16, np.float32)
    f = _warm(lambda a: a + 1, x)
    with pytest.raises(DTypeError):
        f(np.ones(16, np.complex64))
    with pytest.raises(DTypeError):
        f(object())
    # another shape and dtype: a new specialization, right values
    np.testing.assert_array_equal(f(np.ones(8, np.float64)), np.full(8, 2.0))
    np.testing.assert_array_equal(f([1.0, 2.0]), [2.0, 3.0])
    assert f(2.5) == 3.5


def test_subclass_and_scalar_args_take_the_slow_path():
    x = np.ones((4, 4), np.float32)
    f = _warm(lambda a: a * 3, x)
    class Tagged(np.ndarray):
        pass

    m = x.view(Tagged)  # np.matrix is refused (its * is a matrix product)
    assert type(f(m)) is np.ndarray
    assert f(np.float32(2)) == 6


def test_weak_int_range_checks_still_raise():
    x = np.ones(8, np.int8)
    f = halojit.trace(lambda a, b: a + b)
    f(x, 1)
    f(x, 1)
    with pytest.raises(OverflowError):
        f(x, 1000)


def test_out_argument_and_zero_d_outputs():
    x = np.arange(6, dtype=np.float32)
    f = _warm(lambda a: (a * 2, a.sum()), x)
    y, s = f(x)
    assert isinstance(s, np.floating) and s == 15
    out = (np.empty(6, np.float32), np.empty((), np.float32))
    f(x, out=out)
    np.testing.assert_array_equal(out[0], x * 2)


def test_removing_a_specialization_forgets_the_fast_entry():
    x = np.ones(32, np.float32)
    f = _warm(lambda a: a - 1, x)
    key = next(iter(f._cache))
    f._cache.pop(key)  # what a tuning run does to use its new recipe
    assert not f._cache.fast
    np.testing.assert_array_equal(f(x), np.zeros(32))
    assert f.stats()["misses"] == 2


def test_inside_another_trace_inlines():
    x = np.ones(16, np.float32)
    inner = _warm(lambda a: a * 2, x)
    outer = halojit.trace(lambda a: inner(a) + 1)
    np.testing.assert_array_equal(outer(x), np.full(16, 3.0))


def test_small_groups_have_no_parallel_loop():
    x = np.ones((4, 1024), np.float32)
    f = halojit.trace(lambda a: np.exp(a - a.max(axis=-1, keepdims=True)))
    (g,) = f.lower(x).groups
    assert ".parallel(" not in g.schedule
    big = np.ones((256, 1024), np.float32)
    assert ".parallel(" in f.lower(big).groups[0].schedule


def test_fast_path_copies_strided_inputs_and_takes_bools():
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    f = _warm(lambda a, m: np.where(m, a * 2, a) > 10, x, x > 3)
    t = x.T  # the same shape and dtype, a strided last axis: the plan copies it
    got = f(t, t > 3)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, np.where(t > 3, t * 2, t) > 10)
    np.testing.assert_array_equal(f(x[::-1], x[::-1] > 3), np.where(x[::-1] > 3, x[::-1] * 2, x[::-1]) > 10)


def test_fast_path_out_checks_and_falls_back():
    x = np.arange(16, dtype=np.float32)
    f = _warm(lambda a: a + 1, x)
    out = np.empty(16, np.float32)
    assert f(x, out=out) is out
    np.testing.assert_array_equal(out, x + 1)
    y = x.copy()
    assert f(y, out=y) is y  # out= is the input: computed first, then written
    np.testing.assert_array_equal(y, x + 1)
    strided = np.zeros(32, np.float32)
    f(x, out=strided[::2])
    np.testing.assert_array_equal(strided[::2], x + 1)
    with pytest.raises(ValueError):
        f(x, out=np.empty(8, np.float32))
    with pytest.raises(DTypeError):
        f(x, out=np.empty(16, np.float64))


def test_fast_path_tuple_and_scalar_results():
    x = np.arange(6, dtype=np.float32)
    f = _warm(lambda a: a.sum(), x)
    assert f(x) == 15 and isinstance(f(x), np.floating)
    g = _warm(lambda a: (a * 2,), x)
    (r,) = g(x)
    np.testing.assert_array_equal(r, x * 2)
    out = np.empty(6, np.float32)
    (r,) = g(x, out=out)
    assert r is out
    s = np.empty((), np.float32)
    assert f(x, out=s) is s and s == 15
