"""np.asarray, np.array, np.asanyarray and np.ascontiguousarray of traced
values inside a traced function (numpy gives them no __array_function__:
halojit's trace_context wraps them while a trace runs), against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from helpers import jit

X = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 7


def _copy_is_separate(x):
    y = np.array(x * 1)
    z = np.array(y)  # a copy: y's update must not reach it
    y += 1
    return y, z


CASES = {
    "asarray": lambda x: np.asarray(x) * 2,
    "asarray-dtype": lambda x: np.asarray(x, dtype=np.float64) + 1,
    "asarray-same-dtype": lambda x: np.asarray(x, np.float32) - x,
    "array-copy": _copy_is_separate,
    "array-of-scalars": lambda x: np.array([x.sum(), x.max(), 3.0]),  # float64, as numpy
    "array-nested": lambda x: np.array([[x[0], x[1]], [x[2], x[0]]], dtype=np.float16),
    "array-ndmin": lambda x: np.array(x.sum(), ndmin=2),
    "asanyarray": lambda x: np.asanyarray(x.T).sum(axis=0),
    "ascontiguousarray": lambda x: np.ascontiguousarray(x[:, ::-2]) + 0,
    "ascontiguousarray-0d": lambda x: np.ascontiguousarray(x.sum()),
    "int-list": lambda x: np.asarray([x.argmax(), 2]) + 1,
}


@pytest.mark.parametrize("name", list(CASES))
def test_constructors_of_traced_values(name, opt_level):
    fn = CASES[name]
    keep = X.copy()
    got, want = jit(fn, opt_level)(X), fn(X.copy())
    for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-6)
    np.testing.assert_array_equal(X, keep)


def test_list_inputs_through_asarray_follow_each_call():
    # the common first line of a numpy function; lists are converted on entry
    f = halojit.trace(lambda a: np.asarray(a, dtype=np.float64).cumsum())
    for a in ([1, 2, 3], [4.5, -1.0, 2.0]):
        np.testing.assert_array_equal(f(a), np.cumsum(np.asarray(a, dtype=np.float64)))


def test_symbolic_false_keeps_asarray_traced():
    # not frozen to the first call's values (which converting to numpy would do)
    f = halojit.trace(lambda x: np.asarray(x) * 2, symbolic=False)
    with pytest.warns(halojit.TraceWarning, match="0 value-dependent"):
        f(X)
    for k in range(3):
        np.testing.assert_array_equal(f(X + k), (X + k) * 2)


def test_constructors_are_numpys_own_outside_a_trace():
    f = halojit.trace(lambda x: np.asarray(x) + 1)
    f(X)
    assert not hasattr(np.asarray, "__wrapped__") and not hasattr(np.array, "__wrapped__")


def test_constructors_are_restored_when_a_trace_fails():
    def bad(x):
        np.asarray(x)
        if x.sum() > 0:  # a value-dependent branch: TraceError mid-trace
            return x
        return -x

    with pytest.raises(halojit.TraceError):
        halojit.trace(bad)(X)
    assert not any(hasattr(getattr(np, n), "__wrapped__")
                   for n in ("asarray", "array", "asanyarray", "ascontiguousarray"))


def test_refused_forms_say_why(opt_level):
    with pytest.raises(halojit.UnsupportedError, match="order='F'"):
        jit(lambda x: np.asarray(x, order="F"), opt_level)(X)


@pytest.mark.parametrize("fn, args", [
    (lambda x, v: np.full_like(x, v), (np.arange(6.0).reshape(2, 3), 3)),
    (lambda x, v: np.full_like(x, v, dtype=np.int8), (np.arange(6.0), -2.7)),
    (lambda x: np.full_like(x, x.max()) - x, (np.arange(6, dtype=np.int16).reshape(3, 2),)),
    (lambda x, v: np.full_like(x, v, shape=()), (np.arange(3.0), 1.5)),
    (lambda x, v: np.full_like(x, v), (np.ones((2, 3), np.float32), np.arange(3.0))),
    (lambda x, v: np.full_like(x, v), (np.ones(4, np.float32), np.nan)),
], ids=["weak-int", "float-to-int8", "traced-max", "0-d", "row", "nan"])
def test_full_like_of_a_traced_value(fn, args, opt_level):
    want = fn(*args)
    got = jit(fn, opt_level)(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_full_like_out_of_range_is_numpys_error(opt_level):
    with pytest.raises(OverflowError):
        jit(lambda x, v: np.full_like(x, v), opt_level)(np.zeros(3, np.uint8), 300)
