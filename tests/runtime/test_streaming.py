"""Streaming (non-temporal) stores of large outputs: the IR rewrite, the
kernels it builds, and traced functions whose outputs stream, against numpy.

HALOJIT_STREAM_STORES is lowered here so that small arrays stream (the
default is the L3 size); only the threshold differs from a real run."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import halide as hl
import numpy as np
import pytest

import halojit
from halojit import _rt
from halojit.config import get_config, l3_cache_bytes
from halojit.errors import HalojitError
from halojit.generators import compile as hc
from halojit.generators import streaming

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                                reason="streaming stores are an x86-64 feature")

MIN_BYTES = 4096


def test_llvmlite_reads_halides_llvm():
    # a dependency: without it nothing would stream and the tests below could not fail
    assert streaming._installed() and streaming._llvm() is not None


def test_cached_kernels_do_not_import_llvmlite(tmp_path):
    # a new process running kernels from the disk cache must not pay llvmlite's import
    code = ("import sys, numpy as np, halojit\n"
            "f = halojit.trace(lambda x: x * 2 + 1)\n"
            "x = np.ones((64, 256), np.float32)\n"
            "assert (f(x) == 3).all()\n"
            "print('llvmlite' in sys.modules)\n")
    env = {**os.environ, "HALOJIT_STREAM_STORES": str(MIN_BYTES), "HALOJIT_CACHE_DIR": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.strip() == "False", (again.stdout, again.stderr)
    assert json.loads(next(tmp_path.glob("kernels/*/hj_*.json")).read_text())["streamed"]


def test_threshold_setting(monkeypatch):
    monkeypatch.delenv("HALOJIT_STREAM_STORES", raising=False)
    assert get_config().stream_min_bytes == l3_cache_bytes() * 3 // 4 > 0
    monkeypatch.setenv("HALOJIT_STREAM_STORES", "0")
    assert get_config().stream_min_bytes == 0
    monkeypatch.setenv("HALOJIT_STREAM_STORES", "65536")
    assert get_config().stream_min_bytes == 65536
    monkeypatch.setenv("HALOJIT_STREAM_STORES", "64K")
    with pytest.raises(HalojitError, match="HALOJIT_STREAM_STORES='64K'.*size in bytes"):
        get_config()


def _pipeline(update=False, rows=64, cols=256):
    a = hl.ImageParam(hl.Float(32), 2, "a")
    x, y = hl.Var("x"), hl.Var("y")
    out = hl.Func("t_stream_out")
    out[x, y] = a[x, y] * 2.0 + 1.0
    if update:  # reads its own output back
        out[x, y] = out[x, y] * out[x, y]
        out.update().vectorize(x, 8)
    out.vectorize(x, 8).parallel(y)
    for d, extent in enumerate((cols, rows)):
        a.dim(d).set_bounds(0, extent)
        out.output_buffer().dim(d).set_bounds(0, extent)
    name = streaming.prepare_output(out, (rows, cols))
    return hl.Pipeline(out), a, name


def _run(compiled, a, out):
    kernel = hc.load_kernel(compiled.so_path, compiled.fn_name)
    _rt.Plan([kernel], [(0, [0, 1])], [None, None], 1, 1).run([a], [out])


@pytest.mark.parametrize("update", [False, True], ids=["write-only", "read-back"])
def test_streamed_kernel(target, tmp_path, update):
    pipeline, a, name = _pipeline(update)
    fn = "t_stream_rb" if update else "t_stream"
    compiled = hc.compile_pipeline(pipeline, [a], fn, target, tmp_path,
                                   extra_outputs=("assembly",), streamed=[name])
    asm = compiled.extra_paths["assembly"].read_text()
    if update:  # an output read back keeps plain stores
        assert "movnt" not in asm and "sfence" not in asm
    else:  # 16-byte aligned: two 16-byte vmovnt per 8 floats, a fence before each return
        assert asm.count("vmovnt") >= 2 and "movnti" not in asm and "sfence" in asm
    x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    keep = x.copy()
    out = np.full_like(x, np.nan)
    _run(compiled, x, out)
    ref = x * 2 + 1
    np.testing.assert_array_equal(out, ref * ref if update else ref)
    np.testing.assert_array_equal(x, keep)


def test_streamed_kernel_asserts_alignment(target, tmp_path):
    pipeline, a, name = _pipeline()
    compiled = hc.compile_pipeline(pipeline, [a], "t_stream_al", target, tmp_path,
                                   extra_outputs=(), streamed=[name])
    x = np.ones((64, 256), np.float32)
    base = np.zeros(64 * 256 + 4, np.float32)
    shifted = base[1:1 + 64 * 256].reshape(64, 256)  # 4 bytes past a 16-byte boundary
    with pytest.raises(RuntimeError, match="align"):
        _run(compiled, x, shifted)
    assert not base.any()  # refused before writing anything


def test_mark_nontemporal_leaves_other_buffers():
    ir = "\n".join([
        "define i32 @k(ptr %p, ptr %q) {",
        "  %v = load <8 x float>, ptr %q, align 4, !tbaa !5",
        "  store <8 x float> %v, ptr %p, align 16, !tbaa !3",
        "  store <8 x float> %v, ptr %q, align 4, !tbaa !5",
        "  ret i32 0",
        "}",
        "define i32 @other() {",
        "  ret i32 1",
        "}",
        '!1 = !{!"Halide buffer"}',
        '!2 = !{!"out", !1, i64 0}',
        "!3 = !{!2, !2, i64 0}",
        '!4 = !{!"tmp", !1, i64 0}',
        "!5 = !{!4, !4, i64 0}",
    ])
    text, streamed = streaming.mark_nontemporal(ir, ["out", "tmp"])
    assert streamed == ["out"]  # tmp is loaded: plain
    lines = text.splitlines()
    assert "ptr %p, align 16, !tbaa !3, !nontemporal !6" in text and "!6 = !{i32 1}" in text
    assert sum("!nontemporal" in line for line in lines) == 1
    k = lines.index("  call void @llvm.x86.sse.sfence()")
    assert lines[k + 1] == "  ret i32 0" and text.count("sfence()\n") == 2  # the call and its declare
    assert streaming.mark_nontemporal(ir, ["tmp"]) == (ir, [])


def test_add_prefetch_only_vector_loads_of_named_inputs():
    llvm = streaming._llvm()
    ir = "\n".join([
        "define <8 x float> @k(ptr %a, ptr %b, ptr %c) {",
        "  %u = load <8 x float>, ptr %a, align 4, !tbaa !3",
        "  %v = load <8 x float>, ptr %b, align 4, !tbaa !5",
        "  %s = load float, ptr %c, align 4, !tbaa !7",
        "  %w = fadd <8 x float> %u, %v",
        "  ret <8 x float> %w",
        "}",
        '!1 = !{!"Halide buffer"}',
        '!2 = !{!"in0", !1, i64 0}',
        "!3 = !{!2, !2, i64 0}",
        '!4 = !{!"in1", !1, i64 0}',
        "!5 = !{!4, !4, i64 0}",
        '!6 = !{!"in2", !1, i64 0}',
        "!7 = !{!6, !6, i64 0}",
    ])
    text, names = streaming.add_prefetch(ir, {"in0": 16384, "in2": 64, "absent": 8})
    assert names == ["in0"]  # in2 has a scalar load only
    lines = text.splitlines()
    k = lines.index("  %u = load <8 x float>, ptr %a, align 4, !tbaa !3")
    assert lines[k - 2] == "  %hj.prefetch.1 = getelementptr i8, ptr %a, i64 16384"
    assert lines[k - 1] == "  call void @llvm.prefetch.p0(ptr %hj.prefetch.1, i32 0, i32 3, i32 1)"
    assert text.count("call void @llvm.prefetch") == 1 and "declare void @llvm.prefetch.p0(" in text
    llvm.parse_assembly(text).verify()  # valid IR
    assert streaming.add_prefetch(ir, {"in1": 0 + 64})[1] == ["in1"]
    assert streaming.add_prefetch(ir, {"nothing": 64}) == (ir, [])


def test_prefetched_kernel(target, tmp_path):
    pipeline, a, name = _pipeline()
    compiled = hc.compile_pipeline(pipeline, [a], "t_prefetch", target, tmp_path,
                                   extra_outputs=("assembly",), streamed=[name],
                                   prefetch={"a": 4096})
    assert compiled.prefetched == ("a",) and compiled.streamed == (name,)
    asm = compiled.extra_paths["assembly"].read_text()
    assert "prefetcht0\t" in asm and "vmovnt" in asm
    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    keep = x.copy()
    out = np.full_like(x, np.nan)
    _run(compiled, x, out)
    np.testing.assert_array_equal(out, x * 2 + 1)
    np.testing.assert_array_equal(x, keep)
    # prefetches alone also take the llvmlite path (an output small enough for plain stores)
    pipeline, a, name = _pipeline()
    plain = hc.compile_pipeline(pipeline, [a], "t_prefetch_plain", target, tmp_path,
                                extra_outputs=("assembly",), prefetch={"a": 256})
    asm = plain.extra_paths["assembly"].read_text()
    assert plain.prefetched == ("a",) and "prefetcht0\t" in asm and "vmovnt" not in asm


# -- traced functions -------------------------------------------------------------


def _bias_relu(x, b):
    return np.maximum(x + b, 0)


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _blur(im):
    h = (im[:, :-2] + im[:, 1:-1] + im[:, 2:]) / 3
    return (h[:-2] + h[1:-1] + h[2:]) / 3


def _two(x, y):
    return x * y, np.sqrt(np.abs(x - y)).astype(np.float64)


def _mask(x):
    return (x > 0.5).astype(np.uint8) * 3 + (x > 0.2)


def _inputs(rng, shapes, dtype=np.float32):
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


CASES = {
    "bias_relu": (_bias_relu, [(64, 256), (256,)]),
    "softmax": (_softmax, [(96, 128)]),
    "blur_shifted_rows": (_blur, [(24, 600)]),  # rows of 598 floats, shifted to 16-byte bounds
    "two_outputs": (_two, [(48, 128), (48, 128)]),
    "uint8": (_mask, [(40, 160)]),
    "vector": (_bias_relu, [(5003,), (1,)]),
}
# rows that are not 16-byte multiples and not shifted: plain stores
# (streaming.stream_outputs), the values as numpy's all the same
PLAIN_CASES = {
    "bias_relu_odd_rows": (_bias_relu, [(67, 253), (253,)]),
    "blur": (_blur, [(80, 91)]),  # rows of 89 floats: too short to shift
    "odd_3d": (_bias_relu, [(6, 20, 131), (131,)]),
}


def _kernels(f):
    (spec,) = f._cache.values()
    return spec.executor.kernels


@pytest.mark.parametrize("name", list(CASES) + list(PLAIN_CASES))
def test_traced_outputs_stream(name, monkeypatch):
    monkeypatch.setenv("HALOJIT_STREAM_STORES", str(MIN_BYTES))
    fn, shapes = CASES[name] if name in CASES else PLAIN_CASES[name]
    rng = np.random.default_rng(len(name))
    args = _inputs(rng, shapes)
    args[0].flat[::7] = np.nan
    args[0].flat[3::11] = np.inf
    keep = [a.copy() for a in args]
    f = halojit.trace(fn)
    got = f(*args)
    ref = fn(*args)
    for g, r in zip(got if isinstance(got, tuple) else [got], ref if isinstance(ref, tuple) else [ref]):
        assert g.dtype == r.dtype and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=2e-6, atol=1e-7, equal_nan=True)
    for a, k in zip(args, keep):
        np.testing.assert_array_equal(a, k)
    streamed = [k for k in _kernels(f) if k.streamed]
    if name in PLAIN_CASES:
        assert not streamed, [k.fn_name for k in streamed]
        return
    assert streamed, [k.fn_name for k in _kernels(f)]
    for k in streamed:  # the rewrite found the stores of every output asked for
        info = json.loads(k.so_path.with_suffix(".json").read_text())
        assert len(info["streamed"]) == len(k.streamed), info


OUT_LAYOUTS = ["fresh", "aligned", "shifted", "padded_rows", "reversed"]


def _out_array(layout, shape, dtype):
    n = int(np.prod(shape))
    if layout == "aligned":
        return np.empty(shape, dtype)
    if layout == "shifted":  # one element past numpy's 16-byte aligned start
        return np.empty(n + 1, dtype)[1:].reshape(shape)
    if layout == "padded_rows":  # rows 4 bytes apart from a 16-byte multiple
        return np.empty((shape[0], shape[1] + 1), dtype)[:, :shape[1]]
    return np.empty(shape, dtype)[::-1]


@pytest.mark.parametrize("layout", OUT_LAYOUTS[1:])
def test_out_of_any_layout(layout, monkeypatch):
    # an out= the kernel may not stream into is written through an aligned copy
    monkeypatch.setenv("HALOJIT_STREAM_STORES", str(MIN_BYTES))
    x, b = _inputs(np.random.default_rng(3), [(64, 256), (256,)])
    f = halojit.trace(_bias_relu)
    ref = _bias_relu(x, b)
    for _ in range(2):  # the first call and the fast path
        out = _out_array(layout, ref.shape, ref.dtype)
        out[...] = -1
        r = f(x, b, out=out)
        assert r is out
        np.testing.assert_array_equal(out, ref)
    (kernel,) = _kernels(f)
    assert kernel.streamed == (0,)


def test_fresh_outputs_reuse_aligned_pool(monkeypatch):
    monkeypatch.setenv("HALOJIT_STREAM_STORES", str(MIN_BYTES))
    x, b = _inputs(np.random.default_rng(4), [(1024, 512), (512,)])  # 2 MiB: pooled
    f = halojit.trace(_bias_relu)
    first = f(x, b)
    kept = first.copy()
    second = f(x + 1, b)
    np.testing.assert_array_equal(first, kept)  # a live output is never reused
    np.testing.assert_array_equal(second, _bias_relu(x + 1, b))
    assert first.ctypes.data % 16 == 0 and second.ctypes.data % 16 == 0


def test_below_threshold_plain(monkeypatch):
    monkeypatch.setenv("HALOJIT_STREAM_STORES", str(64 * 256 * 4 + 1))
    f = halojit.trace(_bias_relu)
    x, b = _inputs(np.random.default_rng(5), [(64, 256), (256,)])
    np.testing.assert_array_equal(f(x, b), _bias_relu(x, b))
    assert not any(k.streamed for k in _kernels(f))


def _layernorm(x, g, b):
    m = x.mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5) * g + b


PREFETCH_CASES = {
    # name: fn, shapes, the inputs prefetched, the distance's row bytes (RowReduce: blocks of rows)
    "softmax": (_softmax, [(96, 128)], ["in0"]),
    "softmax_long_rows": (_softmax, [(12, 8192)], ["in0"]),
    "layernorm": (_layernorm, [(64, 256), (256,), (256,)], ["in0"]),  # g and b: 1-D, none
    "blur": (_blur, [(80, 91)], ["in0"]),
}


@pytest.mark.parametrize("name", list(PREFETCH_CASES))
def test_traced_templates_prefetch(name, monkeypatch):
    # RowReduce and Stencil ask for prefetches of their large inputs; the
    # kernel's results do not change
    monkeypatch.setenv("HALOJIT_STREAM_STORES", str(MIN_BYTES))
    fn, shapes, expect = PREFETCH_CASES[name]
    rng = np.random.default_rng(7)
    args = _inputs(rng, shapes)
    args[0].flat[::13] = np.nan
    args[0].flat[5::17] = -np.inf
    keep = [a.copy() for a in args]
    f = halojit.trace(fn)
    got = f(*args)
    np.testing.assert_allclose(got, fn(*args), rtol=2e-6, atol=1e-7, equal_nan=True)
    for a, k in zip(args, keep):
        np.testing.assert_array_equal(a, k)
    (kernel,) = _kernels(f)
    info = json.loads(kernel.so_path.with_suffix(".json").read_text())
    assert info["spec"].startswith(("RowReduce", "Stencil")) and "prefetch=16" in info["spec"]
    assert info["prefetched"] == expect, info
    assert "prefetch(inputs, 16 KiB ahead" in f.lower(*args).groups[0].schedule


@pytest.mark.parametrize("shape,rows,ahead", [
    ((96, 128), 4, 16384),        # blocks of 4 rows of 512 bytes: 8 blocks ahead
    ((12, 8192), 4, 131072),      # a block of 4 rows of 32 KiB: one block ahead
    ((80, 91), 1, 46 * 364),      # rows of 364 bytes: the first whole row past 16 KiB
    ((2, 3, 4096), 4, 65536),
])
def test_prefetch_distance_whole_row_groups(shape, rows, ahead):
    from types import SimpleNamespace

    from halojit.schedules.templates import set_prefetch
    inputs = [SimpleNamespace(shape=shape, dtype=np.dtype(np.float32)),
              SimpleNamespace(shape=(shape[-1],), dtype=np.dtype(np.float32))]  # 1-D: none
    lowered = SimpleNamespace(graph=SimpleNamespace(inputs=inputs), prefetch={})
    assert set_prefetch(lowered, {"prefetch": "16"}, rows)
    assert lowered.prefetch == {0: ahead}
    lowered.prefetch = {}
    assert set_prefetch(lowered, {"prefetch": "0"}, rows) == "" and lowered.prefetch == {}


@pytest.mark.parametrize("threshold", ["0", "large"])
def test_no_prefetch_below_threshold_or_when_off(threshold, monkeypatch):
    # inputs that fit the L3 (here: below the streaming size) and prefetch=0 get none
    monkeypatch.setenv("HALOJIT_STREAM_STORES", str(MIN_BYTES) if threshold == "0" else str(1 << 30))
    x = _inputs(np.random.default_rng(8), [(96, 128)])[0]
    f = halojit.trace(_softmax, autoscheduler="RowReduce;prefetch=0" if threshold == "0" else None)
    np.testing.assert_allclose(f(x), _softmax(x), rtol=2e-6, atol=1e-7)
    (kernel,) = _kernels(f)
    assert json.loads(kernel.so_path.with_suffix(".json").read_text())["prefetched"] == []


@pytest.mark.parametrize("value,expected", [("x", "prefetch='x': expected an integer"),
                                            ("-4", "prefetch=-4: expected >= 1")])
def test_prefetch_parameter_checked(value, expected):
    # named in the error (a trace falls back to the autoschedulers on it)
    from types import SimpleNamespace

    from halojit.schedules.templates import set_prefetch
    lowered = SimpleNamespace(graph=SimpleNamespace(inputs=[]), prefetch={})
    with pytest.raises(HalojitError, match=expected):
        set_prefetch(lowered, {"prefetch": value}, 4)
