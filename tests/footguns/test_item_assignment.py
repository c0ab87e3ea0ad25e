"""``y[key] = value`` on arrays made inside the trace (basic keys, a traced
boolean mask with a scalar, augmented ``y[key] += v``), against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from helpers import assert_same, jit

X = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)


def _set(key, value, make=lambda x: x * 1):
    def f(x):
        y = make(x)
        y[key] = value(x) if callable(value) else value
        return y
    return f


CASES = {
    "row": _set(0, 5.0),
    "column-slice": _set((slice(None), slice(1, 3)), -1.0),
    "steps": _set((slice(None, None, 2), slice(None, None, -2)), 7.0),
    "element": _set((1, -2), 9.0),
    "column-of-values": _set((slice(None), 0), lambda x: x[:, 1]),
    "broadcast-rows": _set(slice(1, 3), lambda x: x[0]),
    "ellipsis": _set((Ellipsis, -1), 0.0),
    "none": _set((None, 0), lambda x: x[1]),
    "leading-ones": _set(0, np.ones((1, 5))),
    "whole": _set(slice(None), 3.0),
    "empty": _set(slice(2, 2), 3.0),
    "int16-truncates": _set(0, 2.7, lambda x: (x * 10).astype(np.int16)),
    "bool": _set((slice(None), 1), True, lambda x: x > 0),
    "row-list": _set([2, 0], np.array([[1.0] * 5, [2.0] * 5])),
    "repeated-rows": _set(([0, 0],), np.array([[1.0] * 5, [2.0] * 5])),  # the last wins
    "column-list": _set((slice(None), [4, -1, 1]), 7.0),
    "static-bool-mask": _set((slice(1, 3), np.array([True, False, True, False, True])), -1.0),
    "empty-list": _set([], 5.0),
    "traced-mask": _set(None, 0.0),  # key filled in below
    "mask-with-traced-scalar": _set(None, lambda x: x.max()),
}


def _masked(value):
    def f(x):
        y = x * 1
        y[y < 0] = value(x) if callable(value) else value
        return y
    return f


CASES["traced-mask"] = _masked(0.0)
CASES["mask-with-traced-scalar"] = _masked(lambda x: x.max())


def augmented(x):
    y = x * 1
    y[1:3] += 1
    y[:, 0] *= 2
    y[0, 0] -= 5
    return y


def fill_a_zeros_like(x):
    z = np.zeros_like(x)
    z[:, 0] = x[:, 0]
    z[1] = x[2] + x[3]
    return z


def jacobi(x):
    u = x.astype(np.float64)
    for _ in range(3):
        u = u.copy()
        u[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return u


def shifted_blocks(x):
    y = x * 1
    y[-3:-1, 2:] = x[:2, :3] * 2  # a block at the far corner, from the near one
    y[:, :1] = x[:, 4:]
    y[1:2] = np.nan
    return y


CASES["jacobi"] = jacobi
CASES["shifted-blocks"] = shifted_blocks
CASES["contiguous-row-list"] = _set([1, 2], lambda x: x[:2] * 3)
CASES["augmented"] = augmented
CASES["zeros_like"] = fill_a_zeros_like


@pytest.mark.parametrize("name", list(CASES))
def test_item_assignment_matches_numpy(name, opt_level):
    fn = CASES[name]
    assert_same(jit(fn, opt_level)(X), fn(X.copy()))


def test_unit_step_slices_place_values_without_a_gather():
    # the values shifted into place by a clamped read (pad), not a gather
    # from a table of positions, which kept the Jacobi loop from vectorizing
    big = np.random.default_rng(4).standard_normal((64, 48))
    f = halojit.trace(jacobi)
    graph = f.lower(big).graph  # the printed graph, an op per line
    assert "= pad(" in graph and "= take(" not in graph, graph
    assert_same(f(big), jacobi(big.copy()))
    # a transposed view in, NaN and inf through the stencil
    v = big.T.copy()
    v[3, 5], v[10, 0] = np.nan, np.inf
    assert_same(f(v.T), jacobi(v.T.copy()))


def test_item_assignment_errors_as_numpy(opt_level):
    with pytest.raises(OverflowError):  # numpy: 300 does not fit int8
        jit(_set(0, 300, lambda x: x.astype(np.int8)), opt_level)(X)
    with pytest.raises(IndexError):
        jit(_set(7, 1.0), opt_level)(X)
    with pytest.raises(IndexError):
        jit(_set([1, 7], 1.0), opt_level)(X)
    with pytest.raises(ValueError, match="broadcast"):
        jit(_set(0, np.ones(3)), opt_level)(X)
    with pytest.raises(ValueError, match="read-only"):
        jit(_set(0, 1.0, lambda x: np.broadcast_to(x[0] * 1, (4, 5))), opt_level)(X)
    with pytest.raises(halojit.TraceError, match="input"):
        jit(lambda x: x.__setitem__(0, 1.0), opt_level)(X)


def test_writes_through_another_view_still_refuse(opt_level):
    def f(x):
        y = x * 1
        a = y[0]
        a += 1  # y changed through a ...
        y[1] = 5  # ... and y is used: numpy would show both writes
        return y

    with pytest.raises(halojit.UnsupportedError, match="in-place"):
        jit(f, opt_level)(X)
