"""argmax/argmin as reductions of (value, position) pairs (lowering._arg_reducer):
per-lane partials and parallel chunks as sums have, combined in any order, so
ties, NaN and -0.0 must still give numpy's first occurrence.

Many ties (small integers as floats), a NaN or a -0.0 somewhere, all -inf,
every dtype, every axis, 1-D arrays long enough for parallel chunks and
rows long enough for lanes, compared with numpy exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

import halojit

SHAPES = [(17,), (100003,), (1 << 20,), (64, 1024), (3, 5, 200), (2, 70000)]
DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint64, np.bool_]


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.01
    if np.dtype(dtype).kind == "f":
        x = rng.integers(-3, 4, shape).astype(dtype)
        flat = x.reshape(-1)
        where = rng.integers(0, flat.size, 2)
        if seed % 3 == 0:
            flat[where[0]] = np.nan
        if seed % 2 == 0:
            flat[where[1]] = -0.0
        if seed % 5 == 4:
            flat[:] = -np.inf
        return x
    return rng.integers(0, 5, shape).astype(dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_argmax_argmin_match_numpy(shape, dtype):
    for seed in range(3):
        x = _data(shape, dtype, seed + 10 * len(shape))
        for axis in (None, -1, 0):
            for op in ("argmax", "argmin"):
                def fn(a, op=op, axis=axis):
                    return getattr(a, op)(axis=axis)
                got = halojit.trace(fn)(x)
                np.testing.assert_array_equal(got, fn(x), strict=True,
                                              err_msg=f"{op} axis={axis} seed={seed}")


def test_ties_and_nan_across_chunks_take_the_first():
    x = np.zeros(1 << 20, np.float32)
    x[[700_000, 900_000]] = 5  # equal maxima in different chunks
    x[[300_000, 800_000]] = -5
    f = halojit.trace(lambda a: (a.argmax(), a.argmin()))
    assert [int(v) for v in f(x)] == [700_000, 300_000]
    x[[999_999, 600_000]] = np.nan  # the first NaN wins both
    assert [int(v) for v in f(x)] == [600_000, 600_000]


def test_long_1d_argmax_takes_full_reduce():
    x = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
    f = halojit.trace(lambda a: a.argmax())
    assert int(f(x)) == int(x.argmax())
    (group,) = f.lower(x).groups
    assert group.scheduler.startswith("FullReduce"), group
