"""Functions, inputs and file helpers shared by the artifact tests."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

import halojit
from halojit.runtime import artifact as A

RNG = np.random.default_rng(7)
# A closure array frozen by capture_as_const: it becomes a constant of the artifact.
SCALE = RNG.standard_normal(32).astype(np.float32)


def model(x, b, k):
    """Many outputs of different kinds: kernel results, a bool mask, an
    integer, a reduction, an input passed through, a value returned twice,
    and a constant."""
    h = np.maximum(x * SCALE + b, 0)
    s = h.sum(axis=-1)
    return {"h": h, "mask": x > 0, "idx": (k * 3 - 1), "s": s, "s_again": s, "x": x,
            "w": SCALE, "tag": "static"}


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def model_args(rows=16):
    return (RNG.standard_normal((rows, 32)).astype(np.float32),
            RNG.standard_normal(32).astype(np.float32),
            RNG.integers(-100, 100, size=(rows,)).astype(np.int32))


def read_parts(path: Path) -> tuple[dict, list[bytes]]:
    """(manifest, blobs) of an artifact, read independently of the runtime."""
    data = path.read_bytes()
    assert data[:8] == A.MAGIC
    fmt, header, size, crc, _ = struct.unpack("<IIQII", data[8:32])
    manifest = json.loads(data[header:header + size])
    blobs = [data[b["offset"]:b["offset"] + b["size"]] for b in manifest["blobs"]]
    return manifest, blobs


def rewrite(src: Path, dst: Path, edit) -> Path:
    """A consistent artifact (valid checksums) with ``edit(manifest)`` applied."""
    manifest, blobs = read_parts(src)
    edit(manifest)
    return A._write(dst, manifest, blobs)


def run_python(*args, env=None, **kwargs):
    """``python *args`` in a new process that imports the same halojit as
    this one (the installed package in CI, the source tree in development)."""
    import os
    import subprocess
    import sys
    root = Path(halojit.__file__).resolve().parent.parent
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                          cwd=root, env=env, **kwargs)

