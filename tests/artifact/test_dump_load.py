"""dump -> load round trips: every output kind, specializations, feature
levels, strided inputs, out=, threads, test vectors and ``halojit inspect``."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from artifact_helpers import model, model_args, run_python, softmax

import halojit
from halojit import _rt


def assert_tree_equal(got, want):
    assert type(got) is type(want)
    if isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            assert_tree_equal(got[k], want[k])
    elif isinstance(want, (np.ndarray, np.generic)):
        assert got.dtype == want.dtype and np.shape(got) == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        assert got == want


def supported_levels():
    from halojit.runtime.artifact import LEVELS
    return [name for name, lv in LEVELS.items() if all(_rt.cpu_has_feature(f) for f in lv.requires)]


@pytest.mark.parametrize("level", ["avx512", "avx2", "sse41"])
def test_every_level_matches_numpy(model_artifact, level):
    if level not in supported_levels():
        pytest.skip(f"this CPU cannot run the {level} kernels")
    f = halojit.load(model_artifact, level=level)
    assert f.level == level
    for rows in (16, 5):
        args = model_args(rows)
        before = [a.copy() for a in args]
        assert_tree_equal(f(*args), model(*args))
        for a, b in zip(args, before):  # inputs are never written
            np.testing.assert_array_equal(a, b)


def test_default_level_is_the_best_this_cpu_runs(model_artifact):
    f = halojit.load(model_artifact)
    assert f.level == supported_levels()[0]
    assert [lv["name"] for lv in f.levels] == ["avx512", "avx2", "sse41"]
    assert f.inputs == ["x", "bias", "k"]
    assert f.outputs == ["h", "mask", "idx", "s", "s_again", "x", "w"]


def test_outputs_are_fresh_arrays(model_artifact):
    f = halojit.load(model_artifact)
    args = model_args(16)
    out = f(*args)
    assert out["x"] is not args[0] and not np.shares_memory(out["x"], args[0])
    assert not np.shares_memory(out["s"], out["s_again"])
    out["w"][:] = 0  # the artifact's constant is not affected
    np.testing.assert_array_equal(f(*args)["w"], model(*args)["w"])


def test_unknown_shape_or_dtype_lists_specializations(model_artifact):
    f = halojit.load(model_artifact)
    x, b, k = model_args(7)
    with pytest.raises(halojit.ShapeError, match=r"x: float32\[7, 32\].*float32\[16, 32\].*float32\[5, 32\]"):
        f(x, b, k)
    x, b, k = model_args(16)
    with pytest.raises(halojit.DTypeError, match="float64"):
        f(x.astype(np.float64), b, k)
    with pytest.raises(TypeError, match="expected 3 arguments"):
        f(x, b)


def test_strided_and_reversed_inputs(model_artifact):
    f = halojit.load(model_artifact)
    x, b, k = model_args(16)
    big = np.zeros((32, 64), np.float32)
    big[::2, ::2] = x  # a view with a non-unit last stride
    xv = big[::2, ::2]
    bv = b[::-1].copy()[::-1]  # negative stride
    kv = np.repeat(k, 2)[::2]
    assert_tree_equal(f(xv, bv, kv), model(xv, bv, kv))
    xt = np.asfortranarray(x)
    assert_tree_equal(f(xt, b, k), model(xt, b, k))


def test_out_is_written_in_place(softmax_artifact):
    f = halojit.load(softmax_artifact)
    x = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    out = np.empty((8, 64), np.float32)
    got = f(x, out=out)
    assert got is out
    np.testing.assert_allclose(out, softmax(x), rtol=1e-5, atol=1e-7)
    strided = np.zeros((8, 128), np.float32)[:, ::2]
    f(x, out=strided)
    np.testing.assert_allclose(strided, softmax(x), rtol=1e-5, atol=1e-7)
    with pytest.raises(halojit.ShapeError, match=r"out\[0\] has shape \(8, 32\)"):
        f(x, out=np.empty((8, 32), np.float32))
    with pytest.raises(halojit.DTypeError):
        f(x, out=np.empty((8, 64), np.float64))


def test_aliased_out_is_safe(softmax_artifact):
    f = halojit.load(softmax_artifact)
    x = np.random.default_rng(2).standard_normal((8, 64)).astype(np.float32)
    want = softmax(x)
    f(x, out=x)  # in place: the runtime computes into a temporary first
    np.testing.assert_allclose(x, want, rtol=1e-5, atol=1e-7)


def test_concurrent_calls(softmax_artifact):
    f = halojit.load(softmax_artifact)
    xs = [np.random.default_rng(i).standard_normal((8, 64)).astype(np.float32) for i in range(16)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(f, xs))
    for x, r in zip(xs, results):
        np.testing.assert_allclose(r, softmax(x), rtol=1e-5, atol=1e-7)


def test_special_values(softmax_artifact):
    f = halojit.load(softmax_artifact)
    x = np.zeros((8, 64), np.float32)
    x[0, 0] = np.nan
    x[1, :] = -np.inf
    x[2, 3] = np.inf
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(f(x), softmax(x), rtol=1e-5, atol=1e-7, equal_nan=True)


def test_test_vectors_pass(model_artifact):
    results = halojit.load(model_artifact).check()
    assert len(results) == 2 * 7  # two specializations, seven outputs each
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]


def test_test_vectors_can_be_left_out(tmp_path):
    path = halojit.trace(softmax).dump(tmp_path / "s.hjm", np.ones((2, 8), np.float32),
                                       test_vectors=False, levels="sse41")
    f = halojit.load(path)
    assert f.check() == []
    assert f.manifest["test_vectors"] == []


def test_allclose_catches_a_difference():
    a = np.array([1.0, 2.0, np.nan], np.float32)
    assert _rt.allclose(a, a.copy(), 0.0, 0.0)[0]
    ok, why = _rt.allclose(a, np.array([1.0, 2.5, np.nan], np.float32), 1e-4, 0.0)
    assert not ok and "element 1" in why
    assert not _rt.allclose(np.array([1, 2], np.int32), np.array([1, 3], np.int32), 1.0, 1.0)[0]


def test_inspect_cli(model_artifact):
    proc = run_python("-m", "halojit", "inspect", model_artifact, "--check")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "function  model" in out
    assert "input  x: float32 [16, 32]" in out and "input  k: int32 [5]" in out
    assert "output mask: bool [16, 32]" in out
    assert out.count(": ok") == 14


def test_fresh_process_needs_no_libhalide(softmax_artifact):
    """The artifact's own Halide runtime and kernels: halide is never imported."""
    code = ("import sys, numpy as np, halojit\n"
            f"f = halojit.load({str(softmax_artifact)!r})\n"
            "assert all(r['ok'] for r in f.check())\n"
            "x = np.ones((8, 64), np.float32)\n"
            "assert np.allclose(f(x), 1 / 64)\n"
            "assert 'halide' not in sys.modules, 'halide was imported'\n"
            "print('ok', f.level)\n")
    env = dict(os.environ, HALOJIT_ARTIFACT_LEVEL="sse41")
    proc = run_python("-c", code, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok sse41"


def test_integer_bool_half_and_scalar_arguments(tmp_path):
    def f(a, m, h, s):
        return np.where(m, a * s, -a), (h * 2).astype(np.float16), a.sum(), m & (a > 0)
    a = np.arange(-6, 6, dtype=np.int16).reshape(3, 4)
    m = a % 3 == 0
    h = np.linspace(-1, 1, 12, dtype=np.float16).reshape(3, 4)
    g = halojit.load(halojit.trace(f).dump(tmp_path / "f.hjm", a, m, h, 3, levels="sse41"))
    assert g.specializations[0]["inputs"]["s"] == ((), np.dtype(np.int64))  # a weak Python int
    got, want = g(a, m, h, 3), f(a, m, h, 3)
    assert isinstance(got, tuple) and isinstance(got[2], np.integer)  # 0-d -> numpy scalar
    for x, y in zip(got, want):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(x, y)
    assert all(r["ok"] for r in g.check())
    got = g(a, m, h, -2)  # the scalar is an input, not baked in
    np.testing.assert_array_equal(got[0], f(a, m, h, -2)[0])


def test_zero_d_outputs_load_as_numpy_returns_them(tmp_path):
    """np.where of 0-d arrays is a 0-d ndarray, a sum a numpy scalar, and an
    argument returned as is comes back as it was passed."""
    def f(c, a, b):
        return np.where(c, a, b), a + b, a
    c, a, b = np.array(True), np.array(1.5), np.array(-2.0)
    g = halojit.load(halojit.trace(f).dump(tmp_path / "z.hjm", c, a, b, levels="sse41"))
    for args in ((c, a, b), (c, np.float64(1.5), b)):
        for got, want in zip(g(*args), f(*args)):
            assert type(got) is type(want) and got == want


def test_matmul_layer_at_every_level(tmp_path):
    """The Matmul template is sized per target: each level's kernels agree with numpy."""
    def mlp(x, w1, b1, w2):
        h = x @ w1 + b1
        return (0.5 * h * (1 + np.tanh(0.79788456 * (h + 0.044715 * h * h * h)))) @ w2
    r = np.random.default_rng(0)
    args = [r.standard_normal(s, dtype=np.float32) * 0.1
            for s in [(32, 64), (64, 128), (128,), (128, 48)]]
    path = halojit.trace(mlp).dump(tmp_path / "mlp.hjm", *args)
    for level in supported_levels():
        g = halojit.load(path, level=level)
        np.testing.assert_allclose(g(*args), mlp(*args), rtol=1e-4, atol=1e-6)
        assert all(res["ok"] for res in g.check())


def test_namedtuple_outputs_load_as_namedtuples(tmp_path):
    import collections
    Stats = collections.namedtuple("Stats", "mean spread")
    f = halojit.trace(lambda x: Stats(x.mean(axis=0), (x.max(axis=0) - x.min(axis=0), 2)))
    x = np.random.default_rng(5).standard_normal((6, 4)).astype(np.float32)
    f.dump(tmp_path / "s.hjm", x)
    g = halojit.load(tmp_path / "s.hjm")
    got, want = g(x), f(x)
    assert type(got).__name__ == "Stats" and got._fields == ("mean", "spread")
    np.testing.assert_array_equal(got.mean, want.mean)
    np.testing.assert_array_equal(got.spread[0], want.spread[0])
    assert got.spread[1] == 2
    assert g.outputs == ["mean", "spread_0"]  # named by the fields
