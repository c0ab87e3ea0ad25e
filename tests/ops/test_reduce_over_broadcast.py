"""Reductions over axes that a broadcast created: each broadcast copy counts
(Halide drops a reduction loop whose body does not name its variable)."""
import numpy as np
import pytest

import halojit

V = np.arange(1.0, 5.0)
X = np.arange(12.0, dtype=np.float32).reshape(3, 4)

CASES = {
    "broadcast_to-sum": (lambda v: np.broadcast_to(v[:1], (3,)).sum(), V),
    "tile-sum0": (lambda v: np.tile(v, (3, 1)).sum(axis=0), V),
    "broadcast-mean0": (lambda v: np.broadcast_to(v, (3, 4)).mean(axis=0), V),
    "broadcast-mean-all": (lambda v: np.broadcast_to(v, (5, 4)).mean(), V),
    "repeat-sum0": (lambda x: np.repeat(x[:1], 3, axis=0).sum(axis=0), X),
    "tile-prod0": (lambda x: np.tile(x[1:2, 1:3], (3, 1)).prod(axis=0), X),
    "size1-last-axis": (lambda x: np.broadcast_to(x[:, :1], (3, 1024)).sum(axis=1), X),
    "scalar-to-2d": (lambda x: np.broadcast_to(x[0, 1], (5, 2)).sum(), X),
    "count_nonzero": (lambda x: np.count_nonzero(np.broadcast_to(x[1], (3, 4)), axis=0), X),
    "int-sum": (lambda x: np.broadcast_to(x.astype(np.int32)[1], (7, 4)).sum(axis=0), X),
    "exp-then-sum": (lambda v: np.exp(np.broadcast_to(v, (3, 4))).sum(axis=0), V),
    "matmul-broadcast-k": (lambda x: np.broadcast_to(x[:, :1], (3, 4)) @ np.ones((4, 2), np.float32), X),
    "var0": (lambda x: np.broadcast_to(x[1], (5, 4)).var(axis=0), X),
    "cumsum0": (lambda x: np.cumsum(np.broadcast_to(x[1], (3, 4)), axis=0), X),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reduction_over_broadcast_axis_as_numpy(name):
    fn, a = CASES[name]
    want = fn(a)
    got = halojit.trace(fn)(a)
    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)
