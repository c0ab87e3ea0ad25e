"""np.linalg.norm, vector_norm and matrix_norm traced: every vector and
matrix order numpy computes without an SVD, over one axis, two axes or the
flattened array, with keepdims, integer inputs (float64 results, as numpy),
NaN/inf and zero-size vectors, against numpy; unsupported orders and bad
axes raise before anything compiles."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.errors import ShapeError, UnsupportedError

from helpers import assert_same, random_array

VECTOR_ORDS = [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5, -1]
MATRIX_ORDS = [None, "fro", 1, -1, np.inf, -np.inf]


def data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        return random_array(rng, shape, dtype, -50, 50)
    return random_array(rng, shape, dtype, -3.0, 3.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("ord", VECTOR_ORDS, ids=str)
@pytest.mark.parametrize("axis,keepdims", [(1, False), (-1, True), (0, False)])
def test_vector_norms_match_numpy(dtype, ord, axis, keepdims):
    x = data((37, 70), dtype, seed=7)
    x[3, 4] = 0  # ord 0 counts nonzeros; negative orders see a zero
    fn = lambda x: np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)  # noqa: E731
    with np.errstate(divide="ignore"):
        want = fn(x)
        assert_same(halojit.trace(fn)(x), want, rtol=2e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.int16])
@pytest.mark.parametrize("ord", MATRIX_ORDS, ids=str)
@pytest.mark.parametrize("axis,keepdims", [(None, False), ((0, 1), True), ((1, 0), False)])
def test_matrix_norms_match_numpy(dtype, ord, axis, keepdims):
    x = data((23, 41), dtype, seed=3)
    fn = lambda x: np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)  # noqa: E731
    assert_same(halojit.trace(fn)(x), fn(x), rtol=2e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("ord", [1, np.inf, -1, -np.inf, "fro"], ids=str)
def test_batched_matrix_norms_over_chosen_axes(ord):
    x = data((4, 9, 3, 6), np.float64, seed=11)
    for axes in [(1, 3), (3, 1), (-1, 0)]:
        fn = lambda x: np.linalg.norm(x, ord=ord, axis=axes, keepdims=True)  # noqa: E731
        assert_same(halojit.trace(fn)(x), fn(x), rtol=1e-12)
    mfn = lambda x: np.linalg.matrix_norm(x, ord=ord)  # noqa: E731
    assert_same(halojit.trace(mfn)(x), mfn(x), rtol=1e-12)


@pytest.mark.parametrize("shape", [(5,), (4, 6), (2, 3, 4), (0, 3)])
def test_norm_of_everything_and_vector_norm(shape):
    x = data(shape, np.float32, seed=len(shape))
    for fn in [lambda x: np.linalg.norm(x), lambda x: np.linalg.norm(x, keepdims=True),
               lambda x: np.linalg.vector_norm(x), lambda x: np.linalg.vector_norm(x, ord=1),
               lambda x: np.linalg.vector_norm(x, axis=-1, keepdims=True)]:
        assert_same(halojit.trace(fn)(x), fn(x), rtol=2e-5)


def test_nan_and_inf_propagate_and_a_fused_normalize():
    x = data((300, 64), np.float32, seed=5)
    x[2, 3], x[7, 0], x[9, 1] = np.nan, np.inf, -np.inf
    before = x.copy()
    fn = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    with np.errstate(invalid="ignore"):
        want = fn(x)
    assert_same(halojit.trace(fn)(x), want, rtol=2e-5)
    inf_norm = lambda x: np.linalg.norm(x, ord=np.inf, axis=1)  # noqa: E731
    assert_same(halojit.trace(inf_norm)(x), inf_norm(x))
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("call,err,match", [
    (lambda x: np.linalg.norm(x, ord=2, axis=(0, 1)), UnsupportedError, "singular values"),
    (lambda x: np.linalg.norm(x, ord="nuc"), UnsupportedError, "singular values"),
    (lambda x: np.linalg.norm(x, ord="fro", axis=0), ValueError, "Invalid norm order"),
    (lambda x: np.linalg.norm(x, ord=3, axis=(0, 1)), ValueError, "Invalid norm order"),
    (lambda x: np.linalg.norm(x, axis=(1, 1)), ValueError, "Duplicate axes"),
    (lambda x: np.linalg.norm(x, axis=2), ShapeError, "axis 2 is out of bounds"),
    (lambda x: np.linalg.norm(x, axis=1.5), TypeError, "axis must be an int"),
    (lambda x: np.linalg.matrix_norm(x[0]), ValueError, "at least 2 dimensions"),
])
def test_bad_norms_raise_clear_errors(call, err, match):
    x = data((3, 4), np.float32)
    with pytest.raises(err, match=match):
        halojit.trace(call)(x)
