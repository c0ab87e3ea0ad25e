"""Softmax, layernorm and other last-axis reductions above the serial
threshold take the RowReduce template by default (build.default_spec): values
against numpy on random data with NaN/inf rows, rows that do not fill the
last block and widths that do not divide the vector or the partial lanes
(one native vector of the target: lowering.partial_lanes); the cheap-value
inlining (layernorm's x - mean) and the NaN-propagating max/min partials
(lowering._nan_pick)."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.generators.build import SERIAL_MAX_ELEMENTS

from helpers import layernorm_ref as layernorm, softmax_ref as softmax, assert_same

pytestmark = pytest.mark.level3






def centred_max(x):  # max and min partials, no transcendental
    return x - x.max(axis=-1, keepdims=True) + x.min(axis=-1, keepdims=True)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def plant_specials(x):
    """Rows with a NaN (in the partial lanes, in the tail), +inf, -inf, all
    -inf, all equal, and signed zeros, as numpy sees them."""
    w = x.shape[-1]
    x[0, 3] = np.nan
    x[1, w - 1] = np.nan         # in the tail the 16 lanes do not cover
    x[2, 5] = np.inf
    x[3, 7] = -np.inf
    x[4, :] = -np.inf
    x[5, :] = 2.5
    x[6, :] = 0.0
    x[6, ::3] = -0.0
    x[7, 17 % w] = np.nan
    x[7, 18 % w] = np.inf
    return x


def rows_for(width):
    """Rows above the serial threshold, not a multiple of the block of 4."""
    return SERIAL_MAX_ELEMENTS // width + 3 | 1


def traced(fn, *args):
    f = halojit.trace(fn)
    (g,) = f.lower(*args).groups
    return f, g


@pytest.mark.parametrize("width", [1029, 1024, 200, 70])
def test_softmax_default_row_reduce_matches_numpy(width):
    x = plant_specials(rand(rows_for(width), width, seed=width))
    f, g = traced(softmax, x)
    assert g.scheduler.startswith("RowReduce"), g.scheduler
    with np.errstate(invalid="ignore"):
        want = softmax(x)
    for _ in range(2):  # miss, then hit
        assert_same(f(x), want, rtol=1e-5, atol=1e-7)
    out = np.empty_like(want)
    f(x, out=out)
    assert_same(out, want, rtol=1e-5, atol=1e-7)
    # exp(x - max) is no cheap value: stored per block, computed once
    assert "compute_inline" not in g.schedule


@pytest.mark.parametrize("width", [1024, 333])
def test_layernorm_default_row_reduce_matches_numpy(width):
    x = plant_specials(rand(rows_for(width), width, seed=width))
    g, b = rand(width, seed=1), rand(width, seed=2)
    f, grp = traced(layernorm, x, g, b)
    assert grp.scheduler.startswith("RowReduce"), grp.scheduler
    # x - mean is recomputed where read, not stored per block
    assert "compute_inline()  # cheap" in grp.schedule
    with np.errstate(invalid="ignore"):
        want = layernorm(x, g, b)
    assert_same(f(x, g, b), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_min_partials_propagate_nan_like_numpy(dtype):
    x = plant_specials(rand(rows_for(130), 130, seed=4)).astype(dtype)
    f, g = traced(centred_max, x)
    assert g.scheduler.startswith("RowReduce"), g.scheduler
    with np.errstate(invalid="ignore"):
        want = centred_max(x)
    assert_same(f(x), want)


@pytest.mark.parametrize("op", ["max", "min"])
def test_row_max_min_reductions_with_nan_and_signed_zeros(op):
    """The reduction values themselves (1-D output: Adams2019 schedules it,
    the lowering's partial combine is the same)."""
    x = plant_specials(rand(rows_for(100), 100, seed=5))
    x[9, :] = -0.0
    x[10, :50] = 0.0
    x[10, 50:] = -0.0
    fn = (lambda a: a.max(axis=-1)) if op == "max" else (lambda a: a.min(axis=-1))
    got = halojit.trace(fn)(x)
    want = fn(x)
    assert_same(got, want)


def nd_rows(outer, width, seed):
    """Rows of an N-D array with the leading ``outer`` shape (its last
    entry found so the total is above the serial threshold), specials
    planted in rows that sit in different outer slices."""
    per = -(-rows_for(width) // int(np.prod(outer)))
    rows = rand(int(np.prod(outer)) * per, width, seed=seed)
    plant_specials(rows[:8])
    plant_specials(rows[-8:])
    return rows.reshape(*outer, per, width)


@pytest.mark.parametrize("outer,width", [
    ((3,), 256),        # the second-to-last axis is not a multiple of the block of 4
    ((5, 2), 70),       # 4-D
    ((4,), 10),         # narrow rows: 8-lane vectors and a tail
])
def test_nd_rows_take_blocked_row_reduce(outer, width):
    """Leading axes fuse with the block index of the second-to-last axis,
    so a block never straddles two of them: softmax over (64, 256, 1024)
    9.7 -> 8.9 ms, (16, 16, 64, 1024) 11.0 -> 9.4 against Adams2019."""
    x = nd_rows(outer, width, seed=width)
    f, g = traced(softmax, x)
    assert g.scheduler.startswith("RowReduce"), g.scheduler
    with np.errstate(invalid="ignore"):
        want = softmax(x)
    assert_same(f(x), want, rtol=1e-5, atol=1e-7)
    gamma, beta = rand(width, seed=1), rand(width, seed=2)
    f, g = traced(layernorm, x, gamma, beta)
    assert g.scheduler.startswith("RowReduce"), g.scheduler
    with np.errstate(invalid="ignore"):
        assert_same(f(x, gamma, beta), layernorm(x, gamma, beta), rtol=1e-4, atol=1e-5)


def test_nd_rows_of_a_strided_view_and_short_middle_axis():
    """A transposed view (its rows are not contiguous in memory) with a
    second-to-last axis of 2, shorter than the block: the block shrinks."""
    base = nd_rows((2,), 96, seed=9)           # (2, rows, 96)
    x = base.transpose(1, 0, 2)                # (rows, 2, 96)
    assert not x.flags.c_contiguous
    keep = x.copy()
    f, g = traced(softmax, x)
    assert g.scheduler.startswith("RowReduce"), g.scheduler
    with np.errstate(invalid="ignore"):
        assert_same(f(x), softmax(x), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(x, keep)


def test_reduced_rows_as_output_keep_adams():
    """A (n, m) mean of (n, m, k) rows is a row sum, not rows of a full
    output: RowReduce would run its vectors across the output's rows (5.7 ms
    on (64, 256, 1024), Adams2019 1.7); it does not fit."""
    x = plant_specials(rand(8 * (rows_for(128) // 8 + 1), 128, seed=7)).reshape(-1, 8, 128)
    fn = lambda a: a.mean(axis=-1)  # noqa: E731
    f, g = traced(fn, x)
    assert not g.scheduler.startswith("RowReduce"), g.scheduler
    with np.errstate(invalid="ignore"):
        assert_same(f(x), fn(x.astype(np.float64)).astype(np.float32), rtol=1e-5, atol=1e-6)


def test_partial_lanes_follow_the_target_vector_width():
    import halide as hl
    from halojit.generators.lowering import GPU_ROW_LANES, LANES, partial_lanes
    assert partial_lanes(hl.Target("x86-64-linux-avx512_skylake-avx512-avx2-avx-fma-sse41")) == 16
    assert partial_lanes(hl.Target("x86-64-linux-avx2-avx-fma-f16c-sse41")) == 8
    assert partial_lanes(hl.Target("x86-64-linux-sse41")) == 4
    assert partial_lanes(hl.Target("arm-64-linux")) == 4
    assert partial_lanes(hl.Target("x86-64-linux-avx2-cuda")) == GPU_ROW_LANES  # a thread per lane
    assert partial_lanes(None) == LANES


def _partial_loops(stmt):
    return [line.strip() for line in stmt.splitlines()
            if line.strip().startswith("for (") and "_part_" in line]


@pytest.mark.parametrize("target", ["host", "x86-64-linux-sse41"])
def test_partials_use_the_target_lanes_and_unroll_the_block_rows(target):
    """The partials' reduction loop walks width // lanes vectors, and the
    block's rows are unrolled inside it (keepdims reductions included:
    their size-1 axis is not the row axis), so every row keeps its own
    accumulator in registers; values stay numpy's, NaN/inf rows too."""
    import platform
    from halojit.generators.compile import host_target
    from halojit.generators.lowering import SUM_GROUP, partial_lanes
    if target != "host" and platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("an x86 target runs on an x86 host only")
    width = 96
    x = plant_specials(rand(rows_for(width), width, seed=11))
    f = halojit.trace(softmax, target=target)
    (g,) = f.lower(x).groups
    assert g.scheduler.startswith("RowReduce"), g.scheduler
    lanes = partial_lanes(host_target(target))
    # the block's vectors: 4 native registers (partial_lanes is one register)
    assert f"vector={4 * lanes}" in g.scheduler.split(";"), g.scheduler
    loops = _partial_loops(g.stmt)
    updates = [line for line in loops if ".s1." in line]
    vecs = width // lanes  # a float32 sum's partials take SUM_GROUP vectors a step
    steps = {"max": vecs, "sum": vecs // SUM_GROUP if vecs >= 2 * SUM_GROUP else vecs}
    assert {line.split("_part_")[0].split("(")[1] for line in updates} == {"max", "sum"}, loops
    assert all(line.endswith(f", 0, {steps[line.split('_part_')[0].split('(')[1]]}) {{")
               for line in updates), loops
    # no loop over the block's rows in the update: they are unrolled
    assert not any(".s1.v" in line for line in loops), loops
    with np.errstate(invalid="ignore"):
        want = softmax(x)
    assert_same(f(x), want, rtol=1e-5, atol=1e-7)
