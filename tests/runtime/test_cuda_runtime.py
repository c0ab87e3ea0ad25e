"""The CUDA runtime half without a GPU (CI): clear DeviceErrors before any
kernel runs, DLPack arguments that are refused without being consumed, and
the CUDA capability rules (tests/artifact has CUDA artifacts, tests/cuda the
compile-only and device tests)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import halojit
from halojit import _rt
from halojit.errors import DeviceError

NO_GPU = pytest.mark.skipif(halojit.cuda.is_available(),
                            reason="checks the errors of a machine without a CUDA device")


class FakeCudaArray:
    """A DLPack producer that says it lives on CUDA device 0."""

    shape = (4, 8)
    consumed = False

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        FakeCudaArray.consumed = True
        raise AssertionError("must not be consumed on a machine without a GPU")


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@NO_GPU
def test_cuda_call_without_a_device_is_a_clear_error_and_leaves_inputs_alone():
    f = halojit.trace(softmax, target="host-cuda")
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    before = x.copy()
    lowered = f.lower(x)  # compiling needs no device
    assert lowered.groups and ".entry" in lowered.groups[0].ptx
    with pytest.raises(DeviceError, match="no NVIDIA driver|no CUDA device"):
        f(x)
    np.testing.assert_array_equal(x, before)
    assert not halojit.cuda.is_available() and halojit.cuda.unavailable_reason()


def test_device_arrays_need_a_cuda_target():
    f = halojit.trace(lambda x: x * 2)
    with pytest.raises(DeviceError, match="target='host-cuda'"):
        f(FakeCudaArray())
    assert not FakeCudaArray.consumed


@NO_GPU
def test_device_arrays_without_a_device_are_refused_unconsumed():
    f = halojit.trace(lambda x: x * 2, target="host-cuda")
    with pytest.raises(DeviceError, match="no NVIDIA driver|no CUDA device"):
        f(FakeCudaArray())
    assert not FakeCudaArray.consumed
    with pytest.raises(DeviceError):
        halojit.cuda.to_device(np.ones(3))


def test_host_dlpack_tensors_are_refused_and_released():
    x = np.arange(6.0).reshape(2, 3)
    refs = sys.getrefcount(x)
    with pytest.raises(ValueError, match="device type 1"):
        _rt.from_dlpack(x)
    assert sys.getrefcount(x) == refs  # the producer's deleter ran
    with pytest.raises(TypeError, match="__dlpack__"):
        _rt.from_dlpack(3)
    assert not halojit.cuda.is_device_array(x)
    assert halojit.cuda.is_device_array(FakeCudaArray())


def test_cuda_capability_is_part_of_the_kernel_target(monkeypatch):
    from halojit.generators.compile import cuda_capability, host_target
    monkeypatch.setenv("HALOJIT_CUDA_CAPABILITY", "7.5")
    assert cuda_capability(host_target("host-cuda")) == 75
    monkeypatch.setenv("HALOJIT_CUDA_CAPABILITY", "sm_90")  # newer than Halide knows: its best
    assert cuda_capability(host_target("host-cuda")) == 86
    assert cuda_capability(host_target("host-cuda-cuda_capability_61")) == 61
    assert cuda_capability(host_target("host")) is None
    monkeypatch.setenv("HALOJIT_CUDA_CAPABILITY", "eighty")
    with pytest.raises(halojit.HalojitError, match="HALOJIT_CUDA_CAPABILITY"):
        host_target("host-cuda")
