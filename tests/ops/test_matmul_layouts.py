"""Matmul operands the Matmul template reads in other layouts: a transposed
A (``x.T @ y``, stored row-major once per call), a long K (cut into chunks
by passes/matmul.py: a batched matmul and a sum), and the fusion around
them (``z.T @ z`` after column statistics keeps one copy of z). Values
against numpy at shapes with block tails, float32 and float64, NaN and
inf, batched operands, out=, and a dumped artifact."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.graph.passes.matmul import SHORT_CHANNELS, chunk_count

from helpers import assert_matmul_close, jit, local_graphs

pytestmark = pytest.mark.level3


def rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def ops_of(f, *args):
    return [g.ops for g in f.lower(*args).groups]


@pytest.mark.parametrize("m,k,n", [(1, 7, 33), (9, 17, 65), (37, 50, 70), (200, 300, 96)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_transposed_lhs(m, k, n, dtype):
    a, b = rand((k, m), dtype, 1), rand((k, n), dtype, 2)
    f = halojit.trace(lambda a, b: a.T @ b)
    got = f(a, b)
    assert got.dtype == np.dtype(dtype)
    assert_matmul_close(got, a.T @ b, k)
    assert "A read through a transpose" in f.lower(a, b).groups[0].schedule


def test_transposed_lhs_through_elementwise_and_batched():
    a, b = rand((3, 40, 24), seed=3), rand((40, 56), seed=4)
    bb = rand((3, 40, 56), seed=5)
    f = halojit.trace(lambda a, b: np.swapaxes(a * 2, -1, -2) @ b)
    for rhs in (b, bb):
        assert_matmul_close(f(a, rhs), np.swapaxes(a * 2, -1, -2) @ rhs, 40)
        assert "A read through a transpose" in f.lower(a, rhs).groups[0].schedule


def test_transposed_lhs_specials_and_views():
    a, b = rand((64, 48), seed=6), rand((64, 40), seed=7)
    a[5, 3] = np.nan  # row 3 of the result
    b[9, 11] = np.inf
    f = halojit.trace(lambda a, b: a.T @ b)
    with np.errstate(invalid="ignore"):
        want = a.T @ b
    got = f(a, b)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-4, atol=1e-4)
    # a strided view as the transposed operand
    big = rand((64, 96), seed=8)
    b = rand((64, 40), seed=15)
    assert_matmul_close(f(big[:, ::2], b), big[:, ::2].T @ b, 64)


@pytest.mark.parametrize("m,k,n,itemsize,chunks", [
    (512, 8192, 512, 4, 2),     # two 4096-long chunks
    (512, 4096, 512, 4, 1),     # fits: no split
    (64, 100000, 64, 4, 25),    # the fewest chunks whose length fits and divides K
    (64, 8191, 64, 4, 1),       # a prime K: no divisor, no split
    (64, 4096, 64, 8, 2),       # float64 chunks hold half as many
    (1, 8192, 1, 4, 1),         # too little work to matter
])
def test_chunk_count(m, k, n, itemsize, chunks):
    got = chunk_count(m, k, n, itemsize)
    assert got == chunks
    assert k % got == 0


@pytest.mark.parametrize("dtype,k", [("float32", 8200), ("float64", 5000)])
def test_long_k_is_chunked(dtype, k):
    a, b = rand((33, k), dtype, 9), rand((k, 40), dtype, 10)
    f = halojit.trace(lambda a, b: a @ b)
    got = f(a, b)
    assert got.dtype == np.dtype(dtype)
    assert_matmul_close(got, a @ b, k)
    groups = ops_of(f, a, b)
    assert any("matmul" in ops for ops in groups) and groups[-1] == ["sum"]
    out = np.full((33, 40), np.nan, dtype)
    assert f(a, b, out=out) is out
    assert_matmul_close(out, a @ b, k)


def test_gram_of_tall_matrix_with_epilogue_and_nan():
    x = rand((20000, 24), seed=11)
    x[123, 5] = np.nan

    def gram(x):
        return x.T @ x / x.shape[0] + 1

    f = halojit.trace(gram)
    x_in = x.copy()
    with np.errstate(invalid="ignore"):
        want = gram(x)
    got = f(x)
    assert np.array_equal(x, x_in, equal_nan=True)  # the input is never written
    nan = np.isnan(want)
    assert nan[5].all() and nan[:, 5].all() and np.array_equal(np.isnan(got), nan)
    assert_matmul_close(got[~nan], want[~nan], 20000)
    assert ops_of(f, x)[-1] == ["sum", "divide", "add"]


def test_covariance_keeps_one_copy_of_z():
    """z.T @ z after column statistics: the statistics group stores z once
    (not also z.T); the matmul reads z through the transpose itself."""
    X = rand((300, 72), seed=12) * 3 + 1

    def cov(X):
        Z = (X - X.mean(axis=0)) / X.std(axis=0)
        return Z.T @ Z / X.shape[0]

    f = halojit.trace(cov)
    assert_matmul_close(f(X), cov(X), 300)
    stats, mm = f.lower(X).groups
    assert "transpose" not in stats.ops and mm.ops[:2] == ["transpose", "matmul"]
    assert len(local_graphs(cov, X)[0].outputs) == 1


def test_long_k_artifact(tmp_path):
    a, b = rand((16, 8192), seed=13) * 0.01, rand((8192, 24), seed=14)
    f = halojit.trace(lambda a, b: np.tanh(a @ b))
    path = tmp_path / "mm.hjm"
    f.dump(path, a, b)
    m = halojit.load(path)
    got = m(a, b)
    got = got[0] if isinstance(got, (tuple, list)) else got
    np.testing.assert_allclose(got, np.tanh(a @ b), atol=1e-4)


def test_einsum_row_dot_is_a_product_and_a_sum():
    """einsum('ij,ij->i') is no batched matmul of 1x256 @ 256x1 blocks
    (13x slower than numpy that way): one multiply-and-sum group."""
    x, y = rand((2048, 256), seed=16), rand((2048, 256), seed=17)
    f = halojit.trace(lambda x, y: np.einsum("ij,ij->i", x, y))
    np.testing.assert_allclose(f(x, y), np.einsum("ij,ij->i", x, y), rtol=1e-5, atol=1e-5)
    assert ops_of(f, x, y) == [["multiply", "sum"]]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_vector_dot_is_a_product_and_a_sum(dtype):
    v, w = rand((4096,), dtype, 18), rand((4096,), dtype, 19)
    f = halojit.trace(lambda v, w: v @ w)
    got = f(v, w)
    assert np.asarray(got).dtype == np.dtype(dtype) and np.ndim(got) == 0
    assert_matmul_close(np.asarray(got), np.asarray(v @ w), 4096)
    assert ops_of(f, v, w) == [["multiply", "sum"]]
    v[7] = np.nan
    assert np.isnan(f(v, w))
    with pytest.raises(halojit.ShapeError):
        f(v, w[:100])


@pytest.mark.parametrize("shape", [(37, 50), (1, 1), (5, 0), (0, 8), (3, 5, 40), (300, 3),
                                   (300, 5), (0, 3)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matrix_vector_is_a_product_and_a_row_sum(shape, dtype):
    x, v = rand(shape, dtype, 20), rand(shape[-1:], dtype, 21)
    f = halojit.trace(lambda x, v: x @ v)
    got = f(x, v)
    assert got.dtype == np.dtype(dtype) and got.shape == shape[:-1]
    assert_matmul_close(got, x @ v, shape[-1])
    # zero-size results are constants: no group at all; up to SHORT_CHANNELS
    # columns are summed elementwise (test_a_few_columns_times_a_vector)
    ops = ops_of(f, x, v)
    if not (got.size and x.size):
        assert ops == []
    elif x.ndim > 1 and 1 <= shape[-1] <= SHORT_CHANNELS:
        assert len(ops) == 1 and "sum" not in ops[0] and ops[0].count("multiply") == shape[-1]
    else:
        assert ops == [["multiply", "sum"]]


def test_matrix_vector_views_specials_and_mixed_dtypes():
    x, v = rand((64, 96), seed=22), rand((96,), seed=23)
    f = halojit.trace(lambda x, v: x @ v)
    for xs, vs in [(x[:, ::2], v[::2]), (x.T[:48], v[:64]), (x[::-1, 1:49], v[::-2])]:
        assert_matmul_close(f(xs, vs), xs @ vs, xs.shape[-1])
    x[3, 5], x[7, 0] = np.nan, np.inf
    x_before = x.copy()
    got, want = f(x, v), x @ v
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isinf(got[7]) and np.sign(got[7]) == np.sign(want[7])
    np.testing.assert_array_equal(x, x_before)
    # float32 @ float64 computes in float64, as numpy does
    v64 = v.astype(np.float64)
    got = f(x[8:], v64)
    assert got.dtype == np.float64
    assert_matmul_close(got, x[8:] @ v64, 96)
    with pytest.raises(halojit.ShapeError):
        f(x, v[:95])


def test_vector_matrix_large_is_a_column_sum_small_stays_matmul():
    f = halojit.trace(lambda u, x: u @ x)
    u, x = rand((1200,), seed=24), rand((1200, 900), seed=25)
    assert_matmul_close(f(u, x), u @ x, 1200)
    assert not any("matmul" in ops for ops in ops_of(f, u, x))
    # a ragged width of at least VECMAT_SPLIT_COLUMNS: one row, the columns
    # split into a part read in place and a tail (split_ragged_columns)
    u, x = rand((1024,), seed=24), rand((1024, 1030), seed=25)
    assert_matmul_close(f(u, x), u @ x, 1024)
    assert sum("matmul" in ops for ops in ops_of(f, u, x)) == 2
    ub, xb = rand((600,), seed=26), rand((2, 600, 900), seed=27)
    assert_matmul_close(f(ub, xb), ub @ xb, 600)
    assert not any("matmul" in ops for ops in ops_of(f, ub, xb))
    us, xs = rand((256,), seed=28), rand((256, 256), seed=29)
    assert_matmul_close(f(us, xs), us @ xs, 256)
    assert any("matmul" in ops for ops in ops_of(f, us, xs))
    # a large one whose width is a multiple of 32: one row of the Matmul
    # template, B read in place with K split per task
    ul, xl = rand((1024,), seed=30), rand((1024, 1088), seed=31)
    assert_matmul_close(f(ul, xl), ul @ xl, 1024)
    (g,) = f.lower(ul, xl).groups
    assert "K split" in g.schedule
    ub, xb = rand((600,), seed=26), rand((2, 600, 896), seed=27)  # batched: a column sum
    assert_matmul_close(f(ub, xb), ub @ xb, 600)
    assert not any("matmul" in ops for ops in ops_of(f, ub, xb))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_transposed_matrix_and_vector_read_the_matrix_by_rows(dtype):
    """A.T @ v is v @ A and v @ A.T is A @ v: the product runs along A's
    rows as they lie in memory. X.T @ r of a tall X is the one-row Matmul
    template (K split per task, no packing), not a row sum striding down
    X's columns; v @ A.T a row sum of A * v with no transpose."""
    f = halojit.trace(lambda a, v: a.T @ v)
    g = halojit.trace(lambda v, a: v @ a.T)
    for shape in [(16384, 64), (4096, 300), (50, 30), (7, 1), (0, 5), (5, 0)]:
        a = rand(shape, dtype, seed=40)
        v, w = rand(shape[:1], dtype, seed=41), rand(shape[1:], dtype, seed=42)
        got = f(a, v)
        assert got.dtype == np.dtype(dtype) and got.shape == shape[1:]
        assert_matmul_close(got, a.T @ v, shape[0])
        assert_matmul_close(g(w, a), w @ a.T, shape[1])
        if a.size:
            assert not any("transpose" in ops for ops in ops_of(f, a, v) + ops_of(g, w, a))
    a, v = rand((16384, 64), dtype, seed=43), rand((16384,), dtype, seed=44)
    (grp,) = f.lower(a, v).groups
    assert "matmul" in grp.ops and "K split" in grp.schedule
    assert ops_of(g, rand((64,), dtype), a) == [["multiply", "sum"]]
    # NaN and inf reach the right entries; a strided view; inputs untouched
    a[3, 5], a[9, 7], v[11] = np.nan, np.inf, np.inf
    before = a.copy()
    with np.errstate(invalid="ignore"):
        want = a.T @ v
    got = f(a, v)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = np.isfinite(want)
    assert_matmul_close(got[ok], want[ok], 16384)
    np.testing.assert_array_equal(a, before)
    assert_matmul_close(f(a[::2, ::2], v[::2]), a[::2, ::2].T @ v[::2], 8192)
    # a logistic-regression gradient: the row sum, then X.T @ residual
    def grad(x, w, y):
        p = 1 / (1 + np.exp(-(x @ w)))
        return x.T @ (p - y) / x.shape[0]
    x, wt = rand((16384, 64), dtype, seed=45), rand((64,), dtype, seed=46) * 0.1
    y = (rand((16384,), dtype, seed=47) > 0).astype(dtype)
    h = halojit.trace(grad)
    np.testing.assert_allclose(h(x, wt, y), grad(x, wt, y), rtol=1e-4, atol=1e-5)
    assert not any("transpose" in ops for ops in ops_of(h, x, wt, y))


@pytest.mark.parametrize("m,n,split", [(1, 256, False), (4, 96, False), (8, 200, True),
                                       (5, 64, True)])
def test_few_rows_of_long_k_stay_whole(m, n, split):
    """At most FEW_ROWS rows with a width the template reads in place: no
    chunks of K (the template splits K per task itself); more rows: chunks,
    as larger matmuls, whatever the width (a ragged width of few rows:
    test_few_rows_of_a_ragged_width_split_their_columns)."""
    from halojit.graph.passes.matmul import FEW_ROWS
    assert (m <= FEW_ROWS) != split
    a, b = rand((m, 8192), seed=48), rand((8192, n), seed=49)
    a[0, 3] = np.nan
    f = halojit.trace(lambda a, b: np.maximum(a @ b, 0))
    with np.errstate(invalid="ignore"):
        want = np.maximum(a @ b, 0)
    got = f(a, b)
    assert np.isnan(got[0]).all() and np.array_equal(np.isnan(got), np.isnan(want))
    assert_matmul_close(got[1:], want[1:], 8192)
    groups = f.lower(a, b).groups
    if split:
        assert groups[-1].ops[0] == "sum"
    else:
        assert len(groups) == 1 and "K split" in groups[0].schedule


@pytest.mark.parametrize("m,n,dtype", [(1, 1000, "float32"), (3, 70, "float32"),
                                       (2, 300, "float64"), (4, 33, "float32")])
def test_few_rows_of_a_ragged_width_split_their_columns(m, n, dtype):
    """x @ W with at most FEW_ROWS rows and a width that is not a multiple
    of IN_PLACE_COLUMNS: the widest multiple read in place, the last
    columns a second matmul, concatenated (passes.matmul.split_ragged_columns);
    with its epilogue, NaN in the tail's columns, out= and views."""
    from halojit.graph.passes.matmul import IN_PLACE_COLUMNS
    k = 8192  # enough work for parallel tasks (MIN_FLOPS) at every width here
    a, w, bias = rand((m, k), dtype, 60), rand((k, n), dtype, 61), rand((n,), dtype, 62)
    w[5, n - 1] = np.nan  # a tail column
    w[7, 0] = np.inf  # a main column
    before = w.copy()

    def fn(a, w, bias):
        return np.tanh(a @ w * 0.01 + bias)

    f = halojit.trace(fn)
    with np.errstate(invalid="ignore"):
        want = fn(a, w, bias)
    got = f(a, w, bias)
    assert got.dtype == np.dtype(dtype) and got.shape == (m, n)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(w, before)  # the input is never written
    mms = [g for g in f.lower(a, w, bias).groups if "matmul" in g.ops]
    assert len(mms) == 2 and all(g.ops.count("slice") == 1 for g in mms)
    assert sum("B read in place" in g.schedule for g in mms) >= 1  # the main part
    assert n % IN_PLACE_COLUMNS
    out = np.empty((m, n), dtype)
    assert f(a, w, bias, out=out) is out
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    # views: a strided W, rows picked from a wider x
    wide = rand((m, 2 * k), dtype, 63)
    ws = rand((k, 2 * n), dtype, 64)[:, ::2]
    np.testing.assert_allclose(f(wide[:, ::2], ws, bias), fn(wide[:, ::2], ws, bias),
                               rtol=1e-4, atol=1e-4)


def test_ragged_width_of_more_rows_stays_one_matmul():
    a, w = rand((5, 4096), seed=65), rand((4096, 1000), seed=66)
    f = halojit.trace(lambda a, w: a @ w)
    assert_matmul_close(f(a, w), a @ w, 4096)
    assert sum("matmul" in g.ops for g in f.lower(a, w).groups) == 1


@pytest.mark.parametrize("spec,dts", [
    ("ij,j->j", (np.int8, np.int64)), ("ij,j->j", (np.float16, np.float64)),
    ("i,i,i->", (np.int16, np.int16, np.int32)), ("ij,jk,kl->il", (np.float16, np.float16, np.float32)),
    ("ij,ij->i", (np.uint8, np.float32))])
def test_einsum_casts_every_operand_to_the_common_dtype_first(spec, dts):
    """numpy multiplies in the dtype of all operands together: summing an
    int8 operand's own axis in int8 wrapped 400 to -112, and two float16
    operands overflowed to inf before a float32 third joined (fuzz helper)."""
    terms = spec.split("->")[0].split(",")
    sizes: dict = {}
    big = {np.int8: 100, np.uint8: 250, np.int16: 300, np.float16: 300}
    fixed = [np.full(tuple(sizes.setdefault(c, 3 + len(sizes)) for c in t), big.get(dt, 7), dt)
             for t, dt in zip(terms, dts)]
    f = halojit.trace(lambda *xs: np.einsum(spec, *xs))
    got, want = f(*fixed), np.einsum(spec, *fixed)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-3)


@pytest.mark.parametrize("args", [
    lambda a, b, c: (a, [0, 1], b, [1, 2], [0, 2]),
    lambda a, b, c: (a, [0, 1], b, [1, 2]),            # implicit output: axes in order
    lambda a, b, c: (a, [0, 1], [1]),
    lambda a, b, c: (c, [Ellipsis, 1, 2], b, [2, 3], [Ellipsis, 1, 3]),
    lambda a, b, c: (a, [30, 1], a, [30, 1]),          # lower-case letters, a full contraction
    lambda a, b, c: (a, [1, 0]),                        # implicit: transposed
], ids=["matmul", "implicit", "sum", "ellipsis", "dot", "transpose"])
def test_einsum_sublist_form(args, opt_level):
    """np.einsum(op0, sublist0, op1, sublist1, ..., [out]): axis numbers as
    numpy's letters (0-25 A-Z, 26-51 a-z), Ellipsis as '...'."""
    a, b, c = rand((3, 4), seed=20), rand((4, 5), seed=21), rand((2, 3, 4), seed=22)
    fn = lambda a, b, c: np.einsum(*args(a, b, c))  # noqa: E731
    want = fn(a, b, c)
    got = jit(fn, opt_level)(a, b, c)
    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_einsum_sublist_errors():
    a = rand((3, 4), seed=23)
    with pytest.raises(ValueError, match="subscript 52"):
        halojit.trace(lambda a: np.einsum(a, [0, 52]))(a)


@pytest.mark.parametrize("sa, sb, dtype", [
    ((2, 3, 4), (5, 4, 6), np.float32), ((4,), (2, 4, 3), np.float64),
    ((3, 4), (2, 2, 4, 5), np.int32), ((2, 4), (3, 4, 2), np.int8),
])
def test_dot_with_an_nd_second_operand(sa, sb, dtype, opt_level):
    """np.dot(a, b) with b of 3 or more axes: a's last axis against b's
    second-to-last, the free axes of a then those of b (int8 wraps as numpy's)."""
    rng = np.random.default_rng(24)
    a = (rng.standard_normal(sa) * 5).astype(dtype)
    b = (rng.standard_normal(sb) * 5).astype(dtype)
    want = np.dot(a, b)
    got = jit(lambda a, b: np.dot(a, b), opt_level)(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5)



@pytest.mark.parametrize("shape", [(64, 48, 3), (1000, 4), (7, 5, 2), (2, 3, 130, 3)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_few_columns_times_a_vector(shape, dtype):
    """X @ v over a short last axis (an RGB image @ luma weights) is the
    elementwise sum of X's columns times v's entries, and the Elementwise
    template reads the columns with a stride (templates.channel_pick); on
    dense inputs and on views, where the stride is not the row length."""
    x = rand(shape, dtype, seed=25)
    flat = x.reshape(-1)
    flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    v = rand(shape[-1:], dtype, seed=26)
    f = halojit.trace(lambda x, v: x @ v)
    got = f(x, v)
    assert got.shape == shape[:-1] and got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, x @ v, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)
    assert [g.scheduler.split(";")[0] for g in f.lower(x, v).groups] == ["Elementwise"]
    # an all -0.0 row sums to +0.0, as numpy's matmul does
    z = np.full((5, shape[-1]), -0.0, dtype)
    assert not np.signbit(f(z, v)).any() and not np.signbit(z @ v).any()
    # views: channels of a wider array, a reversed or strided outer axis
    wide = rand(shape[:-1] + (shape[-1] + 2,), dtype, seed=27)
    before = wide.copy()
    for xs in (wide[..., 1:shape[-1] + 1], wide[::-1, ..., :shape[-1]], x[::2]):
        np.testing.assert_allclose(f(xs, v), xs @ v, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(wide, before)
    # fused with what follows: a luma clipped and scaled to uint8
    g = halojit.trace(lambda x, v: np.clip(x @ v, 0, 1) * 255)
    np.testing.assert_allclose(g(x, v), np.clip(x @ v, 0, 1) * 255, rtol=1e-5, atol=1e-4)
    assert len(g.lower(x, v).groups) == 1
