"""np.median, np.percentile and np.quantile of long rows: a radix selection
(the ``select`` op, lowering.lower_select, schedules/select.py) of the few
positions of the sorted row they need, not a sort. Exactly numpy's values,
shapes and dtypes, for every dtype, NaN rows, the extremes of integer
types and both key widths (32 and 64 bits)."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.graph.numpy_api import SELECT_MIN, SELECT_MIN_ONE, SELECT_ROW_PER_BASE, select_bases, selects_rows

from helpers import assert_same, assert_tree_same, numpy_eager

pytestmark = pytest.mark.level3

RNG = np.random.default_rng(23)
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64"]


def data(shape, dtype, spread=1000):
    """Random values with many repeats; integers with their type's extremes
    (a key transform that wraps would misplace them), floats with +-inf,
    +-0.0 and subnormals (no NaN: see test_nan_rows)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return RNG.random(shape) > 0.3
    if dt.kind in "iu":
        info = np.iinfo(dt)
        x = RNG.integers(max(info.min, -spread), min(info.max, spread), shape,
                         endpoint=True).astype(dt)
        flat = x.reshape(-1)
        flat[:3] = [info.min, info.max, info.max]
        return x
    x = (RNG.standard_normal(shape) * 100).round(1).astype(dt)
    flat = x.reshape(-1)
    tiny = np.finfo(dt).smallest_subnormal
    flat[:6] = [np.inf, -np.inf, -0.0, 0.0, tiny, -tiny]
    return x


def groups_of(f, *args):
    return [(g.ops, g.scheduler.split(";")[0]) for g in f.lower(*args).groups]


def uses_select(f, *args) -> bool:
    return any("select" in ops and sched == "Select" for ops, sched in groups_of(f, *args))


@pytest.mark.parametrize("dtype", DTYPES)
def test_median_every_dtype(dtype):
    for shape, axis in [((SELECT_MIN_ONE + 1,), None), ((3, SELECT_MIN), 1), ((40, 50), None)]:
        x = data(shape, dtype)
        fn = lambda x: np.median(x, axis=axis)  # noqa: E731
        f = halojit.trace(fn)
        assert_same(f(x), numpy_eager(fn, x))
        assert uses_select(f, x), groups_of(f, x)


@pytest.mark.parametrize("n", [SELECT_MIN_ONE, SELECT_MIN_ONE + 1, 5000, 65536 + 3])
def test_median_lengths_and_order(n):
    """Odd and even counts; a sorted, a reversed and an all-equal row (every
    key in one bin each pass) give the same middle."""
    x = data((n,), "float32")
    f = halojit.trace(lambda x: np.median(x))
    for v in (x, np.sort(x), np.sort(x)[::-1], np.full(n, 2.5, np.float32)):
        assert_same(f(v), np.median(v))


def test_nan_rows():
    """A row holding a NaN has a NaN median and NaN quantiles (numpy sorts NaN
    last and checks the last value); the other rows are numbers (but for
    the 0th and 100th percentiles, which interpolate -inf or inf: NaN, as
    in numpy)."""
    x = data((4, SELECT_MIN + 5), "float64")
    x[1, 7] = np.nan
    x[3] = np.nan
    for fn in (lambda x: np.median(x, axis=1), lambda x: np.percentile(x, [0, 30, 100], axis=1),
               lambda x: np.quantile(x, 0.5, axis=1, method="nearest")):
        got, want = halojit.trace(fn)(x), fn(x)
        assert_same(got, want)
        assert np.isnan(got[..., 1]).all() and np.isnan(got[..., 3]).all()
        assert not np.isnan(got[..., 0]).all() and not np.isnan(got[..., 2]).all()


QUANTILES = {
    "pct list": lambda x: np.percentile(x, [0, 10, 50, 99.5, 100], axis=-1),
    "pct all": lambda x: np.percentile(x, 90),
    "q array 2-d": lambda x: np.quantile(x, np.array([[0.25, 0.75], [0.1, 0.2]]), axis=-1),
    "keepdims": lambda x: np.percentile(x, [5, 95], axis=-1, keepdims=True),
    "lower": lambda x: np.quantile(x, [0.1, 0.6], axis=-1, method="lower"),
    "higher": lambda x: np.quantile(x, 0.45, axis=-1, method="higher"),
    "nearest": lambda x: np.quantile(x, 0.5, axis=-1, method="nearest"),
    "midpoint": lambda x: np.quantile(x, [0.2, 0.9], axis=-1, method="midpoint"),
    "inverted_cdf": lambda x: np.quantile(x, [0.0, 0.5, 1.0], axis=-1, method="inverted_cdf"),
    "weibull": lambda x: np.percentile(x, 3, axis=-1, method="weibull"),
}


@pytest.mark.parametrize("name", sorted(QUANTILES))
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8"])
def test_quantiles(name, dtype):
    """Rows long enough to select every position; rows of SELECT_MIN + 1
    select a lone position (and its neighbour) but sort for several."""
    fn = QUANTILES[name]
    f = halojit.trace(fn)
    x = data((2, 5 * SELECT_ROW_PER_BASE + 1), dtype)
    assert_same(f(x), numpy_eager(fn, x))
    assert uses_select(f, x)
    y = data((2, SELECT_MIN + 1), dtype)
    assert_same(f(y), numpy_eager(fn, y))


def test_views_fusion_and_inputs_untouched():
    """A strided, reversed view; the values computed before the selection
    (fused into its keys) and used after it."""
    x = data((3, 2 * SELECT_MIN + 2), "float32")
    before = x.copy()
    fn = lambda x: np.median(np.abs(x[:, ::-2]) * 2, axis=1) - 1  # noqa: E731
    f = halojit.trace(fn)
    assert_same(f(x), fn(x))
    np.testing.assert_array_equal(x, before)
    assert uses_select(f, x)


def test_short_rows_still_sort():
    x = data((50, SELECT_MIN - 1), "float32")
    f = halojit.trace(lambda x: np.median(x, axis=1))
    assert_same(f(x), np.median(x, axis=1))
    assert not uses_select(f, x)
    assert any(sched == "Sort" for _, sched in groups_of(f, x))


@pytest.mark.parametrize("params", [{"parallel": "0"}, {"vector": "8"}, {"vector": "32"}])
def test_template_parameters(params):
    x = data((3, 2 * SELECT_ROW_PER_BASE + 7), "float32")  # two positions with neighbours
    fn = lambda x: np.percentile(x, [10, 50], axis=1)  # noqa: E731
    f = halojit.trace(fn, autoscheduler=("Select", params))
    assert_same(f(x), fn(x))
    assert uses_select(f, x)


def test_every_opt_level(opt_level):
    x = data((2, SELECT_MIN + 1), "float32")
    fn = lambda x: (np.median(x, axis=1), np.percentile(x, 75))  # noqa: E731
    assert_tree_same(halojit.trace(fn, opt_level=opt_level)(x), fn(x))


def test_dumped_artifact_selects(tmp_path):
    f = halojit.trace(lambda x: np.median(x))
    x = data((SELECT_MIN + 3,), "float32")
    path = tmp_path / "median.hjm"
    f.dump(path, x)
    assert_same(halojit.load(path)(x), np.median(x))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "uint16"])
def test_runs_of_neighbouring_positions(dtype):
    """Positions k, k+1, k+2, k+3: every other one comes from its
    predecessor's count (selnext), the others from the radix passes; with
    many ties (the neighbours then equal) and without."""
    n = 4097  # four bases: rows of at least 4 * SELECT_ROW_PER_BASE select
    assert selects_rows((2, n), [100, 101, 102, 103, 1000, 2047, 2048])
    q = np.array([100, 101, 102, 103, 1000, 2047, 2048]) / (n - 1)  # exact in binary
    fn = lambda x: np.quantile(x, q, axis=-1, method="lower")  # noqa: E731
    f = halojit.trace(fn)
    for spread in (3, 10**6):
        x = data((2, n), dtype, spread=spread)
        assert_same(f(x), fn(x))
    assert uses_select(f, x)


def test_zero_rows():
    """No rows of a long axis: empty results of numpy's shapes and dtypes."""
    for shape, axis in [((0, 5000), 1), ((5000, 0), 0), ((3, 0, 2000), 2)]:
        x = np.zeros(shape, np.float32)
        for fn in (lambda x: np.median(x, axis=axis),
                   lambda x: np.percentile(x, [5, 50], axis=axis)):
            assert_same(halojit.trace(fn)(x), numpy_eager(fn, x))


def ops_and_schedulers(f, *args):
    return [op for ops, _ in groups_of(f, *args) for op in ops]


SORTED_PICKS = {
    "partition kth": lambda x: np.partition(x, 300, axis=-1)[..., 300],
    "top five": lambda x: np.sort(x, axis=-1)[..., -5:],
    "middle": lambda x: np.sort(x, axis=-1)[..., x.shape[-1] // 2],
    "every other": lambda x: np.sort(x, axis=-1)[..., ::2][..., :3] * 2,
    "two picks": lambda x: (np.sort(x, axis=-1)[..., 0], np.sort(x, axis=-1)[..., -1]),
}


@pytest.mark.parametrize("name", sorted(SORTED_PICKS))
@pytest.mark.parametrize("shape", [(SELECT_MIN_ONE + 3,), (3, 3 * SELECT_ROW_PER_BASE + 1)])
def test_sort_read_at_a_few_positions_selects(name, shape):
    """passes/select.py: a sort whose every use is a slice of a few positions
    along its last axis is a select of them, with the sort's very values
    (NaN last, infinities, zeros)."""
    fn = SORTED_PICKS[name]
    x = data(shape, "float32")
    x.reshape(-1)[7] = np.nan
    f = halojit.trace(fn)
    assert_tree_same(f(x), numpy_eager(fn, x))
    ops = ops_and_schedulers(f, x)
    assert "select" in ops and "sort" not in ops, ops


def test_sorts_kept_where_the_whole_order_is_needed():
    """The sorted row also returned, a slice across rows, a short row: the
    sort stays."""
    x = data((4, SELECT_MIN + 1), "float32")
    for fn in (lambda x: (np.sort(x)[:, 0], np.sort(x)),
               lambda x: np.sort(x)[:2, :3],
               lambda x: np.sort(x[:, :SELECT_MIN - 1])[:, 0]):
        f = halojit.trace(fn)
        assert_tree_same(f(x), fn(x))
        ops = ops_and_schedulers(f, x)
        assert "sort" in ops and "select" not in ops, ops


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_nanmedian_of_long_rows_selects(dtype):
    """np.nanmedian: each row's middle of its non-NaN values, which sort
    first, at a position that depends on the row (the select op's second
    operand): rows with NaN, an odd and an even count, all NaN, none."""
    x = data((5, SELECT_MIN + 2), dtype)
    x[0, ::3] = np.nan   # an even count
    x[1, 1::7] = np.nan  # an odd count
    x[2] = np.nan        # all NaN: NaN
    x[3, :-1] = np.nan   # one value
    fn = lambda x: np.nanmedian(x, axis=1)  # noqa: E731
    f = halojit.trace(fn)
    assert_same(f(x), numpy_eager(fn, x))
    assert uses_select(f, x)
    y = data((SELECT_MIN_ONE + 1,), dtype)
    y[::5] = np.nan
    g = halojit.trace(lambda y: np.nanmedian(y))
    assert_same(g(y), numpy_eager(np.nanmedian, y))
    assert uses_select(g, y)


def test_nanmedian_every_opt_level(opt_level):
    x = data((3, SELECT_MIN + 1), "float32")
    x[0, 5:900] = np.nan
    fn = lambda x: np.nanmedian(x, axis=-1, keepdims=True)  # noqa: E731
    assert_same(halojit.trace(fn, opt_level=opt_level)(x), numpy_eager(fn, x))


def test_positions_decide_between_select_and_sort():
    """Each position found by its own passes costs about a sort of a
    SELECT_ROW_PER_BASE-th of the row: several rows of a few thousand
    values sort for many positions, long rows and lone rows select."""
    assert select_bases([5]) == 1 and select_bases([5, 6]) == 1
    assert select_bases([5, 6, 7]) == 2 and select_bases([1, 3, 9, 10]) == 3
    assert select_bases(range(16)) == 8 and select_bases([4, 4, 5]) == 1
    assert selects_rows((8, SELECT_MIN), [10, 11]) and not selects_rows((8, 2048), [1, 5, 9])
    assert selects_rows((8, 3 * SELECT_ROW_PER_BASE), [1, 5, 9])
    assert selects_rows((4096,), range(16))
    top5 = lambda x: np.sort(x, axis=1)[:, -5:]  # noqa: E731
    for shape, selects in (((6, 2000), False), ((6, 4000), True), ((1, 2000), True)):
        x = data(shape, "float32")
        f = halojit.trace(top5)
        assert_same(f(x), numpy_eager(top5, x))
        assert uses_select(f, x) == selects, groups_of(f, x)
