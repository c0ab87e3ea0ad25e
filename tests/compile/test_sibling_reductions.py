"""A large array's min and max (``x.max() - x.min()``, a normalization to
[0, 1], a histogram's edges) are one kernel that reads the array once:
fusion._merge_sibling_extrema puts both reductions in one group and the
FullReduce template computes their partials in one loop (compute_with).
numpy's values exactly, NaN and integer types included."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.graph.fusion import SIBLING_MIN

from helpers import assert_same, assert_tree_same, numpy_eager

pytestmark = pytest.mark.level3

RNG = np.random.default_rng(5)


def data(shape, dtype):
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        x = RNG.integers(max(info.min, -1000), min(info.max, 1000), shape, endpoint=True)
        x = x.astype(dt)
        x.reshape(-1)[[5, -3]] = [info.min, info.max]
        return x
    return (RNG.standard_normal(shape) * 50).astype(dt)


def kernels(f, *args):
    return [(g.ops, g.scheduler.split(";")[0]) for g in f.lower(*args).groups]


CASES = {
    "range": lambda x: x.max() - x.min(),
    "pair": lambda x: (x.min(), x.max()),
    "normalize": lambda x: (x - x.min()) / (x.max() - x.min()),
    "nan pair": lambda x: (np.nanmin(x), np.nanmax(x)),
    "keepdims": lambda x: x.max(keepdims=True) + x.min(keepdims=True),
    "cast": lambda x: (x.astype(np.float32) / 255).max() - (x.astype(np.float32) / 255).min(),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "uint8"])
@pytest.mark.parametrize("shape", [(SIBLING_MIN + 17,), (300, 700)])
def test_min_and_max_read_the_array_once(name, dtype, shape):
    fn = CASES[name]
    x = data(shape, dtype)
    f = halojit.trace(fn)
    assert_tree_same(f(x), numpy_eager(fn, x))
    ks = kernels(f, x)
    both = [ops for ops, sched in ks if sched == "FullReduce"]
    assert len(both) == 1, ks
    assert sum(op in ("max", "min", "nanmax", "nanmin") for op in both[0]) == 2, ks


def test_nan_and_infinities():
    x = data((SIBLING_MIN * 2,), "float32")
    f = halojit.trace(lambda x: (x.min(), x.max(), np.nanmin(x) + np.nanmax(x)))
    for special in (np.inf, -np.inf, np.nan):
        y = x.copy()
        y[1234] = special
        assert_tree_same(f(y), numpy_eager(lambda y: (y.min(), y.max(),
                                                       np.nanmin(y) + np.nanmax(y)), y))
    y = np.full(SIBLING_MIN, np.nan, np.float32)
    g = halojit.trace(lambda y: (y.min(), y.max()))
    assert_tree_same(g(y), (y.min(), y.max()))


@pytest.mark.parametrize("fn", [lambda x, y: x.max() - y.min(), lambda x, y: x.sum() - x.max()],
                         ids=["two arrays", "sum and max"])
def test_only_extrema_of_one_value_merge(fn):
    x, y = data((400, 300), "float32"), data((400, 300), "float32")
    f = halojit.trace(fn)
    assert_same(f(x, y), fn(x, y))
    full = [ops for ops, _ in kernels(f, x, y)
            if sum(op in ("max", "min", "sum") for op in ops) == 2]
    assert not full, kernels(f, x, y)


def test_small_arrays_keep_their_kernels():
    x = data((SIBLING_MIN - 1,), "float32")
    f = halojit.trace(lambda x: x.max() - x.min())
    assert_same(f(x), x.max() - x.min())
    assert len(kernels(f, x)) == 2


def test_extrema_of_a_value_built_by_several_ops():
    """The min and max of a value made by several ops with parameters (np.pad
    with per-axis constants), compared by fusion.same_value: numpy's values."""
    x = data((300, 200), "float32")
    def padded(x):
        return np.pad(x, ((1, 2), (3, 4)), constant_values=((1, 2), (3, 4)))
    fn = lambda x: padded(x).max() - padded(x).min()  # noqa: E731
    assert_same(halojit.trace(fn)(x), fn(x))
