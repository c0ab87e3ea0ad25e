"""Fixtures for the runtime tests: a session cache dir, the host target and
its loaded runtime, and a few hand-written Halide kernels compiled once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

hl = pytest.importorskip("halide")


@pytest.fixture(scope="session", autouse=True)
def _runtime_cache_dir(tmp_path_factory):
    # Harmless next to a top-level conftest doing the same: both are temp
    # dirs, and the previous value is restored at the end of the session.
    old = os.environ.get("HALOJIT_CACHE_DIR")
    os.environ["HALOJIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("halojit-cache"))
    yield Path(os.environ["HALOJIT_CACHE_DIR"])
    if old is None:
        os.environ.pop("HALOJIT_CACHE_DIR", None)
    else:
        os.environ["HALOJIT_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def target(_runtime_cache_dir):
    from halojit.generators.compile import host_target, load_runtime

    t = host_target()
    load_runtime(t)
    return t


@pytest.fixture(scope="session")
def kdir(target):
    from halojit.runtime.cache import kernel_dir

    return kernel_dir(target)


def build(target, out_dir, fn_name, outputs, args, autoschedule_estimates=None):
    """Compile Funcs ``outputs`` over ``args`` into a loaded _rt.Kernel.
    With ``autoschedule_estimates`` (one list of (min, extent) per output),
    schedule with Adams2019; otherwise Halide's default (all inline/root)."""
    from halojit.generators.compile import compile_pipeline, load_kernel

    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    pipeline = hl.Pipeline(list(outputs))
    results = None
    if autoschedule_estimates is not None:
        plugin = Path(hl.__file__).parent / "lib64" / "libautoschedule_adams2019.so"
        hl.load_plugin(str(plugin))
        for func, est in zip(outputs, autoschedule_estimates):
            func.set_estimates([hl.Range(lo, n) for lo, n in est])
        results = pipeline.apply_autoscheduler(target, hl.AutoschedulerParams("Adams2019", {"parallelism": "16"}))
    compiled = compile_pipeline(pipeline, args, fn_name, target, out_dir, autoscheduler_results=results)
    return compiled, load_kernel(compiled.so_path, fn_name)


x, y = hl.Var("x"), hl.Var("y")

# numpy shape of the autoscheduled kernel: Halide (x=64, y=48).
AXPB_SHAPE = (48, 64)


@pytest.fixture(scope="session")
def axpb(target, kdir):
    """out(x, y) = a(x, y) * 2 + b(x, y), float32, Adams2019 at 48x64."""
    a = hl.ImageParam(hl.Float(32), 2, "a")
    b = hl.ImageParam(hl.Float(32), 2, "b")
    out = hl.Func("out")
    out[x, y] = a[x, y] * 2 + b[x, y]
    _, kernel = build(target, kdir, "t_axpb", out, [a, b], [[(0, 64), (0, 48)]])
    return kernel


@pytest.fixture(scope="session")
def exp_kernel(target, kdir):
    """out = exp(a), float32 2D (default schedule)."""
    a = hl.ImageParam(hl.Float(32), 2, "a")
    out = hl.Func("out")
    out[x, y] = hl.exp(a[x, y])
    return build(target, kdir, "t_exp", out, [a])[1]


@pytest.fixture(scope="session")
def shift_kernel(target, kdir):
    """out(x) = a(x + 1): needs len(a) >= len(out) + 1 (Halide asserts it)."""
    a = hl.ImageParam(hl.Float(32), 1, "a")
    out = hl.Func("out")
    out[x] = a[x + 1]
    return build(target, kdir, "t_shift", out, [a])[1]


@pytest.fixture(scope="session")
def scalar_kernel(target, kdir):
    """0-d: out() = a() * 3 + 1, float64."""
    a = hl.ImageParam(hl.Float(64), 0, "a")
    out = hl.Func("out")
    out[()] = a[()] * 3 + 1
    return build(target, kdir, "t_scalar", out, [a])[1]


@pytest.fixture(scope="session")
def mixed_kernel(target, kdir):
    """mask uint8 (numpy bool as uint8), h float16, i int64 (all 1-D) ->
    o1 float16 = where(mask, h * 2, h) computed in f32; o2 int64 = where(mask, i * 3, i - 1)."""
    m = hl.ImageParam(hl.UInt(8), 1, "mask")
    h = hl.ImageParam(hl.Float(16), 1, "h")
    i = hl.ImageParam(hl.Int(64), 1, "i")
    o1, o2 = hl.Func("o1"), hl.Func("o2")
    hf = hl.cast(hl.Float(32), h[x])
    o1[x] = hl.cast(hl.Float(16), hl.select(m[x] != 0, hf * 2, hf))
    o2[x] = hl.select(m[x] != 0, i[x] * 3, i[x] - 1)
    return build(target, kdir, "t_mixed", [o1, o2], [m, h, i])[1]


@pytest.fixture(scope="session")
def not_kernel(target, kdir):
    """Halide Bool (uint1) buffers: out = !a."""
    a = hl.ImageParam(hl.Bool(), 1, "a")
    out = hl.Func("out")
    out[x] = hl.logical_not(a[x])
    return build(target, kdir, "t_not", out, [a])[1]
