"""The interpreter: runs a graph with each op's numpy reference (the oracle),
frees intermediates early at opt_level 2, and can check every value against
its node's aval."""

from __future__ import annotations

import numpy as np
import pytest

from halojit.errors import InternalError
from halojit.graph.interpret import interpret, last_uses
from halojit.graph.ir import AbstractArray, Const, Node, make_graph


def _input(index, shape=(2, 3), dtype=np.float64):
    return Node("input", (), {"index": index}, AbstractArray(shape, dtype))


def _op(op, inputs, shape=(2, 3), dtype=np.float64, **params):
    return Node(op, inputs, params, AbstractArray(shape, dtype))


def small_graph():
    x, y = _input(0), _input(1, (3,))
    c = Node("constant", (), {"value": Const(np.float64(2))}, AbstractArray((), np.float64))
    a = _op("multiply", [x, c])
    b = _op("add", [a, y])
    e = _op("exp", [b])
    s = _op("sum", [e], (3,), axes=(0,), keepdims=False)
    return make_graph([x, y], [s, a]), (x, y, a, b, e, s)


def test_interpret_runs_the_references():
    g, _ = small_graph()
    x = np.arange(6.0).reshape(2, 3)
    y = np.array([1.0, -1.0, 0.5])
    s, a = interpret(g, [x, y])
    np.testing.assert_array_equal(a, x * 2)
    np.testing.assert_array_equal(s, np.exp(x * 2 + y).sum(axis=0))


def test_last_uses_and_free_early_give_the_same_results():
    g, (x, y, a, b, e, s) = small_graph()
    free = last_uses(g)
    # a is an output: never freed; b dies at e, e dies at s; inputs are never freed.
    assert free == {e: [b], s: [e]}
    args = [np.ones((2, 3)), np.zeros(3)]
    for got, want in zip(interpret(g, args, free), interpret(g, args)):
        np.testing.assert_array_equal(got, want)


def test_interpret_ignores_numpy_warnings():
    x = _input(0)
    g = make_graph([x], [_op("log", [x]), _op("divide", [x, x])])
    with np.errstate(all="raise"):
        log, div = interpret(g, [np.array([[0.0, -1.0, 1.0]] * 2)])
    assert np.isneginf(log[0, 0]) and np.isnan(log[0, 1]) and np.isnan(div[0, 0])


def test_interpret_check_catches_a_reference_that_disagrees_with_infer():
    x = _input(0, dtype=np.float32)
    lying = _op("exp", [x], dtype=np.float64)  # exp of float32 is float32
    g = make_graph([x], [lying])
    interpret(g, [np.ones((2, 3), np.float32)])  # unchecked: runs
    with pytest.raises(InternalError, match=r"exp at None computed float32\(2, 3\), but its "
                                            r"aval is f64\[2,3\]"):
        interpret(g, [np.ones((2, 3), np.float32)], check=True)


def test_interpret_output_that_is_an_input_or_a_constant():
    x = _input(0)
    c = Node("constant", (), {"value": Const(np.arange(3.0))}, AbstractArray((3,), np.float64))
    g = make_graph([x], [x, c])
    arg = np.ones((2, 3))
    got_x, got_c = interpret(g, [arg])
    assert got_x is arg
    np.testing.assert_array_equal(got_c, np.arange(3.0))
