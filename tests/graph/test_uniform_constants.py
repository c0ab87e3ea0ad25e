"""passes/rewrite.uniform_constant: an array made inside a traced function
whose elements are all one value (np.zeros(shape), np.full(shape, v)) is a
broadcast of that scalar, not a full-size constant streamed into the
kernel; bitwise equality decides, so -0.0 next to 0.0 or NaNs with other
payloads stay arrays. Values checked bit-exact through the interpreter and
through compiled kernels against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.graph.passes import optimize

from test_passes import assert_bit_exact, traced_graph

SHAPE = (300, 400)  # 120000 elements: above the folding cap, stays a broadcast


def _big_constants(graph):
    return [n for n in graph.nodes if n.op == "constant" and n.aval.size > 1]


@pytest.mark.parametrize("make", [
    lambda s: np.zeros(s, np.int32),
    lambda s: np.ones(s, np.float32),
    lambda s: np.full(s, -0.0),
    lambda s: np.full(s, np.nan, np.float32),
    lambda s: np.full(s, True),
    lambda s: np.full(s, 2**40 + 1, np.int64),
    lambda s: np.full(s, 200, np.uint8),
], ids=["zeros-i32", "ones-f32", "neg-zero", "nan", "bool", "int64", "uint8"])
def test_uniform_arrays_become_broadcasts(make):
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    fn = lambda a: a * make(a.shape) + make(a.shape)  # noqa: E731
    g = traced_graph(fn, x)
    assert _big_constants(g)
    o = optimize(g, 1, check=True)
    assert not _big_constants(o)
    assert any(n.op == "broadcast_to" for n in o.nodes)
    assert_bit_exact(g, o, [x])


@pytest.mark.parametrize("make", [
    lambda s: np.where(np.arange(np.prod(s)).reshape(s) % 2 == 0, 0.0, -0.0),
    lambda s: np.concatenate([np.full(np.prod(s) - 1, np.nan),
                              [np.frombuffer(np.uint64(0x7FF8000000000001).tobytes(),
                                             np.float64)[0]]]).reshape(s),
    lambda s: np.arange(np.prod(s), dtype=np.int32).reshape(s),
], ids=["mixed-zero-signs", "nan-payloads", "arange"])
def test_arrays_of_different_bits_stay(make):
    x = np.random.default_rng(2).standard_normal(SHAPE)
    fn = lambda a: a + make(a.shape)  # noqa: E731  (made inside: a constant)
    o = optimize(traced_graph(fn, x), 1, check=True)
    assert _big_constants(o)


def test_compiled_values_and_out(tmp_path):
    """Through Halide: the broadcast constants read as scalars, integer
    accumulation and a float -0.0 sum exact, out= filled, input untouched."""
    def fn(a):
        count = np.zeros(a.shape, np.int32)
        for k in range(3):
            count = count + (a > k - 1)
        return count, a + np.full(a.shape, -0.0, np.float32), a * np.ones(a.shape, np.float32)

    x = np.random.default_rng(3).standard_normal(SHAPE).astype(np.float32)
    x[0, :4] = [np.nan, -0.0, np.inf, -np.inf]
    keep = x.copy()
    f = halojit.trace(fn)
    want = fn(x)
    for got, w in zip(f(x), want):
        np.testing.assert_array_equal(got, w)
        assert got.dtype == w.dtype
    assert np.signbit(f(x)[1][0, 1])
    outs = tuple(np.full(w.shape, 7, w.dtype) for w in want)
    f(x, out=outs)
    for got, w in zip(outs, want):
        np.testing.assert_array_equal(got, w)
    np.testing.assert_array_equal(x, keep)
    assert "constant(value=<" not in f.lower(x).graph  # no array-valued constant left
