"""Fusion: kernel counts, not only values."""

import numpy as np
import pytest

import halojit
from halojit.graph.fusion import group_graph, group_key, partition


def _graph(fn, *args):
    f = halojit.trace(fn, opt_level=1)
    f(*args)
    return next(iter(f._cache.values())).graph


def _groups(fn, *args):
    return partition(_graph(fn, *args))


x32 = np.ones((8, 16), np.float32)


def chain20(a):
    y = a
    for i in range(20):
        y = np.exp(-y) if i % 3 == 0 else (y * 1.5 if i % 3 == 1 else y + a)
    return y


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = x.var(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * g + b


def test_twenty_op_elementwise_chain_is_one_kernel():
    groups = _groups(chain20, x32)
    assert len(groups) == 1
    assert len(groups[0].nodes) >= 20


def test_softmax_is_one_kernel():
    groups = _groups(softmax, x32)
    assert len(groups) == 1
    assert {"max", "sum", "exp"} <= {n.op for n in groups[0].nodes}


def test_layernorm_is_one_kernel():
    g = np.ones(16, np.float32)
    assert len(_groups(layernorm, x32, g, g)) == 1


def test_matmul_takes_its_elementwise_epilogue():
    def dense(x, w, b):
        return np.maximum(x @ w + b, 0)
    groups = _groups(dense, x32, np.ones((16, 4), np.float32), np.ones(4, np.float32))
    assert len(groups) == 1
    assert groups[0].kind == "linalg"
    assert [n.op for n in groups[0].nodes] == ["matmul", "add", "maximum"]


def test_diamond_does_not_duplicate_work():
    def diamond(a):
        t = np.exp(a)
        return np.sin(t) + np.cos(t)
    groups = _groups(diamond, x32)
    assert len(groups) == 1
    ops = [n.op for n in groups[0].nodes]
    assert ops.count("exp") == 1


def test_no_cycle_through_a_matmul():
    # exp feeds both the matmul and the final add: fusing exp with the add
    # around the matmul would make a cycle between the two groups.
    def f(a, w):
        e = np.exp(a)
        return e[:, :4] + e @ w
    groups = _groups(f, x32, np.ones((16, 4), np.float32))
    index = {n: k for k, g in enumerate(groups) for n in g.nodes}
    for k, g in enumerate(groups):
        for i in g.inputs:
            assert index.get(i, -1) < k  # every producer group runs first


def test_two_identical_groups_share_one_key():
    def f(a, b):
        return np.maximum(a @ a.T, 0), np.maximum(b @ b.T, 0)
    groups = _groups(f, x32, x32 + 1)
    keys = {group_key(group_graph(g)) for g in groups}
    assert len(groups) == 2 and len(keys) == 1
    assert all(g.kind == "linalg" for g in groups)  # each absorbed its transpose


@pytest.mark.level3
def test_identical_groups_compile_once(tmp_path, monkeypatch):
    monkeypatch.setenv("HALOJIT_CACHE_DIR", str(tmp_path))

    def f(a, b):
        return np.tanh(a) * 3 + 1, np.tanh(b) * 3 + 1
    tf = halojit.trace(f)
    lo = tf.lower(x32, x32)
    assert lo.kernel_count == 2
    assert lo.groups[0].kernel == lo.groups[1].kernel
    assert tf.stats()["compiles"] == 1
    a, b = tf(x32, x32 * 2)
    np.testing.assert_allclose(b, np.tanh(x32 * 2) * 3 + 1, rtol=1e-6)


def test_input_cap_splits_groups():
    def wide(*xs):
        acc = xs[0]
        for x in xs[1:]:
            acc = acc + x
        return acc
    args = [np.full(4, i, np.float32) for i in range(20)]
    g = _graph(wide, *args)
    groups = partition(g, max_inputs=8)
    assert len(groups) > 1
    assert all(len(gr.inputs) <= 8 for gr in groups)
