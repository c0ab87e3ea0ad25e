"""Hand templates from the tuning grids (Stencil, blocked RowReduce,
Elementwise) against
numpy on random data, at shapes with tails: rows not a multiple of the block
or strip, widths not a multiple of the vector, extents below a tile."""

from __future__ import annotations

import numpy as np
import pytest

import halojit

from helpers import layernorm_ref as layernorm, softmax_ref as softmax
from halojit.generators.build import SERIAL_MAX_ELEMENTS
from halojit.schedules.templates import elementwise_fits, row_reduce_fits, stencil_fits

from test_candidates import local_graphs

pytestmark = pytest.mark.level3


def blur(x):
    bx = (x[:, :-2] + x[:, 1:-1] + x[:, 2:]) / 3
    return (bx[:-2] + bx[1:-1] + bx[2:]) / 3


def laplace(x):  # no shared intermediate: the template only tiles
    return x[1:-1, :-2] + x[1:-1, 2:] + x[:-2, 1:-1] + x[2:, 1:-1] - 4 * x[1:-1, 1:-1]






def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def run_template(fn, name, params, *args):
    f = halojit.trace(fn, autoscheduler=(name, params))
    (g,) = f.lower(*args).groups
    assert g.scheduler.startswith(name), g.scheduler  # applied, not fallen back
    return f(*args)


def test_fits():
    x = np.ones((16, 40), np.float32)
    (b,) = local_graphs(blur, x)
    (lp,) = local_graphs(laplace, x)
    (sm,) = local_graphs(softmax, x)
    (ew,) = local_graphs(lambda a: a * 2 + 1, x)
    (sh,) = local_graphs(lambda a: a[:, 1:] * 2, x)  # one slice: not a stencil
    assert stencil_fits(b) and stencil_fits(lp)
    assert not any(stencil_fits(g) for g in (sm, ew, sh))
    assert row_reduce_fits(sm) and not row_reduce_fits(b)
    assert elementwise_fits(ew)
    assert not any(elementwise_fits(g) for g in (b, lp, sm, sh))
    # rows narrower than 16 fuse with the axes before them (flat_axes)
    (short,) = local_graphs(lambda a: a * 2 + 1, np.ones((64, 8), np.float32))
    (narrow,) = local_graphs(lambda a: a * 2 + 1, np.ones((2, 7), np.float32))
    (tr,) = local_graphs(lambda a: a.T * 2 + 1, x)
    i = np.ones((16, 16), np.int32)
    (ipow,) = local_graphs(lambda a, e: a ** e, i, i)  # a stage with an update
    # a slice of an input inlines where rows are short (a flipped HWC image)
    (flip,) = local_graphs(lambda a: a[:, ::-1] * 2, np.ones((64, 8, 3), np.float32))
    assert elementwise_fits(short) and elementwise_fits(flip)
    # fewer than 16 values in all: one scalar loop (apply_elementwise)
    assert elementwise_fits(narrow)
    assert not any(elementwise_fits(g) for g in (tr, ipow))


@pytest.mark.parametrize("shape", [(), (3,), (2, 7), (1, 3, 5)])
def test_elementwise_tiny_outputs_are_one_scalar_loop(shape):
    """A few values (a determinant, a 3-vector): every value inlined, no
    vectors, no tasks; sin's argument check still runs (its fast path)."""
    x = rand(*shape) * 4 if shape else np.float32(1.5)
    fn = lambda a: np.sin(a) * 2 + np.exp(-a)  # noqa: E731
    got = run_template(fn, "Elementwise", {}, x)
    np.testing.assert_allclose(got, fn(x), rtol=2e-6, atol=1e-6)
    big = np.float32(1e30) if not shape else np.full(shape, 1e30, np.float32)
    np.testing.assert_allclose(run_template(fn, "Elementwise", {}, big), fn(big), rtol=2e-6)


@np.errstate(invalid="ignore")  # inf * 0 in the reference, as in the kernel
def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


@pytest.mark.parametrize("shape,params", [
    ((37, 83), {"vector": 64, "task_kib": 1}),     # 83 = 64 + 19: guarded tail, 3 rows a task
    ((5, 3000), {"vector": 32, "task_kib": 4}),    # rows longer than a task: column chunks
    ((3, 4, 50), {"vector": 128, "task_kib": 1}),  # 3-D, fused rows; vector above the width
    ((7001,), {"vector": 16, "task_kib": 2}),      # 1-D: chunks of 512
])
def test_elementwise_matches_numpy(shape, params):
    x = rand(*shape, seed=len(shape))
    x.flat[:4] = [np.nan, np.inf, -np.inf, 0.0]
    # atol: 1 + tanh cancels for negative x; a 1-ulp tanh difference shows there
    np.testing.assert_allclose(run_template(gelu, "Elementwise", params, x), gelu(x),
                               rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("n", [100, SERIAL_MAX_ELEMENTS + 1001])
def test_one_dimensional_windows_take_elementwise(n):
    """1-D slices of step 1 (np.diff, a second difference, a 5-point box
    sum) inline as reads at fixed offsets: the Elementwise template, serial
    or in parallel chunks; NaN, inf and integer wraparound as numpy. A
    strided or reversed slice keeps Adams2019 (test_fits)."""
    x = rand(n, seed=n)
    x[:3] = [np.nan, np.inf, -np.inf]
    i = np.random.default_rng(n).integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    fns = (np.diff, lambda x: np.diff(x, n=2),
           lambda x: (x[4:] + x[3:-1] + x[2:-2] + x[1:-3] + x[:-4]) / 5)
    for fn in fns:
        for a in (x, i, x[::-1][1:-1]):
            f = halojit.trace(fn)
            (g,) = f.lower(a).groups
            assert g.scheduler.startswith("Elementwise"), g.scheduler
            with np.errstate(invalid="ignore", over="ignore"):
                want = fn(a)
            np.testing.assert_array_equal(f(a), want)
    (strided,) = local_graphs(lambda a: a[::2][1:] - a[::2][:-1], np.ones(9, np.float32))
    (flipped,) = local_graphs(lambda a: a[1:] - a[::-1][1:], np.ones(9, np.float32))
    assert not elementwise_fits(strided) and not elementwise_fits(flipped)


def test_elementwise_broadcast_and_mixed_dtypes():
    x = np.random.default_rng(4).integers(-100, 100, (33, 70), dtype=np.int16)
    b = rand(70, seed=5).astype(np.float64)
    fn = lambda x, b: np.maximum(x * 0.5 + b, 0) > 1  # bool output from int16 and float64
    got = run_template(fn, "Elementwise", {"vector": 64, "task_kib": 1}, x, b)
    np.testing.assert_array_equal(got, fn(x, b))


def test_large_elementwise_group_defaults_to_the_template():
    """Above the serial threshold an elementwise group takes Elementwise
    (wide vectors: 3.6x on the GELU benchmark, see build.default_spec); a
    strided view input and a broadcast row still give numpy's answer."""
    rows = SERIAL_MAX_ELEMENTS // 64 + 3
    base = rand(rows, 130, seed=6)
    x = base[:, 1:129]  # non-contiguous rows of 128
    b = rand(128, seed=7)
    f = halojit.trace(lambda x, b: gelu(x + b))
    (g,) = f.lower(x, b).groups
    assert g.scheduler.startswith("Elementwise"), g.scheduler
    before = base.copy()
    np.testing.assert_allclose(f(x, b), gelu(x + b), rtol=2e-6, atol=1e-6)
    np.testing.assert_array_equal(base, before)


@pytest.mark.parametrize("shape,params", [
    ((37, 53), {"rows": 16, "tile_x": 0, "vector": 16, "sliding": 1}),
    ((70, 45), {"rows": 64, "tile_x": 16, "vector": 8, "sliding": 1}),
    ((21, 130), {"rows": 8, "tile_x": 32, "vector": 32, "sliding": 0}),
    ((5, 7), {"rows": 32, "tile_x": 0, "vector": 32, "sliding": 1}),  # below every tile
])
def test_stencil_blur_matches_numpy(shape, params):
    x = rand(*shape, seed=sum(shape))
    np.testing.assert_allclose(run_template(blur, "Stencil", params, x), blur(x),
                               rtol=1e-6, atol=1e-6)


def test_stencil_without_shared_stage_matches_numpy():
    x = rand(29, 41, seed=3)
    got = run_template(laplace, "Stencil", {"rows": 8, "tile_x": 16, "vector": 16}, x)
    np.testing.assert_allclose(got, laplace(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,params", [
    ((13, 83), {"block": 4, "rows_per_task": 8, "vector": 16}),   # 13 rows, 83 = 5*16 + 3
    ((3, 200), {"block": 8, "rows_per_task": 32, "vector": 32}),  # fewer rows than a block
    ((50, 16), {"block": 16, "rows_per_task": 128, "vector": 8}),
    ((2, 5, 37), {"block": 4, "rows_per_task": 2, "vector": 16}),  # 3-D: blocks within a slice
    ((3, 2, 37), {"block": 4, "rows_per_task": 8, "vector": 16}),  # middle axis < block
    ((2, 3, 1, 40), {"block": 4, "rows_per_task": 1, "vector": 64}),  # middle axis 1, 8 lanes
    ((7, 6, 3), {"block": 2, "rows_per_task": 4, "vector": 16}),   # 3 wide: no vector
])
def test_row_reduce_blocks_match_numpy(shape, params):
    x = rand(*shape, seed=shape[0])
    np.testing.assert_allclose(run_template(softmax, "RowReduce", params, x), softmax(x),
                               rtol=1e-5, atol=1e-7)


def test_row_reduce_layernorm_matches_numpy():
    x, g, b = rand(19, 70, seed=1), rand(70, seed=2), rand(70, seed=3)
    got = run_template(layernorm, "RowReduce", {"block": 4, "rows_per_task": 8}, x, g, b)
    np.testing.assert_allclose(got, layernorm(x, g, b), rtol=1e-4, atol=1e-5)
