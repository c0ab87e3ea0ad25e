"""Full reductions of large arrays: lowering cuts the per-lane partials into
chunks (generators.chunks.chunking) that run as parallel tasks; results must stay as
accurate as the serial lanes were (float32 sums accumulate in float64)."""

import re

import numpy as np
import pytest

import halojit
from halojit.generators import chunks

SIZES = [17, 4096, (1 << 15) - 1, 1 << 15, 100003, (1 << 20) + 7, 1 << 22]


def _trace(op):
    return halojit.trace(lambda x: getattr(x, op)())


@pytest.mark.parametrize("n", SIZES)
def test_float32_sum_mean_accuracy(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32) + 0.5
    ref = x.astype(np.float64).sum()
    got = _trace("sum")(x)
    assert got.dtype == np.float32
    # at least as accurate as numpy's pairwise sum
    assert abs(float(got) - ref) <= max(abs(float(np.sum(x)) - ref), abs(ref) * 1e-6)
    np.testing.assert_allclose(_trace("mean")(x), ref / n, rtol=1e-6)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", ["max", "min", "prod", "any", "all"])
def test_other_reductions(n, op):
    rng = np.random.default_rng(n + 1)
    if op in ("any", "all"):
        x = rng.random(n) < (1 / n if op == "any" else 1 - 1 / n)
    elif op == "prod":
        x = (1 + rng.standard_normal(n) * 1e-4).astype(np.float32)
    else:
        x = rng.standard_normal(n).astype(np.float32)
    got, want = _trace(op)(x), getattr(x, op)()
    if op == "prod":  # float32 products round at every step: compare errors
        ref = np.prod(x.astype(np.float64))
        assert abs(float(got) - ref) <= max(2 * abs(float(want) - ref), abs(ref) * 1e-5)
    else:
        assert got == want


@pytest.mark.parametrize("n", [(1 << 20) + 7, 1 << 22])
def test_integer_sums_exact(n):
    x = np.random.default_rng(2).integers(-2**31, 2**31 - 1, n, dtype=np.int32)
    assert _trace("sum")(x) == x.sum()  # numpy sums int32 in int64
    u = np.random.default_rng(3).integers(0, 255, n, dtype=np.uint8)
    assert _trace("sum")(u) == u.sum()
    assert _trace("max")(x) == x.max() and _trace("min")(x) == x.min()


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_nan_and_inf_anywhere(op):
    n = (1 << 20) + 7
    for pos in (0, n // 2, n - 1, n - 5):  # a chunk's start, a middle chunk, the tail
        x = np.ones(n, np.float32)
        x[pos] = np.nan
        assert np.isnan(_trace(op)(x))
        x[pos] = np.inf
        np.testing.assert_equal(_trace(op)(x), getattr(x, op)())


@pytest.mark.parametrize("shape,axis", [((4096, 4096), None), ((3, 1 << 20), None),
                                        ((2, 300, 1000), None), ((8, 1 << 18), 1)])
def test_nd(shape, axis):
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    f = halojit.trace(lambda x: x.sum(axis=axis))
    np.testing.assert_allclose(f(x), x.astype(np.float64).sum(axis=axis), rtol=1e-5, atol=1e-3)
    g = halojit.trace(lambda x: x.max(axis=axis))
    np.testing.assert_array_equal(g(x), x.max(axis=axis))


def test_chunking_choice():
    # a full 1-D reduction chunks its last axis only once it is large
    assert chunks.chunking((4096,), (0,), ()) == (None, None)
    assert chunks.chunking((1 << 24,), (0,), ())[0] == "last"
    # a row reduction with many rows keeps one partial per lane
    assert chunks.chunking((4096, 4096), (1,), (4096,)) == (None, None)
    assert chunks.chunking((4096, 4096), (0, 1), ()) == ("outer", 0)
    assert chunks.chunking((3, 1 << 20), (0, 1), ())[0] == "last"


def test_large_sum_is_parallel():
    from halojit.schedules import templates
    if "FullReduce" not in templates.TEMPLATES:
        pytest.skip("the FullReduce template is not registered")
    x = np.ones(1 << 24, np.float32)
    f = halojit.trace(lambda x: x.sum())
    sched = "\n".join(g.schedule for g in f.lower(x).groups)
    assert ".parallel(chunk)" in sched
    assert f(x) == x.size


def test_default_interleave_keeps_enough_tasks():
    from halojit.schedules.full_reduce import MIN_TASKS, _interleave
    assert _interleave({}, 64) == 8          # 8 tasks of 8 chunks side by side
    assert _interleave({}, 16) == 2          # a 1-D sum's 16 chunks: still 8 tasks
    assert _interleave({}, 7) == 1
    assert _interleave({"interleave": "3"}, 64) == 3
    assert _interleave({"interleave": "0"}, 64) == 8  # 0: the default
    assert all(-(-c // _interleave({}, c)) >= MIN_TASKS for c in range(MIN_TASKS, 65))


@pytest.mark.parametrize("inter", ["1", "3", "8"])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_interleaved_chunks_match_numpy(op, inter):
    """Chunks walked side by side (3 does not divide the 64 chunks; the
    last chunks of (301, 1000) are partly or wholly past the rows): the
    same values, NaN and inf in any chunk included."""
    x = np.random.default_rng(5).standard_normal((301, 1000)).astype(np.float32)
    f = halojit.trace(lambda a: getattr(a, op)(), autoscheduler=("FullReduce", {"interleave": inter}))
    (g,) = f.lower(x).groups
    assert g.scheduler.startswith("FullReduce"), g.scheduler
    assert ("unroll(ci)" in g.schedule) == (inter != "1"), g.schedule
    want = x.astype(np.float64).sum() if op == "sum" else getattr(x, op)()
    np.testing.assert_allclose(f(x), want, rtol=1e-6)
    for row in (0, 150, 300):  # first, a middle and the last chunk
        y = x.copy()
        y[row, 999] = np.nan
        assert np.isnan(f(y))
        y[row, 999] = -np.inf if op == "max" else np.inf
        np.testing.assert_equal(f(y), getattr(y, op)())


@pytest.mark.parametrize("shape", [(100003,), (300, 257)])
@pytest.mark.parametrize("fn", [lambda x: (np.exp(x), np.exp(x).sum()),
                                lambda x: ((x + 1) * 3, (x + 1).min())],
                         ids=["exp-and-sum", "scaled-and-min"])
def test_array_sized_outputs_are_vectorized_rows(shape, fn):
    """A value computed in the group, reduced and also returned at full
    size: one kernel, whose second pass is scheduled, not left serial and
    scalar (x / x.sum() of a computed x read after the sum recomputes x in
    a kernel of its own: passes/recompute.py)."""
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    f = halojit.trace(fn)
    got, want = f(x), fn(x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-7)
    (group,) = f.lower(x).groups
    assert group.scheduler.startswith("FullReduce"), group
    assert re.search(r"_out0(\$\d+)?\.vectorize", group.schedule), group.schedule


@pytest.mark.parametrize("shape", [(100003,), (300, 257)])
@pytest.mark.parametrize("fn", [lambda x: np.exp(x) / np.exp(x).sum(),
                                lambda x: (x + 1) - (x + 1).min(),
                                lambda x: ((x * 2) - (x * 2).mean(), (x * 2).mean() * 2)],
                         ids=["div-sum", "sub-min", "two-outputs"])
def test_computed_values_read_after_their_reduction(shape, fn):
    """y / y.sum() of y = exp(x): the second pass recomputes y in a kernel
    of its own (as fast as FullReduce's second pass over y inlined: 3.4 ->
    3.2 ms for (2048, 2048) float32, one core), so each kernel fits a template."""
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    f = halojit.trace(fn)
    got, want = f(x), fn(x)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-7)
    groups = f.lower(x).groups
    assert len(groups) == 2
    assert all(g.scheduler.split(";")[0] in ("FullReduce", "Elementwise") for g in groups), groups
