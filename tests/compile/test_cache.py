"""The shape-keyed cache in memory and the kernel cache on disk."""

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import halojit

pytestmark = pytest.mark.level3


def fn(x):
    return np.tanh(x) * 2 + x.sum(axis=-1, keepdims=True)


def test_shape_change_compiles_and_old_shape_does_not(tmp_path, monkeypatch):
    monkeypatch.setenv("HALOJIT_CACHE_DIR", str(tmp_path))
    f = halojit.trace(fn)
    a, b = np.ones((3, 5), np.float32), np.ones((4, 5), np.float32)
    f(a)
    assert f.stats()["compiles"] == 1
    f(b)
    assert f.stats()["compiles"] == 2
    f(a)
    f(b)
    s = f.stats()
    assert s["compiles"] == 2 and s["misses"] == 2 and s["hits"] == 2


def test_miss_reason_is_logged(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("HALOJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("HALOJIT_LOG", "1")
    f = halojit.trace(fn)
    f(np.ones((2, 3), np.float32))
    f(np.ones((2, 4), np.float32))
    err = capfd.readouterr().err
    assert "cache miss (first call)" in err
    assert "argument 0 is f32[2,4] (cached: f32[2,3])" in err
    assert "compiled in" in err


SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np, halojit
    def fn(x):
        return np.tanh(x) * 2 + x.sum(axis=-1, keepdims=True)
    f = halojit.trace(fn)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
""")
# a blur whose streamed output rows (598 floats) the Stencil template shifts to
# 16-byte boundaries: whether it does is part of the kernel's cache key
BLUR_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np, halojit
    def fn(im):
        h = (im[:, :-2] + im[:, 1:-1] + im[:, 2:]) / 3
        return (h[:-2] + h[1:-1] + h[2:]) / 3
    f = halojit.trace(fn)
    x = np.random.default_rng(0).standard_normal((24, 600)).astype(np.float32)
""")
CHECK = textwrap.dedent("""
    y = f(x)
    # what a call loads that a call from the disk cache should not need
    print("LOADED", [m for m in ("numpy.ma", "halojit.generators.lowering") if m in sys.modules])
    assert np.allclose(y, fn(x), rtol=1e-5), (y, fn(x))
    print("COMPILES", f.stats()["compiles"])
""")


SCRIPT, BLUR_SCRIPT = SCRIPT + CHECK, BLUR_SCRIPT + CHECK


def _run_script(cache: Path, loaded: list | None = None, script: str = SCRIPT,
                **env_vars) -> int:
    env = dict(os.environ, HALOJIT_CACHE_DIR=str(cache), **env_vars)
    root = Path(halojit.__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=300, cwd=root)
    assert out.returncode == 0, out.stderr
    if loaded is not None:
        loaded += ast.literal_eval(out.stdout.split("LOADED")[1].splitlines()[0])
    return int(out.stdout.split("COMPILES")[1].split()[0])


def test_second_process_reuses_disk_cache(tmp_path):
    assert _run_script(tmp_path) == 1
    loaded = []
    assert _run_script(tmp_path, loaded) == 0
    # a warm first call loads kernels and runs them: numpy.ma's import was
    # ~20 ms of it (an isinstance check), Halide's lowering code ~5 ms
    assert loaded == []


def test_second_process_loads_a_shifted_row_stencil_without_lowering(tmp_path):
    # streamed from 4 KiB up: the output's row shift is decided before the
    # disk lookup, and deciding it imported the lowering (16 ms of a 4096x4096
    # blur's warm first call on the 2-core Intel VM)
    run = dict(script=BLUR_SCRIPT, HALOJIT_STREAM_STORES="4096")
    assert _run_script(tmp_path, **run) == 1
    loaded = []
    assert _run_script(tmp_path, loaded, **run) == 0
    assert loaded == []


def test_corrupt_cache_entry_is_rebuilt(tmp_path):
    assert _run_script(tmp_path) == 1
    (so,) = tmp_path.glob("kernels/*/hj_*.so")
    broken = so.with_suffix(".tmp")
    broken.write_bytes(so.read_bytes()[:100])  # truncated, as after a crash mid-write
    os.replace(broken, so)  # a new inode: never scribble over a mapped .so
    assert _run_script(tmp_path) == 1  # detected, rebuilt, and the result is right
    assert so.stat().st_size > 1000
    assert _run_script(tmp_path) == 0


def test_cache_clear_cli(tmp_path):
    env = dict(os.environ, HALOJIT_CACHE_DIR=str(tmp_path))
    (tmp_path / "kernels" / "x").mkdir(parents=True)
    (tmp_path / "tuning.db").write_text("keep")
    root = Path(halojit.__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-m", "halojit", "cache", "clear"], env=env,
                       capture_output=True, text=True, cwd=root)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "kernels").exists()
    assert (tmp_path / "tuning.db").exists()


def test_two_processes_compiling_the_same_kernel_at_once(tmp_path):
    env = dict(os.environ, HALOJIT_CACHE_DIR=str(tmp_path))
    root = Path(halojit.__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, cwd=root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err  # each checked its result against numpy
    (so,) = tmp_path.glob("kernels/*/hj_*.so")
    from halojit.runtime.cache import is_valid_so
    assert is_valid_so(so, remove=False)
    assert not [p for p in so.parent.iterdir() if p.name.startswith(".")]  # no temp leftovers
    assert _run_script(tmp_path) == 0


def test_halide_version_matches_the_installed_wheel():
    """halide_version reads the dist-info name (importlib.metadata is slow
    to import); it must agree with the metadata."""
    from importlib import metadata

    from halojit.runtime.cache import halide_version
    assert halide_version() == metadata.version("halide")
