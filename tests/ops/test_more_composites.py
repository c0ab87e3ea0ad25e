"""More numpy functions composed of other traced calls
(halojit.graph.numpy_composite): diagonal (and ndarray.diagonal), trace
(and ndarray.trace), diag, atleast_1d/2d/3d, fliplr, flipud, rot90, divmod,
modf, ldexp, allclose, array_equal, cov, corrcoef and angle.

Every case is compared with numpy eager (dtype, shape, values, NaN and inf
positions) at opt levels 0 and 1 and, compiled with Halide, at level 3, on
random data with NaN, +-inf, integer and bool dtypes, non-contiguous views
and zero-size arrays; the bad arguments raise the kind of error numpy
raises. modf, ldexp and angle are also compared bit for bit (the sign of
zero included), ldexp over the whole exponent range.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import DTYPES, Case, assert_matches_numpy, assert_same_bits, jit

import halojit
from halojit.errors import UnsupportedError


def _data():
    rng = np.random.default_rng(11)
    f = rng.standard_normal((4, 5)).astype(np.float32)
    f[0, 0], f[1, 1], f[2, 3], f[3, 0] = np.nan, np.inf, -np.inf, -0.0
    x = np.array([np.inf, -np.inf, np.nan, -2.5, 2.5, -3.0, 3.0, -0.0, 0.0, 1e-30, -7.75,
                  1e30], np.float32)
    return {
        "f": f,  # float32 with NaN, +-inf, -0.0
        "g": rng.standard_normal((4, 5)).astype(np.float32),
        "d": rng.standard_normal((3, 4, 5)),  # float64, 3-D
        "sq": rng.standard_normal((4, 4)),
        "i8": rng.integers(-100, 100, (4, 4)).astype(np.int8),
        "i": rng.integers(-50, 50, (3, 6)).astype(np.int32),
        "u16": rng.integers(0, 60000, (4, 4)).astype(np.uint16),
        "b": rng.random((4, 5)) < 0.5,
        "t": rng.standard_normal((8, 12)).astype(np.float32)[::2, 1::2],  # strided view
        "z": np.zeros((0, 4), np.float32),
        "z1": np.zeros(0, np.float32),
        "v": np.array([1.5, np.nan, -2.0, np.inf], np.float32),
        "x": x,  # the specials of modf / angle / divmod
        "y": np.array([0.7, -0.7, 0.0, -0.0, np.inf, -np.inf, 2.0, -2.0, 1.5, 0.5, 3.0, -1.0],
                      np.float32),
        "n": np.array([7, -7, 0, 5, -128, 127, 100, -3, 9], np.int8),
        "dn": np.array([2, 2, 3, 0, -1, -1, -7, 5, -4], np.int8),
        "e": np.array([0, 1, -1, 127, 128, -126, -149, -150, 300, -300, 5000, -5000], np.int32),
        "obs": rng.standard_normal((3, 7)),  # three variables, seven observations
        "obs2": rng.standard_normal((2, 7)).astype(np.float32),
        "row": rng.standard_normal(7),
    }


D = _data()

# id -> (function, names of its arguments in D)
CASES = {
    # diagonal and ndarray.diagonal
    "diagonal": (lambda a: np.diagonal(a), "f"),
    "diagonal-offset": (lambda a: np.diagonal(a, 2), "f"),
    "diagonal-neg-offset": (lambda a: np.diagonal(a, -3), "f"),
    "diagonal-past-end": (lambda a: np.diagonal(a, 5), "f"),
    "diagonal-3d": (lambda a: np.diagonal(a, 1, 2, 0), "d"),
    "diagonal-neg-axes": (lambda a: np.diagonal(a, -1, -1, -3), "d"),
    "diagonal-method": (lambda a: a.diagonal(1), "t"),
    "diagonal-bool": (lambda a: np.diagonal(a, -1), "b"),
    "diagonal-empty": (lambda a: np.diagonal(a), "z"),
    "diagonal-of-result": (lambda a: np.diagonal(a * 2 + 1), "i8"),
    # trace and ndarray.trace: np.sum's dtypes
    "trace": (lambda a: np.trace(a), "f"),
    "trace-int8": (lambda a: np.trace(a), "i8"),
    "trace-uint16": (lambda a: np.trace(a, 1), "u16"),
    "trace-bool": (lambda a: np.trace(a), "b"),
    "trace-dtype": (lambda a: np.trace(a, -1, dtype=np.float32), "i8"),
    "trace-3d": (lambda a: np.trace(a, 0, 0, 2), "d"),
    "trace-method": (lambda a: a.trace(offset=1), "t"),
    "trace-empty": (lambda a: np.trace(a), "z"),
    # diag
    "diag-1d": (lambda a: np.diag(a), "v"),
    "diag-1d-k": (lambda a: np.diag(a, 2), "v"),
    "diag-1d-negk": (lambda a: np.diag(a, -1), "v"),
    "diag-1d-int": (lambda a: np.diag(a[0], 1), "i8"),
    "diag-1d-bool": (lambda a: np.diag(a[1]), "b"),
    "diag-1d-empty": (lambda a: np.diag(a, 1), "z1"),
    "diag-2d": (lambda a: np.diag(a, 1), "f"),
    "diag-2d-negk": (lambda a: np.diag(a, -2), "t"),
    # atleast_nd
    "atleast_1d-0d": (lambda a: np.atleast_1d(a[0, 0]), "f"),
    "atleast_1d-many": (lambda a: np.atleast_1d(a, a[1], 2.5), "f"),
    "atleast_2d": (lambda a: np.atleast_2d(a[0]), "i8"),
    "atleast_2d-many": (lambda a: np.atleast_2d(a[0, 0], a[1], a, 3), "f"),
    "atleast_3d-many": (lambda a: np.atleast_3d(a[0, 0], a[0], a, a[None]), "f"),
    # flips and rotations
    "fliplr": (lambda a: np.fliplr(a), "f"),
    "fliplr-3d": (lambda a: np.fliplr(a), "d"),
    "flipud": (lambda a: np.flipud(a), "t"),
    "flipud-1d": (lambda a: np.flipud(a), "v"),
    "rot90": (lambda a: np.rot90(a), "f"),
    "rot90-2": (lambda a: np.rot90(a, 2), "i8"),
    "rot90-3": (lambda a: np.rot90(a, 3), "t"),
    "rot90-neg": (lambda a: np.rot90(a, -1, axes=(1, 0)), "f"),
    "rot90-0": (lambda a: np.rot90(a, 4) + 0, "f"),
    "rot90-3d": (lambda a: np.rot90(a, 1, axes=(2, 0)), "d"),
    "rot90-neg-axes": (lambda a: np.rot90(a, 3, axes=(-1, -2)), "d"),
    # divmod: the pair numpy's loop gives, zero divisors and specials included
    "divmod": (lambda a, b: np.divmod(a, b), "x", "y"),
    "divmod-scalar": (lambda a: np.divmod(a, 0.75), "f"),
    "divmod-int": (lambda a, b: np.divmod(a, b), "n", "dn"),
    "divmod-int-scalar": (lambda a: np.divmod(a, -3), "i8"),
    "divmod-mixed": (lambda a, b: np.divmod(a, b[:, :6]), "i", "obs"),
    "divmod-uint": (lambda a: np.divmod(a, np.uint16(7)), "u16"),
    "divmod-bool": (lambda a: np.divmod(a, a[::-1]), "b"),
    # modf
    "modf": (lambda a: np.modf(a), "x"),
    "modf-f64": (lambda a: np.modf(a * 10), "d"),
    "modf-int8": (lambda a: np.modf(a), "i8"),
    "modf-int32": (lambda a: np.modf(a), "i"),
    "modf-bool": (lambda a: np.modf(a), "b"),
    # ldexp
    "ldexp": (lambda a, e: np.ldexp(a, e), "x", "e"),
    "ldexp-f64": (lambda a, e: np.ldexp(a[:, :, :4], e[:4] * 4), "d", "e"),
    "ldexp-f16": (lambda a, e: np.ldexp(a.astype(np.float16), e), "x", "e"),
    "ldexp-int64-exp": (lambda a, e: np.ldexp(a, e.astype(np.int64)), "x", "e"),
    "ldexp-int8-exp": (lambda a, n: np.ldexp(a[:9], n), "x", "n"),
    "ldexp-scalar-exp": (lambda a: np.ldexp(a, 3), "f"),
    "ldexp-int-base": (lambda a, e: np.ldexp(a[0], e[:6]), "i", "e"),
    # allclose and array_equal: 0-d bool arrays inside the trace
    "allclose": (lambda a: np.allclose(a, a + 1e-6), "g"),
    "allclose-not": (lambda a: np.allclose(a, a * 1.0001), "g"),
    "allclose-nan": (lambda a: np.allclose(a, a), "f"),
    "allclose-equal_nan": (lambda a: np.allclose(a, a, equal_nan=True), "f"),
    "allclose-tol": (lambda a: np.allclose(a, a + 0.01, rtol=0, atol=0.02), "g"),
    "allclose-broadcast": (lambda a: np.allclose(a, a[:1]), "i8"),
    "array_equal": (lambda a: np.array_equal(a, a + 0), "g"),
    "array_equal-not": (lambda a: np.array_equal(a, a[::-1]), "i8"),
    "array_equal-shape": (lambda a: np.array_equal(a, a[:3]), "g"),
    "array_equal-broadcastable": (lambda a: np.array_equal(a, a[:1]), "g"),
    "array_equal-nan": (lambda a: np.array_equal(a, a), "f"),
    "array_equal-equal_nan": (lambda a: np.array_equal(a, a * 1, equal_nan=True), "f"),
    "array_equal-nan-elsewhere": (lambda a: np.array_equal(a, a.T.T[::-1][::-1] * np.where(
        np.arange(5) == 4, np.nan, 1.0).astype(np.float32), equal_nan=True), "f"),
    "array_equal-int-float": (lambda a: np.array_equal(a, a.astype(np.float64), equal_nan=True),
                              "i8"),
    "array_equal-empty": (lambda a: np.array_equal(a, a + 1), "z"),
    # cov and corrcoef
    "cov": (lambda a: np.cov(a), "obs"),
    "cov-rowvar": (lambda a: np.cov(a, rowvar=False), "sq"),
    "cov-bias": (lambda a: np.cov(a, bias=True), "obs"),
    "cov-ddof": (lambda a: np.cov(a, ddof=3), "obs"),
    "cov-1d": (lambda a: np.cov(a), "row"),
    "cov-y": (lambda a, b: np.cov(a, b), "obs", "obs2"),
    "cov-y-1d": (lambda a, b: np.cov(a, b[0], rowvar=False), "row", "obs2"),
    "cov-int": (lambda a: np.cov(a), "i"),
    "cov-bool": (lambda a: np.cov(a), "b"),
    "cov-f32": (lambda a: np.cov(a, dtype=np.float32), "obs2"),
    "cov-nan": (lambda a: np.cov(a), "f"),
    "cov-view": (lambda a: np.cov(a), "t"),
    "cov-no-dof": (lambda a: np.cov(a[:, :1]), "obs"),
    "cov-empty": (lambda a: np.cov(a), "z"),
    "corrcoef": (lambda a: np.corrcoef(a), "obs"),
    "corrcoef-y": (lambda a, b: np.corrcoef(a, b), "obs", "obs2"),
    "corrcoef-rowvar": (lambda a: np.corrcoef(a, rowvar=False), "sq"),
    "corrcoef-1d": (lambda a: np.corrcoef(a), "row"),
    "corrcoef-constant-row": (lambda a: np.corrcoef(a * np.array([[1.0], [0.0], [1.0]])), "obs"),
    "corrcoef-int": (lambda a: np.corrcoef(a), "i"),
    "corrcoef-nan": (lambda a: np.corrcoef(a), "f"),
    # angle of real input
    "angle": (lambda a: np.angle(a), "x"),
    "angle-deg": (lambda a: np.angle(a, deg=True), "d"),
    "angle-int8": (lambda a: np.angle(a), "i8"),
    "angle-bool": (lambda a: np.angle(a, True), "b"),
}

# level 3 compiles Halide kernels: every case there costs a compile
LEVEL3 = {"diagonal", "diagonal-3d", "diagonal-method", "trace-int8", "trace-3d", "diag-1d-k",
          "diag-1d-bool", "diag-2d-negk", "atleast_3d-many", "rot90-3", "rot90-3d", "divmod",
          "divmod-int", "modf", "modf-int8", "ldexp", "ldexp-f64", "ldexp-f16", "allclose-nan",
          "array_equal-equal_nan", "array_equal-shape", "cov-y", "cov-f32", "cov-no-dof",
          "corrcoef", "corrcoef-constant-row", "angle", "angle-int8"}


def _params():
    params = []
    for case in sorted(CASES):
        for level in (0, 1, 3):
            if level < 3 or case in LEVEL3:
                params.append(pytest.param(case, level, id=f"{case}-O{level}"))
    return params


def test_level3_subset_names_real_cases():
    assert LEVEL3 <= set(CASES)


@pytest.mark.parametrize("case,opt_level", _params())
def test_against_numpy(case, opt_level):
    fn, *names = CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_matches_numpy(fn, [D[n] for n in names], opt_level)


# -- bit for bit: the sign of zero, subnormals, the whole exponent range ------------
def _ldexp_data(dtype):
    rng = np.random.default_rng(5)
    fi = np.finfo(dtype)
    x = np.concatenate([rng.standard_normal(120) * 10.0 ** rng.integers(-4, 4, 120),
                        [fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal, fi.max,
                         -fi.max, 0.0, -0.0, np.inf, -np.inf, np.nan, 1 - fi.eps / 2, 1.5]])
    x = x.astype(dtype)
    e = rng.integers(-2300, 2300, x.size)
    e[::3] = rng.integers(-40, 40, e[::3].size)  # the normal range
    e[1::5] = rng.integers(-1100, -1000, e[1::5].size)  # float64 subnormal results
    e[2::5] = -np.log2(np.finfo(dtype).tiny).astype(int) + rng.integers(-30, 5, e[2::5].size)
    return x, e


@pytest.mark.parametrize("opt_level", [0, 3])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ldexp_modf_angle_bits(dtype, opt_level):
    """One kernel per dtype: ldexp rounds once like C's ldexp (subnormal
    results, overflow, exponents past the int range), modf and angle give
    numpy's signed zeros."""
    x, e = _ldexp_data(dtype)
    # float64 results in the subnormal range from huge x (one rounding, not one per
    # power-of-two step) and huge results from subnormal x
    rng = np.random.default_rng(6)
    sign = np.where(rng.random(400) < 0.5, -1.0, 1.0)
    x64 = sign * rng.uniform(1, 2, 400) * 2.0 ** np.concatenate(
        [rng.integers(1000, 1023, 300), rng.integers(-1070, -1030, 100)])
    e64 = np.concatenate([rng.integers(-2095, -2045, 300), rng.integers(1000, 2100, 100)])

    def fn(x, e, x64, e64):
        return np.ldexp(x, e), np.modf(x), np.angle(x), np.ldexp(x64, e64)
    got = jit(fn, opt_level)(x, e, x64, e64)
    with np.errstate(all="ignore"):
        want = fn(x, e, x64, e64)
    assert_same_bits(got[0], want[0])
    assert_same_bits(got[1][0], want[1][0])
    assert_same_bits(got[1][1], want[1][1])
    assert_same_bits(got[2], want[2])
    assert_same_bits(got[3], want[3])


def test_two_output_ufuncs_resolve_numpys_loops():
    """divmod and modf pick their input dtypes through a one-output ufunc
    with the same loops (halojit.graph.numpy_api.COMPOSITE_LOOPS)."""
    from halojit.graph.numpy_api import COMPOSITE_LOOPS
    dts = [np.dtype(d) for d in DTYPES]
    for a in dts:
        assert np.modf.resolve_dtypes((a, None, None))[0] == \
            getattr(np, COMPOSITE_LOOPS["modf"]).resolve_dtypes((a, None))[0]
        for b in dts:
            try:
                want = np.divmod.resolve_dtypes((a, b, None, None))[:2]
            except TypeError:
                continue
            assert getattr(np, COMPOSITE_LOOPS["divmod"]).resolve_dtypes((a, b, None))[:2] \
                == want, (a, b)


def test_divmod_int_min_by_minus_one():
    n = np.array([-128, 5], np.int8)
    d = np.array([-1, -1], np.int8)
    with np.errstate(all="ignore"):
        want = np.divmod(n, d)
    got = jit(lambda a, b: np.divmod(a, b), 3)(n, d)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w, strict=True)


def test_array_equal_is_decided_at_every_call():
    f = halojit.trace(lambda a, b: np.array_equal(a, b, equal_nan=True), opt_level=1,
                      backend="numpy")
    a = D["f"]
    b = a.copy()
    assert bool(f(a, b)) is True
    b[0, 0] = 1.0  # the NaN moved
    assert bool(f(a, b)) is np.array_equal(a, b, equal_nan=True) is False
    b = a.copy()
    b[3, 3] += 1
    assert bool(f(a, b)) is False


def test_cov_warns_when_no_degrees_of_freedom():
    obs = D["obs"][:, :1]
    with np.errstate(divide="ignore", invalid="ignore"):  # numpy's 1 / 0.0 and 0 * inf
        with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
            want = np.cov(obs)
        with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
            got = jit(lambda a: np.cov(a), 0)(obs)
    np.testing.assert_array_equal(got, want, strict=True)


# -- errors --------------------------------------------------------------------------
ERROR_CASES = [
    Case("diagonal-1d", lambda a: np.diagonal(a[0]), ("f",)),
    Case("diagonal-same-axes", lambda a: np.diagonal(a, 0, 1, 1), ("f",)),
    Case("diagonal-axis-range", lambda a: np.diagonal(a, 0, 0, 3), ("d",)),
    Case("diagonal-float-offset", lambda a: np.diagonal(a, 1.5), ("f",)),
    Case("trace-1d", lambda a: np.trace(a[0]), ("f",)),
    Case("diag-3d", lambda a: np.diag(a), ("d",)),
    Case("diag-0d", lambda a: np.diag(a[0, 0]), ("f",)),
    Case("diag-float-k", lambda a: np.diag(a, 1.0), ("v",)),
    Case("fliplr-1d", lambda a: np.fliplr(a), ("v",)),
    Case("flipud-0d", lambda a: np.flipud(a[0]), ("v",)),
    Case("rot90-same-axes", lambda a: np.rot90(a, 1, (1, 1)), ("f",)),
    Case("rot90-wrapped-axes", lambda a: np.rot90(a, 1, (0, -2)), ("f",)),
    Case("rot90-one-axis", lambda a: np.rot90(a, 1, (0,)), ("f",)),
    Case("rot90-axes-range", lambda a: np.rot90(a, 1, (0, 3)), ("d",)),
    Case("ldexp-float-exp", lambda a: np.ldexp(a, a), ("f",)),
    Case("ldexp-uint64-exp", lambda a, e: np.ldexp(a, e.astype(np.uint64)), ("x", "e")),
    Case("cov-3d", lambda a: np.cov(a), ("d",)),
    Case("cov-y-3d", lambda a, b: np.cov(a, b), ("obs", "d")),
    Case("cov-ddof", lambda a: np.cov(a, ddof=1.5), ("obs",)),
    Case("cov-y-mismatch", lambda a, b: np.cov(a, b), ("obs", "f")),
    Case("corrcoef-3d", lambda a: np.corrcoef(a), ("d",)),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c.id for c in ERROR_CASES])
def test_errors_as_numpy(case):
    assert_matches_numpy(case.fn, [D[n] for n in case.args], 0, expect_error=True)


@pytest.mark.parametrize("fn", [
    lambda a: np.cov(a, fweights=np.ones(7)),
    lambda a: np.cov(a, aweights=a[0]),
    lambda a: np.trace(a, out=np.empty(())),  # into a numpy array: return the result instead
    lambda a: np.divmod(a, 2.0, out=(a.copy(), a.copy())),
], ids=["cov-fweights", "cov-aweights", "trace-out", "divmod-out"])
def test_unsupported_arguments(fn):
    a = D["obs"].copy()
    with pytest.raises(UnsupportedError):
        halojit.trace(fn, backend="numpy")(a)
