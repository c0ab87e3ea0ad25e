"""float64 exp and log families and the inverse trigonometric and
hyperbolic functions compiled at opt_level 3
(halojit/generators/halide_math64.py) against numpy and against 80-bit long
double references, in float64 ulps: special values (NaN, +-inf, +-0.0,
subnormal inputs and results, the overflow and underflow edges, the
reduction's breakpoints) and random magnitudes from 1e-320 to 1e308.

Bounds: 3 ulp of numpy's result and 2 ulp of the long double one, 3 for
tanh (measured maxima: exp, cosh, log, log2, log10, log1p and the six
inverse functions 1 ulp; expm1 and sinh 2; tanh 3 from numpy and 3 from
long double, at
-0.20577383282021633 alone among 2M inputs in [-1, 1]); exact where numpy's value is exact
(exp(0), log(1), log2 of powers of two, log10 of powers of ten), NaN where
numpy gives NaN and the sign of every zero as numpy's.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import halojit

pytestmark = pytest.mark.level3

NAMES = ["exp", "expm1", "tanh", "sinh", "cosh", "log", "log2", "log10", "log1p",
         "arctan", "arcsin", "arccos", "arctanh", "arcsinh", "arccosh"]
MAX_ULP_NUMPY = 3
MAX_ULP_EXACT = 2
LONG_DOUBLE = np.finfo(np.longdouble).nmant >= 63  # x87 extended (x86-64 Linux)

SPECIAL = np.array([
    0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-310, 1e-300,
    1e-20, 1e-16, 1e-8, 1e-5, 0.3, 0.5, 1.0, -1.0, 2.0, 8.0, 1024.0, 2.0 ** -1000, 0.75, 1.5,
    np.sqrt(2), np.sqrt(0.5), 1.4142135623730951, 1.414213562373095, 709.78, 709.79, 710.4,
    710.48, -745.13, -745.14, -708.4, -708.39, -720.0, 19.06, 19.07, 40.0, -40.0, -37.0, 1e300,
    -1e300, 1.7976931348623157e308, -0.99999999, -1 + 1e-16, -0.5, 0.34657359027997264,
    -0.34657359027997264, 0.6931471805599453, 3 * 0.6931471805599453,
    -0.20577383282021633,  # tanh's worst: 3 ulp from long double
])


def _inputs(seed):
    rng = np.random.default_rng(seed)
    mags = 10.0 ** rng.uniform(-320, 308, 30000) * rng.choice([-1.0, 1.0], 30000)
    # and the inverse functions' domains and breakpoints: +-1 and their
    # neighbours, arcsin's 1/2, arctan's 7/16 ... 39/16, 2**28
    edges = np.array([0.5, 7 / 16, 11 / 16, 19 / 16, 39 / 16, 2.0 ** 28, 2.0 ** -28, 1.0])
    near = np.concatenate([edges, np.nextafter(edges, 0), np.nextafter(edges, 2 * edges),
                           1 - 10.0 ** -np.arange(1, 17), 1 + 10.0 ** -np.arange(1, 16)])
    return np.concatenate([SPECIAL, mags, rng.uniform(-800, 800, 20000),
                           rng.uniform(-746, -700, 5000), rng.uniform(-3, 3, 20000),
                           rng.uniform(-1e-3, 1e-3, 5000), rng.uniform(0.5, 2.0, 20000),
                           rng.uniform(-1, 0, 5000), rng.uniform(-1, 1, 20000), near, -near])


def ulp_distance64(got, want):
    """|got - want| in float64 ulps (0 where both are NaN, 2**60 where one is)."""
    g = got.view(np.int64)
    w = want.view(np.int64)
    g = np.where(g < 0, -(g & 0x7FFFFFFFFFFFFFFF), g)
    w = np.where(w < 0, -(w & 0x7FFFFFFFFFFFFFFF), w)
    d = np.abs((g - w).astype(np.float64))
    d[np.isnan(got) & np.isnan(want)] = 0
    d[np.isnan(got) != np.isnan(want)] = 2.0 ** 60
    return d


def _worst(d, x, got, want, name, what):
    i = int(np.argmax(d))
    return f"{name}({x[i]!r}): got {got[i]!r}, {what} {want[i]!r} ({d[i]:.0f} ulp)"


@pytest.mark.parametrize("name", NAMES)
def test_within_ulps_of_numpy_and_long_double(name):
    fn = getattr(np, name)
    x = _inputs(sum(map(ord, name)))
    got = halojit.trace(lambda a: fn(a))(x)
    assert got.dtype == np.float64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = fn(x)
        exact = fn(x.astype(np.longdouble)).astype(np.float64)
    d = ulp_distance64(got, want)
    assert d.max() <= MAX_ULP_NUMPY, _worst(d, x, got, want, name, "numpy")
    if LONG_DOUBLE:
        d = ulp_distance64(got, exact)
        bound = MAX_ULP_EXACT + (name == "tanh")
        assert d.max() <= bound, _worst(d, x, got, exact, name, "long double")
    zeros = want == 0
    assert np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros])), "sign of zero"


def test_exact_values_stay_exact():
    """exp(0) = 1, log(1) = 0, log2 of every power of two is its exponent
    and log10 of every power of ten numpy's (code that floors them to count
    bits or digits relies on it)."""
    powers = 2.0 ** np.arange(-1074, 1024)
    got = halojit.trace(lambda a: np.log2(a))(powers)
    np.testing.assert_array_equal(got, np.arange(-1074, 1024, dtype=np.float64))
    tens = 10.0 ** np.arange(-300, 309)
    got = halojit.trace(lambda a: np.log10(a))(tens)
    np.testing.assert_array_equal(got, np.log10(tens))
    np.testing.assert_array_equal(got[300:323], np.arange(23.0))  # 10**n exact to n = 22
    ints = np.arange(1, 300001, dtype=np.float64)
    digits = halojit.trace(lambda a: np.floor(np.log10(a)).astype(np.int64) + 1)(ints)
    np.testing.assert_array_equal(digits, [len(str(i)) for i in range(1, 300001)])
    one = np.array([0.0, 1.0])
    np.testing.assert_array_equal(halojit.trace(lambda a: np.exp(a[:1]))(one), [1.0])
    np.testing.assert_array_equal(halojit.trace(lambda a: np.log(a[1:]))(one), [0.0])
    # the inverse functions at their exact points, as numpy's libm gives them
    pts = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 2.0 ** 30, -2.0 ** -30])
    for fn in (np.arctan, np.arcsin, np.arccos, np.arctanh, np.arcsinh, np.arccosh):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = fn(pts)
        got = halojit.trace(lambda a: fn(a))(pts)
        np.testing.assert_array_equal(got, want)
        num = ~np.isnan(want)  # a NaN's sign is the platform's
        assert np.array_equal(np.signbit(got[num]), np.signbit(want[num])), fn.__name__


def test_fused_with_other_float64_ops_and_views():
    """Inside a larger kernel, on a strided view and 2-D: softplus-like chains
    in float64 against numpy."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 257)) * 20

    @halojit.trace
    def f(a):
        return np.log1p(np.exp(-np.abs(a))) + np.maximum(a, 0) - np.tanh(a) * np.cosh(a / 40)

    v = x[::2, 1::3]
    got = f(v)
    want = np.log1p(np.exp(-np.abs(v))) + np.maximum(v, 0) - np.tanh(v) * np.cosh(v / 40)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)


def test_float32_and_float16_keep_their_own_paths():
    x = np.linspace(-5, 5, 101)
    for dt in (np.float32, np.float16):
        got = halojit.trace(lambda a: np.exp(a) + np.log1p(np.abs(a)))(x.astype(dt))
        assert got.dtype == dt
        want = np.exp(x.astype(dt)) + np.log1p(np.abs(x.astype(dt)))
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=2e-3 if dt == np.float16 else 1e-6)


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_fast_trig_within_1_ulp_of_long_double(name):
    """halide_math64.FAST_TRIG: every argument within TRIG_FAST_MAX (2**20),
    so the kernel takes the checked path; random magnitudes, the float64
    nearest to multiples of pi/2 (zeros and poles, where the reduction's
    precision shows: 2**-130 absolute) and their neighbours."""
    from halojit.generators import halide_math64
    rng = np.random.default_rng(sum(map(ord, name)))
    k = np.arange(1, 600000, 7) * (np.pi / 2)
    x = np.concatenate([rng.uniform(-4, 4, 20000), rng.uniform(-2.0 ** 20, 2.0 ** 20, 20000),
                        10.0 ** rng.uniform(-300, 6, 20000), k, np.nextafter(k, 0), -k,
                        [0.0, -0.0, 5e-324, 413441.44719405076, 2.0 ** 20, -(2.0 ** 20)]])
    assert np.abs(x).max() <= halide_math64.TRIG_FAST_MAX  # else the whole call takes libm
    fn = getattr(np, name)
    got = halojit.trace(lambda a: fn(a))(x)
    want = fn(x)
    d = ulp_distance64(got, want)
    assert d.max() <= 1, _worst(d, x, got, want, name, "numpy")
    zeros = want == 0
    assert np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))
    if LONG_DOUBLE:
        exact = fn(x.astype(np.longdouble)).astype(np.float64)
        d = ulp_distance64(got, exact)
        assert d.max() <= 1, _worst(d, x, got, exact, name, "long double")


def test_fast_trig_falls_back_for_large_arguments():
    """One argument past 2**20 sends the call to libm (within an ulp of
    numpy's loops, which are not libm's) for every element: 1e300 needs its
    exact reduction. inf and NaN give NaN on either path."""
    rng = np.random.default_rng(2)
    x = rng.uniform(-100, 100, (37, 53))
    f = halojit.trace(lambda a: (np.sin(a), np.tan(a)))
    for bad in (1e300, 2.0 ** 20 + 1, -1e10, np.inf, np.nan):
        for pos in (0, x.size - 1, 17):
            y = x.copy()
            y.flat[pos] = bad
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                want = (np.sin(y), np.tan(y))
            for g, w in zip(f(y), want):
                assert ulp_distance64(g, w).max() <= 1, (bad, pos)


def test_arctan2_within_ulps_of_numpy_and_long_double():
    """halide_math64.arctan2: every pair of special values (signed zeros,
    infinities, NaN, subnormals, the largest), random magnitudes over the
    whole range and the unit square, against numpy (bit for bit where it is
    exact: zeros, pi, pi/2, the signs) and long double."""
    rng = np.random.default_rng(11)
    sp = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e308,
                   -1e308, 2.0 ** -1000, 3.0, 0.5])
    n = 50000
    y = np.concatenate([np.repeat(sp, sp.size), rng.standard_normal(n) * 10.0 ** rng.uniform(-300, 300, n),
                        rng.uniform(-2, 2, n)])
    x = np.concatenate([np.tile(sp, sp.size), rng.standard_normal(n) * 10.0 ** rng.uniform(-300, 300, n),
                        rng.uniform(-2, 2, n)])
    got = halojit.trace(lambda a, b: np.arctan2(a, b))(y, x)
    want = np.arctan2(y, x)
    d = ulp_distance64(got, want)
    assert d.max() <= MAX_ULP_NUMPY, _worst(d, y, got, want, "arctan2", "numpy")
    num = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[num]), np.signbit(want[num]))
    if LONG_DOUBLE:
        exact = np.arctan2(y.astype(np.longdouble), x.astype(np.longdouble)).astype(np.float64)
        d = ulp_distance64(got, exact)
        assert d.max() <= MAX_ULP_EXACT, _worst(d, y, got, exact, "arctan2", "long double")
        # the special pairs correctly rounded (numpy's libm gives pi/2 + 1 ulp
        # for atan2(2**-1000, -5e-324))
        grid = slice(0, sp.size ** 2)
        np.testing.assert_array_equal(got[grid], exact[grid])


def test_power_within_ulps_of_numpy_and_long_double():
    """halide_math64.power: double-double y * log(x) keeps 1 ulp where
    y log x nears +-745 (|x| near 1, |y| near 2000), every special case of
    C99 pow on a grid of special values, and correctly rounded results for y
    in {1, 2, -1, 0.5} (numpy's SIMD pow is within an ulp of them)."""
    rng = np.random.default_rng(12)
    grid = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0,
                     -3.0, 1e-310, -1e-310, 1e308, -1e308, 0.999999, 1.000001, 2.5, -2.5, 1e16,
                     1e17, -1e17, 1025.0, -1075.0, 0.3])
    gx, gy = np.meshgrid(grid, grid)
    near1 = rng.uniform(0.7, 1.42, 20000)
    big_y = rng.uniform(-700, 700, 20000) / np.maximum(np.abs(np.log(near1)), 1e-3)
    x = np.concatenate([gx.ravel(), np.exp(rng.uniform(-700, 700, 20000)), near1,
                        rng.uniform(-10, 10, 20000), -np.exp(rng.uniform(-20, 20, 10000))])
    y = np.concatenate([gy.ravel(), rng.uniform(-3, 3, 20000), big_y, rng.uniform(-40, 40, 20000),
                        np.round(rng.uniform(-30, 30, 10000))])
    got = halojit.trace(lambda a, b: np.power(a, b))(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.power(x, y)
        exact = np.power(x.astype(np.longdouble), y.astype(np.longdouble)).astype(np.float64)
    d = ulp_distance64(got, want)
    assert d.max() <= 1, _worst(d, x, got, want, "power", "numpy")
    if LONG_DOUBLE:
        d = ulp_distance64(got, exact)
        assert d.max() <= 1, _worst(d, x, got, exact, "power", "long double")
    special = (gx == 0) | np.isinf(gx) | np.isnan(gx) | (gy == 0) | np.isinf(gy) | np.isnan(gy)
    special = special.ravel()
    n = gx.size
    np.testing.assert_array_equal(got[:n][special], want[:n][special])  # NaN == NaN here
    assert np.array_equal(np.signbit(got[:n][special]), np.signbit(want[:n][special]))
    v = np.abs(x[n:n + 20000])
    f = halojit.trace(lambda a, b: np.power(a, b))
    for e, rounded in ((1.0, v), (2.0, v * v), (-1.0, 1 / v), (0.5, np.sqrt(v))):
        got = f(v, np.full_like(v, e))
        np.testing.assert_array_equal(got, rounded)  # correctly rounded
        assert ulp_distance64(got, np.power(v, np.full_like(v, e))).max() <= 1


def test_nested_transcendentals_compile_quickly():
    """lowering.TRANSCENDENTAL_OPS: a transcendental that reaches another
    through other ops is a Func of its own. Five levels of exp(x) * 0.1 in
    float64 never finished compiling (12-18 GB) before; the power inside a
    NaN test (np.maximum) is one too."""
    x = np.linspace(0.1, 2.0, 1001)

    def chain(a):
        for fn in (np.exp, np.log1p, np.tanh, np.cosh, np.log):
            a = fn(a) * 0.1
        return np.maximum(a ** a, 0.5)
    for dt in (np.float64, np.float32):
        xt = x.astype(dt)
        got = halojit.trace(chain)(xt)
        np.testing.assert_allclose(got, chain(xt), rtol=1e-13 if dt == np.float64 else 1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_abs_of_the_integer_minimum_is_negative_as_numpy(dtype):
    """np.abs wraps the integer minimum to itself; Halide bounded the float of
    it as non-negative and dropped the log's NaN branch (1441.05 for int32)
    and float32 exp's clamp (1.8e25). halide_ops._vectorized hides the
    arguments (opaque)."""
    x = np.array([np.iinfo(dtype).min, 5, 7], dtype)
    fns = [lambda a: np.log(np.abs(a)), lambda a: np.log2(np.abs(a)),
           lambda a: np.log10(np.abs(a)), lambda a: np.log1p(np.abs(a)),
           lambda a: np.exp(np.abs(a).astype(np.float32)),
           lambda a: np.log(np.abs(a).astype(np.float32)),
           lambda a: np.power(np.abs(a) * 1.0, 0.3), lambda a: np.tanh(np.abs(a) * 1.0)]
    for fn in fns:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = fn(x)
        np.testing.assert_allclose(halojit.trace(fn)(x), want, rtol=1e-6, equal_nan=True)
