"""np.diff, np.triu / np.tril and np.count_nonzero inside traces: exactly
numpy's values and dtypes (integer wrap-around, bool differences as !=,
prepend/append promotion), NaN and inf, zero-size arrays, and numpy's
errors."""

from __future__ import annotations

import numpy as np
import pytest

import halojit

from helpers import assert_same


def _arrays():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 7)).astype(np.float32)
    x[2, 3], x[1, 1], x[4, 0] = np.nan, np.inf, -np.inf
    return {
        "float32": x,
        "int8": rng.integers(-120, 120, (6, 7)).astype(np.int8),  # differences wrap
        "uint8": rng.integers(0, 255, (6, 7)).astype(np.uint8),
        "bool": x > 0,
        "float64-3d": rng.standard_normal((2, 3, 4)),
    }


ARRAYS = _arrays()

FUNCS = {
    "diff": lambda a: np.diff(a),
    "diff-axis0": lambda a: np.diff(a, axis=0),
    "diff-n2": lambda a: np.diff(a, 2, axis=0),
    "diff-n0": lambda a: np.diff(a, 0),
    "diff-n-past-size": lambda a: np.diff(a, n=9),
    "diff-prepend-scalar": lambda a: np.diff(a, prepend=0),
    "diff-append-slice": lambda a: np.diff(a, axis=0, append=a[:1]),
    "diff-prepend-float": lambda a: np.diff(a, prepend=0.5),
    "triu": lambda a: np.triu(a),
    "triu-k2": lambda a: np.triu(a, 2),
    "tril-k-1": lambda a: np.tril(a, -1),
    "tril-k-big": lambda a: np.tril(a, 10),
    "count": lambda a: np.count_nonzero(a),
    "count-axis1": lambda a: np.count_nonzero(a, axis=1),
    "count-keepdims": lambda a: np.count_nonzero(a, axis=0, keepdims=True),
    "fused": lambda a: np.diff(np.triu(a), axis=0).sum(axis=0) + np.count_nonzero(a, axis=0),
}


@pytest.mark.parametrize("func", sorted(FUNCS))
@pytest.mark.parametrize("kind", sorted(ARRAYS))
def test_against_numpy(func, kind):
    fn, a = FUNCS[func], ARRAYS[kind]
    a_in = a.copy()
    with np.errstate(all="ignore"):
        want = np.asarray(fn(a))
        got = np.asarray(halojit.trace(fn)(a))
    assert_same(got, want)
    assert np.array_equal(a, a_in, equal_nan=True)


@pytest.mark.parametrize("fn", [np.triu, np.tril])
def test_triangle_of_1d_broadcasts_to_square(fn):
    v = np.arange(1, 6, dtype=np.float32)
    assert_same(halojit.trace(fn)(v), fn(v))


@pytest.mark.parametrize("fn", [np.diff, np.triu, lambda a: np.count_nonzero(a, axis=1)])
def test_zero_size(fn):
    a = np.zeros((0, 3), np.float32)
    assert_same(np.asarray(halojit.trace(fn)(a)), np.asarray(fn(a)))


def test_large_triu_on_the_compiled_path():
    a = np.random.default_rng(1).standard_normal((300, 260)).astype(np.float32)
    f = halojit.trace(lambda a: np.triu(a * 2, 1))
    assert_same(f(a), np.triu(a * 2, 1))
    assert len(f.lower(a).groups) == 1  # the mask is two index vectors, fused


@pytest.mark.parametrize("fn,message", [
    (lambda a: np.diff(a, -1), "order must be non-negative"),
    (lambda a: np.diff(a[0, 0]), "at least one dimensional"),
])
def test_errors(fn, message):
    with pytest.raises(ValueError, match=message):
        halojit.trace(fn)(ARRAYS["float32"])


def test_triangle_of_0d_is_a_type_error():  # numpy's class: tri() misses its N
    with pytest.raises(TypeError, match="at least 1 dimension"):
        halojit.trace(lambda a: np.triu(a[0, 0]))(ARRAYS["float32"])
