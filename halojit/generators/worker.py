"""Lower, autoschedule and compile one fusion group; runs in a worker process.

A crash inside Halide (an autoscheduler's std::terminate, a segfault) kills
only the worker: the caller sees a CompileError and the user's process
lives. ``HALOJIT_COMPILE_WORKERS=0`` compiles in-process instead (faster
first call, no protection).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import os
import threading
import time
from pathlib import Path

from ..errors import CompileError


def _compile_quietly(request: dict) -> dict:
    """compile_group with Halide's stderr chatter (storage-folding warnings)
    captured into the result's "log" instead of the user's terminal."""
    import tempfile
    with tempfile.TemporaryFile(mode="w+b") as cap:
        saved = os.dup(2)
        os.dup2(cap.fileno(), 2)
        try:
            result = compile_group(request)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        cap.seek(0)
        result["log"] = cap.read().decode(errors="replace")[-4000:]
    return result


def compile_group(request: dict) -> dict:
    """request: graph, fn_name, target (string), specs (fallback chain), out_dir."""
    import halide as hl

    from ..schedules.autoschedule import autoschedule, set_estimates
    from .compile import compile_pipeline
    from .lowering import lower_group

    graph = request["graph"]
    fn_name = request["fn_name"]
    target = hl.Target(request["target"])
    out_dir = Path(request["out_dir"])
    failures = []
    t0 = time.perf_counter()
    for spec in request["specs"]:
        try:
            lowered = lower_group(graph, fn_name)
            set_estimates(lowered.params, lowered.outputs,
                          [i.shape for i in graph.inputs], [o.shape for o in graph.outputs])
            t_sched = time.perf_counter()
            results = autoschedule(lowered.pipeline, target, spec)
            sched_seconds = time.perf_counter() - t_sched
            kernel = compile_pipeline(lowered.pipeline, lowered.params, fn_name, target, out_dir,
                                      ("stmt", "schedule"), results)
        except (hl.HalideError, CompileError, RuntimeError) as e:
            failures.append(f"{spec}: {str(e).strip()}")
            continue
        info = {
            "fn_name": fn_name, "so": str(kernel.so_path),
            "stmt": str(kernel.stmt_path) if kernel.stmt_path else None,
            "schedule": str(kernel.schedule_path) if kernel.schedule_path else None,
            "spec": spec.key, "requested": request["specs"][0].key,
            "schedule_seconds": sched_seconds, "compile_seconds": time.perf_counter() - t0,
            "failures": failures,
        }
        info_path = out_dir / f"{fn_name}.json"
        tmp = info_path.with_suffix(f".json.{os.getpid()}")
        tmp.write_text(json.dumps(info))
        os.replace(tmp, info_path)
        return info
    raise CompileError(f"every schedule failed for kernel {fn_name}:\n  " + "\n  ".join(failures))


_pool: cf.ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def _workers() -> int:
    raw = os.environ.get("HALOJIT_COMPILE_WORKERS", "").strip()
    if raw:
        return max(0, int(raw))
    return max(1, min(4, os.cpu_count() or 1))


def _get_pool(n: int) -> cf.ProcessPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = cf.ProcessPoolExecutor(max_workers=n,
                                           mp_context=multiprocessing.get_context("spawn"))
        return _pool


def _reset_pool():
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None


def compile_groups(requests: list[dict]) -> list[dict]:
    """Compile every request (in parallel worker processes); results in order."""
    n = _workers()
    if n == 0 or not requests:
        return [compile_group(r) for r in requests]
    futures = [_get_pool(n).submit(_compile_quietly, r) for r in requests]
    results, crashed = [], None
    for r, fut in zip(requests, futures):
        try:
            results.append(fut.result())
        except cf.process.BrokenProcessPool:
            crashed = r["fn_name"]
            break
    if crashed is not None:
        _reset_pool()
        raise CompileError(
            f"the Halide compiler crashed while compiling kernel {crashed} (its worker process "
            "died); the kernel was not built. Try another autoscheduler, or set "
            "HALOJIT_COMPILE_WORKERS=0 to reproduce in-process.")
    return results
