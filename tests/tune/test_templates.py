"""Hand templates from the tuning grids (Stencil, blocked RowReduce) against
numpy on random data, at shapes with tails: rows not a multiple of the block
or strip, widths not a multiple of the vector, extents below a tile."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.schedules.templates import row_reduce_fits, stencil_fits

from test_candidates import local_graphs

pytestmark = pytest.mark.level3


def blur(x):
    bx = (x[:, :-2] + x[:, 1:-1] + x[:, 2:]) / 3
    return (bx[:-2] + bx[1:-1] + bx[2:]) / 3


def laplace(x):  # no shared intermediate: the template only tiles
    return x[1:-1, :-2] + x[1:-1, 2:] + x[:-2, 1:-1] + x[2:, 1:-1] - 4 * x[1:-1, 1:-1]


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, g, b):
    m = x.mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5) * g + b


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def run_template(fn, name, params, *args):
    f = halojit.trace(fn, autoscheduler=(name, params))
    (g,) = f.lower(*args).groups
    assert g.scheduler.startswith(name), g.scheduler  # applied, not fallen back
    return f(*args)


def test_fits():
    x = np.ones((16, 16), np.float32)
    (b,) = local_graphs(blur, x)
    (lp,) = local_graphs(laplace, x)
    (sm,) = local_graphs(softmax, x)
    (ew,) = local_graphs(lambda a: a * 2 + 1, x)
    (sh,) = local_graphs(lambda a: a[:, 1:] * 2, x)  # one slice: not a stencil
    assert stencil_fits(b) and stencil_fits(lp)
    assert not any(stencil_fits(g) for g in (sm, ew, sh))
    assert row_reduce_fits(sm) and not row_reduce_fits(b)


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
    ((2, 5, 37), {"block": 4, "rows_per_task": 2, "vector": 16}),  # 3-D: one row at a time
])
def test_row_reduce_blocks_match_numpy(shape, params):
    x = rand(*shape, seed=shape[0])
    np.testing.assert_allclose(run_template(softmax, "RowReduce", params, x), softmax(x),
                               rtol=1e-5, atol=1e-7)


def test_row_reduce_layernorm_matches_numpy():
    x, g, b = rand(19, 70, seed=1), rand(70, seed=2), rand(70, seed=3)
    got = run_template(layernorm, "RowReduce", {"block": 4, "rows_per_task": 8}, x, g, b)
    np.testing.assert_allclose(got, layernorm(x, g, b), rtol=1e-4, atol=1e-5)
