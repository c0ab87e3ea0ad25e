"""Fusion: kernel counts, not only values."""

import numpy as np
import pytest

import halojit
from halojit.graph.fusion import SIBLING_MIN, group_graph, group_key, partition


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


def attention(q, k, v):
    s = q @ k.swapaxes(-1, -2) / np.float32(8.0)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def test_softmax_of_matmul_scores_stays_out_of_the_matmul_group():
    """``s - s.max()`` reads the matmul's epilogue and a reduction: merging
    both into the matmul's group would leave a group no template fits
    (attention (8, 12, 128, 64): 18.6 ms that way, 3.0 ms as three groups)."""
    q = np.ones((2, 3, 8, 4), np.float32)
    groups = _groups(attention, q, q, q)
    assert [[n.op for n in g.nodes] for g in groups] == [
        ["transpose", "matmul", "divide"],
        ["max", "subtract", "exp", "sum", "divide"],
        ["matmul"]]
    assert [g.kind for g in groups] == ["linalg", "fused", "linalg"]


@pytest.mark.level3
def test_attention_takes_matmul_and_row_reduce_templates():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 3, 40, 16), dtype=np.float32) for _ in range(3))
    k[1, 2, 5, 3] = np.inf  # one row of scores all NaN after the max
    f = halojit.trace(attention)
    scheds = [g.scheduler.split(";")[0] for g in f.lower(q, k, v).groups]
    assert scheds == ["Matmul", "RowReduce", "Matmul"]
    with np.errstate(invalid="ignore"):
        want = attention(q, k, v)
    got = f(q, k, v)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5, atol=1e-6)


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


@pytest.mark.parametrize("shape,dtype", [((1024, 1024), np.uint8), ((4096,), np.float32)])
def test_two_full_reductions_of_a_large_array(shape, dtype):
    """x.max() - x.min(): of a large array one group, whose two partials the
    FullReduce template computes in one loop (fusion._merge_sibling_extrema);
    of a smaller one, each reduction a group FullReduce takes (together,
    Adams2019 ran them 2-57x slower); small arrays stay one kernel."""
    a = np.random.default_rng(0).integers(0, 250, shape).astype(dtype)
    f = halojit.trace(lambda a: a.max() - a.min())
    np.testing.assert_array_equal(f(a), a.max() - a.min(), strict=True)
    assert len(_groups(lambda a: a.max() - a.min(), a)) == (1 if a.size >= SIBLING_MIN else 2)
    if a.size >= 1 << 15:  # parallel kernels: FullReduce, also with two scalar outputs
        g = halojit.trace(lambda a: (a.max() + 0.5, a.max() * 2))
        g(a)
        groups = [str(k) for k in f.lower(a).groups + g.lower(a).groups]
        assert all("FullReduce" in k for k in groups), groups
    assert len(_groups(lambda a: a.max() - a.min(), a.ravel()[:10])) == 1


@pytest.mark.parametrize("fn", [lambda a: a / a.std(), lambda a: (a > a.min()).mean(),
                                lambda a: a - a.var(keepdims=True)],
                         ids=["x/std", "above-min-mean", "x-var"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint8])
def test_a_reduction_chained_behind_a_full_reduction_is_its_own_kernel(fn, dtype):
    """x.var() reduces x - x.mean(): the large value reading only the mean
    starts a group of its own, so the second reduction is never chained
    behind the first in one kernel (Adams2019 read the input at -8 there,
    a crash, for x / x.std() of 2**20 float32; 32768 float16)."""
    a = (np.random.default_rng(1).random(1 << 15) * 4).astype(dtype)
    with np.errstate(all="ignore"):
        want = fn(a)
    f = halojit.trace(fn)
    got = f(a)
    np.testing.assert_allclose(got, want, rtol=2e-3 if dtype == np.float16 else 1e-5, atol=1e-6)
    # uint8: the float64 cast of x that both reductions read is recomputed
    # for the second (passes/recompute.py), not shared between them
    assert all(g.ops.count("sum") + g.ops.count("min") <= 1 for g in f.lower(a).groups)


def _img_norm(x):
    y = x.astype(np.float32) / 255.0
    return (y - y.mean()) / (y.std() + 1e-6)


def _cast_norm(x):
    y = x.astype(np.float32)
    return (y - y.mean()) / y.std()


@pytest.mark.parametrize("fn,shape", [
    (lambda x: x.var(), (32, 32, 16)), (_cast_norm, (256, 256)), (_img_norm, (96, 64, 3)),
    (lambda x: np.abs(x - x.mean()).max() + x.sum(), (64, 200)),
    (lambda x: ((x * 2.0 - (x * 2.0).mean()) ** 2).sum() / (x * 2.0).max(), (8192,))],
    ids=["u8-var", "cast-norm", "image-norm", "abs-dev", "scaled"])
def test_cheap_values_read_after_a_full_reduction_are_recomputed(fn, shape):
    """``y = x.astype(np.float32); (y - y.mean()) / y.std()`` reads y before
    and after reductions of all of it: each later pass gets its own copy of
    the cast instead of sharing it, so no kernel chains two full reductions
    (Adams2019 took 55 s to compile a uint8 (128, 128, 64) x.var() chained,
    13.6 s the line above at (2048, 2048); now 1.5 and 0.4 s)."""
    x = np.random.default_rng(3).integers(0, 256, shape).astype(np.uint8)
    f = halojit.trace(fn)
    got = f(x)
    np.testing.assert_allclose(got, fn(x), rtol=2e-5)
    assert np.asarray(got).dtype == np.asarray(fn(x)).dtype
    reductions = ("sum", "max", "min")
    groups = f.lower(x).groups
    assert all(sum(g.ops.count(r) for r in reductions) <= 1 for g in groups), \
        [g.ops for g in groups]
    # the traced graph shares the cast: every later pass reads a copy of it
    assert sum(g.ops.count("astype") > 0 for g in groups) >= 2
