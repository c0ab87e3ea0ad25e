"""Each pass alone (fold_constants, simplify, eliminate_common_subexpressions,
eliminate_dead_code) and the opt_level pipeline: what they rewrite, what they
must leave alone, and that results stay bit-exact (NaN, -0.0, inf).
"""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.graph.interpret import interpret
from halojit.graph.ir import AbstractArray, Node, make_graph
from halojit.graph.passes import (SIMPLIFY, eliminate_common_subexpressions,
                                  eliminate_dead_code, fold_constants, optimize, simplify)
from halojit.graph.passes.rewrite import FOLD_MAX_ELEMENTS
from halojit.graph.verify import verify

SPECIAL_F32 = np.array([[0.0, -0.0, np.nan, np.inf], [-np.inf, 1.5, -2.0, 3e38],
                        [1e-45, -1e-45, 7.0, -0.5]], np.float32)


def traced_graph(fn, *args):
    """The graph of ``fn`` as traced (opt_level 0: only dead code dropped)."""
    f = halojit.trace(fn, opt_level=0, backend="numpy")
    f(*args)
    (spec,) = f._cache.values()
    return spec.graph


def ops(graph):
    return [n.op for n in graph.nodes if n.op not in ("input", "constant")]


def assert_bit_exact(before, after, args):
    """Same dtype, shape, NaN positions and bits (sign of zero included)."""
    verify(after)
    for b, a in zip(interpret(before, args), interpret(after, args)):
        b, a = np.asarray(b), np.asarray(a)
        assert (a.dtype, a.shape) == (b.dtype, b.shape)
        if b.dtype.kind == "f":
            nan = np.isnan(b)
            np.testing.assert_array_equal(np.isnan(a), nan)
            np.testing.assert_array_equal(np.signbit(a[~nan]), np.signbit(b[~nan]))
            np.testing.assert_array_equal(a[~nan], b[~nan])
        else:
            np.testing.assert_array_equal(a, b)


# -- fold_constants ------------------------------------------------------------------------------
def _input(shape, dtype=np.float32):
    return Node("input", (), {"index": 0}, AbstractArray(shape, dtype))


def _const(value):
    from halojit.graph.ir import Const
    value = np.asarray(value)
    return Node("constant", (), {"value": Const(value)}, AbstractArray(value.shape, value.dtype))


def _node(op, inputs, aval_shape, aval_dtype=np.float32, **params):
    return Node(op, inputs, params, AbstractArray(aval_shape, aval_dtype))


def test_fold_constants_folds_constant_subgraphs():
    c = np.arange(4.0, dtype=np.float32)
    x = _input((3, 4))
    m = _node("multiply", [_const(c), _const(np.float32(2))], (4,))
    e = _node("exp", [m], (4,))
    g = make_graph([x], [_node("add", [x, e], (3, 4))])
    assert ops(g) == ["multiply", "exp", "add"]
    folded = fold_constants(g)
    assert ops(folded) == ["add"]
    (const,) = [n for n in folded.nodes if n.op == "constant"]
    assert const.dtype == np.float32
    np.testing.assert_array_equal(const.params["value"].value, np.exp(c * 2))
    assert_bit_exact(g, folded, [SPECIAL_F32])


def test_fold_constants_keeps_numpy_wraparound_and_dtypes():
    x = _input((3,), np.int16)
    a = _node("add", [_const(np.int8(127)), _const(np.int8(1))], (), np.int8)  # wraps to -128
    b = _node("astype", [a], (), np.int16, dtype=np.dtype(np.int16))
    g = make_graph([x], [_node("multiply", [x, b], (3,), np.int16)])
    folded = fold_constants(g)
    assert ops(folded) == ["multiply"]
    (const,) = [n for n in folded.nodes if n.op == "constant"]
    assert const.params["value"].value == -128 and const.dtype == np.int16
    assert_bit_exact(g, folded, [np.arange(3, dtype=np.int16)])


def test_fold_constants_does_not_expand_broadcasts():
    n = FOLD_MAX_ELEMENTS * 2
    x = _input((n,))
    big = _node("broadcast_to", [_const(np.float32(1))], (n,), shape=(n,))
    g = make_graph([x], [_node("add", [x, big], (n,))])
    assert "broadcast_to" in ops(fold_constants(g))
    small = _node("broadcast_to", [_const(np.float32(1))], (8,), shape=(8,))
    g = make_graph([_input((8,))], [small])
    assert ops(fold_constants(g)) == []


def test_traced_constants_fold_at_opt_level_1():
    f = halojit.trace(lambda x: x + np.exp(np.float32(2) * np.ones_like(x)), opt_level=1,
                      backend="numpy")
    f(SPECIAL_F32)
    (spec,) = f._cache.values()
    assert "exp" not in ops(spec.graph)


def test_fold_constants_leaves_input_dependent_nodes():
    g = traced_graph(lambda x: np.exp(x) * np.float32(2), SPECIAL_F32)
    assert ops(fold_constants(g)) == ops(g) == ["exp", "multiply"]


# -- simplify -------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda x: x * 1, lambda x: x * 1.0, lambda x: 1 * x if False else x * np.float32(1),
    lambda x: x / 1, lambda x: x - 0.0, lambda x: x - 0, lambda x: x + (-0.0),
    lambda x: x.astype(np.float32), lambda x: -(-x), lambda x: x.T.T,
    lambda x: x.reshape(4, 3).reshape(3, 4),
    lambda x: np.transpose(np.transpose(x, (1, 0)), (1, 0)),
], ids=["mul1", "mul1.0", "mul-f32-1", "div1", "sub0.0", "sub0", "add-0.0", "astype-same",
        "neg-neg", "TT", "reshape-reshape", "transpose-transpose"])
def test_simplify_removes_exact_identities(fn):
    g = traced_graph(fn, SPECIAL_F32)
    s = eliminate_dead_code(simplify(fold_constants(g)))
    assert ops(s) == [] and s.outputs == s.inputs
    assert_bit_exact(g, s, [SPECIAL_F32])


@pytest.mark.parametrize("fn,op", [
    (lambda x: x + 0.0, "add"),       # -0.0 + 0.0 is +0.0: not an identity
    (lambda x: x + 0, "add"),         # the same for a weak int zero on floats
    (lambda x: x * 0, "multiply"),    # NaN * 0 is NaN, -1 * 0 is -0.0
    (lambda x: x / x, "divide"),      # never y / y -> 1 (0/0, inf/inf are NaN)
    (lambda x: x - x, "subtract"),    # inf - inf is NaN
    (lambda x: x * -1, "multiply"),   # not rewritten (would change a NaN's sign bit)
    (lambda x: 0.0 - x, "subtract"),  # 0.0 - 0.0 is +0.0, -(0.0) is -0.0
    (lambda x: np.maximum(x, x), "maximum"),
], ids=["add0.0", "add0", "mul0", "div-self", "sub-self", "mul-1", "rsub0", "max-self"])
def test_simplify_keeps_what_is_not_exact(fn, op):
    g = traced_graph(fn, SPECIAL_F32)
    s = simplify(fold_constants(g))
    assert op in ops(s)
    assert_bit_exact(g, s, [SPECIAL_F32])


def test_simplify_keeps_identities_that_change_shape_or_dtype():
    x8 = np.arange(6, dtype=np.int8).reshape(2, 3)
    for fn in (lambda x: x * 1.0,                     # int8 * 1.0 is float64
               lambda x: x * np.ones((4, 1, 1), np.int8),  # broadcasts to (4, 2, 3)
               lambda x: x / 1):                      # true division: float64
        g = traced_graph(fn, x8)
        s = simplify(fold_constants(g))
        assert len(ops(s)) >= 1
        assert_bit_exact(g, s, [x8])


def test_simplify_integer_identities():
    x = np.array([-128, -1, 0, 1, 127], np.int8)
    for fn in (lambda x: x + 0, lambda x: x - 0, lambda x: x * 1, lambda x: -(-x)):
        g = traced_graph(fn, x)
        s = eliminate_dead_code(simplify(fold_constants(g)))
        assert ops(s) == []
        assert_bit_exact(g, s, [x])


def test_simplify_power_two_is_square():
    g = traced_graph(lambda x: np.power(x, 2.0), SPECIAL_F32)
    s = simplify(fold_constants(g))
    assert ops(eliminate_dead_code(s)) == ["square"]
    assert_bit_exact(g, s, [SPECIAL_F32])


STACKED = {
    "sum0": lambda a, b, c: np.stack([a, b, c]).sum(0),
    "mean1": lambda a, b, c: np.stack([a, b, c], axis=1).mean(axis=1),
    "prod-last": lambda a, b, c: np.stack([a, b, c], axis=-1).prod(-1),
    "sum0-keepdims": lambda a, b, c: np.stack([a, b, c]).sum(0, keepdims=True),
}


def _slabs(dtype, seed=3):
    """Three (5, 7) arrays; float ones carry NaN, +-inf and +-0.0."""
    rng = np.random.default_rng(seed)
    slabs = [(rng.standard_normal((5, 7)) * 40).astype(dtype) for _ in range(3)]
    if np.dtype(dtype).kind == "f":
        with np.errstate(over="ignore"):  # 3e38 is inf in float16, as wanted
            slabs[1].flat[:12] = SPECIAL_F32.reshape(-1)
    return slabs


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int8", "uint16", "bool"])
@pytest.mark.parametrize("name", sorted(STACKED))
def test_stacked_reduction_is_an_elementwise_chain_in_numpys_order(name, dtype):
    """np.stack([a, b, c]).sum(0) is a + b + c in the sum's dtype: numpy adds
    the slabs in that order, so the chain is bit-exact, compiled too."""
    fn, args = STACKED[name], _slabs(dtype)
    g = traced_graph(fn, *args)
    s = eliminate_dead_code(simplify(fold_constants(g)))
    if dtype == "float16" and name != "mean1":  # numpy sums float16 in float32: kept
        assert {"sum", "prod"} & set(ops(s))
        return
    assert "concatenate" not in ops(s) and not {"sum", "prod"} & set(ops(s))
    with np.errstate(all="ignore"):
        assert_bit_exact(g, s, args)
        want = fn(*args)
        got = halojit.trace(fn)(*args)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)


def test_stacked_reduction_left_alone_where_numpy_sums_pairwise():
    """Along a last axis of 8 or more numpy sums pairwise: not a chain."""
    xs = [np.full((4, 3), i, np.float32) for i in range(9)]
    g = traced_graph(lambda *xs: np.stack(xs, axis=-1).sum(-1), *xs)
    assert "sum" in ops(simplify(g))
    g2 = traced_graph(lambda *xs: np.stack(xs).sum(0), *xs)
    assert "sum" not in ops(eliminate_dead_code(simplify(g2)))


def test_full_keepdims_reduction_shares_the_plain_one():
    """x.std() reduces with keepdims (as numpy's var does): over every axis
    that is a reshape of the plain sum, which CSE then shares with x.mean()."""
    x = np.random.default_rng(2).standard_normal((6, 5, 3)).astype(np.float32)
    fn = lambda x: (x - x.mean()) / x.std() + x.max(keepdims=True)  # noqa: E731
    g = traced_graph(fn, x)
    assert ops(g).count("sum") == 3
    s = eliminate_dead_code(eliminate_common_subexpressions(simplify(g)))
    assert ops(s).count("sum") == 2 and ops(s).count("max") == 1
    assert_bit_exact(g, s, [x])
    # a keepdims reduction over some axes only stays as it is
    g2 = traced_graph(lambda x: x.sum(axis=(0, 1), keepdims=True), x)
    assert ops(simplify(g2)) == ["sum"]


def test_recompute_and_flatten_keep_values():
    """The Halide backend's graph passes (codegen_graph): values unchanged,
    bit for bit where no sum is reordered."""
    from halojit.generators.build import codegen_graph
    from halojit.generators.compile import host_target
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (64, 40, 3)).astype(np.uint8)
    fns = [lambda x: x.max() - x.min(keepdims=True),
           lambda x: (x * 2).max() + (x * 2).min() - x.astype(np.float32) / (x * 2).max(),
           lambda x: (x > 7).any() & (x < 250).all()]
    for fn in fns:
        g = traced_graph(fn, x)
        c = codegen_graph(g, host_target("host"))
        assert_bit_exact(g, c, [x])
    g = traced_graph(lambda x: x.max() + (x * 3).max() + ((x * 3) - (x * 3).min()).sum(), x)
    c = codegen_graph(g, host_target("host"))
    assert ops(c).count("reshape") >= 3  # every full reduction reads a (rows, width) view
    assert ops(c).count("multiply") == 3  # x * 3: its own copy for each reduction
    assert_bit_exact(g, c, [x])


# -- CSE and DCE -----------------------------------------------------------------------------------
def test_cse_merges_duplicates():
    two = np.float32(2)
    g = traced_graph(lambda x, y: (np.exp(x) * two + y) - (np.exp(x) * two + y),
                     SPECIAL_F32, SPECIAL_F32[0])
    assert ops(g).count("exp") == 2
    c = eliminate_common_subexpressions(g)
    assert ops(c) == ["exp", "multiply", "add", "subtract"]
    sub = c.outputs[0]
    assert sub.inputs[0] is sub.inputs[1]
    assert_bit_exact(g, c, [SPECIAL_F32, SPECIAL_F32[0]])


def test_cse_keeps_distinct_inputs_and_merges_equal_constants():
    c1, c2 = np.arange(4.0), np.arange(4.0)  # equal content, different objects
    f = halojit.trace(lambda x, y: (x + c1, y + c2, x + c1.astype(np.float32)), opt_level=0,
                      capture_as_const=True, backend="numpy")
    f(np.ones(4), np.ones(4))
    (spec,) = f._cache.values()
    g = spec.graph
    assert len([n for n in g.nodes if n.op == "constant"]) == 3
    c = eliminate_common_subexpressions(g)
    assert len(c.inputs) == 2 and c.outputs[0] is not c.outputs[1]
    consts = [n for n in c.nodes if n.op == "constant"]
    assert sorted(n.dtype.name for n in consts) == ["float32", "float64"]


def test_dce_drops_dead_nodes():
    x = Node("input", (), {"index": 0}, AbstractArray((3,), np.float32))
    live = Node("exp", (x,), {}, x.aval)
    dead = Node("log", (x,), {}, x.aval)
    from halojit.graph.ir import Graph
    g = Graph((x,), (x, dead, live), (live,))
    d = eliminate_dead_code(g)
    assert d.nodes == (x, live) and d.inputs == (x,)


def test_traced_dead_code_never_reaches_the_graph():
    g = traced_graph(lambda x: (np.log(x), np.exp(x))[1], SPECIAL_F32)
    assert ops(g) == ["exp"]


def test_unused_input_stays_a_graph_input():
    g = traced_graph(lambda x, y: x + 1, SPECIAL_F32, SPECIAL_F32)
    assert len(g.inputs) == 2


# -- the pipeline ------------------------------------------------------------------------------
def test_optimize_levels():
    g = traced_graph(lambda x: (x * 1 + np.exp(x)) + (x * 1 + np.exp(x)), SPECIAL_F32)
    assert ops(optimize(g, 0)) == ops(g)
    names = []
    o = optimize(g, 1, check=True, dump=lambda name, graph: names.append(name))
    assert names == [name for name, _ in SIMPLIFY]
    assert ops(o) == ["exp", "add", "add"]
    assert_bit_exact(g, o, [SPECIAL_F32])


def test_optimize_output_that_is_an_input():
    g = traced_graph(lambda x: (x * 1, x), SPECIAL_F32)
    o = optimize(g, 1)
    assert o.outputs == (o.inputs[0], o.inputs[0])
    f = halojit.trace(lambda x: (x * 1, x), opt_level=1, backend="numpy")
    a, b = f(SPECIAL_F32)
    assert a is not b and a is not SPECIAL_F32  # fresh arrays for the caller
