"""The IR: AbstractArray is frozen and hashable, structural keys, Const,
graphs and their printer, and verify() catching broken graphs."""

from __future__ import annotations

import dataclasses
import pickle
import re

import numpy as np
import pytest

from halojit.errors import InternalError
from halojit.graph.ir import AbstractArray, Const, Node, format_graph, make_graph, toposort
from halojit.graph.verify import verify

F32 = np.dtype(np.float32)


def inp(index, shape=(3, 4), dtype=F32):
    return Node("input", (), {"index": index}, AbstractArray(shape, dtype))


def const(value, weak=False):
    value = np.asarray(value)
    return Node("constant", (), {"value": Const(value)},
                AbstractArray(value.shape, value.dtype, weak))


def op(name, inputs, shape=(3, 4), dtype=F32, loc=None, **params):
    return Node(name, inputs, params, AbstractArray(shape, dtype), loc)


# -- AbstractArray ----------------------------------------------------------------------------
def test_abstract_array_is_frozen_and_hashable():
    a = AbstractArray((3, 4), np.float32)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.shape = (1,)
    b = AbstractArray([3, 4], "float32")  # normalized: tuple of ints, np.dtype
    assert a == b and hash(a) == hash(b)
    assert b.shape == (3, 4) and isinstance(b.dtype, np.dtype)
    assert {a: 1}[b] == 1
    assert AbstractArray((3, 4), np.float64) != a
    assert AbstractArray((4, 3), np.float32) != a
    assert AbstractArray((3, 4), np.float32, weak=True) != a


def test_abstract_array_properties():
    a = AbstractArray((2, 0, 5), np.int8)
    assert (a.ndim, a.size) == (3, 0)
    assert AbstractArray((), np.bool_).size == 1
    w = AbstractArray((), np.float64, weak=True)
    assert w.strong() == AbstractArray((), np.float64) and not w.strong().weak
    assert a.strong() is a


@pytest.mark.parametrize("aval,text", [
    (AbstractArray((3, 4), np.float32), "f32[3,4]"),
    (AbstractArray((), np.int64, weak=True), "i64[]~weak"),
    (AbstractArray((0,), np.bool_), "b1[0]"),
    (AbstractArray((2,), np.uint16), "u16[2]"),
    (AbstractArray((1, 1), np.float16), "f16[1,1]"),
])
def test_abstract_array_str(aval, text):
    assert str(aval) == text


# -- Const ----------------------------------------------------------------------------------
def test_const_owns_a_readonly_copy_and_hashes_by_content():
    user = np.arange(6.0)
    c = Const(user)
    user[0] = 99.0  # the user's later write does not reach the constant
    assert c.value[0] == 0.0 and not c.value.flags.writeable
    assert Const(np.arange(6.0)) == c and hash(Const(np.arange(6.0))) == hash(c)
    assert Const(np.arange(6.0).astype(np.float32)) != c  # dtype is part of the content
    assert Const(np.arange(6.0).reshape(2, 3)) != c       # so is the shape
    assert pickle.loads(pickle.dumps(c)) == c


def test_const_repr():
    assert repr(Const(np.float32(2))) == "2."
    assert repr(Const(np.arange(3))) == "[0,1,2]"
    assert repr(Const(np.arange(10))).startswith("<int64[10] #")


# -- structural keys ---------------------------------------------------------------------------
def test_equal_subgraphs_have_equal_keys():
    x = inp(0)
    a = op("add", [x, const(np.float32(1))])
    b = op("add", [x, const(np.float32(1))])
    assert a is not b and a.key == b.key
    assert op("exp", [a]).key == op("exp", [b]).key


@pytest.mark.parametrize("other", [
    lambda x: op("subtract", [x, const(np.float32(1))]),            # op
    lambda x: op("add", [x, const(np.float32(2))]),                 # constant value
    lambda x: op("add", [x, const(np.float64(1))], dtype=np.float64),  # dtype
    lambda x: op("add", [const(np.float32(1)), x]),                 # operand order
    lambda x: op("add", [inp(1), const(np.float32(1))]),            # another input
])
def test_different_subgraphs_have_different_keys(other):
    x = inp(0)
    assert op("add", [x, const(np.float32(1))]).key != other(x).key


def test_key_depends_on_params_but_not_loc():
    x = inp(0)
    s0 = op("sum", [x], shape=(4,), axes=(0,), keepdims=False)
    s1 = op("sum", [x], shape=(3,), axes=(1,), keepdims=False)
    assert s0.key != s1.key
    here = op("exp", [x], loc="a.py:1")
    there = op("exp", [x], loc="b.py:2")
    assert here.key == there.key


def test_replace_makes_a_new_node():
    x, y = inp(0), inp(1)
    a = op("add", [x, x], loc="f.py:1")
    b = a.replace(inputs=(x, y))
    assert b is not a and b.inputs == (x, y) and a.inputs == (x, x)
    assert b.op == "add" and b.loc == "f.py:1" and b.key != a.key


# -- graphs -------------------------------------------------------------------------------------
def test_toposort_puts_producers_first_and_drops_unreachable():
    x = inp(0)
    a = op("exp", [x])
    dead = op("log", [x])
    b = op("add", [a, x])
    order = toposort([b], [x])
    assert order.index(x) < order.index(a) < order.index(b)
    assert dead not in order
    g = make_graph([x], [b, a])
    assert g.nodes == order and g.outputs == (b, a)
    assert g.users()[x] == [a, b] and g.users()[b] == []


def test_printer():
    x = inp(0)
    m = op("multiply", [x, const(np.float32(2))], loc="f.py:3")
    s = op("sum", [m], shape=(4,), axes=(0,), keepdims=False)
    g = make_graph([x], [s, m])
    assert str(g) == format_graph(g) == "\n".join([
        "graph(%0: f32[3,4]) {",
        "  %1 = constant(value=2.) : f32[]",
        "  %2 = multiply(%0, %1) : f32[3,4]",
        "  %3 = sum(%2; axes=(0,), keepdims=False) : f32[4]",
        "  return (%3, %2)",
        "}",
    ])
    annotated = format_graph(g, annotate=lambda n: n.loc)
    assert "  %2 = multiply(%0, %1) : f32[3,4]  # f.py:3" in annotated.splitlines()


def test_printer_of_a_traced_function():
    import halojit
    f = halojit.trace(lambda x, y: np.maximum(x, y).astype(np.int8).T, opt_level=1)
    f(np.ones((2, 3), np.float32), np.ones(3, np.float32))
    (spec,) = f._cache.values()
    assert str(spec.graph).splitlines() == [
        "graph(%0: f32[2,3], %1: f32[3]) {",
        "  %2 = maximum(%0, %1) : f32[2,3]",
        "  %3 = astype(%2; dtype=int8) : i8[2,3]",
        "  %4 = transpose(%3; perm=(1, 0)) : i8[3,2]",
        "  return (%4)",
        "}",
    ]


# -- verify -----------------------------------------------------------------------------------
def good_graph():
    x = inp(0)
    a = op("exp", [x])
    return make_graph([x], [op("add", [a, x])])


def test_verify_accepts_a_good_graph():
    g = good_graph()
    assert verify(g) is g


def _broken(kind):
    from halojit.graph.ir import Graph
    x = inp(0)
    a = op("exp", [x], loc="f.py:7")
    if kind == "order":
        b = op("add", [a, x])
        return Graph((x,), (x, b, a), (b,)), "topological order"
    if kind == "aval":
        b = op("exp", [x], shape=(4, 3), loc="f.py:7")
        return make_graph([x], [b]), "records f32[4,3] but infers f32[3,4]"
    if kind == "dtype":
        b = op("exp", [x], dtype=np.float64)
        return make_graph([x], [b]), "infers f32[3,4]"
    if kind == "unknown-op":
        return make_graph([x], [op("frobnicate", [x])]), "unknown op 'frobnicate'"
    if kind == "missing-input":
        return Graph((), (x, a), (a,)), "missing from graph.inputs"
    if kind == "constant":
        c = Node("constant", (), {"value": Const(np.zeros(3))}, AbstractArray((4,), F32))
        return make_graph([], [c]), "constant holds float64(3,)"
    if kind == "output":
        return Graph((x,), (x,), (a,)), "output is not among the nodes"
    if kind == "input-not-a-node":
        return Graph((x,), (), ()), "graph input is not among the nodes"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["order", "aval", "dtype", "unknown-op", "missing-input",
                                  "constant", "output", "input-not-a-node"])
def test_verify_catches_a_broken_graph(kind):
    g, message = _broken(kind)
    with pytest.raises(InternalError, match=re.escape(message)):
        verify(g)
