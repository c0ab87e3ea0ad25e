"""One frozen Config built from the HALOJIT_* environment variables.

Read at call time (``get_config()``) so tests and users can change the
environment between calls; parsing is cheap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import HalojitError

BACKENDS = ("halide", "numpy")

# name -> (default, meaning); the README's environment table mirrors this.
ENV_VARS = {
    "HALOJIT_BACKEND": ("halide", "default backend: HALIDE or NUMPY (case-insensitive)"),
    "HALOJIT_TARGET": ("host", "default Halide target: host, host-cuda or any target string"),
    "HALOJIT_CACHE_DIR": ("~/.cache/halojit", "where compiled kernels and the tuning database live"),
    "HALOJIT_LOG": ("0", "1 logs every compile and cache miss (with its reason) to stderr"),
    "HALOJIT_NUM_THREADS": ("0", "threads of the one kernel thread pool; 0 = one per core"),
    "HALOJIT_STRICT_FLOAT": ("1", "0 lets Halide use fast-math (faster, not bit-faithful to numpy; "
                                  "inf and NaN give undefined values)"),
    "HALOJIT_CUDA_CAPABILITY": ("", "CUDA capability host-cuda compiles for, e.g. 8.0 or 86 "
                                    "(default: the device's, else 8.0; at most 8.6, Halide 21's newest)"),
    "HALOJIT_FAST_MATH": ("0", "1: float32 transcendentals as float32 polynomials and no strict_float "
                               "(faster; a few ulp, no NaN/inf/huge-argument guarantees)"),
    "HALOJIT_STREAM_STORES": ("auto", "outputs of at least this many bytes are written with non-temporal "
                                      "(streaming) stores on x86-64: auto = 3/4 of the L3 cache, 0 = never"),
    "HALOJIT_COMPILE_WORKERS": ("cores, at most 4", "compile worker processes; 0 compiles in-process "
                                                    "(read by generators/worker.py)"),
    "HALOJIT_COMPILE_TIMEOUT": ("600", "seconds one scheduler may take to compile a kernel in a worker "
                                       "before the next one of the fallback chain runs; 0 = no limit"),
    "HALOJIT_ARTIFACT_LEVEL": ("", "feature level loaded from artifacts: avx512, avx2 or sse41 "
                                   "(default: the best the CPU runs; read by halojit.load and the C++ API)"),
}


@dataclass(frozen=True)
class Config:
    backend: str
    target: str
    cache_dir: Path
    log: bool
    num_threads: int
    strict_float: bool
    fast_math: bool = False
    stream_min_bytes: int = 0  # 0: no streaming stores (see HALOJIT_STREAM_STORES)
    compile_timeout: int = 600  # seconds per scheduler in a compile worker; 0: none


def _parse_backend(raw: str) -> str:
    value = raw.strip().lower()
    if value not in BACKENDS:
        raise HalojitError(
            f"HALOJIT_BACKEND={raw!r} is not a backend; expected one of "
            f"{', '.join(b.upper() for b in BACKENDS)} (case-insensitive)."
        )
    return value


def _parse_int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise HalojitError(f"{name}={raw!r}: expected a non-negative integer.") from None
    if value < 0:
        raise HalojitError(f"{name}={raw!r}: expected a non-negative integer.")
    return value


def l3_cache_bytes() -> int:
    """The L3 (last-level) cache size, 32 MiB when the OS does not say.

    CPython's os.sysconf knows SC_LEVEL3_CACHE_SIZE only where it was built
    with it; the pyenv 3.11 on the project's VMs lacks it, so both take the
    32 MiB default. On the 2-core Intel VM (105 MiB L3 in sysfs) reading the
    true size was tried and dropped: its 64 MiB bench inputs then fell below
    the prefetch size too, and layernorm took 13.2 ms against 9.0 (blur 13.7
    against 11.1, softmax 14.8 against 13.4; `halojit bench`, one run each)."""
    try:
        size = os.sysconf("SC_LEVEL3_CACHE_SIZE")
    except (AttributeError, ValueError, OSError):
        size = 0
    return size if size > 0 else 32 << 20


def _parse_stream(raw: str) -> int:
    value = raw.strip().lower()
    if value in ("", "auto"):
        return l3_cache_bytes() * 3 // 4
    if value in ("off", "no", "false"):
        return 0
    if not value.isdigit():
        raise HalojitError(f"HALOJIT_STREAM_STORES={raw!r}: expected auto, 0 (never) or a "
                           f"size in bytes (e.g. 33554432).")
    return int(value)


def get_config() -> Config:
    env = os.environ
    cache_dir = env.get("HALOJIT_CACHE_DIR") or "~/.cache/halojit"
    return Config(
        backend=_parse_backend(env.get("HALOJIT_BACKEND", "halide")),
        target=env.get("HALOJIT_TARGET", "host").strip() or "host",
        cache_dir=Path(cache_dir).expanduser(),
        log=env.get("HALOJIT_LOG", "0").strip() not in ("", "0", "false", "no"),
        num_threads=_parse_int("HALOJIT_NUM_THREADS", env.get("HALOJIT_NUM_THREADS", "0")),
        strict_float=env.get("HALOJIT_STRICT_FLOAT", "1").strip() not in ("0", "false", "no"),
        fast_math=env.get("HALOJIT_FAST_MATH", "0").strip() not in ("", "0", "false", "no"),
        stream_min_bytes=_parse_stream(env.get("HALOJIT_STREAM_STORES", "auto")),
        compile_timeout=_parse_int("HALOJIT_COMPILE_TIMEOUT",
                                   env.get("HALOJIT_COMPILE_TIMEOUT", "600").strip() or "600"),
    )
