"""CUDA artifacts on any machine: dumped from a host-cuda trace, loaded,
described, and refused with DeviceError where no GPU can run them."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from artifact_helpers import run_python, softmax
from halojit.errors import DeviceError


def test_cuda_artifact_dumps_loads_and_describes_itself(tmp_path):
    f = halojit.trace(softmax, target="host-cuda-cuda_capability_80")
    x = np.random.default_rng(1).standard_normal((16, 128)).astype(np.float32)
    path = f.dump(tmp_path / "softmax.hjm", x)
    g = halojit.load(path)
    assert [lv["name"] for lv in g.levels] == ["avx512", "avx2", "sse41"]
    assert all("cuda_capability_80" in lv["target"] for lv in g.levels)
    out = run_python("-m", "halojit", "inspect", path)
    assert out.returncode == 0 and "cuda_capability_80" in out.stdout
    if halojit.cuda.is_available():
        np.testing.assert_allclose(g(x), softmax(x), rtol=1e-5, atol=1e-6)
        g.check()
    else:
        with pytest.raises(DeviceError, match="no NVIDIA driver|no CUDA device"):
            g(x)
