"""AOT compilation, the shared runtime, the disk cache and concurrency."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import halide as hl
import numpy as np
import pytest

from halojit import _rt
from halojit.errors import CompileError
from halojit.generators import compile as hc
from halojit.runtime import cache

from helpers import run_in_threads

SHAPE = (48, 64)  # the shape the axpb fixture was autoscheduled for


def test_host_target_features(monkeypatch):
    t = hc.host_target()
    assert t.has_feature(hl.TargetFeature.NoRuntime)
    assert t.has_feature(hl.TargetFeature.StrictFloat)
    assert not t.has_feature(hl.TargetFeature.NoAsserts)
    monkeypatch.setenv("HALOJIT_STRICT_FLOAT", "0")
    assert not hc.host_target().has_feature(hl.TargetFeature.StrictFloat)
    assert hc.host_target("host-cuda").has_feature(hl.TargetFeature.CUDA)
    assert not hc.base_target(t).has_feature(hl.TargetFeature.NoRuntime)
    with pytest.raises(CompileError, match="is not a Halide target"):
        hc.host_target("host-bogus")


def test_runtime_is_built_once(target, _runtime_cache_dir):
    so = hc.ensure_runtime(target)
    assert so.name == "libhalojit_hlrt.so" and so.is_relative_to(_runtime_cache_dir)
    mtime = so.stat().st_mtime_ns
    assert hc.ensure_runtime(target) == so and so.stat().st_mtime_ns == mtime
    # One runtime per process: whichever test loaded it first decides its path.
    assert hc.load_runtime(target).name == so.name and _rt.runtime_loaded()
    assert (so.parent / "target.txt").read_text().strip() == str(hc.base_target(target))


def test_kernel_dir_layout(target, kdir, _runtime_cache_dir):
    assert kdir == cache.kernel_dir(target)
    assert kdir.parent == _runtime_cache_dir / "kernels"
    assert kdir.name.startswith(cache.halide_version() + "-")
    assert (kdir / "target.txt").read_text().strip() == str(target)


def test_compile_outputs(axpb, kdir):
    assert (kdir / "t_axpb.so").exists()
    assert "Adams2019" in (kdir / "t_axpb.schedule.h").read_text()
    assert "t_axpb" in (kdir / "t_axpb.stmt").read_text()
    assert not [p for p in os.listdir(kdir) if p.startswith(".")]  # no temp leftovers


def test_compile_error_carries_halide_message(target, tmp_path):
    a = hl.ImageParam(hl.Float(32), 1, "a")
    b = hl.ImageParam(hl.Float(32), 1, "b")
    x = hl.Var("x")
    out = hl.Func("out")
    out[x] = a[x] + b[x]
    with pytest.raises(CompileError, match="Halide could not compile kernel 't_bad'.*b"):
        hc.compile_pipeline(hl.Pipeline(out), [a], "t_bad", target, tmp_path)  # b not in args
    with pytest.raises(ValueError, match="unknown extra_outputs"):
        hc.compile_pipeline(hl.Pipeline(out), [a, b], "t_bad", target, tmp_path, extra_outputs=("nope",))


def _compile_neg(target, out_dir):
    a = hl.ImageParam(hl.Float(32), 1, "a")
    x = hl.Var("x")
    out = hl.Func("out")
    out[x] = -a[x]
    return hc.compile_pipeline(hl.Pipeline(out), [a], "t_neg", target, out_dir, extra_outputs=())


def test_corrupt_so_is_detected_and_rebuilt(target, tmp_path):
    compiled = _compile_neg(target, tmp_path)
    so = compiled.so_path
    assert cache.is_valid_so(so, "t_neg")
    data = so.read_bytes()
    so.write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(RuntimeError):  # loading it directly raises, never crashes
        _rt.Kernel(str(so), "t_neg")
    assert not cache.is_valid_so(so, "t_neg")
    assert not so.exists()  # deleted so that it is rebuilt
    so.write_bytes(b"\x7fELF" + os.urandom(4000))  # garbage with a valid magic
    assert not cache.is_valid_so(so, "t_neg") and not so.exists()
    compiled = _compile_neg(target, tmp_path)
    assert cache.is_valid_so(compiled.so_path, "t_neg")
    kernel = hc.load_kernel(compiled.so_path, "t_neg")
    assert hc.load_kernel(compiled.so_path, "t_neg") is kernel
    a = np.arange(5, dtype=np.float32)
    out = np.empty(5, np.float32)
    _rt.Plan([kernel], [(0, [0, 1])], [None, None], 1, 1).run([a], [out])
    np.testing.assert_array_equal(out, -a)


def test_corrupt_runtime_is_rebuilt(target, tmp_path, monkeypatch):
    monkeypatch.setenv("HALOJIT_CACHE_DIR", str(tmp_path))
    so = hc.ensure_runtime(target)
    so.write_bytes(so.read_bytes()[:1000])
    assert hc.ensure_runtime(target) == so and cache.is_valid_so(so)


def test_runtime_build_is_serialised_across_processes(target, tmp_path):
    # Two processes race to build the runtime into an empty cache dir.
    code = (
        "from halojit.generators import compile as hc; "
        "print(hc.ensure_runtime(hc.host_target()))"
    )
    env = {**os.environ, "HALOJIT_CACHE_DIR": str(tmp_path)}
    procs = [
        # cwd: not the repo root, whose source tree (no _rt) would shadow the install
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True,
                         cwd=Path(hc.__file__).resolve().parents[2])
        for _ in range(2)
    ]
    paths = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs) and len(paths) == 1
    so = Path(paths.pop())
    assert cache.is_valid_so(so)
    assert [p.name for p in so.parent.iterdir() if p.name.startswith(".build")] == []


def test_atomic_write_and_lock(tmp_path):
    p = tmp_path / "sub" / "f.txt"
    cache.atomic_write(p, "hello")
    cache.atomic_write(p, b"bye")
    assert p.read_bytes() == b"bye" and os.listdir(p.parent) == ["f.txt"]
    order = []

    def worker(i):
        with cache.file_lock(tmp_path / "l.lock"):
            order.append(("in", i))
            order.append(("out", i))

    run_in_threads(worker, 4)
    assert all(order[k][1] == order[k + 1][1] for k in range(0, 8, 2))


def test_concurrent_runs_from_threads(exp_kernel, axpb):
    # Two steps with an intermediate: each concurrent call needs its own workspace.
    plan = _rt.Plan([exp_kernel, axpb], [(0, [0, 3]), (1, [3, 1, 2])], [(SHAPE, "float32")] * 4, 2, 1)
    errors = []

    def worker(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(40):
                a = rng.standard_normal(SHAPE).astype(np.float32)
                b = rng.standard_normal(SHAPE).astype(np.float32)
                out = np.empty(SHAPE, np.float32)
                plan.run([a, b], [out])
                np.testing.assert_allclose(out, np.exp(a) * 2 + b, rtol=1e-5, atol=1e-5)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    run_in_threads(worker, 4)
    assert not errors, errors[0]
