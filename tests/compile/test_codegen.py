"""Compiled kernels (opt_level 3, Halide) against numpy on whole functions."""


import numpy as np
import pytest

import halojit

from helpers import run_in_threads

pytestmark = pytest.mark.level3
rng = np.random.default_rng(7)


def close(got, want, rtol=1e-5, atol=1e-6):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def gelu_layer(x, w, b):
    h = x @ w + b
    return 0.5 * h * (1 + np.tanh(0.79788456 * (h + 0.044715 * h ** 3)))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, g, b):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b


def blur(img):
    bx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) / 3
    return (bx[:-2] + bx[1:-1] + bx[2:]) / 3


def int_semantics(a, b):
    return a // b, a % b, a * b, -a, np.abs(a), a >> 3, a << 2, np.maximum(a, b)


def mixed(x, n):
    return (x.sum(axis=0), x.argmax(axis=1), (x > 0).all(axis=1), x.astype(np.int16),
            np.where(x > n, x, n), np.pad(x, 1, mode="edge"), x[::-2, 1::3].T)


f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
CASES = [
    ("gelu_layer", gelu_layer, (f32(16, 32), f32(32, 8), f32(8))),
    ("softmax", softmax, (f32(12, 40),)),
    ("layernorm", layernorm, (f32(6, 24), f32(24), f32(24))),
    ("blur", blur, (f32(20, 30),)),
    ("int32", int_semantics, (rng.integers(-99, 99, (5, 7)).astype(np.int32),
                              rng.integers(-4, 4, (5, 7)).astype(np.int32))),
    ("int8_wrap", int_semantics, (np.array([-128, 127, -7, 7, 0, 100], np.int8),
                                  np.array([-1, 2, -2, 0, 3, 3], np.int8))),
    ("mixed_f64", mixed, (rng.standard_normal((9, 10)), 0.25)),
    ("float16", lambda x: (x * x + 1).sum(axis=1) / 3, (f32(5, 6).astype(np.float16),)),
    ("uint8", lambda a, b: (a + b, a - b, a * b, a // np.maximum(b, 1)),
     (rng.integers(0, 255, (4, 9)).astype(np.uint8), rng.integers(0, 255, (4, 9)).astype(np.uint8))),
    ("bool", lambda m, x: (m & (x > 0), np.logical_xor(m, x < 0), m.sum(), m.any()),
     (rng.random((3, 5)) > 0.5, f32(3, 5))),
    ("scalar_0d", lambda x, s: (x * s + 1, np.exp(x)), (np.float32(2.0), 3.0)),
    ("nan_inf", lambda x: (np.maximum(x, 0), np.fmax(x, 0), x.max(axis=1), x.argmin(axis=1),
                           np.isnan(x), np.isinf(x)),
     (np.array([[np.nan, 1, -np.inf], [2, np.inf, 0]], np.float32),)),
]


@pytest.mark.parametrize("fn,args", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_compiled_matches_numpy(fn, args):
    f = halojit.trace(fn)
    with np.errstate(all="ignore"):
        want = fn(*args)
    before = [np.array(a, copy=True) for a in args]
    close(f(*args), want, rtol=2e-3 if "float16" in str(args[0].dtype if hasattr(args[0], "dtype") else "") else 1e-5)
    for a, b in zip(args, before):  # inputs never written to
        np.testing.assert_array_equal(np.asarray(a), b)
    assert f.stats()["misses"] == 1


def test_strided_negative_and_transposed_views():
    f = halojit.trace(lambda a, b: np.sin(a) * b + 1)
    base = f32(16, 24)
    other = f32(24, 16)
    for a, b in [(base[::2, ::3], other[::-3, ::2].T),
                 (base[::-1], other.T), (base[:, ::-1], other.T[::-1])]:
        close(f(a, b), np.sin(a) * b + 1)


def test_zero_size_and_broadcast_inputs():
    f = halojit.trace(lambda a, b: (a + b).sum(axis=0))
    close(f(np.ones((0, 3), np.float32), np.ones(3, np.float32)), np.zeros(3, np.float32))
    b = np.broadcast_to(np.float32(2), (4, 5))  # zero strides
    a = f32(4, 5)
    close(f(a, b), (a + b).sum(axis=0))


def test_out_writes_into_given_array():
    f = halojit.trace(softmax)
    x = f32(4, 8)
    out = np.empty((4, 8), np.float32)
    r = f(x, out=out)
    assert r is out
    close(out, softmax(x))
    with pytest.raises(halojit.ShapeError):
        f(x, out=np.empty((4, 9), np.float32))


def test_concurrent_calls_from_four_threads():
    f = halojit.trace(layernorm)
    g, b = f32(32), f32(32)
    inputs = [f32(16, 32) for _ in range(4)]
    f(inputs[0], g, b)  # compile once
    results, errors = [None] * 4, []

    def work(k):
        try:
            for _ in range(20):
                results[k] = f(inputs[k], g, b)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    run_in_threads(work, 4)
    assert not errors
    for k in range(4):
        close(results[k], layernorm(inputs[k], g, b), rtol=1e-4, atol=1e-5)


def test_lower_reports_groups_schedule_and_stmt():
    lo = halojit.trace(softmax).lower(f32(8, 16))
    assert lo.kernel_count == 1
    g = lo.groups[0]
    assert g.ops == ["max", "subtract", "exp", "sum", "divide"]
    assert g.kernel.startswith("hj_")
    # the measured default for a 2-D last-axis reduction (build.default_spec)
    assert g.scheduler.startswith("RowReduce")
    assert "RowReduce" in g.schedule and "compute_at" in g.schedule
    assert g.stmt and "produce" in g.stmt
    assert g.kernel in lo.graph


def test_row_reduce_template_schedule_text():
    lo = halojit.trace(softmax, autoscheduler="RowReduce").lower(f32(8, 80))
    g = lo.groups[0]
    assert g.scheduler.startswith("RowReduce")
    assert "compute_at" in g.schedule and "vectorize(lane)" in g.schedule


def test_template_that_does_not_fit_falls_back():
    f = halojit.trace(lambda x: x.sum(axis=0), autoscheduler="RowReduce")
    x = f32(6, 5)
    close(f(x), x.sum(axis=0), rtol=1e-5)
    assert f.lower(x).groups[0].scheduler.startswith("Adams2019")


def test_printed_schedule_string_round_trips():
    """The scheduler text a group reports is accepted back by trace()."""
    x = f32(8, 80)
    printed = halojit.trace(softmax, autoscheduler=("RowReduce", {"block": 2, "vector": 8})) \
        .lower(x).groups[0].scheduler
    assert "block=2" in printed and "vector=8" in printed
    f = halojit.trace(softmax, autoscheduler=printed)
    assert f.lower(x).groups[0].scheduler == printed
    close(f(x), softmax(x), rtol=1e-5)


def test_bad_autoscheduler_is_refused_before_compiling():
    with pytest.raises(halojit.HalojitError, match="is not key=value"):
        halojit.trace(softmax, autoscheduler="RowReduce;block")(f32(2, 2))
    with pytest.raises(halojit.HalojitError, match="valid keys are"):
        halojit.trace(softmax, autoscheduler="RowReduce;blocks=2")(f32(2, 2))
    with pytest.raises(halojit.HalojitError, match="valid keys are"):
        halojit.trace(softmax, autoscheduler=("Adams2019", {"bogus": 1}))(f32(2, 2))
    with pytest.raises(halojit.HalojitError, match="expected one of"):
        halojit.trace(softmax, autoscheduler="NoSuchScheduler")(f32(2, 2))


@pytest.mark.parametrize("sched", ["Adams2019", "Li2018", "Mullapudi2016", "RowReduce", "none"])
def test_other_schedulers(sched):
    f = halojit.trace(layernorm, autoscheduler=sched)
    x, g, b = f32(8, 16), f32(16), f32(16)
    close(f(x, g, b), layernorm(x, g, b), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [64, 100])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint16", "bool"])
def test_long_row_reductions_use_lane_partials(n, dtype):
    """Rows of >= 64 elements reduce through per-lane partials (with a tail
    when n % 16): every reduction must still equal numpy's."""
    x = np.random.default_rng(n).standard_normal((3, n)) * 50
    x = (x > 0) if dtype == "bool" else x.astype(dtype)
    if dtype.startswith("float"):
        x[1, 7] = np.nan
        x[2, n - 1] = np.inf

    def reds(a):
        out = (a.max(axis=-1), a.min(axis=-1), a.any(axis=-1), a.all(axis=-1),
               a.sum(axis=-1, keepdims=True))
        return out + ((a.prod(axis=-1),) if dtype == "int8" else ())
    f = halojit.trace(reds)
    with np.errstate(all="ignore"):  # atol: numpy's own float32 rounding of sums of ~500
        close(f(x), reds(x), rtol=1e-6, atol=1e-3)


def test_pooled_outputs_are_never_shared_while_alive():
    """Large outputs recycle memory only once nothing references it."""
    f = halojit.trace(lambda a: a * 2 + 1)
    a = f32(512, 1024)  # 2 MiB: pooled
    first = f(a)
    view = first[3:5]  # keeps first's memory alive after first is dropped
    del first
    kept = [f(a + k) for k in range(3)]
    for k, y in enumerate(kept):
        close(y, (a + k) * 2 + 1)
    close(view, (a * 2 + 1)[3:5])
    ptrs = [y.__array_interface__["data"][0] for y in kept]
    assert len(set(ptrs)) == 3
    del kept, y
    again = f(a)  # memory of a dropped output is reused, with correct values
    close(again, a * 2 + 1)


def test_out_may_be_a_strided_view():
    f = halojit.trace(lambda a: np.exp(a))
    a = f32(6, 8)
    big = np.zeros((6, 16), np.float32)
    f(a, out=big[:, ::2])  # last axis not unit-stride: computed, then copied
    close(big[:, ::2], np.exp(a))
    assert not big[:, 1::2].any()


@pytest.mark.parametrize("shape,axes", [((130, 67), None), ((5, 7, 100), (0, 2)),
                                        ((200, 3, 65), (0, 2)), ((9, 64), (0, 1))])
@pytest.mark.parametrize("dtype", ["float32", "int16"])
def test_full_reductions_use_lanes_and_parallel_chunks(shape, axes, dtype):
    """Reductions over the last axis and others split into lanes and chunks
    of the outermost reduced axis (the last chunk is partial)."""
    x = (np.random.default_rng(3).standard_normal(shape) * 40).astype(dtype)

    def reds(a):
        return a.sum(axis=axes), a.max(axis=axes), a.min(axis=axes), (a > 0).all(axis=axes)
    got = halojit.trace(reds)(x)
    close(got[1:], reds(x)[1:])
    # float32 sums accumulate in float64: compare with the exact sum (numpy's
    # own float32 sum is off by its pairwise rounding near cancellation)
    exact = x.astype(np.float64).sum(axis=axes).astype(x.sum(axis=axes).dtype)
    close(got[0], exact, rtol=1e-6, atol=1e-4)
