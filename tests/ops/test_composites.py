"""numpy functions composed of other traced calls (halojit.graph.numpy_composite):
the NaN-ignoring reductions, isclose, nan_to_num, select, average, ptp,
gradient, trapezoid, polyval, piecewise, tensordot, inner, vdot, kron, cross, meshgrid,
partition, sinc, logaddexp(2), heaviside, float_power, fabs, ufunc.outer and
ufunc.accumulate: numpy's values and dtypes on random data with NaN, +-inf,
all-NaN slices, integer dtypes, non-contiguous views and zero-size arrays;
numpy's errors, including the ones raised from values at call time."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import halojit
from halojit.errors import UnsupportedError

from helpers import assert_same


def _data():
    rng = np.random.default_rng(7)
    f = rng.standard_normal((6, 9)).astype(np.float32)
    f[1, 2], f[3, 3], f[4, 0], f[0, 5] = np.nan, np.inf, -np.inf, np.nan
    f[2, :] = np.nan  # an all-NaN row
    g = rng.standard_normal((6, 9)).astype(np.float32)
    g[0, 0], g[1, 1] = np.nan, np.inf
    return {
        "f": f,  # float32 with NaN, inf, an all-NaN row
        "g": g,
        "d": rng.standard_normal((3, 4, 5)),  # float64, 3-D
        "i": rng.integers(-100, 100, (6, 9)).astype(np.int32),
        "i8": rng.integers(-120, 120, (5, 7)).astype(np.int8),
        "t": rng.standard_normal((8, 10)).astype(np.float32)[::2, 1::3],  # strided view
        "v3": rng.standard_normal((5, 3)).astype(np.float32),
        "w3": rng.standard_normal((5, 3)).astype(np.float32),
        "w": rng.random(9).astype(np.float32) + 0.1,
        "z": np.zeros((0, 4), np.float32),
        "p": np.array([0.5, -1.0, 2.0], np.float32),
    }


D = _data()

CASES = {
    # NaN-ignoring reductions
    "nansum": (lambda a: np.nansum(a, axis=1), "f"),
    "nansum-all": (lambda a: np.nansum(a), "f"),
    "nansum-int": (lambda a: np.nansum(a, axis=0), "i"),
    "nanprod-keep": (lambda a: np.nanprod(a * 0.5, axis=0, keepdims=True), "f"),
    "nanmean": (lambda a: np.nanmean(a, axis=1), "f"),
    "nanmean-axes": (lambda a: np.nanmean(a, axis=(0, 2)), "d"),
    "nanmean-int": (lambda a: np.nanmean(a, axis=1), "i"),
    "nanmean-view": (lambda a: np.nanmean(np.where(a > 1, np.nan, a), axis=0), "t"),
    "nanvar": (lambda a: np.nanvar(a, axis=1), "f"),
    "nanvar-ddof": (lambda a: np.nanvar(a, axis=0, ddof=1, keepdims=True), "f"),
    "nanstd": (lambda a: np.nanstd(np.where(a > 0.5, np.nan, a), axis=-1), "d"),
    "nanstd-int": (lambda a: np.nanstd(a), "i"),
    "nanmax": (lambda a: np.nanmax(a, axis=1), "f"),
    "nanmin-all": (lambda a: np.nanmin(a), "f"),
    "nanmin-int": (lambda a: np.nanmin(a, axis=0), "i8"),
    "nanargmax": (lambda a: np.nanargmax(a, axis=0), "g"),
    "nanargmin": (lambda a: np.nanargmin(a, axis=1), "g"),
    "nancumsum": (lambda a: np.nancumsum(a, axis=1), "g"),
    "nancumprod": (lambda a: np.nancumprod(a * 0.5, axis=0), "g"),
    "nanmedian": (lambda a: np.nanmedian(a, axis=1), "f"),
    "nanmedian-even": (lambda a: np.nanmedian(np.where(a > 1, np.nan, a), axis=0), "g"),
    "nanmedian-all": (lambda a: np.nanmedian(a), "g"),
    "nanmedian-keep": (lambda a: np.nanmedian(a, axis=(0, 1), keepdims=True), "d"),
    "nanmedian-int": (lambda a: np.nanmedian(a, axis=1), "i"),
    "nanmean-empty": (lambda a: np.nanmean(a, axis=1), "z"),
    # elementwise
    "isclose": (lambda a, b: np.isclose(a, b, atol=0.5), "f", "g"),
    "isclose-nan": (lambda a, b: np.isclose(a, a + 1e-7, equal_nan=True), "f", "g"),
    "isclose-int": (lambda a: np.isclose(a, 3), "i"),
    "nan_to_num": (lambda a: np.nan_to_num(a), "f"),
    "nan_to_num-fill": (lambda a: np.nan_to_num(a, nan=-1.0, posinf=7, neginf=-7), "f"),
    "nan_to_num-int": (lambda a: np.nan_to_num(a), "i"),
    "sinc": (lambda a: np.sinc(np.where(a > 0, 0, a)), "d"),
    "sinc-int": (lambda a: np.sinc(a), "i8"),
    "logaddexp": (lambda a, b: np.logaddexp(a, b), "f", "g"),
    "logaddexp-same": (lambda a: np.logaddexp(a, a), "f"),
    "logaddexp2": (lambda a, b: np.logaddexp2(a, b * 40), "f", "g"),
    "logaddexp-int": (lambda a: np.logaddexp(a, 1), "i8"),
    "heaviside": (lambda a: np.heaviside(np.round(a), 0.5), "f"),
    "heaviside-arr": (lambda a, b: np.heaviside(np.trunc(a), b), "f", "g"),
    "float_power": (lambda a: np.float_power(np.abs(a), 1.5), "f"),
    "fabs": (lambda a: np.fabs(a), "i8"),
    "select": (lambda a: np.select([a < -1, a > 1], [a * 2, a * 3], default=0), "f"),
    "select-mixed": (lambda a: np.select([a < 0, a > 50], [a, 1.5]), "i"),
    "piecewise": (lambda a: np.piecewise(a, [a < 0, a >= 0], [lambda t: -t, lambda t: t * t]),
                  "f"),
    "piecewise-else": (lambda a: np.piecewise(a, [a < -20, a > 20], [-1, np.abs, 2.5]), "i"),
    "piecewise-one": (lambda a: np.piecewise(a, a > 0, [lambda t: t + 1]), "w"),
    "piecewise-stacked": (lambda a: np.piecewise(a, np.stack([a < 0, a > 1]), [0.5, 2.0]), "g"),
    "ptp": (lambda a: np.ptp(a, axis=1), "g"),
    "ptp-int": (lambda a: np.ptp(a, axis=0, keepdims=True), "i8"),
    "polyval": (lambda a: np.polyval([1.0, -2.0, 0.5], a), "f"),
    "polyval-arr": (lambda a, p: np.polyval(p, a), "g", "p"),
    # averages and calculus
    "average": (lambda a: np.average(a, axis=1), "g"),
    "average-w": (lambda a, w: np.average(a, axis=1, weights=w), "g", "w"),
    "average-full-w": (lambda a: np.average(a, weights=a * a + 1), "d"),
    "average-int-ret": (lambda a, w: np.average(a, axis=1, weights=w, returned=True), "i", "w"),
    "gradient": (lambda a: np.gradient(a, axis=1), "g"),
    "gradient-all": (lambda a: np.gradient(a, 0.5), "d"),
    "gradient-2": (lambda a: np.gradient(a, 2.0, 0.25, axis=(0, 1), edge_order=2), "g"),
    "gradient-int": (lambda a: np.gradient(a), "i"),
    "trapezoid": (lambda a: np.trapezoid(a, axis=1), "g"),
    "trapezoid-dx": (lambda a: np.trapezoid(a, dx=0.1, axis=0), "i"),
    "trapezoid-x": (lambda a, w: np.trapezoid(a, x=np.cumsum(w)), "g", "w"),
    # products
    "tensordot": (lambda a, b: np.tensordot(a, b, axes=([0], [0])), "g", "f"),
    "tensordot-2": (lambda a: np.tensordot(a, a.transpose(1, 2, 0), axes=2), "d"),
    "tensordot-0": (lambda a, b: np.tensordot(a, b, axes=0), "p", "w"),
    "inner": (lambda a, b: np.inner(a, b), "v3", "w3"),
    "inner-scalar": (lambda a: np.inner(a, 2.0), "v3"),
    "dot-scalar": (lambda a: np.dot(a, 2.0), "v3"),  # float64, as numpy: the scalar is strong
    "dot-scalar-left": (lambda a: np.dot(3, a), "v3"),
    "vdot": (lambda a, b: np.vdot(a, b), "v3", "w3"),
    "kron": (lambda a, b: np.kron(a, b), "p", "v3"),
    "kron-int": (lambda a: np.kron(a[:2, :3], a[:3, :2]), "i8"),
    "cross": (lambda a, b: np.cross(a, b), "v3", "w3"),
    "cross-axis0": (lambda a, b: np.cross(a.T, b.T, axis=0), "v3", "w3"),
    "cross-int": (lambda a: np.cross(a[:, :3], a[:, 3:6]), "i"),
    "meshgrid": (lambda a, b: np.meshgrid(a, b), "p", "w"),
    "meshgrid-ij": (lambda a, b: np.meshgrid(a, b, a, indexing="ij", sparse=True), "p", "w"),
    # partition (a sorted result is a valid partition: compared on the kth)
    "partition": (lambda a: np.partition(a, 3, axis=1)[:, 3], "g"),
    "partition-sum": (lambda a: np.partition(a, (1, 4), axis=0)[:4].sum(0), "i"),
    "argpartition": (lambda a: np.take_along_axis(a, np.argpartition(a, 2, axis=1), 1)[:, 2],
                     "t"),
    # ufunc methods
    "add-outer": (lambda a, b: np.add.outer(a, b), "p", "w"),
    "logaddexp-outer": (lambda a, b: np.logaddexp.outer(a, b), "p", "w"),
    "greater-outer": (lambda a, b: np.greater.outer(a, b), "p", "w"),
    "add-accumulate": (lambda a: np.add.accumulate(a, axis=1), "i8"),
    "multiply-accumulate": (lambda a: np.multiply.accumulate(a * 0.5), "g"),
}


def _call_numpy(fn, args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


@pytest.mark.parametrize("case", sorted(CASES))
def test_against_numpy(case):
    fn, *names = CASES[case]
    args = [D[n] for n in names]
    before = [a.copy() for a in args]
    want = _call_numpy(fn, args)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = halojit.trace(fn)(*args)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
    else:
        assert_same(got, want)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b, strict=True)


def test_nanargmax_raises_at_every_call_on_an_all_nan_slice():
    f = halojit.trace(lambda a: np.nanargmax(a, axis=1))
    ok = D["g"]
    assert_same(f(ok), np.nanargmax(ok, axis=1))
    bad = ok.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="All-NaN slice"):
        f(bad)
    assert_same(f(ok), np.nanargmax(ok, axis=1))  # the same compiled function, fine again


def test_value_checks_also_run_on_an_eager_first_call():
    bad = D["g"].copy()
    bad[:, 4] = np.nan
    f = halojit.trace(lambda a: np.nanargmin(a, axis=0), symbolic=False)
    with pytest.raises(ValueError, match="All-NaN slice"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(bad)


def test_average_raises_when_weights_sum_to_zero():
    f = halojit.trace(lambda a, w: np.average(a, axis=1, weights=w))
    w = D["w"].copy()
    assert_same(f(D["g"], w), np.average(D["g"], axis=1, weights=w))
    w[:] = 0
    with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):
        f(D["g"], w)


CONST_W = np.linspace(0.5, 2.0, 9)


@pytest.mark.parametrize("weights", [
    lambda a: np.arange(1.0, 10.0),  # made inside the function: a constant of the trace
    lambda a: [1, 2, 3, 4, 5, 6, 7, 8, 9],
    lambda a: CONST_W,  # a global
    lambda a: np.ones(a.shape, np.float32),
], ids=["arange", "list", "global", "ones-full"])
def test_average_with_constant_weights(weights):
    def fn(a):
        return np.average(a, axis=1, weights=weights(a), returned=True)
    a = D["g"]
    got, want = halojit.trace(fn)(a), fn(a)
    assert_same(got[0], want[0])
    assert_same(got[1], want[1])


def test_average_with_constant_weights_that_sum_to_zero():
    f = halojit.trace(lambda a: np.average(a, axis=1, weights=np.zeros(a.shape[1])))
    with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):
        f(D["g"])


@pytest.mark.parametrize("fn, error", [
    (lambda a: np.partition(a, 9, axis=1), ValueError),
    (lambda a: np.partition(a, -10, axis=1), ValueError),
    (lambda a: np.gradient(a, np.arange(6.0), np.arange(9.0)), UnsupportedError),
    (lambda a: np.gradient(a, 1.0, 2.0, 3.0), TypeError),
    (lambda a: np.gradient(a[:1], axis=0), ValueError),
    (lambda a: np.select([a], [a]), TypeError),
    (lambda a: np.select([a > 0], [a, a]), ValueError),
    (lambda a: np.tensordot(a, a, axes=([0], [1])), ValueError),
    (lambda a: np.cross(a, a), ValueError),
    (lambda a: np.average(a, weights=a[0]), TypeError),
    (lambda a: np.average(a, axis=0, weights=a[0]), ValueError),
    (lambda a: np.nanmean(a, where=a > 0), UnsupportedError),
    (lambda a: np.subtract.accumulate(a), UnsupportedError),
    (lambda a: np.piecewise(a, [a > 0], [1, 2, 3]), ValueError),
    (lambda a: np.piecewise(a, a > 0, [1]), ValueError),  # 2-D: its rows are the conditions
], ids=["kth-high", "kth-low", "gradient-coords", "gradient-nargs", "gradient-short",
        "select-nonbool", "select-lengths", "tensordot-mismatch", "cross-dims",
        "average-noaxis", "average-wshape", "nanmean-where", "subtract-accumulate", "piecewise-count",
        "piecewise-rows"])
def test_errors(fn, error):
    a = D["g"]
    if error is not UnsupportedError:  # numpy raises the same type
        with pytest.raises(error), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(a)
    with pytest.raises(error), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        halojit.trace(fn)(a)


def test_cross_of_2d_vectors_as_numpy():
    """numpy 2.x (< 2.5) warns and computes the z component; numpy 2.5 raises
    ValueError: halojit does what the installed numpy does."""
    a, b = D["v3"][:, :2], D["w3"][:, :2]
    f = halojit.trace(lambda x, y: np.cross(x, y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = np.cross(a, b)
        except ValueError:
            with pytest.raises(ValueError, match="cross product"):
                f(a, b)
            return
    with pytest.warns(DeprecationWarning):
        got = f(a, b)
    assert_same(got, want)
