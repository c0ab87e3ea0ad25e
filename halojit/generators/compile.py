"""AOT compilation: Halide Pipeline -> kernel .so (``no_runtime``) plus one
shared Halide runtime .so per base target, and loading both into ``_rt``.

Measured on the 2-core dev VM (HALIDE_NOTES.md §a): ``compile_to`` of an
object 60-120 ms, linking a kernel .so about 30 ms, building the standalone
runtime about 1.3 s once per (Halide version, target).
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import halide as hl

from halojit import _rt
from halojit.config import get_config
from halojit.cuda import HALIDE_CAPABILITIES, target_capability
from halojit.errors import CompileError
from halojit.runtime.cache import file_lock, is_valid_so, runtime_dir

__all__ = [
    "CompiledKernel",
    "base_target",
    "compile_pipeline",
    "ensure_runtime",
    "find_cxx",
    "host_target",
    "load_kernel",
    "load_runtime",
]

RUNTIME_SO = "libhalojit_hlrt.so"

# OutputFileType name -> file suffix after the kernel name.
OUTPUT_SUFFIXES = {
    "stmt": ".stmt",
    "stmt_html": ".stmt.html",
    "conceptual_stmt": ".conceptual.stmt",
    "schedule": ".schedule.h",
    "c_header": ".h",
    "assembly": ".s",
    "llvm_assembly": ".ll",
    "bitcode": ".bc",
    "function_info_header": ".function_info.h",
    "featurization": ".featurization",
    "registration": ".registration.cpp",
    "compiler_log": ".compiler_log",
    "static_library": ".a",
    "c_source": ".halide_generated.cpp",
    "device_code": ".device_code",
}

# Features that change kernels only; the shared runtime is built without them.
_KERNEL_ONLY_FEATURES = (
    hl.TargetFeature.NoRuntime,
    hl.TargetFeature.StrictFloat,
    hl.TargetFeature.NoAsserts,
)


@dataclass(frozen=True)
class CompiledKernel:
    so_path: Path
    fn_name: str
    stmt_path: Path | None
    schedule_path: Path | None
    seconds: float  # compile_to + link, wall time
    extra_paths: dict[str, Path] | None = None  # every extra output by OutputFileType name
    streamed: tuple[str, ...] = ()  # output buffers written with streaming stores
    prefetched: tuple[str, ...] = ()  # input buffers given software prefetches


def host_target(target_str: str = "host") -> hl.Target:
    """The kernel target for ``target_str`` ("host", "host-cuda", any Halide
    target string): adds ``no_runtime`` (kernels share one runtime), a CUDA
    capability to a CUDA target that names none (with_cuda_capability), and
    ``strict_float`` unless HALOJIT_STRICT_FLOAT=0 or HALOJIT_FAST_MATH=1.
    Asserts stay on."""
    target = _parsed_target(target_str.strip() or "host")
    if target.has_feature(hl.TargetFeature.CUDA):
        target = with_cuda_capability(target)
    cfg = get_config()
    if cfg.strict_float and not cfg.fast_math:
        target = target.with_feature(hl.TargetFeature.StrictFloat)
    return target


@functools.lru_cache(maxsize=64)
def _parsed_target(text: str) -> hl.Target:
    """``text`` parsed once per process: Halide validates "host-cuda" by
    probing for a CUDA driver, 11-17 ms a call (every DLPack argument of a
    call on device arrays asked for it)."""
    if not hl.Target.validate_target_string(text):
        raise CompileError(
            f"{text!r} is not a Halide target; expected 'host', 'host-cuda' or a string like "
            f"'x86-64-linux-avx2' (arch-bits-os-features; see Halide's Target docs)."
        )
    target = hl.Target(text).with_feature(hl.TargetFeature.NoRuntime)
    # Halide 21 / LLVM miscompile with avx512_sapphirerapids (AVX512-FP16):
    # float32(f16 value) < c, vectorized and and-ed with a broadcast bool, comes
    # out inverted (a float16 softmax-style mask (x > 0).any(-1) & (x < 1) was
    # wrong in every lane for rows of 16-33). Float16 math is done in float32
    # here anyway; without the feature the same kernels are right.
    target = target.without_feature(hl.TargetFeature.AVX512_SapphireRapids)
    if "cuda_capability" not in text:
        # "host-cuda" on a machine with a GPU comes back naming the device's
        # capability; halojit's rule (HALOJIT_CUDA_CAPABILITY first, see
        # with_cuda_capability) decides instead
        for cap in HALIDE_CAPABILITIES:
            target = target.without_feature(getattr(hl.TargetFeature, f"CUDACapability{cap}"))
    return target


def native_lanes(target: hl.Target | None, default: int) -> int:
    """float32 lanes of one native vector of a CPU ``target`` (16 on
    AVX-512, 8 on AVX2, 4 on SSE/NEON; at most 16), ``default`` for a GPU
    target or none: the unit that reduction partials and the templates'
    default vector widths scale with."""
    if target is None or target.has_gpu_feature():
        return default
    return max(4, min(16, target.natural_vector_size(hl.Float(32))))


def cuda_capability(target: hl.Target) -> int | None:
    """The CUDA capability ``target`` names (80 for cuda_capability_80), or None."""
    found = [c for c in HALIDE_CAPABILITIES
             if target.has_feature(getattr(hl.TargetFeature, f"CUDACapability{c}"))]
    return max(found) if found else None


def with_cuda_capability(target: hl.Target) -> hl.Target:
    """A CUDA target that names its capability: kept when it names one, else
    the device's (or HALOJIT_CUDA_CAPABILITY, or 8.0; see halojit.cuda)."""
    if cuda_capability(target) is not None:
        return target
    cap, _ = target_capability()
    return target.with_feature(getattr(hl.TargetFeature, f"CUDACapability{cap}"))


def is_cuda(target: hl.Target) -> bool:
    return target.has_feature(hl.TargetFeature.CUDA)


def base_target(target: hl.Target) -> hl.Target:
    """``target`` without the kernel-only features: what the shared runtime is built for."""
    for feature in _KERNEL_ONLY_FEATURES:
        target = target.without_feature(feature)
    return target


def find_cxx() -> list[str]:
    """The C++ compiler driver used to link shared objects: $CXX, else c++, g++ or clang++."""
    env = os.environ.get("CXX", "").strip()
    if env:
        cmd = shlex.split(env)
        if shutil.which(cmd[0]):
            return cmd
        raise CompileError(f"CXX={env!r} is not an executable; set CXX to a C++ compiler (g++ or clang++).")
    for name in ("c++", "g++", "clang++"):
        found = shutil.which(name)
        if found:
            return [found]
    raise CompileError(
        "no C++ compiler found (looked for $CXX, c++, g++, clang++); one is needed to link kernels: "
        "install g++ (apt-get install g++) or set CXX."
    )


def _link(objects: Sequence[Path], out: Path, libs: Iterable[str] = ()) -> None:
    cmd = [*find_cxx(), "-shared", "-o", str(out), *map(str, objects), *libs]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"linking {out.name} failed: {shlex.join(cmd)}\n{proc.stderr.strip()}")


# ---------------------------------------------------------------- the shared runtime


def ensure_runtime(target: hl.Target) -> Path:
    """Build (once per Halide version and base target) the standalone Halide
    runtime as a shared object in the cache dir, and return its path.
    Concurrent processes serialise on a lock file; the .so appears by rename."""
    base = base_target(target)
    out_dir = runtime_dir(base)
    so = out_dir / RUNTIME_SO
    if is_valid_so(so):
        return so
    with file_lock(out_dir / ".lock"):
        if is_valid_so(so):  # another process built it while we waited
            return so
        with tempfile.TemporaryDirectory(dir=out_dir, prefix=".build.") as tmp:
            obj = Path(tmp) / "hlrt.o"
            tmp_so = Path(tmp) / RUNTIME_SO
            try:
                hl.compile_standalone_runtime(str(obj), base)
            except hl.HalideError as e:
                raise CompileError(f"Halide could not build its runtime for {base}: {e}") from e
            _link([obj], tmp_so, ["-ldl", "-lpthread"])
            os.replace(tmp_so, so)
    return so


_runtime_lock = threading.Lock()
_loaded_runtimes: dict[str, Path] = {}


def load_runtime(target: hl.Target) -> Path:
    """Ensure and load (RTLD_GLOBAL) the shared runtime for ``target``, once
    per process; applies HALOJIT_NUM_THREADS. A runtime .so that fails to
    load is rebuilt once."""
    key = str(base_target(target))
    with _runtime_lock:
        if key in _loaded_runtimes:
            return _loaded_runtimes[key]
        so = ensure_runtime(target)
        try:
            _rt.load_runtime(str(so))
        except RuntimeError:
            so.unlink(missing_ok=True)  # corrupt cache entry: rebuild once
            so = ensure_runtime(target)
            _rt.load_runtime(str(so))
        threads = get_config().num_threads
        if threads > 0:
            _rt.set_num_threads(threads)
        _loaded_runtimes[key] = so
        return so


# ---------------------------------------------------------------- kernels


def compile_pipeline(
    pipeline: hl.Pipeline,
    args: Sequence,
    fn_name: str,
    target: hl.Target,
    out_dir: Path,
    extra_outputs: Sequence[str] = ("stmt", "schedule"),
    autoscheduler_results: hl.AutoSchedulerResults | None = None,
    streamed: Sequence[str] = (),
    prefetch: dict[str, int] | None = None,
    realign: Sequence[str] = (),
) -> CompiledKernel:
    """Compile ``pipeline`` AOT into ``out_dir/<fn_name>.so`` (linked without
    libHalide; ``target`` should carry ``no_runtime``, see host_target).

    ``args`` are the input arguments in order (``hl.Argument`` or
    ``hl.ImageParam``); the outputs follow them in the kernel's argv.
    ``extra_outputs`` names OutputFileTypes written beside the .so as
    ``<fn_name><suffix>`` (see OUTPUT_SUFFIXES). Every file appears by an
    atomic rename, the .so last.

    Pass what ``pipeline.apply_autoscheduler`` returned as
    ``autoscheduler_results``: Halide 21 writes the ``schedule`` and
    ``featurization`` outputs only from results attached to the Module
    (``Pipeline.compile_to`` alone writes "No autoscheduler has been run").

    ``streamed`` names output buffers to write with non-temporal stores:
    the kernel then goes through LLVM bitcode and llvmlite (see streaming.py),
    as it does for ``prefetch`` (input buffer name -> bytes ahead to prefetch,
    streaming.add_prefetch). ``realign``: streamed buffers whose vector
    stores all start at 16-byte boundaries (shifted rows, see
    streaming.row_shift), marked so.
    """
    unknown = [name for name in extra_outputs if name not in OUTPUT_SUFFIXES]
    if unknown:
        raise ValueError(f"unknown extra_outputs {unknown}; expected some of {sorted(OUTPUT_SUFFIXES)}")
    if not fn_name.isidentifier():
        raise ValueError(f"fn_name {fn_name!r} must be a C identifier: it becomes the kernel's symbol")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=f".{fn_name}.") as tmp_name:
        tmp = Path(tmp_name)
        obj = tmp / f"{fn_name}.o"
        via_llvmlite = bool(streamed or prefetch)
        files = {hl.OutputFileType.bitcode if via_llvmlite else hl.OutputFileType.object:
                 obj.with_suffix(".bc") if via_llvmlite else obj}
        for name in extra_outputs:
            files[getattr(hl.OutputFileType, name)] = tmp / f"{fn_name}{OUTPUT_SUFFIXES[name]}"
        asm = files.pop(hl.OutputFileType.assembly, None) if via_llvmlite else None  # llvmlite's, below
        try:
            module = pipeline.compile_to_module(list(args), fn_name, target)
            if autoscheduler_results is not None:
                module.set_auto_scheduler_results(autoscheduler_results)
            module.compile({k: str(v) for k, v in files.items()})
        except hl.HalideError as e:
            raise CompileError(f"Halide could not compile kernel {fn_name!r} for {target}: {e}") from e
        done, prefetched = (), ()
        if via_llvmlite:
            from .streaming import streamed_object
            try:
                done, prefetched = map(tuple, streamed_object(obj.with_suffix(".bc"), streamed,
                                                              obj, asm, prefetch, realign))
            except RuntimeError as e:  # llvmlite could not read or build it: plain stores
                if get_config().log:
                    print(f"[halojit] kernel {fn_name}: no streaming stores or prefetches ({e})",
                          file=sys.stderr)
                plain = {hl.OutputFileType.object: str(obj)}
                if asm is not None:
                    plain[hl.OutputFileType.assembly] = str(asm)
                module.compile(plain)
        tmp_so = tmp / f"{fn_name}.so"
        _link([obj], tmp_so)
        extra_paths = {}
        for name in extra_outputs:
            src = tmp / f"{fn_name}{OUTPUT_SUFFIXES[name]}"
            if src.exists():
                dst = out_dir / src.name
                os.replace(src, dst)
                extra_paths[name] = dst
        so_path = out_dir / f"{fn_name}.so"
        os.replace(tmp_so, so_path)
    return CompiledKernel(
        so_path=so_path,
        fn_name=fn_name,
        stmt_path=extra_paths.get("stmt"),
        schedule_path=extra_paths.get("schedule"),
        seconds=time.perf_counter() - start,
        extra_paths=extra_paths,
        streamed=done,
        prefetched=prefetched,
    )


_kernel_lock = threading.Lock()
_kernels: dict[tuple[str, str], _rt.Kernel] = {}


def load_kernel(so_path: Path | str, fn_name: str) -> _rt.Kernel:
    """Load a kernel .so (cached per process by path and name). The matching
    runtime must be loaded first (load_runtime)."""
    key = (os.path.abspath(so_path), fn_name)
    with _kernel_lock:
        kernel = _kernels.get(key)
        if kernel is None:
            kernel = _rt.Kernel(key[0], fn_name)
            _kernels[key] = kernel
        return kernel


def forget_kernel(so_path: Path | str, fn_name: str) -> None:
    """Drop a kernel from the in-process cache (e.g. before rebuilding its .so)."""
    with _kernel_lock:
        _kernels.pop((os.path.abspath(so_path), fn_name), None)
