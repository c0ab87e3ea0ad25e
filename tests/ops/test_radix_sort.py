"""Long sorts by LSD radix passes (lowering.lower_radix_sort): a lone row of
256 or more, rows of 8192 or more. Exactly numpy's values and its stable
argsort order for every dtype with NaN, +-inf, +-0.0, repeats and the
type's extremes; chunked lone rows of lengths that do not split evenly;
rows along the first, middle and last axis; strided views; the Sort
template's radix and chunks parameters against the bitonic network; a
dumped artifact."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.generators.lowering import radix_sorts

pytestmark = pytest.mark.level3

RNG = np.random.default_rng(23)

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64"]


def data(shape, dtype, spread: bool = True):
    """Random values over the whole range of ``dtype`` (every key byte
    varies) with repeats; floats with NaN, +-inf and +-0.0 scattered."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return RNG.random(shape) > 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = (info.min, info.max) if spread else (-3 if dt.kind == "i" else 0, 3)
        x = RNG.integers(lo, hi, shape, dtype=dt, endpoint=True)
        x.flat[:2] = info.min, info.max
        return x
    x = RNG.standard_normal(shape) * np.float64(10.0) ** RNG.integers(-6, 6, shape)
    if not spread:
        x = x.round(0)
    x = np.clip(x, -6e4, 6e4).astype(dt)  # float16: finite but for the specials
    flat = x.reshape(-1)
    k = RNG.choice(x.size, 40, replace=False)
    flat[k] = np.repeat([np.nan, np.inf, -np.inf, -0.0, 0.0], 8)
    return x


def assert_exact(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    assert np.array_equal(got, want, equal_nan=want.dtype.kind == "f"), (got, want)


def radix_kernels(f, *args) -> int:
    return sum("radix sort" in g.schedule for g in f.lower(*args).groups)


def test_which_sorts_take_radix():
    assert radix_sorts((256,), 0) and radix_sorts((1, 300), 1) and radix_sorts((5, 8192), 1)
    assert not radix_sorts((255,), 0) and not radix_sorts((5, 8191), 1)
    assert not radix_sorts((0, 9000), 1) and not radix_sorts((9000, 1), 1)
    assert radix_sorts((3,), 0, "1") and not radix_sorts((10**6,), 0, "0")


@pytest.mark.parametrize("dtype", DTYPES)
def test_lone_row_every_dtype(dtype):
    """Sort and stable argsort of 1-D rows: a short one (one chunk) and a
    long, odd one, whose chunks do not split it evenly; the input unchanged."""
    fn = lambda x: (np.sort(x), np.argsort(x, kind="stable"))  # noqa: E731
    f = halojit.trace(fn)
    for n, spread in ((300, False), (70001, True)):
        x = data((n,), dtype, spread)
        before = x.copy()
        for got, want in zip(f(x), fn(x)):
            assert_exact(got, want)
        assert np.array_equal(x, before, equal_nan=x.dtype.kind == "f")
        assert radix_kernels(f, x) == 2  # one kernel per sort


def test_argsort_ties_keep_their_order():
    """Equal keys (repeats, every NaN, -0.0 beside +0.0) come out by
    position, as numpy's stable argsort: a default argsort too."""
    x = np.zeros(5000, np.float32)
    x[::3], x[1::7], x[2::11] = -0.0, np.nan, 1.0
    assert_exact(halojit.trace(np.argsort)(x), np.argsort(x, kind="stable"))
    y = RNG.integers(0, 4, 20000).astype(np.int64)
    assert_exact(halojit.trace(lambda y: y.argsort(kind="stable"))(y),
                 y.argsort(kind="stable"))


def test_rows_that_skip_passes():
    """Passes over digits every key of a row shares are skipped, per row:
    a row of one value (no pass), small ranges (the low digits), the full
    range (every pass) and small values of both signs (every pass: the
    sign bit differs)."""
    rows = np.stack([np.full(9000, 7), RNG.integers(0, 1000, 9000),
                     RNG.integers(-2**62, 2**62, 9000), RNG.integers(-3, 4, 9000),
                     RNG.integers(2**40, 2**40 + 300, 9000)]).astype(np.int64)
    fn = lambda x: (np.sort(x, axis=1), np.argsort(x, axis=1, kind="stable"))  # noqa: E731
    f = halojit.trace(fn)
    for got, want in zip(f(rows), fn(rows)):
        assert_exact(got, want)
    g = halojit.trace(lambda x: (np.sort(x), np.argsort(x, kind="stable")))
    for x in (np.full(70001, 2.5, np.float32), RNG.random(70001).astype(np.float32),
              RNG.integers(0, 50, 3000).astype(np.uint16), np.zeros(300, bool),
              np.array([-0.0, 0.0] * 200, np.float64)):
        for got, want in zip(g(x), (np.sort(x), np.argsort(x, kind="stable"))):
            assert_exact(got, want)


@pytest.mark.parametrize("shape,axis", [((3, 9000), 1), ((9000, 3), 0), ((2, 8200, 3), 1),
                                        ((1, 1, 5000), 2)])
@pytest.mark.parametrize("dtype", ["float32", "int64", "uint16"])
def test_rows_along_any_axis(shape, axis, dtype):
    x = data(shape, dtype)
    fn = lambda x: (np.sort(x, axis=axis), np.argsort(x, axis=axis, kind="stable"))  # noqa: E731
    f = halojit.trace(fn)
    for got, want in zip(f(x), fn(x)):
        assert_exact(got, want)
    assert radix_kernels(f, x) == 2


def test_views_and_uses():
    """Strided and reversed views; a sort feeding arithmetic and a slice of
    ranks (the sorted values inline into the outputs)."""
    base = data((3, 40000), "float32")
    view = base[::2, ::-3]
    assert_exact(halojit.trace(lambda v: np.sort(v, axis=1))(view), np.sort(view, axis=1))
    flat = base[1, 1::2]
    fn = lambda v: (np.sort(v)[::-1] * 2, np.argsort(v, kind="stable")[:10])  # noqa: E731
    for got, want in zip(halojit.trace(fn)(flat), fn(flat)):
        assert_exact(got, want)


@pytest.mark.parametrize("params", [{"chunks": "3"}, {"chunks": "1"}, {"parallel": "0"},
                                    {"radix": "1"}, {"radix": "0"}, {"chunks": "7", "vector": "8"}])
def test_template_parameters(params):
    """Every radix/chunks setting agrees with numpy, and radix=0 keeps the
    bitonic network (which GPU targets always take)."""
    x = data((20001,), "float32")
    y = data((4, 300), "int32")
    fn = lambda x: (np.sort(x), np.argsort(x, kind="stable"))  # noqa: E731
    f = halojit.trace(fn, autoscheduler=("Sort", params))
    for got, want in zip(f(x), fn(x)):
        assert_exact(got, want)
    g = halojit.trace(lambda y: np.sort(y, axis=1), autoscheduler=("Sort", params))
    assert_exact(g(y), np.sort(y, axis=1))
    assert radix_kernels(f, x) == (0 if params.get("radix") == "0" else 2)
    assert radix_kernels(g, y) == (1 if params.get("radix") == "1" else 0)


def test_bad_parameters():
    x = np.zeros(300, np.float32)
    for params, words in (({"radix": "yes"}, "radix must be auto, 0 or 1"),
                          ({"chunks": "-1"}, "chunks must be a whole number")):
        with pytest.raises(halojit.HalojitError, match=words):
            halojit.trace(np.sort, autoscheduler=("Sort", params))(x)


def test_dumped_artifact(tmp_path):
    f = halojit.trace(lambda x: (np.sort(x), np.argsort(x)))
    x = data((5000,), "float64")
    path = tmp_path / "radix.hjm"
    f.dump(path, x)
    for got, want in zip(halojit.load(path)(x), (np.sort(x), np.argsort(x, kind="stable"))):
        assert_exact(got, want)
