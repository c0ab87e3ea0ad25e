"""numpy_more's np.lib.stride_tricks.sliding_window_view (windows along one
or several axes, repeated axes, empty windows, views, errors, read-only
results), np.unwrap and np.lexsort, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view as swv

from helpers import HAS_HALIDE_BACKEND, assert_matches_numpy, jit

RNG = np.random.default_rng(3)
LEVELS = [0] + ([3] if HAS_HALIDE_BACKEND else [])
X = RNG.standard_normal((6, 7)).astype(np.float32)
V = RNG.standard_normal(50).astype(np.float32)
I = RNG.integers(-50, 50, (5, 9)).astype(np.int16)

CASES = {
    "moving-mean": (lambda v: swv(v, 3).mean(-1), V),
    "1d": (lambda v: swv(v, 5), V),
    "whole": (lambda v: swv(v, 50), V),
    "2d-all-axes": (lambda x: swv(x, (2, 3)), X),
    "axis0": (lambda x: swv(x, 3, axis=0), X),
    "axes-reversed": (lambda x: swv(x, (2, 2), axis=(1, 0)), X),
    "axis-twice": (lambda x: swv(x, (2, 3), axis=(1, 1)), X),
    "empty-window": (lambda x: swv(x, 0, axis=1), X),
    "strided-view-max": (lambda x: swv(x[:, ::2], 2, axis=-1).max(-1), X),
    "ints-sum": (lambda i: swv(i, 4, axis=1).sum(-1), I),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy(name, level):
    fn, a = CASES[name]
    assert_matches_numpy(fn, (a,), level)


@pytest.mark.parametrize("fn", [lambda v: swv(v, 51), lambda v: swv(v.reshape(5, 10), 3),
                                lambda v: swv(v, -1), lambda v: swv(v, (2,), axis=(0, 0)),
                                lambda v: swv(v, 2, axis=1)])
def test_errors_as_numpy(fn):
    with pytest.raises((ValueError, np.exceptions.AxisError)) as want:
        fn(V)
    with pytest.raises(type(want.value)):
        jit(fn)(V)


def test_windows_are_read_only_and_writeable_is_refused():
    def write(v):
        w = swv(v, 3)
        w[0, 0] = 1.0
        return w
    with pytest.raises(ValueError, match="read-only"):
        jit(write)(V)
    with pytest.raises(NotImplementedError, match="share memory"):
        jit(lambda v: swv(v, 3, writeable=True))(V)


# np.unwrap (numpy_more), step for step as numpy's
P = np.cumsum(RNG.standard_normal((4, 300)) * 2, axis=1)
WRAPPED = np.angle(np.exp(1j * P))
UNWRAP = {
    "float64": ({}, WRAPPED),
    "float32-axis0": ({"axis": 0}, WRAPPED.astype(np.float32)),
    "discont": ({"discont": 4.0}, WRAPPED),
    "degrees": ({"period": 360}, np.degrees(WRAPPED)),
    "int-even-period": ({"period": 6}, (WRAPPED * 100).astype(np.int32)),
    "int-odd-period": ({"period": 7}, (WRAPPED * 3).astype(np.int64)),
    "half-period-jumps": ({}, np.array([0.0, np.pi, 0.0, -np.pi, 2.0, np.nan, 1.0])),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", sorted(UNWRAP))
def test_unwrap(name, level):
    kw, a = UNWRAP[name]
    assert_matches_numpy(lambda p: np.unwrap(p, **kw), (a,), level)


# np.lexsort (numpy_more): successive stable argsorts
A3 = RNG.integers(0, 3, 40)
B4 = RNG.integers(0, 4, 40)
C = RNG.standard_normal(40)
C[[3, 9]] = np.nan
M = RNG.integers(0, 3, (3, 5, 8))
LEXSORT = {
    "two-keys": (lambda a, b: np.lexsort((a, b)), (A3, B4)),
    "nan-key-first": (lambda a, b, c: np.lexsort((c, a, b)), (A3, B4, C)),
    "nan-key-last": (lambda a, c: np.lexsort((a, c)), (A3, C)),
    "2d-keys-array": (lambda m: np.lexsort(m), (M,)),
    "axis0": (lambda m: np.lexsort(m, axis=0), (M,)),
    "one-key": (lambda a: np.lexsort((a,)), (A3,)),
    "bool-key": (lambda m: np.lexsort((m[0], m[1] > 0)), (M,)),
    "0d-key": (lambda a: np.lexsort((a[0],)), (A3,)),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", sorted(LEXSORT))
def test_lexsort(name, level):
    fn, args = LEXSORT[name]
    assert_matches_numpy(fn, args, level)


def test_lexsort_errors_as_numpy():
    for fn, args in [(lambda a, b: np.lexsort((a, b[:-1])), (A3, B4))]:
        with pytest.raises((ValueError, np.exceptions.AxisError)) as want:
            fn(*args)
        with pytest.raises(type(want.value)):
            jit(fn)(*args)


# np.vectorize (numpy_more.vectorize_call): pyfunc traced once on whole arrays
X5 = RNG.standard_normal((4, 5)).astype(np.float32)
Y5 = RNG.standard_normal(5)
I5 = RNG.integers(-5, 5, (4, 5)).astype(np.int32)


def _affine(a, b=2.0):
    return a * b + 1


VF = np.vectorize(_affine)
VECTORIZE = {
    "one-arg": (lambda x: VF(x), (X5,)),
    "broadcast": (lambda x, y: VF(x, y), (X5, Y5)),
    "keyword": (lambda x, y: VF(x, b=y), (X5, Y5)),
    "ints": (lambda i: np.vectorize(lambda a: a * 2)(i), (I5,)),
    "otypes": (lambda i: np.vectorize(lambda a: a > 0, otypes=[np.float32])(i), (I5,)),
    "constant": (lambda x: np.vectorize(lambda a: 3)(x), (X5,)),
    "two-outputs": (lambda x: np.vectorize(lambda a: (a, a * 2))(x)[1], (X5,)),
    "excluded": (lambda x: np.vectorize(lambda a, s: a * s, excluded={1})(x, 3), (X5,)),
    "where": (lambda x: np.vectorize(lambda a: np.where(a > 0, a, 0.0))(x), (X5,)),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", sorted(VECTORIZE))
def test_vectorize(name, level):
    fn, args = VECTORIZE[name]
    assert_matches_numpy(fn, args, level)


def test_vectorize_errors():
    import math
    import halojit
    with pytest.raises(halojit.TraceError, match="branch"):
        jit(lambda x: np.vectorize(lambda a: a if a > 0 else 0)(x))(X5)
    with pytest.raises(halojit.TraceError, match="float"):
        jit(lambda x: np.vectorize(math.exp)(x))(X5)
    with pytest.raises(NotImplementedError, match="signature"):
        jit(lambda x: np.vectorize(lambda a: a, signature="(n)->(n)")(x))(X5)
    with pytest.raises(ValueError, match="size 0"):
        jit(lambda x: np.vectorize(lambda a: a)(x[:0]))(X5)
    # outside a trace np.vectorize is numpy's own again
    assert VF(np.float32(1.5)) == 4.0 and not hasattr(np.vectorize.__call__, "__wrapped__")
