"""The C++ side: the C ABI driven from a separate process, and the
examples/cpp program built with CMake through `halojit --cmake-dir`,
exactly as the README's "Use from C++" section says."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from artifact_helpers import run_python

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def halojit_dir(kind: str) -> str:
    proc = run_python("-m", "halojit", f"--{kind}-dir")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_cmake_dir_holds_a_package():
    d = Path(halojit_dir("cmake"))
    assert (d / "halojitConfig.cmake").is_file() and (d / "halojitConfigVersion.cmake").is_file()
    assert (Path(halojit_dir("include")) / "halojit" / "halojit.hpp").is_file()
    lib = Path(halojit_dir("lib")) / "libhalojit.so"
    assert lib.is_file()
    needed = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout \
        if shutil.which("readelf") else ""
    assert "python" not in needed.lower() and "libHalide" not in needed


def test_c_abi_from_a_plain_process(softmax_artifact):
    lib = Path(halojit_dir("lib")) / "libhalojit.so"
    proc = run_python(HERE / "c_abi_client.py", lib, softmax_artifact)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "c abi ok" in proc.stdout


@pytest.fixture(scope="module")
def run_artifact(tmp_path_factory):
    """examples/cpp built out of tree with CMake, as a user would."""
    build = tmp_path_factory.mktemp("example-build")
    cmake = shutil.which("cmake")
    assert cmake, "cmake is needed (pip install '.[test]' brings it)"
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    configure = subprocess.run(
        [cmake, "-S", str(ROOT / "examples" / "cpp"), "-B", str(build), *gen,
         f"-Dhalojit_DIR={halojit_dir('cmake')}", "-DCMAKE_BUILD_TYPE=Release"],
        capture_output=True, text=True)
    assert configure.returncode == 0, configure.stdout + configure.stderr
    compiled = subprocess.run([cmake, "--build", str(build)], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    exe = build / "run_artifact"
    assert exe.is_file()
    return exe


def run(exe, *args, **env):
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True,
                          env=dict(os.environ, **env))


def test_example_runs_every_test_vector(run_artifact, model_artifact):
    proc = run(run_artifact, model_artifact, "--threads", 3)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "function model" in proc.stdout
    assert "input  x: float32 [16, 32]" in proc.stdout
    assert proc.stdout.count("7 output(s) match") == 2 * 3  # two vectors, three threads
    assert "all test vectors match" in proc.stdout


def test_example_at_the_lowest_level(run_artifact, softmax_artifact):
    proc = run(run_artifact, softmax_artifact, HALOJIT_ARTIFACT_LEVEL="sse41")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "level sse41" in proc.stdout


def test_example_reports_a_corrupt_artifact(run_artifact, softmax_artifact, tmp_path):
    data = bytearray(softmax_artifact.read_bytes())
    data[-100] ^= 0xFF  # inside the last blob (a test vector)
    bad = tmp_path / "bad.hjm"
    bad.write_bytes(bytes(data))
    proc = run(run_artifact, bad)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "checksum" in proc.stderr
    proc = run(run_artifact, tmp_path / "missing.hjm")
    assert proc.returncode == 2 and "cannot be opened" in proc.stderr


def test_example_outputs_equal_python(run_artifact, model_artifact, tmp_path):
    """The C++ program's outputs, byte for byte, against halojit.load in
    Python on the same inputs (same level, same kernels)."""
    import halojit
    proc = run(run_artifact, model_artifact, "--save", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    f = halojit.load(model_artifact)
    _, inputs, _, _, _ = f._art.test_vector(0)
    got = f(*inputs)
    for name, (shape, dtype) in f.specializations[0]["outputs"].items():
        cpp = np.fromfile(tmp_path / f"{name}.bin", dtype=dtype).reshape(shape)
        np.testing.assert_array_equal(cpp, got[name])
