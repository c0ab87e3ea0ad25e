"""passes/slices.py: slices move above elementwise ops when no element is
computed twice, slices of concatenations read the part, and elementwise ops
of equally cut concatenations are concatenations: what moves, what must
stay, and that every value stays bit-exact (NaN, -0.0, inf, integers)."""

from __future__ import annotations

import numpy as np
import pytest

from halojit.graph.passes import optimize, push_slices

from test_passes import assert_bit_exact, ops, traced_graph

RNG = np.random.default_rng(7)


def _state(shape, dtype=np.float64):
    x = RNG.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[:6] = [np.nan, -0.0, np.inf, -np.inf, 0.0, 1e308 if dtype == np.float64 else 3e38][:flat.size]
    return x


def lorenz_steps(y, steps=2, dt=0.01):
    """Columns sliced out of each step's value, new columns stacked back."""
    for _ in range(steps):
        x, v, z = y[:, 0], y[:, 1], y[:, 2]
        d = np.stack([10 * (v - x), x * (28 - z) - v, x * v - 8 / 3 * z], axis=1)
        y = y + dt * d
    return y


def computed_slices(graph):
    """Slices that read a computed value (not an input or a constant)."""
    return [n for n in graph.nodes if n.op == "slice" and n.inputs[0].op not in ("input", "constant")]


def _check(fn, *args):
    g = traced_graph(fn, *args)
    o = optimize(g, 1, check=True)
    assert_bit_exact(g, o, list(args))
    return g, o


def test_column_state_chain_becomes_column_chains():
    y = _state((50, 3))
    g, o = _check(lorenz_steps, y)
    assert computed_slices(g)  # as traced: every step slices the last one
    assert not computed_slices(o)
    assert o.outputs[0].op == "concatenate"  # the last step's add, done per column
    assert [n.shape for n in o.nodes if n.op == "slice"] == [(50, 1)] * 3  # the input's columns


@pytest.mark.parametrize("steps", [1, 3])
def test_column_chain_with_intermediate_outputs(steps):
    """A step's value that is also returned is the concatenation of its
    columns, each computed once."""
    def fn(y):
        mid = lorenz_steps(y, steps)
        return mid, lorenz_steps(mid, 1)
    y = _state((20, 3))
    g, o = _check(fn, y)
    assert not computed_slices(o)
    exps = [n for n in o.nodes if n.op == "multiply"]
    assert len(exps) < len([n for n in g.nodes if n.op == "multiply"]) * 1.5


def test_overlapping_slices_stay_whole():
    """A stencil of an elementwise value would compute its elements twice
    as slices of the op: the value stays whole."""
    x = _state((64,), np.float32)
    _, o = _check(lambda x: np.exp(x)[1:] - np.exp(x)[:-1], x)
    assert ops(o).count("exp") == 1
    assert len(computed_slices(o)) == 2


def test_slice_of_a_value_also_used_whole_stays():
    x = _state((10, 3))
    _, o = _check(lambda x: (x * 3 - 1, (x * 3 - 1)[:, 0] * 2), x)
    assert ops(o).count("subtract") == 1
    assert len(computed_slices(o)) == 1


def test_transcendentals_stay_whole():
    """numpy's exp of a reversed column differs in the last bit from the
    column of its exp (a scalar loop against a SIMD one): the numpy
    backend must give the traced program's values."""
    x = _state((40, 3))
    _, o = _check(lambda x: (np.exp(x)[::-1, 0], np.exp(x)[:, 1:]), x)
    assert len(computed_slices(o)) == 2 and ops(o).count("exp") == 1


@pytest.mark.parametrize("fn", [
    lambda x: ((x * 2)[3:3, 1:], (x * 2)[:, 0], (x * 2)[:, 1]),
    lambda x: ((x * 2)[:0, :] + 1, (x * 2)[:, 0], (x * 2)[:, 1:]),
    lambda x: ((x - 1)[:, :2][::2, 1], (x - 1)[:, 2]),
    lambda x: (x + 1)[3, 0] * (x + 1)[4, 1],
])
def test_empty_single_and_nested_pieces(fn):
    _check(fn, _state((10, 3)))


def test_disjoint_strided_slices_move_up():
    x = _state((40,))
    _, o = _check(lambda x: np.sqrt(x * x + 1)[::2] - np.sqrt(x * x + 1)[1::2], x)
    assert not computed_slices(o)
    assert ops(o).count("sqrt") == 2 and {n.shape for n in o.nodes if n.op == "sqrt"} == {(20,)}


def test_interleaved_strided_slices_that_overlap_stay():
    x = _state((40,))
    _, o = _check(lambda x: np.exp(x)[:20:2] + np.exp(x)[::4], x)
    assert len(computed_slices(o)) == 2


def test_broadcast_operands_are_sliced_where_they_vary():
    x, b = _state((16, 4), np.float32), _state((4,), np.float32)
    _, o = _check(lambda x, b: (x * b + 1)[:, 1] - (x * b + 1)[:, 3], x, b)
    assert not computed_slices(o)
    x, r = _state((16, 4), np.float32), _state((16, 1), np.float32)
    _check(lambda x, r: (x - r)[:, :2] * (x - r)[:, 2:], x, r)


def test_slice_of_a_concatenation_reads_the_part():
    a, b = _state((8, 5)), _state((8, 3))
    _, o = _check(lambda a, b: np.exp(np.concatenate([a, b], axis=1)[:, 5:7]), a, b)
    assert "concatenate" not in ops(o)
    # across two parts it stays a slice of the concatenation
    _, o = _check(lambda a, b: np.concatenate([a, b], axis=1)[:, 4:6] * 2, a, b)
    assert "concatenate" in ops(o)


def test_slice_of_a_slice_is_one_slice():
    x = _state((30, 4))
    _, o = _check(lambda x: x[2:20:3][1:5, ::-1] + 1, x)
    assert ops(o).count("slice") == 1


def test_elementwise_of_equally_cut_concatenations_is_a_concatenation():
    a, b, c, d = (_state((12,)) for _ in range(4))
    fn = lambda a, b, c, d: np.stack([a, b], axis=1) * np.stack([c, d], axis=1) + 1  # noqa: E731
    _, o = _check(fn, a, b, c, d)
    assert o.outputs[0].op == "concatenate"
    # cut at different places, or along another axis than the last: left alone
    _, o = _check(lambda a, b: np.concatenate([a, b]) - np.concatenate([b, a[:5], a[5:]]), a[:7], b)
    assert o.outputs[0].op == "subtract"
    _, o = _check(lambda a, b: np.stack([a, b]) * 2, a, b)
    assert o.outputs[0].op == "multiply"


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float32, bool])
def test_integer_and_bool_columns(dtype):
    y = (RNG.integers(0, 5, (9, 2)) if dtype is not bool else RNG.integers(0, 2, (9, 2))).astype(dtype)
    _check(lambda y: np.stack([y[:, 0] & y[:, 1] if dtype is bool else y[:, 0] * y[:, 1],
                               y[:, 1] | y[:, 0] if dtype is bool else y[:, 1] - y[:, 0]], axis=1)[:, 1],
           y)


@pytest.mark.parametrize("shape", [(0, 3), (1, 3)])
def test_empty_and_single_row_states(shape):
    _check(lambda y: lorenz_steps(y, 2), _state(shape))


def test_pass_alone_keeps_values():
    y = _state((7, 3))
    g = traced_graph(lambda y: lorenz_steps(y, 3), y)
    assert_bit_exact(g, push_slices(g), [y])


def test_many_part_concatenations_stay_under_one_op():
    from halojit.graph.passes.slices import SINK_MAX_PARTS
    parts = [_state((3,)) for _ in range(SINK_MAX_PARTS + 1)]
    _, o = _check(lambda *p: np.concatenate(p) * 2 + 1, *parts)
    assert o.outputs[0].op == "add"
    _, o = _check(lambda *p: np.concatenate(p) * 2 + 1, *parts[:SINK_MAX_PARTS])
    assert o.outputs[0].op == "concatenate"


def test_pieces_tiling_a_leading_axis_leave_the_whole_value():
    x = _state((10, 3))
    _, o = _check(lambda x: ((x * 2)[:4] + 1, (x * 2)[4:] - 1, x * 2), x)
    assert "concatenate" not in ops(o) and len(computed_slices(o)) == 2
