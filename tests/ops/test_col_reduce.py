"""Reductions over leading axes (the last axis kept) take the ColReduce
template by default (schedules/col_reduce.py): chunks of rows as parallel
tasks, each streaming its rows into a row of accumulators, then the chunks
combined. Values against numpy on random data with NaN/inf, row counts no
chunk or unroll divides, widths under the vector, non-contiguous views,
keepdims, integer and bool dtypes, and every template parameter."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.generators.build import SERIAL_MAX_ELEMENTS

from helpers import assert_same

pytestmark = pytest.mark.level3


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def rows_for(width):
    """Rows above the serial threshold and enough for two chunks, odd: no
    chunk count or unroll divides them."""
    return max(SERIAL_MAX_ELEMENTS // width + 7, 301) | 1


def softmax0(x):
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


FUNCS = {
    "sum": lambda x: x.sum(axis=0),
    "mean_keepdims": lambda x: x.mean(axis=0, keepdims=True),
    "max": lambda x: x.max(axis=0),
    "min": lambda x: x.min(axis=0),
    "centre": lambda x: x - x.mean(axis=0),
    "std": lambda x: x.std(axis=0),
    "softmax0": softmax0,
}


def traced(fn, *args, first=False, **options):
    """The traced function and its one group (``first``: its first)."""
    f = halojit.trace(fn, **options)
    groups = f.lower(*args).groups
    if first:
        return f, groups[0]
    (g,) = groups
    return f, g


def check(fn, x, rtol=None, atol=None, first=False, **options):
    f, g = traced(fn, x, first=first, **options)
    with np.errstate(invalid="ignore", over="ignore"):
        want = fn(x)
        if x.dtype.kind == "f":
            # numpy's float32 column sums add row after row in float32; the
            # kernels accumulate in float64: compare both with float64 numpy
            want = np.asarray(fn(x.astype(np.float64))).astype(want.dtype)
    before = x.copy()
    for _ in range(2):  # miss, then hit
        assert_same(f(x), want, rtol=rtol, atol=atol)
    np.testing.assert_array_equal(x, before)  # the input is never written
    return g


@pytest.mark.parametrize("name", sorted(FUNCS))
@pytest.mark.parametrize("width", [1024, 37, 5])
def test_default_col_reduce_matches_numpy(name, width):
    x = rand(rows_for(width), width, seed=width)
    x[3, 0] = np.nan
    x[5, width - 1] = np.inf
    # 5 kept elements: 32 rows of 5 reduce as one row of 160, then the
    # partials in a second kernel (passes/flatten.py)
    g = check(FUNCS[name], x, rtol=2e-5, atol=1e-5, first=width < 16)
    assert g.scheduler.startswith("ColReduce"), g.scheduler
    assert "parallel(chunk)" in g.schedule


def test_large_column_sum_is_chunked_and_accurate():
    """Float32 column sums accumulate in float64 across chunks: closer to
    the exact sum than numpy's float32 one."""
    x = rand(20001, 64, seed=1) + np.float32(1000)
    f, g = traced(lambda a: a.sum(axis=0), x)
    assert "chunks=8" in g.scheduler, g.scheduler
    exact = x.astype(np.float64).sum(axis=0)
    got = f(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, exact, rtol=1e-7)


@pytest.mark.parametrize("op", ["max", "min"])
def test_nan_and_inf_propagate_across_chunks(op):
    x = rand(rows_for(40), 40, seed=2)
    x[-1, 0] = np.nan           # the last chunk only
    x[0, 1] = np.nan            # the first chunk only
    x[:, 2] = -np.inf
    x[:, 3] = np.inf
    x[len(x) // 2, 4] = np.inf if op == "max" else -np.inf
    x[:, 5] = 0.0
    x[::3, 5] = -0.0
    fn = (lambda a: a.max(axis=0)) if op == "max" else (lambda a: a.min(axis=0))
    g = check(fn, x)
    assert g.scheduler.startswith("ColReduce"), g.scheduler


@pytest.mark.parametrize("dtype,op", [(np.int32, "sum"), (np.int64, "max"), (np.uint8, "sum"),
                                      (np.bool_, "any"), (np.bool_, "all"), (np.float64, "prod"),
                                      (np.float16, "sum")])
def test_integer_bool_and_other_dtypes(dtype, op):
    rng = np.random.default_rng(3)
    shape = (rows_for(33), 33)
    if dtype == np.bool_:
        x = rng.random(shape) < (0.999 if op == "all" else 0.001)
    elif np.dtype(dtype).kind in "iu":
        x = rng.integers(0, 100, shape).astype(dtype)
    elif op == "prod":
        x = (1 + rng.standard_normal(shape) * 1e-3).astype(dtype)
    else:
        x = rng.standard_normal(shape).astype(dtype)
    fn = {"sum": lambda a: a.sum(axis=0), "max": lambda a: a.max(axis=0),
          "any": lambda a: a.any(axis=0), "all": lambda a: a.all(axis=0),
          "prod": lambda a: a.prod(axis=0)}[op]
    tol = {"rtol": 2e-3, "atol": 0.5} if dtype == np.float16 else {}
    g = check(fn, x, **tol)
    assert g.scheduler.startswith("ColReduce"), g.scheduler


@pytest.mark.parametrize("case", ["strided_rows", "transposed", "sliced_columns"])
def test_non_contiguous_views(case):
    base = rand(2 * rows_for(48) + 1, 96, seed=4)
    x = {"strided_rows": base[::2, :48], "transposed": base[:96, :].T.copy().T[:, :48],
         "sliced_columns": base[:, 10:58]}[case]
    assert not x.flags.c_contiguous or case == "transposed"
    check(lambda a: a.sum(axis=0), x, rtol=2e-5, atol=1e-5)
    check(softmax0, x, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("fn,shape", [
    (lambda a: a.sum(axis=(0, 1)), (16, 257, 129)),      # two reduced axes, chunks of axis 0
    (lambda a: a.mean(axis=1), (40, 1001, 24)),          # a kept axis outside the reduction
    (lambda a: a.max(axis=(0, 2), keepdims=True), (9, 5, 1003, 17)),  # a kept axis between
], ids=["axes01", "axis1_of_3d", "axes02_keepdims"])
def test_several_and_inner_reduced_axes(fn, shape):
    x = rand(*shape, seed=5)
    x[0, 0, 0] = np.nan
    g = check(fn, x, rtol=2e-5, atol=1e-5)
    assert g.scheduler.startswith("ColReduce"), g.scheduler


@pytest.mark.parametrize("params", [
    {"chunks": "1"}, {"chunks": "3"}, {"chunks": "64"}, {"unroll": "1"}, {"unroll": "3"},
    {"vector": "8"}, {"vector": "32"}, {"inline": "0"}, {"parallel": "0"},
    {"chunks": "1", "unroll": "7", "vector": "64"},
])
def test_every_parameter_gives_numpy_values(params):
    x = rand(1003, 45, seed=6)
    x[7, 3] = np.nan
    sched = {"name": "ColReduce", **params}
    for fn in (FUNCS["std"], softmax0):
        g = check(fn, x, rtol=2e-5, atol=1e-5, autoscheduler=sched)
        assert g.scheduler.startswith("ColReduce"), g.scheduler
    x3 = rand(12, 301, 40, seed=7)
    check(lambda a: a.mean(axis=1), x3, rtol=2e-5, atol=1e-5, autoscheduler=sched)


def test_wide_accumulator_rows_keep_adams():
    """A mean over axis 0 of (64, 512, 512) keeps 256K accumulators per
    chunk: Adams2019 (register tiles) was faster there, so it stays the
    default; ColReduce asked for by name still gives numpy's values."""
    x = rand(8, 300, 240, seed=8)
    fn = lambda a: a.mean(axis=0)  # noqa: E731
    f, g = traced(fn, x)
    assert not g.scheduler.startswith("ColReduce"), g.scheduler
    check(fn, x, rtol=2e-5, atol=1e-5, autoscheduler="ColReduce")


def test_small_groups_run_as_one_serial_task():
    x = rand(64, 64, seed=9)
    g = check(lambda a: a.sum(axis=0), x, rtol=2e-5, atol=1e-5)
    assert "chunks=1" in g.scheduler and "parallel=0" in g.scheduler, g.scheduler
    assert "parallel" not in g.schedule.replace("parallel=0", "")


def test_out_argument_and_zero_rows_edge():
    x = rand(rows_for(64), 64, seed=10)
    f = halojit.trace(lambda a: a.sum(axis=0))
    out = np.full(64, np.nan, np.float32)
    f(x, out=out)
    assert_same(out, x.sum(axis=0), rtol=2e-5, atol=1e-5)
    empty = np.zeros((0, 64), np.float32)
    assert_same(f(empty), empty.sum(axis=0))


def test_last_axis_reductions_fall_back_from_col_reduce():
    """ColReduce asked for a group it does not fit: the compile falls back
    to the autoschedulers and the values are numpy's."""
    x = rand(100, 50, seed=11)
    g = check(lambda a: a.sum(axis=-1), x, rtol=2e-5, atol=1e-5, autoscheduler="ColReduce")
    assert not g.scheduler.startswith("ColReduce"), g.scheduler


@pytest.mark.parametrize("params,expected", [({"chunks": "0"}, ">= 1"), ({"parallel": "-1"}, ">= 0"),
                                             ({"unroll": "two"}, "expected an integer")])
def test_bad_parameters_are_named(params, expected):
    from halojit.schedules.col_reduce import apply_col_reduce, col_chunks_of
    with pytest.raises(halojit.HalojitError, match=expected):
        col_chunks_of(params) if "chunks" in params else apply_col_reduce(_Lowered(), params)


class _Lowered:
    """apply_col_reduce reads its parameters before it looks at the group."""
    stages = ()
