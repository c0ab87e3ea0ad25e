"""The Matmul template (default for 2-D float matmul groups): packed B, FMA
register blocks, strict_float everywhere else. Odd shapes (tails of every
block size), transposed and strided operands, epilogues, NaN and inf."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import halojit
from halojit.graph.passes.matmul import SHORT_K, SHORT_N
from helpers import assert_matmul_close, check_plain_matmul

pytestmark = pytest.mark.level3

SHAPES = [(1, 1, 1), (1, 7, 33), (5, 3, 33), (8, 16, 32), (9, 17, 65), (37, 50, 70), (13, 64, 1),
          (64, 1, 100), (200, 300, 96)]


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_shapes(m, k, n, dtype):
    f, a, b = check_plain_matmul(m, k, n, dtype, seed=m * 1000 + k * 10 + n)
    expanded = k <= SHORT_K and n <= SHORT_N  # elementwise instead (passes/matmul.py)
    assert ("Matmul" in f.lower(a, b).groups[0].schedule) != expanded


def test_transposed_and_strided_operands():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((40, 96), dtype=np.float32)
    b = rng.standard_normal((80, 96), dtype=np.float32)
    f = halojit.trace(lambda a, b: a @ b.T)
    assert_matmul_close(f(a, b), a @ b.T, 96)
    g = halojit.trace(lambda a, b: a @ b)
    a2 = rng.standard_normal((40, 192), dtype=np.float32)[:, ::2]
    b2 = rng.standard_normal((96, 160), dtype=np.float32)[:, ::2]
    assert_matmul_close(g(a2, b2), a2 @ b2, 96)


@pytest.mark.parametrize("m,k,n", [(64, 1024, 64), (1000, 300, 100), (300, 201, 40)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_transposed_b_packed_once_for_row_chunks(m, k, n, dtype):
    """Few panels of a B read through a transpose: the row chunks share one
    pack at the root instead of gathering B's columns each (ragged row
    blocks and column blocks, NaN and inf carried, an epilogue)."""
    rng = np.random.default_rng(m + n)
    x = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((n, k)).astype(dtype)
    x[3, 5], w[n - 1, 7] = np.nan, np.inf
    fn = lambda x, w: x @ w.T * 2  # noqa: E731
    f = halojit.trace(fn)
    (g,) = f.lower(x, w).groups
    assert "once for" in g.schedule, g.schedule
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = fn(x, w)
    got = f(x, w)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = np.isfinite(want)
    assert np.array_equal(got[~ok & ~np.isnan(want)], want[~ok & ~np.isnan(want)])
    assert_matmul_close(got[ok], want[ok], k)
    # a B read as it is keeps its pack per task
    y = np.ascontiguousarray(w.T)
    assert "once for" not in halojit.trace(lambda x, y: x @ y).lower(x, y).groups[0].schedule


def test_correlation_keeps_the_template():
    """np.corrcoef divides the product by its own diagonal: that epilogue
    reads the product elsewhere, so it runs after it and the product keeps
    the Matmul template."""
    x = np.random.default_rng(9).standard_normal((64, 1024)).astype(np.float32)
    x[5, 7] = np.nan
    f = halojit.trace(np.corrcoef)
    groups = f.lower(x).groups
    assert any(g.scheduler.startswith("Matmul") and "matmul" in g.ops and "sqrt" not in g.ops
               for g in groups), [(g.scheduler, g.ops) for g in groups]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.corrcoef(x)
    np.testing.assert_allclose(f(x), want, rtol=1e-9, atol=1e-12)
    y = x[:10, :50].T
    np.testing.assert_allclose(halojit.trace(np.cov)(y), np.cov(y), rtol=1e-9, atol=1e-12)


def test_epilogue_keeps_numpy_semantics():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((33, 64), dtype=np.float32)
    w = rng.standard_normal((64, 48), dtype=np.float32) * 0.1
    b = rng.standard_normal(48, dtype=np.float32)

    def fn(x, w, b):
        h = x @ w + b
        return 1 / np.where(h > 0, h, np.float32(-0.0))  # -0.0 survives: -inf

    f = halojit.trace(fn)
    assert "Matmul" in f.lower(x, w, b).groups[0].schedule
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = fn(x, w, b)
    got = f(x, w, b)
    assert np.array_equal(np.isneginf(got), np.isneginf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-4)


def test_nan_and_inf_propagate():
    a = np.ones((16, 32), np.float32)
    b = np.ones((32, 40), np.float32)
    a[0, 3] = np.nan
    a[1, 4] = np.inf
    b[5, 7] = -np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = a @ b
    got = halojit.trace(lambda a, b: a @ b)(a, b)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)])


@pytest.mark.parametrize("a_shape", [(3, 5, 16), (2, 3, 7, 33), (1, 9, 40), (4, 1, 8)])
def test_batched_rows_times_a_matrix(a_shape):
    rng = np.random.default_rng(len(a_shape))
    a = rng.standard_normal(a_shape, dtype=np.float32)
    w = rng.standard_normal((a_shape[-1], 70), dtype=np.float32)
    bias = rng.standard_normal(70, dtype=np.float32)
    f = halojit.trace(lambda a, w, b: np.maximum(a @ w + b, 0))
    got = f(a, w, bias)
    assert_matmul_close(got, np.maximum(a @ w + bias, 0), a_shape[-1])
    assert "Matmul" in f.lower(a, w, bias).groups[0].schedule


@pytest.mark.parametrize("a_shape,b_shape", [
    ((3, 5, 16), (3, 16, 9)),            # serial, no column tail: B read in place
    ((3, 5, 16), (3, 16, 40)),           # serial with a column tail: packed per matrix
    ((6, 70, 33), (6, 33, 100)),         # parallel: a task per (matrix, panel)
    ((2, 3, 37, 20), (2, 3, 20, 65)),    # 4-D
    ((2, 3, 40, 16), (2, 3, 16, 40)),    # 4-D, one panel (vectorize once clashed with v1)
    ((2, 1, 40, 33), (1, 3, 33, 70)),    # batch axes broadcast both ways
    ((1, 64, 48), (5, 48, 80)),          # A broadcast over B's batch
    ((4, 1, 24), (4, 24, 1)),            # one row, one column
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_matmul_packs_b_per_matrix(a_shape, b_shape, dtype):
    rng = np.random.default_rng(sum(a_shape) + sum(b_shape))
    a = rng.standard_normal(a_shape).astype(dtype)
    b = rng.standard_normal(b_shape).astype(dtype)
    keep_a, keep_b = a.copy(), b.copy()
    f = halojit.trace(lambda a, b: a @ b)
    assert f.lower(a, b).groups[0].scheduler.startswith("Matmul")
    got = f(a, b)
    assert got.dtype == dtype
    assert_matmul_close(got, a @ b, a_shape[-1])
    np.testing.assert_array_equal(a, keep_a)
    np.testing.assert_array_equal(b, keep_b)


def test_attention_scores_with_transposed_keys_and_softmax_input():
    """q @ k.swapaxes(-1, -2) / sqrt(d): B is a strided view, the scale an
    epilogue; NaN and inf in one head stay in that head."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 4, 50, 32), dtype=np.float32)
    k = rng.standard_normal((2, 4, 50, 32), dtype=np.float32)
    q[1, 2, 3, 5] = np.nan
    k[0, 1, 7, 0] = np.inf

    def scores(q, k):
        return q @ k.swapaxes(-1, -2) / np.float32(np.sqrt(32))

    f = halojit.trace(scores)
    assert f.lower(q, k).groups[0].scheduler.startswith("Matmul")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = scores(q, k)
    got = f(q, k)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-4, atol=1e-4)
    out = np.empty_like(want)
    f(q, k, out=out)
    assert np.array_equal(np.isnan(out), np.isnan(want))


OTHER_ROWS = {
    "row": lambda x, w: (lambda p: p * p[3])(x @ w),
    "transpose": lambda x, w: (lambda p: p + p.T)(x @ w),
    "flip": lambda x, w: (lambda p: p + p[::-1])(x @ w),
    "roll": lambda x, w: (lambda p: p + np.roll(p, 1, 0))(x @ w),
    "corner": lambda x, w: (lambda p: np.maximum(p, p[:1, :1]))(x @ w),
}


@pytest.mark.parametrize("name", sorted(OTHER_ROWS))
def test_epilogue_reading_other_rows_of_the_product(name):
    # the Matmul template bounds each block's accumulators to its own rows;
    # such epilogues failed its bounds check or, with the roll, silently
    # read other blocks' values: they run in a group after the product's
    # now, which holds the product alone
    fn = OTHER_ROWS[name]
    rng = np.random.default_rng(5)
    x, w = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    f = halojit.trace(fn)
    groups = f.lower(x, w).groups
    assert [g.ops for g in groups if g.scheduler.startswith("Matmul")] == [["matmul"]]
    np.testing.assert_allclose(f(x, w), fn(x, w), rtol=1e-4, atol=1e-4)


def test_pointwise_epilogue_keeps_the_template():
    rng = np.random.default_rng(6)
    x, w = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    b = rng.standard_normal(64).astype(np.float32)
    f = halojit.trace(lambda x, w, b: np.maximum(x @ w + b, 0))
    assert f.lower(x, w, b).groups[0].scheduler.startswith("Matmul")
    np.testing.assert_allclose(f(x, w, b), np.maximum(x @ w + b, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k,n", [(1, 5), (1, 64), (2, 40)])
def test_products_of_negative_zero_sum_to_positive_zero(k, n, dtype):
    """numpy's matmul sums from +0.0, so it never returns -0.0; the Matmul
    template's unstrict accumulation folded 0 + p to p and gave -0.0 for
    K = 1 (found by the fuzz). lower_matmul_blocked adds a strict +0.0."""
    a = np.full((37, k), -0.0, dtype)
    a[::2] = -1.5
    b = np.ones((k, n), dtype)
    b[:, ::3] = 0.0
    f = halojit.trace(lambda x, y: x @ y)
    got, want = f(a, b), a @ b
    assert "Matmul" in f.lower(a, b).groups[0].schedule
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


# (dtype, m, k, n, tuned params): the only 2-vector block half past the last
# column (N one vector: float64 N = 8, float32 N = 16 on AVX-512), the last
# block's second vector past it (float32 N = 48), row-chunked products whose
# 64-wide panel reached whole blocks past it (N = 16, 32), and a tuned
# 32-wide panel (float64 N = 24: two panels, the second half past the end)
COLUMNS_PAST_THE_AXIS = [("float64", 4, 2, 8, ""), ("float32", 4, 2, 16, ""),
                         ("float32", 3, 40, 48, ""), ("float64", 3000, 40, 16, ""),
                         ("float32", 3000, 40, 32, ""), ("float64", 3, 40, 24, ";tile_n=32")]


@pytest.mark.parametrize("dtype,m,k,n,params", COLUMNS_PAST_THE_AXIS)
def test_comparison_epilogue_with_vectors_past_the_last_column(dtype, m, k, n, params):
    """The column tiling split x by panel and then by block, leaving vectors
    wholly past the last column under a predicate; where their index was
    known the predicate was all false and Halide 21's simplifier folded the
    is_nan of a float comparison under it into a scalar in a vector
    expression, then divided by zero lanes: SIGFPE killed the compiler and
    the kernel fell back to Adams2019 (in-process, with
    HALOJIT_COMPILE_WORKERS=0, the user's process died)."""
    rng = np.random.default_rng(n + k)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = rng.standard_normal(n).astype(dtype)
    masked = lambda a, b, c: a @ b * (c > 0)  # noqa: E731
    positive = lambda a, b: (a @ b > 0) * 1.0  # noqa: E731
    for fn, args in ((masked, (a, b, c)), (positive, (a, b))):
        f = halojit.trace(fn, autoscheduler="Matmul" + params)
        (group,) = [g for g in f.lower(*args).groups if "matmul" in g.ops]
        assert group.scheduler.startswith("Matmul"), group.scheduler
        got, want = f(*args), fn(*args)
        assert got.dtype == want.dtype and got.shape == want.shape
        if fn is masked:
            assert_matmul_close(got, want, k)
        else:
            np.testing.assert_array_equal(got, want)


# -- few rows (x @ W at batch 1-12): B read in place -------------------------------
FEW = [  # (a shape, n, dtype): above the serial threshold, n a multiple of the block
    ((1, 300), 4096, "float32"),
    ((2, 700), 1536, "float32"),
    ((3, 257), 2048, "float32"),
    ((4, 512), 1024, "float32"),
    ((2, 2, 256), 1024, "float32"),   # batched rows: 4 in all
    ((2, 600), 1024, "float64"),
    ((6, 333), 1024, "float32"),      # panels of two column blocks
    ((8, 300), 1024, "float32"),      # panels of one block: 16 accumulators
    ((3, 4, 200), 512, "float32"),    # 12 batched rows: 24 accumulators
    ((12, 256), 512, "float64"),
]


@pytest.mark.parametrize("a_shape,n,dtype", FEW, ids=lambda v: str(v))
def test_few_rows_read_b_in_place(a_shape, n, dtype):
    from halojit.schedules.templates import KSPLIT_ROWS, SERIAL_MAX_FLOPS
    rng = np.random.default_rng(sum(a_shape) + n)
    k = a_shape[-1]
    a = rng.standard_normal(a_shape).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    a[0, ..., 3] = np.nan  # NaN spreads along its row only
    w[5, 7] = np.inf
    keep = (a.copy(), w.copy())
    assert 2 * a.size * n >= SERIAL_MAX_FLOPS and a.size // k <= KSPLIT_ROWS
    fn = lambda a, w, b: np.maximum(a @ w + b, 0)  # noqa: E731
    f = halojit.trace(fn)
    (g,) = f.lower(a, w, b).groups
    assert "B read in place" in g.schedule, g.schedule
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = fn(a, w, b)
    got = f(a, w, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    assert_matmul_close(got[ok], want[ok], k)
    np.testing.assert_array_equal(a, keep[0])
    np.testing.assert_array_equal(w, keep[1])


def test_few_rows_limits():
    """Thirteen rows pack B as before, as does a column tail; few=0 turns it off."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((512, 1024), dtype=np.float32)
    for a, fw, params in ((rng.standard_normal((13, 512), dtype=np.float32), w, None),
                          (rng.standard_normal((2, 512), dtype=np.float32), w[:, :1000], None),
                          (rng.standard_normal((2, 512), dtype=np.float32), w,
                           ("Matmul", {"few": "0"}))):
        f = halojit.trace(lambda a, w: a @ w, autoscheduler=params)
        (g,) = f.lower(a, fw).groups
        assert g.scheduler.startswith("Matmul") and "B read in place" not in g.schedule
        assert_matmul_close(f(a, fw), a @ fw, 512)


@pytest.mark.parametrize("m,k,n,dtype", [(1, 1500, 2048, "float32"), (2, 999, 1024, "float32"),
                                         (3, 700, 512, "float64"), (9, 400, 1024, "float32")])
def test_few_rows_with_k_split_per_task(m, k, n, dtype):
    """few=2: K cut into a chunk per task, the chunks' sums added (an odd
    K leaves a short last chunk); the default for one row with a long K."""
    from halojit.schedules.templates import few_rows_mode
    rng = np.random.default_rng(m + k)
    a = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    a[0, 11] = np.inf
    f = halojit.trace(lambda a, w: a @ w * 2, autoscheduler=("Matmul", {"few": "2"}))
    (g,) = f.lower(a, w).groups
    assert "K split" in g.schedule, g.schedule
    want = a @ w * 2
    got = f(a, w)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = np.isfinite(want)
    assert_matmul_close(got[ok] / 2, want[ok] / 2, k)
    if m == 1:  # the default for one long row
        (g,) = halojit.trace(lambda a, w: a @ w).lower(a, w).groups
        assert "few=2" in g.scheduler and "K split" in g.schedule


def test_default_few_rows_modes():
    """The defaults of templates.few_rows_mode: 7-12 rows read a B of at
    most PANEL_B_BYTES in column panels and pack a larger one; up to
    PANEL_ROWS rows read even a larger B in place."""
    from halojit.schedules.templates import PANEL_B_BYTES
    rng = np.random.default_rng(6)
    small = rng.standard_normal((1024, 1024), dtype=np.float32)
    large = rng.standard_normal((2048, 1088), dtype=np.float32)
    assert small.nbytes <= PANEL_B_BYTES < large.nbytes
    f = halojit.trace(lambda a, w: a @ w)
    for rows, w, few, in_place in ((8, small, "1", True), (12, small, "1", True),
                                   (8, large, "0", False), (6, large, "1", True)):
        a = rng.standard_normal((rows, w.shape[0]), dtype=np.float32)
        (g,) = f.lower(a, w).groups
        assert f"few={few}" in g.scheduler and ("B read in place" in g.schedule) == in_place
        assert_matmul_close(f(a, w), a @ w, w.shape[0])
