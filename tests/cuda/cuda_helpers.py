"""Helpers of the CUDA tests: the checks every group lowered for a CUDA
target passes (a GPU scheduler, PTX for the requested sm_NN, every node in a
kernel, the PTX assembles when ptxas is installed) and the GPU-only marker.

ptxas comes from the ``nvidia-cuda-nvcc-cu12`` wheel (the ``test`` extra on
Linux x86-64), else PATH; without it the PTX text is still checked.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import halojit
from halojit import cuda

TARGET = "host-cuda"

# Every GPU-only test carries this: a module-level ``pytestmark = needs_gpu``.
needs_gpu = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda.is_available(),
                       reason="needs an NVIDIA GPU and driver (halojit.cuda.is_available() is "
                              f"False: {cuda.unavailable_reason()})"),
]


def expected_sm() -> int:
    """The sm_NN a ``host-cuda`` target compiles for here (the device's,
    HALOJIT_CUDA_CAPABILITY's or the default 80)."""
    return cuda.target_capability()[0]


@functools.cache
def find_ptxas() -> str | None:
    """ptxas from the nvidia-cuda-nvcc wheel, else PATH, else None."""
    try:
        import nvidia.cuda_nvcc as pkg  # namespace package: no __file__
        for base in pkg.__path__:
            path = Path(base) / "bin" / "ptxas"
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    except ImportError:
        pass
    return shutil.which("ptxas")


@functools.cache
def ptxas_archs(ptxas: str) -> frozenset[str]:
    """The sm_NN this ptxas assembles for (CUDA 12 has no sm_30/35, CUDA 13
    nothing below sm_75), from its --help."""
    out = subprocess.run([ptxas, "--help"], capture_output=True, text=True, timeout=60).stdout
    return frozenset(re.findall(r"'(sm_\d+)'", out))


def assemble(ptx: str, sm: int, what: str) -> None:
    """ptxas -arch=sm_NN on ``ptx``; a no-op when ptxas is absent or too new
    for sm_NN (the PTX text checks still ran)."""
    ptxas = find_ptxas()
    if ptxas is None or f"sm_{sm}" not in ptxas_archs(ptxas):
        return
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        r = subprocess.run([ptxas, f"-arch=sm_{sm}", str(src), "-o", os.devnull],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{what}: ptxas -arch=sm_{sm} rejects the PTX:\n{r.stderr[-2000:]}"


def entries(ptx: str) -> int:
    """Kernel launches in a PTX module: its ``.entry`` functions."""
    return len(re.findall(r"^\.visible \.entry ", ptx, re.M)) or ptx.count(".entry ")


def check_lowered(lo, what: str = "", sm: int | None = None) -> None:
    """Every group of ``lo`` (a Lowered for a CUDA target) was scheduled by
    a GPU scheduler, has PTX for sm_NN with at least one kernel entry that
    ptxas accepts, and every non-constant node of the graph is in a group."""
    sm = expected_sm() if sm is None else sm
    assert lo.groups, f"{what}: no kernel was compiled\n{lo.graph}"
    kernels = {g.kernel for g in lo.groups}
    for g in lo.groups:
        label = f"{what}: group {g.kernel} ({', '.join(g.ops)})"
        assert g.scheduler and g.scheduler != "none", (
            f"{label}: every GPU scheduler failed, Halide's default (host-only) schedule was "
            f"used (scheduler={g.scheduler!r})")
        targets = re.findall(r"^\.target (\S+)", g.ptx, re.M)
        assert targets == [f"sm_{sm}"], f"{label}: PTX .target {targets}, want sm_{sm}"
        assert entries(g.ptx) >= 1, f"{label}: the PTX has no .entry (no kernel launch)"
        assemble(g.ptx, sm, label)
    for line in lo.graph.splitlines():
        m = re.match(r"\s*%\d+ = (\w+)\(", line)
        if m and m.group(1) != "constant":
            kernel = line.rsplit("# ", 1)[-1].strip() if "# " in line else None
            assert kernel in kernels, f"{what}: node outside every CUDA kernel: {line.strip()}"


def lower(fn, *args, target: str = TARGET, **kwargs):
    """``fn`` traced for ``target`` and lowered (compiled, not run) for ``args``."""
    return halojit.trace(fn, target=target).lower(*args, **kwargs)
