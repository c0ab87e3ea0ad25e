"""Small (serial) matmuls under the Matmul template: without a column tail
B is read in place (no packing, row blocks inside each column block), with
one it keeps the packed B. Random data at shapes with row tails (M not a
multiple of tile_m), column tails (N not a multiple of the block), odd K,
batched A, epilogues, and the benchmark's small MLP."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.bench.workloads import SIZES, gelu, mlp
from helpers import assert_matmul_close, check_plain_matmul

pytestmark = pytest.mark.level3


# (m, k, n): all serial (2*m*k*n < templates.SERIAL_MAX_FLOPS)
UNPACKED = [(16, 64, 256), (16, 256, 64), (13, 33, 64), (5, 7, 32), (1, 65, 96), (21, 17, 128)]
PACKED = [(16, 64, 100), (9, 33, 65), (3, 5, 7), (37, 50, 70)]


def _schedule(f, *args):
    return f.lower(*args).groups[0].schedule


@pytest.mark.parametrize("m,k,n", UNPACKED + PACKED)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_small_matmul_matches_numpy(m, k, n, dtype):
    f, a, b = check_plain_matmul(m, k, n, dtype, seed=m * 10000 + k * 100 + n)
    sched = _schedule(f, a, b)
    assert "Matmul" in sched and "serial" in sched
    # float32 blocks are 32 lanes, float64 ones 16: N % 32 == 0 is unpacked for both
    if (m, k, n) in UNPACKED:
        assert "B unpacked" in sched and "compute_inline()" in sched
    elif n % 16:
        assert "B unpacked" not in sched


@pytest.mark.parametrize("n", [64, 70])
def test_small_batched_and_epilogue(n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal((3, 11, 40), dtype=np.float32)
    w = rng.standard_normal((40, n), dtype=np.float32) * 0.2
    b = rng.standard_normal(n, dtype=np.float32)
    f = halojit.trace(lambda a, w, b: np.maximum(a @ w + b, 0) * 2)
    assert_matmul_close(f(a, w, b), np.maximum(a @ w + b, 0) * 2, 40)
    g = halojit.trace(lambda a, w, b: gelu(a @ w + b))
    assert_matmul_close(g(a, w, b), gelu(a @ w + b), 40)


def test_small_mlp():
    m, k, n = SIZES["small"]["mlp"]
    rng = np.random.default_rng(4)
    x = rng.standard_normal((m, k), dtype=np.float32)
    w1 = rng.standard_normal((k, n), dtype=np.float32) / np.sqrt(k)
    b1 = rng.standard_normal(n, dtype=np.float32)
    w2 = rng.standard_normal((n, k), dtype=np.float32) / np.sqrt(n)
    f = halojit.trace(mlp)
    want = mlp(x, w1, b1, w2)
    assert_matmul_close(f(x, w1, b1, w2), want, n)
    assert_matmul_close(f(x, w1, b1, w2), want, n)  # a second (cached-plan) call
    scheds = [g.schedule for g in f.lower(x, w1, b1, w2).groups]
    assert len(scheds) == 2 and all("B unpacked" in s for s in scheds)
