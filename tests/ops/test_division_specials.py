"""Float division where the divisor is zero, infinite or NaN: numpy's IEEE
results, signed zeros included (halide_ops._fdiv computes a / +-0 as
a * copysign(inf, b))."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from helpers import assert_same_bits

pytestmark = pytest.mark.level3

SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3e38, 2.5])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_every_pair_of_specials(dtype):
    with np.errstate(all="ignore"):
        a, b = (v.astype(dtype) for v in np.meshgrid(SPECIALS, SPECIALS))
        want = a / b
    got = halojit.trace(lambda x, y: x / y)(a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert (np.signbit(got) == np.signbit(want)).all()


def test_constant_zero_and_reciprocal():
    x = SPECIALS.astype(np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(halojit.trace(lambda v: v / 0.0)(x), x / np.float32(0))
        np.testing.assert_array_equal(halojit.trace(lambda v: v / -0.0)(x), x / np.float32(-0.0))
        want = np.float32(1) / x
    got = halojit.trace(lambda v: np.reciprocal(v))(x)
    np.testing.assert_array_equal(got, want)
    assert (np.signbit(got) == np.signbit(want)).all()


DIVISORS = [3.0, -3.0, 4.0, 0.5, -8.0, 2.0 ** -126, 2.0 ** -149, 2.0 ** 127, 1e-300, 1 / 3,
            65504.0, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_constant_divisors_bit_for_bit(dtype):
    # a nonzero constant divisor skips _fdiv's zero test, and a power of two
    # with a normal reciprocal becomes a multiply (divide_by_constant): same bits
    rng = np.random.default_rng(5)
    tiny = np.finfo(dtype).tiny
    with np.errstate(over="ignore"):  # 3e38 is inf in float16
        x = np.concatenate([SPECIALS, rng.standard_normal(200) * 1e3, [tiny, -tiny / 4, 65504.0]]
                           ).astype(dtype)
    for c in DIVISORS:
        fn = lambda v, c=c: v / c  # noqa: E731
        with np.errstate(all="ignore"):
            want = fn(x)
            got = halojit.trace(fn)(x)
        assert_same_bits(got, want)


def _tiny_quotient_inputs(c, rng):
    # float32 a whose a / c is subnormal: every exact rounding tie
    # (2j+1) * 2**-150 and random bit patterns of that range, both signs
    n, k = int(c), 0
    while n % 2 == 0 and n:
        n, k = n // 2, k + 1
    ties = [(2 * j + 1) * float(c) * 2.0 ** -150 for j in range(4000) if (2 * j + 1) * n < 2 ** 24]
    top = np.float32(float(c) * 2.0 ** -126).view(np.uint32)
    rand = rng.integers(0, int(top), 100_000, dtype=np.uint32).view(np.float32)
    x = np.concatenate([np.array(ties if k else [], np.float32), rand])
    return np.concatenate([x, -x])


@pytest.mark.parametrize("c", [3.0, 6.0, 10.0, 98.0, 150.0, 1000.0, 0.1, 255.0])
def test_float32_constant_divisor_ties(c):
    # subnormal quotients and exact rounding ties, where a shortcut for a
    # constant divisor goes wrong first (a float64 multiply rounded some ties
    # of 98 and 150 the other way; see halide_ops.divide_by_constant)
    x = _tiny_quotient_inputs(c, np.random.default_rng(int(c * 10)))
    fn = lambda v: v / c  # noqa: E731
    assert_same_bits(halojit.trace(fn)(x), fn(x))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_negative_and_abs_keep_numpys_signed_zeros(dtype):
    x = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan], dtype)
    for fn in (lambda x: -x, np.negative, np.abs, lambda x: 1 / -x, lambda x: 1 / np.abs(x)):
        with np.errstate(divide="ignore"):
            want = fn(x)
        got = halojit.trace(fn)(x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got[:4]), np.signbit(want[:4])), (got, want)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_difference_of_a_value_with_itself_in_a_reduction(dtype):
    # Halide folded y - y to 0 inside a sum's update: numpy's NaN for inf/NaN
    y = np.array([[1.5, np.inf, -2.0], [np.nan, 0.0, -0.0], [3.0, 4.0, 5.0]], dtype)
    fns = (lambda y: (y - y).sum(), lambda y: (y - y).sum(axis=0), lambda y: (y - y).sum(axis=1),
           lambda y: np.mean(y - y, axis=1), lambda y: y - y, lambda y: ((y - y) * 2).max(axis=0))
    for fn in fns:
        with np.errstate(invalid="ignore"):
            want = fn(y)
        got = halojit.trace(fn)(y)
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)
        real = ~np.isnan(want)  # a NaN's sign bit is the CPU's choice
        assert np.array_equal(np.signbit(got)[real], np.signbit(want)[real])
