"""Matmuls with a short inner dimension (passes/matmul.py
expand_short_matmuls): point transforms ``p @ R.T + t``, color matrices on
HWC images, batched and broadcast forms, against numpy; they become one
elementwise kernel (the Elementwise template where large), and the cases
the pass leaves alone keep a matmul."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.graph.passes.matmul import SHORT_K, SHORT_N

pytestmark = pytest.mark.level3


def rand(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def check(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f":
        tol = 1e-5 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sa, sb, dtype", [
    ((100003, 3), (3, 3), np.float32),       # points, parallel
    ((100003, 3), (3, 3), np.int32),
    ((50, 3), (3, 3), np.float64),           # small, one task
    ((4096, 4), (4, 4), np.float64),         # homogeneous coordinates
    ((4097, 8), (8, 4), np.float32),         # the longest K, widest N expanded
    ((4097, 2), (2, 4), np.int8),            # wraps as numpy
    ((3000, 3), (3, 1), np.uint16),          # a column
    ((5, 7, 3), (3, 3), np.float32),         # batched A, shared B
    ((2, 1, 40, 4), (3, 4, 2), np.float64),  # batch dims broadcast both ways
    ((1, 1), (1, 4), np.int32),
])
def test_values_match_numpy(sa, sb, dtype):
    a, b = rand(sa, dtype, 1), rand(sb, dtype, 2)
    check(halojit.trace(lambda x, y: x @ y)(a, b), a @ b)


def test_point_transform_is_one_elementwise_kernel():
    p, r, t = rand((200000, 3), np.float32, 3), rand((3, 3), np.float32, 4), rand(3, np.float32, 5)
    f = halojit.trace(lambda p, r, t: p @ r.T + t)
    check(f(p, r, t), p @ r.T + t)
    lo = f.lower(p, r, t)
    assert lo.kernel_count == 1
    assert lo.groups[0].scheduler.startswith("Elementwise"), lo.groups[0].scheduler
    assert "matmul" not in lo.groups[0].ops


def test_views_and_a_color_matrix_on_an_image():
    img = rand((120, 161, 3), np.float32, 6)[:, ::2]  # strided rows
    m = rand((3, 3), np.float32, 7)
    f = halojit.trace(lambda im, m: np.clip(im @ m.T, 0, 1))
    check(f(img, m), np.clip(img @ m.T, 0, 1))
    at = rand((3, 5000), np.float64, 8).T  # a transposed (Fortran-order) A
    check(halojit.trace(lambda x, y: x @ y)(at, m.astype(np.float64)), at @ m.astype(np.float64))


def test_signed_zeros_nan_inf_and_integer_wraparound():
    a = np.array([[-0.0, -0.0], [np.inf, 1.0], [np.nan, 0.0], [1e38, 1e38]], np.float32)
    b = np.array([[1.0, -0.0], [1.0, 2.0]], np.float32)
    got = halojit.trace(lambda x, y: x @ y)(a, b)
    want = a @ b
    np.testing.assert_array_equal(got, want)  # NaN == NaN here, inf, overflow to inf
    assert np.array_equal(np.signbit(got), np.signbit(want))  # a sum from +0.0, as numpy
    ai = np.array([[100, 100, 100]], np.int8)
    bi = np.array([[2], [2], [2]], np.int8)
    np.testing.assert_array_equal(halojit.trace(lambda x, y: x @ y)(ai, bi), ai @ bi)


@pytest.mark.parametrize("sa, sb, dtype", [
    ((300, SHORT_K + 1), (SHORT_K + 1, 3), np.float32),   # K too long
    ((300, 2), (2, SHORT_N + 1), np.float32),             # too many columns
    ((300, 3), (3, 3), np.float16),                       # float16 accumulates in float32
    ((300, 3), (3, 3), np.bool_),
])
def test_others_keep_the_matmul(sa, sb, dtype):
    a = rand(sa, np.float32, 9).astype(dtype)
    b = rand(sb, np.float32, 10).astype(dtype)
    f = halojit.trace(lambda x, y: x @ y)
    got = f(a, b)
    want = a @ b
    if dtype == np.float16:
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)
    else:
        check(got, want)
    assert any("matmul" in g.ops for g in f.lower(a, b).groups)
