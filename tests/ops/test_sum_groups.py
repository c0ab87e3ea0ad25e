"""float32 sums whose float64 partials take SUM_GROUP vectors a step, added
first in float32 (lowering.SUM_GROUP): row sums, the chunked full sums
(chunks along the last axis and along an outer one), means and variances,
with widths that leave a tail, against the exact sum and numpy's; NaN and inf
as numpy gives them; the kernels really take the grouped steps."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.generators.chunks import LAST_CHUNK_MIN
from halojit.generators.lowering import SUM_GROUP, partial_lanes

pytestmark = pytest.mark.level3

EPS32 = float(np.finfo(np.float32).eps)


def rand(*shape, seed=0, scale=1.0, offset=0.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale + offset).astype(np.float32)


def _within_bound(got, x, axis):
    """|got - exact| within 3 float32 roundings of sum|x| (two in the
    group's float32 adds, one at the end) plus half an ulp of the result:
    well inside numpy's pairwise bound, and far below what a misplaced or
    dropped element costs."""
    exact = x.astype(np.float64).sum(axis=axis)
    mag = np.abs(x.astype(np.float64)).sum(axis=axis)
    err = np.abs(got.astype(np.float64) - exact)
    bound = 3 * EPS32 * mag + EPS32 * np.abs(exact)
    assert np.all(err <= bound), (np.max(err - bound), err.max())
    return err.max(), np.abs(x.sum(axis=axis).astype(np.float64) - exact).max()


# widths: under two groups (plain steps), whole groups, a tail of a few
# elements, a tail of almost a group; rows from 1 to a few blocks
@pytest.mark.parametrize("shape", [(3, 100), (7, 512), (5, 1000), (33, 1023), (2, 4096 + 63)])
def test_row_sums_against_the_exact_sum(shape):
    x = rand(*shape, seed=sum(shape), offset=0.5)
    f = halojit.trace(lambda x: x.sum(axis=-1))
    got = f(x)
    assert got.dtype == np.float32 and got.shape == shape[:1]
    ours, numpys = _within_bound(got, x, -1)
    assert ours <= max(numpys, EPS32 * np.abs(x).sum(-1).max())


@pytest.mark.parametrize("n", [LAST_CHUNK_MIN + 4097, 3 * LAST_CHUNK_MIN])
def test_full_sums_chunked_along_the_last_axis(n):
    x = rand(n, seed=n, scale=10.0, offset=1.0)
    got = halojit.trace(lambda x: x.sum())(x)
    _within_bound(np.asarray(got)[None], x[None], -1)


@pytest.mark.parametrize("shape", [(512, 1000), (300, 256)])
def test_full_sums_chunked_along_an_outer_axis(shape):
    x = rand(*shape, seed=3, offset=-0.25)
    got = halojit.trace(lambda x: x.sum())(x)
    _within_bound(np.asarray(got)[None], x.reshape(1, -1), -1)


def test_mean_and_var_over_rows_match_numpy():
    x = rand(64, 1000, seed=5, scale=3.0, offset=100.0)  # a large mean: var cancels
    m, v = halojit.trace(lambda x: (x.mean(axis=1), x.var(axis=1)))(x)
    np.testing.assert_allclose(m, x.astype(np.float64).mean(axis=1), rtol=4 * EPS32)
    np.testing.assert_allclose(v, x.astype(np.float64).var(axis=1), rtol=2e-4)
    np.testing.assert_allclose(v, x.var(axis=1), rtol=5e-4)


def test_nan_and_inf_anywhere_in_a_group_as_numpy():
    w = 16 * SUM_GROUP * 4 + 7
    x = rand(8, w, seed=9)
    x[0, 1] = np.nan
    x[1, 17] = np.inf                       # the second vector of a group
    x[2, 33], x[2, 200] = np.inf, -np.inf   # inf - inf: NaN
    x[3, w - 2] = -np.inf                   # in the tail
    x[4, :] = -0.0
    x[5, 40] = np.float32(3e38)
    x[5, 41] = np.float32(3e38)             # overflows float32, as numpy's does
    got = halojit.trace(lambda x: x.sum(axis=1))(x)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.sum(axis=1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-5)
    assert got[4] == 0.0


def test_the_partials_step_over_groups_of_vectors():
    """The row sum's partial update walks width / (lanes * SUM_GROUP) steps;
    a float64 sum, whose partials need no conversion, walks every vector."""
    width = 2048
    loops = {}
    for dt in (np.float32, np.float64):
        x = np.ones((64, width), dt)
        (g,) = halojit.trace(lambda x: x.sum(axis=1)).lower(x).groups
        loops[dt] = [line.strip() for line in g.stmt.splitlines()
                     if line.strip().startswith("for (sum_part") and "$x, 0, " in line]
    from halojit.generators.compile import host_target
    lanes = partial_lanes(host_target("host"))
    assert loops[np.float32] and all(line.endswith(f", 0, {width // lanes // SUM_GROUP}) {{")
                                     for line in loops[np.float32]), loops
    assert loops[np.float64] and all(line.endswith(f", 0, {width // lanes}) {{")
                                     for line in loops[np.float64]), loops
