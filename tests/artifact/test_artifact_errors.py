"""Every way dump can be misused and every way an artifact file can be bad
gives a clear error (never a crash), each named in its message."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from artifact_helpers import read_parts, rewrite

import halojit
from halojit.errors import ArtifactError

X = np.ones((4, 8), np.float32)
GLOBAL_W = np.ones(8, np.float32)


def test_function_returning_nothing(tmp_path):
    def nothing(x):
        x + 1  # computed, never returned
    with pytest.raises(ArtifactError, match="returns no arrays"):
        halojit.trace(nothing).dump(tmp_path / "a.hjm", X)


def test_closure_array_needs_capture_as_const(tmp_path):
    w = np.ones(8, np.float32)
    with pytest.raises(ArtifactError, match=r"'w'.*capture_as_const=True"):
        halojit.trace(lambda x: x * w).dump(tmp_path / "a.hjm", X)
    with pytest.raises(ArtifactError, match=r"'GLOBAL_W'.*capture_as_const=True"):
        halojit.trace(lambda x: x * GLOBAL_W).dump(tmp_path / "a.hjm", X)
    assert not (tmp_path / "a.hjm").exists()


def test_writing_into_an_input(tmp_path):
    def inplace(x):
        x += 1
        return x
    with pytest.raises(halojit.TraceError):
        halojit.trace(inplace).dump(tmp_path / "a.hjm", X)


def test_exclude_from_trace(tmp_path):
    def f(x):
        with halojit.exclude_from_trace():
            pass
        return x + 1
    with pytest.raises(ArtifactError, match="exclude_from_trace"):
        halojit.trace(f).dump(tmp_path / "a.hjm", X)


@pytest.mark.parametrize("kwargs, message", [
    (dict(arg_names=["a", "b"]), "arg_names has 2 names, the function has 1 arguments"),
    (dict(arg_names="x"), "arg_names must be a list"),
    (dict(output_names=["p", "q"]), "output_names has 2 names, the function has 1 outputs"),
    (dict(output_names=["p", "p"], extra_examples=()), None),
    (dict(levels=["avx9000"]), "unknown feature level 'avx9000'"),
    (dict(levels=[]), "levels is empty"),
    (dict(extra_examples=[X]), r"extra_examples\[0\] must be a tuple"),
    (dict(extra_examples=[(X, X)]), r"extra_examples\[0\] has 2 arguments"),
    (dict(extra_examples=[(X,)]), "same shapes and dtypes"),
])
def test_bad_dump_arguments(tmp_path, kwargs, message):
    f = halojit.trace(lambda x: x * 2)
    if kwargs.get("output_names") == ["p", "p"]:
        f = halojit.trace(lambda x: (x * 2, x * 3))
        message = "output_names has duplicates"
    with pytest.raises(ArtifactError, match=message):
        f.dump(tmp_path / "a.hjm", X, **kwargs)


def test_zero_size_example(tmp_path):
    with pytest.raises(ArtifactError, match="zero-size"):
        halojit.trace(lambda x: x * 2).dump(tmp_path / "a.hjm", np.ones((0, 8), np.float32))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no artifact"):
        halojit.load(tmp_path / "nope.hjm")


@pytest.mark.parametrize("content, message", [
    (b"", "not a halojit artifact"),
    (b"\x7fELF" + bytes(100), "not a halojit artifact"),
    (b"hello world, this is not an artifact at all", "not a halojit artifact"),
])
def test_foreign_file(tmp_path, content, message):
    p = tmp_path / "foreign.hjm"
    p.write_bytes(content)
    with pytest.raises(ArtifactError, match=message):
        halojit.load(p)


@pytest.mark.parametrize("keep", [12, 40, 0.5, -1])
def test_truncated_file(softmax_artifact, tmp_path, keep):
    data = softmax_artifact.read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep % len(data)
    p = tmp_path / "cut.hjm"
    p.write_bytes(data[:n])
    with pytest.raises(ArtifactError, match="truncated|not a halojit artifact"):
        halojit.load(p)


def test_corrupt_blob_and_manifest(softmax_artifact, tmp_path):
    manifest, _ = read_parts(softmax_artifact)
    data = bytearray(softmax_artifact.read_bytes())
    blob = manifest["blobs"][manifest["levels"][-1]["kernels"][0]["blob"]]
    data[blob["offset"] + blob["size"] // 2] ^= 0xFF  # inside a kernel image
    p = tmp_path / "bad.hjm"
    p.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="checksum"):
        halojit.load(p, level="sse41")
    data = bytearray(softmax_artifact.read_bytes())
    data[40] ^= 0x20  # inside the manifest
    p.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="manifest checksum"):
        halojit.load(p)


def test_newer_format(softmax_artifact, tmp_path):
    data = bytearray(softmax_artifact.read_bytes())
    data[8:12] = struct.pack("<I", 99)
    p = tmp_path / "new.hjm"
    p.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="format version 99 is newer"):
        halojit.load(p)


def test_foreign_architecture(softmax_artifact, tmp_path):
    p = rewrite(softmax_artifact, tmp_path / "arm.hjm", lambda m: m.update(arch="arm-64"))
    with pytest.raises(ArtifactError, match="built for arm-64-linux; this machine is x86-64"):
        halojit.load(p)


def test_cpu_lacks_every_level(softmax_artifact, tmp_path):
    def future_cpu(m):
        for lv in m["levels"]:
            lv["requires"].append("avx1024")
    p = rewrite(softmax_artifact, tmp_path / "future.hjm", future_cpu)
    with pytest.raises(ArtifactError, match="needs a CPU feature this machine lacks.*avx1024"):
        halojit.load(p)
    with pytest.raises(ArtifactError, match="needs .*avx1024, which this CPU lacks"):
        halojit.load(p, level="sse41")


def test_unknown_level_on_load(softmax_artifact):
    with pytest.raises(ArtifactError, match="no feature level 'avx512'; it has avx2"):
        halojit.load(softmax_artifact, level="avx512")


def test_corrupt_plan(softmax_artifact, tmp_path):
    def bad_step(m):
        m["specializations"][0]["steps"][0]["buffers"][0] = 99
    p = rewrite(softmax_artifact, tmp_path / "plan.hjm", bad_step)
    with pytest.raises(ArtifactError, match="corrupt.*buffer 99"):
        halojit.load(p)
