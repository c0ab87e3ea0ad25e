"""Float `np.fmod`, `%` and `//` bit-exact against numpy (halide_ops._float_fmod):
exact while |a/b| < 2**112 for float32 (all of float16) and 2**51 for
float64; beyond that the remainder is 0, a documented difference."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import same_bits

import halojit

pytestmark = pytest.mark.level3

EXACT_RATIO = {np.float16: 2.0 ** 112, np.float32: 2.0 ** 112, np.float64: 2.0 ** 51}


@halojit.trace
def divmods(a, b):
    return np.fmod(a, b), a % b, a // b


def _check(a, b, exact):
    with np.errstate(all="ignore"):
        wants = np.fmod(a, b), np.remainder(a, b), np.floor_divide(a, b)
    results = divmods(a, b)
    a, b, exact = np.broadcast_arrays(a, b, exact)
    for name, got, want in zip(("fmod", "%", "//"), results, wants):
        assert got.dtype == want.dtype and got.shape == want.shape
        bad = ~same_bits(got, want) & exact
        assert not bad.any(), (name, a[bad][:4], b[bad][:4], got[bad][:4], want[bad][:4])


def _random_exponents(rng, dtype, n):
    """Magnitudes spread over the dtype's whole exponent range, both signs."""
    fi = np.finfo(dtype)
    e = rng.integers(fi.minexp - fi.nmant, fi.maxexp, n)
    v = np.ldexp(rng.uniform(1, 2, n), e)
    with np.errstate(over="ignore"):
        return (v * rng.choice([-1.0, 1.0], n)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_any_exponent_pair(dtype):
    rng = np.random.default_rng(7)
    a, b = _random_exponents(rng, dtype, 20000), _random_exponents(rng, dtype, 20000)
    a, b = a[np.isfinite(a) & np.isfinite(b)], b[np.isfinite(a) & np.isfinite(b)]
    with np.errstate(all="ignore"):
        ratio = np.abs(a.astype(np.float64) / b.astype(np.float64))
    exact = ratio < EXACT_RATIO[dtype]
    assert exact.sum() > 1000
    _check(a, b, exact)
    # beyond the exact range: a remainder still, |r| < |b| with a's sign
    r = divmods(a, b)[0][~exact]
    assert (np.abs(r) < np.abs(b[~exact])).all() and not np.isnan(r).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_quotients_next_to_an_integer(dtype):
    # a/b rounds up to an integer here: the old a - b*trunc(a/b) gave 0 for
    # float64 [1., 2.] % 0.1, numpy 0.09999999999999995
    rng = np.random.default_rng(3)
    b = rng.choice(np.array([0.1, 0.7, 2 * np.pi, 1.0, 3.0, 1e-3], dtype), 20000)
    k = rng.integers(-(2 ** 20), 2 ** 20, b.size).astype(dtype)
    for a in (k * b, np.nextafter(k * b, dtype(np.inf)), np.nextafter(k * b, dtype(-np.inf))):
        _check(a, b, np.ones(a.shape, bool))
    _check(np.array([1.0, 2.0, 3.0, -1.0], dtype), np.full(4, 0.1, dtype), True)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_specials(dtype):
    fi = np.finfo(dtype)
    s = np.array([0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan,
                  fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal, fi.max, -fi.max], dtype)
    a, b = (v.ravel() for v in np.meshgrid(s, s))
    with np.errstate(all="ignore"):
        ratio = np.abs(a.astype(np.float64) / b.astype(np.float64))
    _check(a, b, ~(np.isfinite(ratio) & (ratio >= EXACT_RATIO[dtype])))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_signs_as_numpy(dtype):
    """NaN made by fmod (inf % x, x % 0) is x86's default NaN, sign set, as
    C's fmod gives it to numpy; a NaN operand passes through with its sign
    (np.signbit tells them apart)."""
    vals = [0.0, -0.0, 1.5, -2.5, np.inf, -np.inf, np.nan, -np.nan, 3.0]
    a, b = (np.array(v, dtype) for v in zip(*[(x, y) for x in vals for y in vals
                                              if not (np.isnan(x) and np.isnan(y))]))
    with np.errstate(all="ignore"):
        wants = np.fmod(a, b), np.remainder(a, b), np.floor_divide(a, b)
    for name, got, want in zip(("fmod", "%", "//"), divmods(a, b), wants):
        nan = np.isnan(want)
        assert nan.any() and (np.isnan(got) == nan).all(), name
        np.testing.assert_array_equal(np.signbit(got[nan]), np.signbit(want[nan]), err_msg=name)


def test_large_float32_quotient_and_views():
    # the fuzz's float32 1e30 % 7 (numpy 2.0 here; the old code 0); a
    # negative-stride view and a broadcast scalar divisor
    a = np.array([1e30, -3e33, 7.5, 1e20], np.float32)[::-1]
    _check(a, np.float32(7), True)
    _check(a, np.array([[7.0], [0.3]], np.float32), True)


@pytest.mark.parametrize("fn", [
    lambda x: (x % 2.0).max(axis=0),
    lambda x: (x // 0.75).sum(axis=1),
    lambda x: np.fmod(x, 3.0).min(),
    lambda x: np.where((x % 2.0) < 1, x, -x),
    lambda x: np.maximum(x % 1.5, x // 4.0),
], ids=["mod-max", "floordiv-sum", "fmod-min", "mod-compare", "maximum"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_remainders_feeding_nan_checks_compile(fn, dtype):
    """A max, a comparison or np.maximum checks its operand for NaN. With the
    remainder's exact steps inlined into that check, Halide 21's is_nan
    walked the Expr as a tree (exponential in the steps: 32 s for one
    float32 remainder) and (x % 2.0).max(axis=0) on a (3, 4) array never
    finished compiling; the remainder is now a Func of its own."""
    x = np.random.default_rng(9).standard_normal((3, 4)).astype(dtype) * 10
    x[1, 2], x[2, 0] = np.nan, np.inf
    keep = x.copy()
    with np.errstate(all="ignore"):
        want = fn(x)
    got = halojit.trace(fn)(x)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    assert same_bits(np.asarray(got), np.asarray(want)).all(), (got, want)
    np.testing.assert_array_equal(x, keep)
