"""Sorting inside traces: ``np.sort`` (and ``x.sort()``), ``np.argsort``
(numpy's stable order), ``np.median``,
``np.percentile`` and ``np.quantile``. Exactly numpy's values, shapes and
dtypes for bool, integer and float data with NaN, +-inf and +-0.0, along
every axis, through the unrolled network (short axes), the looped one
(long axes) and the one-row schedule; strided views, zero-size arrays,
keepdims and several axes; numpy's errors; the Sort template's fusion
rules and its tuning parameters; a dumped artifact."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.errors import TraceError, UnsupportedError

from helpers import assert_same, numpy_eager

pytestmark = pytest.mark.level3

RNG = np.random.default_rng(11)


def data(shape, dtype, specials=True):
    """Random values of ``dtype`` with repeats; floats with NaN, +-inf, +-0."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return RNG.random(shape) > 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        x = RNG.integers(max(info.min, -50), min(info.max, 50), shape, endpoint=True).astype(dt)
        if x.size >= 4:  # the extremes of the type, which a key transform could wrap
            x.flat[0], x.flat[-1] = info.min, info.max
        return x
    x = (RNG.standard_normal(shape) * 10).round(1).astype(dt)
    if specials and x.size >= 8:
        flat = x.reshape(-1)
        k = RNG.choice(x.size, 5, replace=False)
        flat[k] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
    return x


def assert_exact(got, want):
    """Sorting moves values: the same bits (NaN where numpy has NaN; a
    -0.0/+0.0 pair may come in either order, as numpy does not fix it)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    assert np.array_equal(got, want, equal_nan=want.dtype.kind == "f"), (got, want)


SORT_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
               "uint64", "float16", "float32", "float64"]


@pytest.mark.parametrize("dtype", SORT_DTYPES)
def test_sort_every_dtype(dtype):
    x = data((6, 13), dtype)
    f = halojit.trace(lambda x: (np.sort(x), np.sort(x, axis=0), np.sort(x, axis=None)))
    before = x.copy()
    for got, want in zip(f(x), (np.sort(x), np.sort(x, axis=0), np.sort(x, axis=None))):
        assert_exact(got, want)
    assert np.array_equal(x, before, equal_nan=True)


@pytest.mark.parametrize("dtype", SORT_DTYPES)
def test_argsort_every_dtype(dtype):
    """The stable order: ties (repeats, NaNs, -0.0 beside +0.0) by position."""
    x = data((6, 13), dtype)
    if dtype.startswith("float"):
        x[2, :4] = [0.0, np.nan, -0.0, np.nan]
    f = halojit.trace(lambda x: (np.argsort(x), np.argsort(x, axis=0, kind="stable"),
                                 x.argsort(axis=None)))
    want = (np.argsort(x, kind="stable"), np.argsort(x, axis=0, kind="stable"),
            np.argsort(x, axis=None, kind="stable"))
    for got, w in zip(f(x), want):
        assert_exact(got, w)


def test_argsort_default_kind_without_ties_and_uses():
    """Without ties every kind agrees with numpy's default; a top-k pick
    and ranks through take_along_axis."""
    x = RNG.permutation(40 * 50).reshape(40, 50).astype(np.float32)

    def top3(x):
        i = np.argsort(-x, axis=1)[:, :3]
        return i, np.take_along_axis(x, i, axis=1)
    for got, want in zip(halojit.trace(top3)(x), top3(x)):
        assert_exact(got, want)
    for n in (1, 2, 33):
        y = x[:, :n]
        assert_exact(halojit.trace(lambda y: np.argsort(y, axis=1))(y), np.argsort(y, axis=1))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 9, 16, 31, 33, 64, 100])
def test_sort_lengths(n):
    """Powers of two and not, unrolled (<= 32) and looped networks."""
    x = data((4, n), "float32")
    f = halojit.trace(lambda x: np.sort(x, axis=-1) * 1)
    assert_exact(f(x), np.sort(x, axis=-1) * 1)
    g = halojit.trace(lambda x: np.sort(x.T, axis=0))
    assert_exact(g(x), np.sort(x.T, axis=0))


def test_sort_3d_axes_views_and_methods():
    x = data((5, 7, 12), "float32")
    for axis in (0, 1, 2, -2):
        assert_exact(halojit.trace(lambda x: np.sort(x, axis=axis))(x), np.sort(x, axis=axis))
    view = x[::2, ::-1, 1::3]
    assert_exact(halojit.trace(lambda x: np.sort(x, kind="stable"))(view), np.sort(view))

    def in_place(x):
        y = x * 2
        y.sort(axis=0)
        return y
    assert_exact(halojit.trace(in_place)(x), in_place(x.copy()))


def test_sort_one_row_paths():
    """1-D sorts (no other axis to vectorize across) through the network:
    short, long and long enough that every step runs in parallel chunks
    (long ones take radix passes by default: test_radix_sort.py)."""
    for n in (7, 1000, 70000):
        x = data((n,), "float32")
        f = halojit.trace(np.sort, autoscheduler=("Sort", {"radix": "0"}))
        assert_exact(f(x), np.sort(x))
        assert "radix sort" not in f.lower(x).groups[0].schedule
    x = data((1, 300), "int32")
    assert_exact(halojit.trace(lambda x: np.sort(x, axis=1))(x), np.sort(x, axis=1))


def test_zero_size():
    for shape, axis in [((0, 5), -1), ((4, 0), -1), ((0, 5), 0), ((0,), 0)]:
        x = np.zeros(shape, np.float32)
        assert_exact(halojit.trace(lambda x: np.sort(x, axis=axis))(x), np.sort(x, axis=axis))
        want = numpy_eager(np.median, x, axis=axis)
        assert_same(halojit.trace(lambda x: np.median(x, axis=axis))(x), want)


MEDIANS = {
    "all": lambda x: np.median(x),
    "axis0": lambda x: np.median(x, axis=0),
    "axis-1": lambda x: np.median(x, axis=-1),
    "axes": lambda x: np.median(x, axis=(0, 2)),
    "keepdims": lambda x: np.median(x, axis=1, keepdims=True),
    "even": lambda x: np.median(x[:, :4], axis=1),
    "method": lambda x: x.mean() + np.median(x[1:], axis=0),
}


@pytest.mark.parametrize("name", sorted(MEDIANS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int16", "uint8", "bool"])
def test_median(name, dtype):
    fn = MEDIANS[name]
    x = data((3, 5, 7), dtype)
    assert_same(halojit.trace(fn)(x), numpy_eager(fn, x))


def test_median_nan_rows_and_exact_values():
    x = data((40, 11), "float32", specials=False)
    x[3, 5] = np.nan
    x[7] = np.nan
    x[9, :5] = np.inf
    for fn in (lambda x: np.median(x, axis=1), lambda x: np.median(x[:, 1:], axis=1)):
        got, want = halojit.trace(fn)(x), fn(x)
        assert_exact(got, want)  # the middle values, or the mean of two: bit for bit


QUANTILES = {
    "pct scalar": lambda x: np.percentile(x, 37.5, axis=1),
    "pct list": lambda x: np.percentile(x, [0, 10, 50, 99.5, 100], axis=0),
    "pct all": lambda x: np.percentile(x, 90),
    "pct int q": lambda x: np.percentile(x, 25, axis=-1),
    "pct keepdims": lambda x: np.percentile(x, [5, 95], axis=1, keepdims=True),
    "q scalar": lambda x: np.quantile(x, 0.3, axis=1),
    "q float32": lambda x: np.quantile(x, np.float32(0.7), axis=0),
    "q array": lambda x: np.quantile(x, np.array([0.25, 0.75]), axis=(0, 1)),
    "lower": lambda x: np.quantile(x, [0.1, 0.6], axis=1, method="lower"),
    "higher": lambda x: np.quantile(x, 0.45, axis=1, method="higher"),
    "nearest": lambda x: np.quantile(x, 0.5, axis=0, method="nearest"),
    "midpoint": lambda x: np.quantile(x, [0.2, 0.9], axis=1, method="midpoint"),
    "median_unbiased": lambda x: np.quantile(x, 0.33, axis=1, method="median_unbiased"),
    "inverted_cdf": lambda x: np.quantile(x, [0.0, 0.5, 1.0], axis=1, method="inverted_cdf"),
    "weibull": lambda x: np.percentile(x, 3, axis=0, method="weibull"),
}


@pytest.mark.parametrize("name", sorted(QUANTILES))
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8"])
def test_quantiles(name, dtype):
    fn = QUANTILES[name]
    x = data((9, 6), dtype)
    if dtype.startswith("float"):
        x[4, 2] = np.nan  # one NaN row / column: NaN there, numbers elsewhere
    assert_same(halojit.trace(fn)(x), numpy_eager(fn, x))


def test_quantile_errors():
    x = data((4, 5), "float32")
    for fn, kind in [(lambda x: np.percentile(x, 101), ValueError),
                     (lambda x: np.quantile(x, [-0.1, 0.5]), ValueError),
                     (lambda x: np.quantile(x, 0.5, method="best"), ValueError),
                     (lambda x: np.quantile(x, [[[0.5]]]), ValueError),  # q of 3 dims
                     (lambda x: np.quantile(x, 0.5, axis=1, weights=np.ones(5)),
                      UnsupportedError),
                     (lambda x: np.quantile(x, x[0, 0]), UnsupportedError),
                     (lambda x: np.percentile(x[:, :0], 50, axis=1), IndexError),
                     (lambda x: np.sort(x, kind="bogo"), ValueError),
                     (lambda x: np.sort(x, axis=2), halojit.ShapeError)]:
        with pytest.raises(kind):
            halojit.trace(fn)(x)

    def sorts_input(x):
        x.sort()
        return x
    before = x.copy()
    with pytest.raises(TraceError, match="input"):
        halojit.trace(sorts_input)(x)
    assert np.array_equal(x, before, equal_nan=True)


def median3x3(a):
    h, w = a.shape
    return np.median(np.stack([a[i:h - 2 + i, j:w - 2 + j] for i in range(3) for j in range(3)]),
                     axis=0)


def test_median_filter_is_one_sort_kernel():
    """A 3x3 median filter written with numpy slicing: one kernel, the
    Sort template, the network unrolled."""
    img = data((70, 90), "float32")
    f = halojit.trace(median3x3)
    assert_exact(f(img), median3x3(img))
    (group,) = f.lower(img).groups
    assert group.scheduler.startswith("Sort") and "sort" in group.ops
    assert "unroll(axis)" in group.schedule


def test_sort_groups_hold_no_other_axis_loop():
    """A reduction before or after a sort runs in its own kernel (the Sort
    template schedules the sort's), with numpy's results."""
    def fn(x):
        c = np.sort(x - x.mean(axis=1, keepdims=True), axis=1)
        return c[:, -3:].sum(axis=1), np.cumsum(np.sort(x, axis=0), axis=0)
    x = data((50, 40), "float32", specials=False)
    f = halojit.trace(fn)
    for got, want in zip(f(x), fn(x)):
        assert_same(got, want)
    groups = f.lower(x).groups
    for g in groups:
        if "sort" in g.ops:
            assert g.ops.count("sort") == 1 and g.scheduler.startswith("Sort"), g.ops
            assert not {"sum", "cumsum"} & set(g.ops), g.ops


@pytest.mark.parametrize("params", [
    {"parallel": "0"}, {"vector": "8", "tile_kib": "16"}, {"unroll": "4"},
    {"vector": "32", "tile_kib": "256", "unroll": "64"}])
def test_template_parameters(params):
    """Every tuning grid point computes numpy's values (short and long axes,
    the median filter)."""
    x = data((300, 40), "float32")
    for fn in (lambda x: np.sort(x, axis=1), lambda x: np.percentile(x, [10, 50], axis=0),
               median3x3):
        f = halojit.trace(fn, autoscheduler=("Sort", params))
        assert_same(f(x), numpy_eager(fn, x))
        assert all(g.scheduler.startswith("Sort") for g in f.lower(x).groups)


def test_every_opt_level(opt_level):
    fn = lambda x: (np.sort(x, axis=0)[::2], np.median(x * 2, axis=1))  # noqa: E731
    x = data((9, 6), "float32")
    for got, want in zip(halojit.trace(fn, opt_level=opt_level)(x), fn(x)):
        assert_exact(got, want)


def test_dumped_artifact_sorts(tmp_path):
    f = halojit.trace(lambda x: np.median(x, axis=1) + np.sort(x)[:, 0])
    x = data((20, 9), "float32")
    path = tmp_path / "median.hjm"
    f.dump(path, x)
    assert_exact(halojit.load(path)(x), np.median(x, axis=1) + np.sort(x)[:, 0])
