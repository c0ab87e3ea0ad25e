"""The CUDA capability a kernel is compiled for (explicit target, then
HALOJIT_CUDA_CAPABILITY, then the device's, then 8.0), ptxas itself, and
what a machine without a GPU does: a clear DeviceError before any kernel
runs, while ``f.lower`` still compiles.
"""

from __future__ import annotations

import numpy as np
import pytest

from cuda_helpers import TARGET, assemble, check_lowered, find_ptxas, lower
import halojit
from halojit import cuda
from halojit.errors import DeviceError, HalojitError

X = np.linspace(-2, 2, 4 * 24, dtype=np.float32).reshape(4, 24)


def axpy(x):
    return 2 * x + 1


# -- capability ---------------------------------------------------------------------------
@pytest.mark.parametrize("value,sm", [("7.5", 75), ("8.0", 80), ("86", 86), ("sm_61", 61),
                                      ("9.0", 86), ("sm_90", 86)])
def test_capability_from_env(clean_env, value, sm):
    """Any spelling; capabilities above Halide's highest (8.6) clamp to it."""
    clean_env.setenv("HALOJIT_CUDA_CAPABILITY", value)
    assert cuda.target_capability() == (sm, "HALOJIT_CUDA_CAPABILITY")
    check_lowered(lower(axpy, X), f"HALOJIT_CUDA_CAPABILITY={value}", sm=sm)


@pytest.mark.parametrize("value", ["bogus", "8", "sm_8x", "100"])
def test_bad_capability_is_a_clear_error(clean_env, value):
    clean_env.setenv("HALOJIT_CUDA_CAPABILITY", value)
    with pytest.raises(HalojitError, match=r"HALOJIT_CUDA_CAPABILITY=.*expected a compute "
                                           r"capability such as 8\.0, 86 or sm_90"):
        lower(axpy, X)


def test_capability_older_than_halide_is_a_device_error(clean_env):
    clean_env.setenv("HALOJIT_CUDA_CAPABILITY", "2.0")
    with pytest.raises(DeviceError, match=r"2\.0 is older than Halide supports"):
        lower(axpy, X)


def test_explicit_target_capability_wins(clean_env):
    clean_env.setenv("HALOJIT_CUDA_CAPABILITY", "8.6")
    lo = lower(axpy, X, target="host-cuda-cuda_capability_61")
    check_lowered(lo, "cuda_capability_61", sm=61)


def test_default_capability(clean_env):
    """No variable: the device's capability (clamped to 8.6), else 8.0."""
    if cuda.is_available():
        want = cuda.halide_capability(cuda.current_device().capability)
    else:
        want = cuda.DEFAULT_CAPABILITY
        assert want == 80
    assert cuda.target_capability()[0] == want
    check_lowered(lower(axpy, X), "default capability", sm=want)


def test_capabilities_get_distinct_kernels(clean_env):
    """The kernel cache name includes the target: an sm_75 kernel is never
    reused for sm_86, in memory or on disk."""
    names = {}
    for cap in ("7.5", "8.0", "8.6"):
        clean_env.setenv("HALOJIT_CUDA_CAPABILITY", cap)
        (g,) = lower(axpy, X).groups
        names[cap] = g.kernel
    assert len(set(names.values())) == 3, names
    host = halojit.trace(axpy, target="host").lower(X).groups[0].kernel
    assert host not in names.values()


# -- ptxas ------------------------------------------------------------------------------------
def test_ptxas_checks_the_ptx():
    """The assembler the compile-only tests use catches broken PTX (a skip
    here means they checked PTX as text only)."""
    if find_ptxas() is None:
        pytest.skip("ptxas not installed (pip install nvidia-cuda-nvcc-cu12): the compile-only "
                    "tests check the PTX text only")
    (g,) = lower(axpy, X).groups
    sm = int(g.ptx.split(".target sm_", 1)[1].split()[0])
    assemble(g.ptx, sm, "axpy")
    with pytest.raises(AssertionError, match="ptxas .* rejects the PTX"):
        assemble(g.ptx.replace("ret;", "not_an_instruction;", 1), sm, "broken")


# -- no device ----------------------------------------------------------------------------------
no_device = pytest.mark.skipif(cuda.is_available(), reason="a CUDA device is present: the "
                                                           "no-device behaviour cannot be seen")


@no_device
def test_no_device_is_reported():
    assert cuda.is_available() is False
    assert cuda.devices() == []
    reason = cuda.unavailable_reason()
    assert reason and ("driver" in reason or "device" in reason), reason
    with pytest.raises(DeviceError, match="cannot run a CUDA kernel"):
        cuda.current_device()


@no_device
@pytest.mark.parametrize("name", ["axpy", "mlp"])
def test_call_without_device_raises_before_running(name):
    """A clear DeviceError naming the missing driver; inputs and out= untouched;
    the next call fails the same way and ``lower`` still compiles."""
    from halojit.bench.workloads import workloads
    if name == "axpy":
        fn, args = axpy, [X.copy()]
    else:
        w = {w.name: w for w in workloads("small")}[name]
        fn, args = w.fn, w.inputs()
    copies = [a.copy() for a in args]
    want = fn(*args)
    out = np.full_like(want, 7)
    f = halojit.trace(fn, target=TARGET)
    for _ in range(2):
        with pytest.raises(DeviceError, match=r"cannot run a CUDA kernel.*driver") as info:
            f(*args, out=out)
        assert "target='host'" in str(info.value)  # says what to do
        assert isinstance(info.value, (HalojitError, RuntimeError))
        np.testing.assert_array_equal(out, np.full_like(want, 7), err_msg="out= was written")
        for a, c in zip(args, copies):
            np.testing.assert_array_equal(a, c, strict=True, err_msg="an input was written")
    with pytest.raises(DeviceError):
        f(*args)
    check_lowered(f.lower(*args), name)


@no_device
def test_halojit_target_env_without_device(clean_env):
    """HALOJIT_TARGET=host-cuda is the same as target="host-cuda"."""
    clean_env.setenv("HALOJIT_TARGET", "host-cuda")
    f = halojit.trace(axpy)
    with pytest.raises(DeviceError, match="driver"):
        f(X)
    check_lowered(f.lower(X), "HALOJIT_TARGET=host-cuda")


def test_device_error_classes():
    assert cuda.DeviceError is DeviceError is halojit.DeviceError
    assert issubclass(DeviceError, HalojitError) and issubclass(DeviceError, RuntimeError)
