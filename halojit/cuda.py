"""CUDA devices: probing the driver, picking the compute capability a
kernel is compiled for, and the clear errors a machine without a GPU gives.

The probe talks to the driver API (``libcuda.so.1``) through ctypes, so
halojit needs no CUDA toolkit: compiling for ``host-cuda`` works anywhere,
running needs the NVIDIA driver and a device.
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass

import numpy as np

from .errors import DeviceError, HalojitError

__all__ = ["Device", "DeviceError", "call_on_device", "current_device", "devices", "from_dlpack",
           "is_available", "is_device_array", "target_capability", "to_device", "unavailable_reason"]

# Halide 21's CUDA capability features, lowest first (cuda_capability_89/90
# do not exist there: an sm_90 device runs sm_86 PTX, JIT-compiled by the
# driver on first use).
HALIDE_CAPABILITIES = (30, 32, 35, 50, 61, 70, 75, 80, 86)
# What host-cuda compiles for when no device is present and
# HALOJIT_CUDA_CAPABILITY is unset: Ampere, which every data-centre GPU
# since the A100 runs.
DEFAULT_CAPABILITY = 80

_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


@dataclass(frozen=True)
class Device:
    index: int
    name: str
    capability: int  # major * 10 + minor, e.g. 90 for an H100
    multiprocessors: int
    memory_bytes: int


_lock = threading.Lock()
_probe: tuple[list[Device], str] | None = None


def _probe_driver() -> tuple[list[Device], str]:
    """(devices, why there are none). Never raises."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return [], ("no NVIDIA driver: libcuda.so.1 is not on this machine (install the NVIDIA "
                    "driver, or use a machine with a GPU)")
    rc = lib.cuInit(0)
    if rc != 0:
        return [], f"the NVIDIA driver failed to initialise (cuInit returned CUDA error {rc})"
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return [], "the NVIDIA driver reports no CUDA device (check CUDA_VISIBLE_DEVICES)"
    devices = []
    for i in range(count.value):
        dev = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(dev), i) != 0:
            continue

        def attr(code):
            v = ctypes.c_int(0)
            lib.cuDeviceGetAttribute(ctypes.byref(v), code, dev)
            return v.value

        name = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(name, 256, dev)
        mem = ctypes.c_size_t(0)
        total = getattr(lib, "cuDeviceTotalMem_v2", None) or lib.cuDeviceTotalMem
        total(ctypes.byref(mem), dev)
        cap = 10 * attr(_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) + \
            attr(_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        devices.append(Device(i, name.value.decode(errors="replace"), cap,
                              attr(_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), mem.value))
    return devices, "" if devices else "no CUDA device answered cuDeviceGet"


def devices() -> list[Device]:
    """The CUDA devices this process sees (probed once); [] without a driver."""
    global _probe
    with _lock:
        if _probe is None:
            _probe = _probe_driver()
        return list(_probe[0])


def is_available() -> bool:
    """Whether a CUDA kernel can run here (a driver and at least one device)."""
    return bool(devices())


def unavailable_reason() -> str:
    """Why ``is_available()`` is False ("" when it is True)."""
    devices()
    return _probe[1] if _probe else ""


def current_device() -> Device:
    """The device kernels run on: ``HL_GPU_DEVICE`` (Halide's variable), else 0.
    Raises DeviceError when there is none."""
    found = devices()
    if not found:
        raise DeviceError(f"cannot run a CUDA kernel: {unavailable_reason()}. Trace with "
                          "target='host' to run on the CPU.")
    raw = os.environ.get("HL_GPU_DEVICE", "").strip()
    index = int(raw) if raw.lstrip("-").isdigit() and int(raw) >= 0 else 0
    if index >= len(found):
        raise DeviceError(f"HL_GPU_DEVICE={raw} names CUDA device {index}, but this machine has "
                          f"{len(found)} ({', '.join(d.name for d in found)}).")
    return found[index]


def halide_capability(cap: int) -> int:
    """The highest Halide capability feature that a device of capability
    ``cap`` runs (its PTX is forward-compatible)."""
    usable = [c for c in HALIDE_CAPABILITIES if c <= cap]
    if not usable:
        raise DeviceError(f"CUDA capability {cap // 10}.{cap % 10} is older than Halide supports "
                          f"(at least {HALIDE_CAPABILITIES[0] // 10}.{HALIDE_CAPABILITIES[0] % 10}).")
    return usable[-1]


def _parse_capability(raw: str) -> int:
    text = raw.strip().lower().removeprefix("sm_").replace(".", "")
    if not text.isdigit() or len(text) != 2:
        raise HalojitError(f"HALOJIT_CUDA_CAPABILITY={raw!r}: expected a compute capability such "
                           "as 8.0, 86 or sm_90.")
    return int(text)


def target_capability() -> tuple[int, str]:
    """(Halide capability, where it came from) for a ``host-cuda`` target
    that names none: HALOJIT_CUDA_CAPABILITY, else the current device, else
    DEFAULT_CAPABILITY."""
    raw = os.environ.get("HALOJIT_CUDA_CAPABILITY", "").strip()
    if raw:
        return halide_capability(_parse_capability(raw)), "HALOJIT_CUDA_CAPABILITY"
    if is_available():
        dev = current_device()
        return halide_capability(dev.capability), f"device {dev.index} ({dev.name})"
    return DEFAULT_CAPABILITY, "default (no CUDA device)"


def parallelism() -> int:
    """Anderson2021's ``parallelism``: the streaming multiprocessors to fill
    (the current device's, else an A100's 108)."""
    return current_device().multiprocessors if is_available() else 108


# -- device arrays ---------------------------------------------------------------------
_CUDA_DEVICE_TYPES = (2, 13)  # DLPack kDLCUDA, kDLCUDAManaged


def is_device_array(a) -> bool:
    """Whether ``a`` is a CUDA array from a DLPack producer (CuPy, PyTorch,
    JAX) or a halojit DeviceArray. numpy arrays are host arrays."""
    if isinstance(a, np.ndarray) or not hasattr(type(a), "__dlpack_device__"):
        return False
    try:
        return a.__dlpack_device__()[0] in _CUDA_DEVICE_TYPES
    except Exception:  # a producer that cannot say: not ours to take
        return False


_runtime_ready = False


def _ensure_runtime() -> None:
    """Load the host-cuda Halide runtime (built once into the cache dir) and
    check that a device can run it; after the first success, only the
    device check (host_target reads the environment: 50-100 us a call)."""
    global _runtime_ready
    if not _runtime_ready:
        from .generators.compile import host_target, load_runtime
        load_runtime(host_target("host-cuda"))
        _runtime_ready = True
    current_device()


def to_device(array) -> "DeviceArray":
    """A device copy of a numpy array (or anything np.asarray takes)."""
    from . import _rt
    _ensure_runtime()
    return _rt.to_device(np.ascontiguousarray(array))


def from_dlpack(obj) -> "DeviceArray":
    """Borrow a CUDA array from any DLPack producer, zero copy; a DeviceArray
    is returned as is."""
    from . import _rt
    if isinstance(obj, _rt.DeviceArray):
        return obj
    _ensure_runtime()
    return _rt.from_dlpack(obj)


def _placeholder(shape, dtype) -> np.ndarray:
    """A host stand-in for tracing: the right shape and dtype, one element of memory."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape),
                                           writeable=False)


def call_on_device(tf, args, kwargs, out=None):
    """``tf(*args)`` where some arguments live on a CUDA device: they are read
    in place, and every result is a DeviceArray on that device (a DLPack
    producer: ``torch.from_dlpack(r)``, ``cupy.from_dlpack(r)``)."""
    from . import _rt
    from .api import convert_arg
    from .errors import UnsupportedError
    from .generators.build import plan_dtype
    from .graph.ir import AbstractArray
    if "cuda" not in tf.target:
        raise DeviceError(f"{tf.__name__} was traced for target {tf.target!r} but got CUDA device "
                          "arrays; trace it with target='host-cuda', or pass numpy arrays.")
    if out is not None:
        raise UnsupportedError(f"{tf.__name__}: out= is not supported with CUDA device arrays; "
                               "results come back as new device arrays.")
    if not tf.symbolic:
        raise UnsupportedError(f"{tf.__name__}: symbolic=False traces on real values; with CUDA "
                               "device arrays trace with symbolic=True.")
    values, avals, runs = [], [], []
    for i, a in enumerate(args):
        if is_device_array(a):
            d = from_dlpack(a)
            aval = AbstractArray(tuple(d.shape), np.dtype(d.dtype))
            values.append(_placeholder(aval.shape, aval.dtype))
            avals.append(aval)
            runs.append(d)
        else:
            v, aval = convert_arg(i, f"arg{i}", a)
            values.append(v)
            avals.append(aval)
            runs.append(v)
    spec = tf._get_spec(values, avals, kwargs)
    if spec is None:
        raise UnsupportedError(f"{tf.__name__} uses exclude_from_trace: it cannot run on device arrays.")
    ex = spec.executor
    inputs = runs + [b.read() for b in spec.bindings]
    plan = getattr(ex, "plan", None)
    if plan is None:  # zero-size arrays: the numpy backend on host copies
        host = [np.asarray(x) for x in inputs]
        return spec.treedef.unflatten([to_device(r) for r in ex(host)])
    outs = [_rt.DeviceArray(list(o.shape), "bool" if o.dtype == np.bool_ else plan_dtype(o.dtype))
            for o in ex.out_nodes]
    plan.run(inputs + list(ex.consts), outs)
    on_device = (lambda v: v if isinstance(v, _rt.DeviceArray) else to_device(v))
    return spec.treedef.unflatten(ex.assemble(inputs, outs, on_device))


def __getattr__(name):
    if name == "DeviceArray":  # the C++ class, without importing _rt at import time
        from . import _rt
        return _rt.DeviceArray
    raise AttributeError(f"module 'halojit.cuda' has no attribute {name!r}")
