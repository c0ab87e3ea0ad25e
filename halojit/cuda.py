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

from .errors import DeviceError, HalojitError

__all__ = ["Device", "DeviceError", "current_device", "devices", "is_available",
           "target_capability", "unavailable_reason"]

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
