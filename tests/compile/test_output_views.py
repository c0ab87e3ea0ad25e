"""passes/views.py: reshapes and transposes at a function's outputs are
peeled off the kernels and returned as numpy views of the kernel output, so
the group keeps the template of its work (RowReduce, Stencil, Elementwise)
instead of Adams2019 on a re-indexed output. Values against numpy, the
views' layout, out= (written through the inverse view where it exists),
the C call path, pooled outputs and inputs left untouched. Elementwise work
on operands transposed one way is computed in their order and returned in
numpy's layout (sink_output_transposes); np.ascontiguousarray, x.copy()
and np.array(order='C') keep their promise of C order."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit import _rt
from halojit.graph.ir import make_graph
from halojit.graph.passes import optimize
from halojit.graph.passes.views import peel_output_views, sink_output_transposes

from helpers import assert_same, random_array, seeded_array, softmax_ref


def _softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _blur(x):
    h = x[:, :-2] + x[:, 1:-1] + x[:, 2:]
    return (h[:-2] + h[1:-1] + h[2:]) / 9


def _layout(a):
    """Strides of the axes longer than 1 (the others' do not matter)."""
    return [s for s, n in zip(a.strides, a.shape) if n > 1]


def _peeled(fn, *args):
    f = halojit.trace(fn)
    conv = f._convert(args)
    ctx, nodes, _ = f._trace([v for v, _ in conv], [a for _, a in conv], {}, False)
    return peel_output_views(optimize(make_graph(ctx.inputs, nodes), 3))


@pytest.mark.parametrize("view, template", [
    (lambda y: y.reshape(-1), "RowReduce"),
    (lambda y: y.reshape(8, 8, 256), "RowReduce"),
    (lambda y: y.T, "RowReduce"),
    (lambda y: y[None], "RowReduce"),
], ids=["flat", "3d", "T", "newaxis"])
def test_views_keep_the_template(view, template):
    x = seeded_array((64, 256), seed=3)
    f = halojit.trace(lambda a: view(_softmax(a)))
    (g,) = f.lower(x).groups
    assert g.schedule.startswith(f"// {template};"), g.schedule[:120]
    got = f(x)
    want = view(softmax_ref(x))
    assert_same(got, want)
    assert _layout(got) == _layout(want)  # the same view numpy gives


def test_stencil_with_a_flat_output():
    x = seeded_array((40, 70), seed=4)
    f = halojit.trace(lambda a: _blur(a).reshape(-1))
    (g,) = f.lower(x).groups
    assert g.schedule.startswith("// Stencil;"), g.schedule[:120]
    assert_same(f(x), _blur(x).reshape(-1))


@pytest.mark.parametrize("dtype", ["float32", "int16", "bool", "float64"])
@pytest.mark.parametrize("view", [
    lambda y: y.reshape(-1),
    lambda y: y.reshape(5, -1, 3).transpose(2, 0, 1),
    lambda y: y.T.reshape(-1),          # only the reshape: numpy copies a transposed reshape
    lambda y: np.expand_dims(y, 1).T,
    lambda y: y.reshape(1, 30, 7)[0],
], ids=["flat", "reshape-transpose", "transpose-reshape", "expand-T", "squeeze"])
def test_chains_match_numpy(dtype, view):
    rng = np.random.default_rng(5)
    x = random_array(rng, (30, 7), dtype, specials=True)
    x0 = x.copy()
    fn = (lambda a: view(a ^ True)) if dtype == "bool" else (lambda a: view(a * 3 - a))
    with np.errstate(invalid="ignore"):
        want = fn(x)
    f = halojit.trace(fn)
    for _ in range(3):  # general path, then the C call path
        got = f(x)
        assert_same(got, want)
        assert got.flags.writeable and not np.shares_memory(got, x)
    assert _rt.dispatch_info(f)[1] >= 1  # ran from C
    np.testing.assert_array_equal(x, x0)


def test_what_is_peeled():
    x = seeded_array((16, 16))
    _, views = _peeled(lambda a: ((a + 1).T, a.T, (a * 2).reshape(-1)), x)
    assert set(views) == {0, 2}  # an input's transpose keeps its kernel
    _, views = _peeled(lambda a: ((a + 1), (a + 1).T), x)
    assert not views  # the value is returned itself too
    _, views = _peeled(lambda a: ((a + 1).T, (a + 1).reshape(-1)), x)
    assert set(views) == {0}  # two views of one value: the first only
    _, views = _peeled(lambda a: (a + 1).T.reshape(-1), x)
    (v,) = views.values()
    assert [op for op, _ in v.steps] == ["reshape"]


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_out_arrays(layout):
    x = seeded_array((48, 64), seed=6)
    f = halojit.trace(lambda a: (_softmax(a).T, (a + 1).reshape(8, 6, 64)))
    want = (softmax_ref(x).T, (x + 1).reshape(8, 6, 64))
    if layout == "contiguous":
        outs = (np.empty((64, 48), np.float32), np.empty((8, 6, 64), np.float32))
    elif layout == "transposed":  # out[0] laid out as the kernel's own output: written in place
        outs = (np.empty((48, 64), np.float32).T, np.empty((64, 6, 8), np.float32).T)
    else:
        outs = (np.empty((64, 96), np.float32)[:, ::2], np.empty((8, 6, 128), np.float32)[..., ::2])
    for _ in range(2):
        got = f(x, out=outs)
        assert got[0] is outs[0] and got[1] is outs[1]
        assert_same(outs[0], want[0])
        assert_same(outs[1], want[1])


def test_pooled_outputs_stay_distinct():
    """Outputs of 1 MiB and more come from a pool; a view returned earlier
    keeps its block busy."""
    x = seeded_array((512, 1024), seed=7)
    f = halojit.trace(lambda a: (a * 2).T)
    first = f(x)
    second = f(x * 0.5)
    assert not np.shares_memory(first, second)
    assert_same(first, (x * 2).T)
    assert_same(second, x.T)


def test_artifact_of_a_viewed_output(tmp_path):
    x = seeded_array((32, 64), seed=8)
    f = halojit.trace(lambda a: _softmax(a).T)
    path = tmp_path / "sm.hjm"
    f.dump(path, x)
    assert_same(halojit.load(path)(x), softmax_ref(x).T)


# elementwise work on transposed operands: (fn, operand shapes)
SUNK = {
    "T+1": (lambda a: a.T + 1, [(40, 70)]),
    "exp-T-times-T": (lambda a, b: np.exp(a.T) * b.T, [(40, 70), (40, 70)]),
    "row-bias": (lambda a, b: a.T * 2 + b, [(40, 70), (40,)]),
    "column-bias": (lambda a, b: a.T - b[:, None], [(40, 70), (70,)]),
    "3d-perm": (lambda a, s: np.transpose(a, (2, 0, 1)) * s[:, None, None] + 0.5,
                [(6, 9, 33), (33,)]),
    "3d-swap-bias": (lambda a, b: np.swapaxes(a, 1, 2) + b, [(4, 30, 20), (4, 1, 30)]),
    "where-int": (lambda a: np.where(a.T > 0, a.T, -a.T).astype(np.int16), [(33, 17)]),
    "computed-T": (lambda a, b: (a * 2 + b).T + 1, [(40, 70), (70,)]),
}


@pytest.mark.parametrize("case", sorted(SUNK))
def test_transposed_work_comes_back_in_numpys_layout(case):
    fn, shapes = SUNK[case]
    args = [seeded_array(sh, seed=k) for k, sh in enumerate(shapes)]
    args[0][1, 2] = np.nan
    keep = [a.copy() for a in args]
    f = halojit.trace(fn)
    with np.errstate(all="ignore"):
        want = fn(*args)
        got = f(*args)
        assert_same(got, want)
        assert _layout(got) == _layout(want)  # F order where numpy's is
        assert not any("transpose" in g.ops for g in f.lower(*args).groups)  # none in a kernel
        out = np.empty(want.shape, want.dtype)  # out= in C order: written through a copy
        assert f(*args, out=out) is out
        assert_same(out, want)
    for a, k in zip(args, keep):
        np.testing.assert_array_equal(a, k)


def _sunk(fn, *args):
    f = halojit.trace(fn)
    conv = f._convert(args)
    ctx, nodes, _ = f._trace([v for v, _ in conv], [a for _, a in conv], {}, False)
    graph = optimize(make_graph(ctx.inputs, nodes), 3)
    return graph, sink_output_transposes(graph)


def test_what_is_sunk():
    x, y = seeded_array((16, 24)), seeded_array((24, 16))
    for fn in (lambda a, b: a.T + b,                     # b in C order: no order suits both
               lambda a, b: (a.T + 1, (a.T + 1).sum(0)),  # the value is read again
               lambda a, b: a.T,                          # an input's transpose
               lambda a, b: (a + 1).T,                    # peeled already
               lambda a, b: np.ascontiguousarray(a.T * 2)):
        before, after = _sunk(fn, x, y)
        assert after is before
    _, after = _sunk(lambda a, b: (a.T * 2 + 1, b.T - 1), x, y)
    assert [o.op for o in after.outputs] == ["transpose", "transpose"]


# np.ascontiguousarray & co. of values the kernels would hand back in another layout
CONTIGUOUS = {
    "ascontiguousarray-T": lambda a: np.ascontiguousarray((a + 1).T),
    "ascontiguousarray-work": lambda a: np.ascontiguousarray(a.T * 2 + 1),
    "copy-T": lambda a: (a * 2).T.copy(),
    "copy-work": lambda a: (a.T - 1).copy(),
    "array-order-C": lambda a: np.array(np.exp(a.T), order="C"),
    "copy-order-C": lambda a: np.copy(a.T + 0.5, order="C"),
}


@pytest.mark.parametrize("case", sorted(CONTIGUOUS))
@pytest.mark.parametrize("opt_level", [0, 3])
def test_contiguity_promises_are_kept(case, opt_level):
    fn = CONTIGUOUS[case]
    x = seeded_array((48, 80), seed=9)
    got = halojit.trace(fn, opt_level=opt_level)(x)
    want = fn(x)
    assert want.flags.c_contiguous
    assert got.flags.c_contiguous
    assert_same(got, want)


def test_copies_in_numpys_layout_and_in_the_middle():
    x = seeded_array((48, 80), seed=10)
    # np.copy keeps the layout (order='K'), x.copy(order='K') too: as numpy
    for fn in (lambda a: np.copy(a.T + 1), lambda a: (a.T + 1).copy(order="K")):
        got, want = halojit.trace(fn)(x), fn(x)
        assert_same(got, want)
        assert _layout(got) == _layout(want)
    # a copy used inside the function costs nothing: no copy op reaches a kernel
    f = halojit.trace(lambda a: np.ascontiguousarray(a.T).sum(0) + a.copy()[:, 0])
    assert_same(f(x), x.T.sum(0) + x[:, 0])
    assert not any("copy" in g.ops for g in f.lower(x).groups)


def test_artifact_of_transposed_work(tmp_path):
    """An artifact's outputs are all C order: the transpose stays in its kernel."""
    x = seeded_array((32, 64), seed=11)
    f = halojit.trace(lambda a: np.exp(a.T) + 1)
    path = tmp_path / "t.hjm"
    f.dump(path, x)
    got = halojit.load(path)(x)
    assert_same(got, np.exp(x.T) + 1)
    assert got.flags.c_contiguous


def test_a_long_transposed_chain_is_sunk_without_recursion():
    """1500 steps of y = y * c + x.T: the rewrite walks the graph in order
    (a recursive walk hit Python's recursion limit)."""
    def fn(a, b):
        y = a.T * np.float32(1.0001)
        for _ in range(1500):
            y = y * np.float32(0.999) + a.T
        return y
    _, after = _sunk(fn, seeded_array((6, 5)), seeded_array((5, 6)))
    assert after.outputs[0].op == "transpose"
    assert not any(n.op == "transpose" for n in after.nodes if n is not after.outputs[0])
