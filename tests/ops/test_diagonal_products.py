"""Matrix products read only for their diagonal (passes/diagonal.py):
``np.trace(a @ b)``, ``np.diag(a @ b)``, ``np.diagonal`` with offsets,
batched traces and ``np.diag(x @ s @ x.T)`` are row-wise dot products, not
matmuls; a product used elsewhere too stays a matmul. Values against numpy
(integers exactly), NaN and inf, views, zero-length diagonals."""

from __future__ import annotations

import numpy as np
import pytest

import halojit

from helpers import assert_matmul_close

pytestmark = pytest.mark.level3


def rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def ops_of(f, *args):
    return [op for g in f.lower(*args).groups for op in g.ops]


CASES = {
    "trace": lambda a, b: np.trace(a @ b),
    "diag": lambda a, b: np.diag(a @ b),
    "offset 3": lambda a, b: np.diagonal(a @ b, 3),
    "offset -2": lambda a, b: np.diagonal(a @ b, -2),
    "trace offset": lambda a, b: np.trace(a @ b, offset=1) * 2,
    "b transposed": lambda a, b: np.diag(a @ b.T[::-1].T),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("shape", [(37, 50, 41), (1, 5, 1), (6, 0, 6), (64, 33, 64)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_diagonal_of_a_product_is_a_row_dot(name, shape, dtype):
    fn = CASES[name]
    n, k, m = shape
    a, b = rand((n, k), dtype, 1), rand((k, m), dtype, 2)
    before = a.copy(), b.copy()
    f = halojit.trace(fn)
    got, want = f(a, b), fn(a, b)
    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == want.dtype
    assert_matmul_close(np.asarray(got), np.asarray(want), max(k, 1) * (2 if "trace" in name else 1))
    assert "matmul" not in ops_of(f, a, b)
    np.testing.assert_array_equal(a, before[0])
    np.testing.assert_array_equal(b, before[1])


def test_integer_traces_are_exact_and_wrap_as_numpy():
    rng = np.random.default_rng(3)
    a = rng.integers(-2**20, 2**20, (30, 40)).astype(np.int32)
    b = rng.integers(-2**20, 2**20, (40, 30)).astype(np.int32)
    for fn in (lambda a, b: np.trace(a @ b), lambda a, b: np.diag(a @ b)):
        f = halojit.trace(fn)
        with np.errstate(over="ignore"):
            want = fn(a, b)
        got = f(a, b)
        assert np.asarray(got).dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert "matmul" not in ops_of(f, a, b)


def test_specials_reach_their_diagonal_entries():
    a, b = rand((20, 30), seed=4), rand((30, 20), seed=5)
    a[3, 7] = np.nan  # row 3 of the product
    b[2, 11] = np.inf  # column 11
    f = halojit.trace(lambda a, b: np.diag(a @ b))
    with np.errstate(invalid="ignore"):
        want = np.diag(a @ b)
    got = f(a, b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    assert_matmul_close(got[ok], want[ok], 30)


def test_mahalanobis_and_batched_traces():
    x, s = rand((3000, 24), seed=6), rand((24, 24), seed=7)
    f = halojit.trace(lambda x, s: np.diag(x @ s @ x.T))
    assert_matmul_close(f(x, s), np.diag(x @ s @ x.T), 24 * 24)
    assert ops_of(f, x, s).count("matmul") == 1  # x @ s only: no 3000 x 3000 product
    # strided views as operands
    assert_matmul_close(f(x[::3, ::2], s[::2, ::2]), np.diag(x[::3, ::2] @ s[::2, ::2] @ x[::3, ::2].T),
                        12 * 12)
    a, b = rand((8, 16, 12), seed=8), rand((12, 16), seed=9)  # broadcast batch
    g = halojit.trace(lambda a, b: np.linalg.trace(a @ b))
    assert_matmul_close(g(a, b), np.linalg.trace(a @ b), 24)
    assert "matmul" not in ops_of(g, a, b)


def test_a_product_used_elsewhere_stays_a_matmul():
    """The returned product and its trace from the same matmul: the trace
    sums the product's own diagonal, bit for bit."""
    a, b = rand((40, 30), seed=10), rand((30, 40), seed=11)
    f = halojit.trace(lambda a, b: (a @ b, np.trace(a @ b), np.diag(a @ b)))
    p, t, d = f(a, b)
    assert_matmul_close(p, a @ b, 30)
    np.testing.assert_array_equal(d, np.diag(p))
    np.testing.assert_allclose(t, np.trace(p), rtol=1e-6)
    assert "matmul" in ops_of(f, a, b)
    # the transposed product's diagonal goes through a transpose: values only
    g = halojit.trace(lambda a, b: np.trace(a @ b, axis1=1, axis2=0))
    assert_matmul_close(np.asarray(g(a, b)), np.asarray(np.trace(a @ b, axis1=1, axis2=0)), 60)


def test_dumped_artifact_of_a_trace(tmp_path):
    a, b = rand((50, 20), seed=12), rand((20, 50), seed=13)
    f = halojit.trace(lambda a, b: np.diag(a @ b) + 1)
    path = tmp_path / "diag.hjm"
    f.dump(path, a, b)
    got = halojit.load(path)(a, b)
    got = got[0] if isinstance(got, (tuple, list)) else got
    assert_matmul_close(got, np.diag(a @ b) + 1, 20)
