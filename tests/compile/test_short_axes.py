"""Axes shorter than a vector: Adams2019 may split them by the full vector
width with ShiftInwards, which starts the one iteration before 0. Inputs are
read through a clamp on such axes (lowering._clamp_short); these shapes
failed at run time with "Input buffer in0 is accessed at -8" before."""

from __future__ import annotations

import numpy as np
import pytest

import halojit

pytestmark = pytest.mark.level3


def softmax(a):
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("shape", [(4, 8), (3, 5), (8, 3), (2, 17)])
def test_softmax_of_short_rows(shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = halojit.trace(softmax)(x)
    np.testing.assert_allclose(got, softmax(x), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("shape", [(5, 40), (40, 5)])
def test_byte_arrays_with_short_axes(shape):
    # one-byte lanes: the natural vector is 64 wide on AVX-512
    rng = np.random.default_rng(1)
    a = rng.integers(0, 255, shape, dtype=np.uint8)
    b = rng.integers(0, 255, shape[-1], dtype=np.uint8)
    f = halojit.trace(lambda x, y: (x // 3 + y, (x > y).sum(axis=0)))
    got, count = f(a, b)
    np.testing.assert_array_equal(got, a // 3 + b)
    np.testing.assert_array_equal(count, (a > b).sum(axis=0))


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("m,k,n", [(1, 64, 1), (1, 1, 1), (5, 30, 1), (1, 30, 7)])
def test_matmul_with_one_column_or_row_and_an_epilogue(m, k, n, dtype, tol):
    # the Matmul template's column vectors shifted before 0 on a one-column B:
    # "Input buffer in1 is accessed at -15" (float32), -7 (float64)
    rng = np.random.default_rng(m * 100 + k + n)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(dtype)
    for fn in (lambda a, b: np.maximum(a @ b + b[0], 0), lambda a, b: (a @ b) * 0.5 - 1):
        got = halojit.trace(fn)(a, b)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, fn(a, b), rtol=tol, atol=tol)
