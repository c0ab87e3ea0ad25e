"""Lower, autoschedule and compile one fusion group; runs in a worker process.

A crash inside Halide (an autoscheduler's std::terminate, a segfault) kills
only the worker: the caller sees a CompileError and the user's process
lives. ``HALOJIT_COMPILE_WORKERS=0`` compiles in-process instead (faster
first call, no protection).
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import json
import os
import pickle
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..errors import CompileError, HalojitError


def _flush_c_stdio():
    try:
        import ctypes
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


def _compile_quietly(request: dict, progress=None) -> dict:
    """compile_group with Halide's stderr chatter (storage-folding warnings)
    captured into the result's "log" instead of the user's terminal."""
    import tempfile
    with tempfile.TemporaryFile(mode="w+b") as cap:
        saved = os.dup(2)
        os.dup2(cap.fileno(), 2)
        try:
            result = compile_group(request, progress)
        finally:
            _flush_c_stdio()
            os.dup2(saved, 2)
            os.close(saved)
        cap.seek(0)
        result["log"] = cap.read().decode(errors="replace")[-4000:]
    return result


def compile_group(request: dict, progress=None) -> dict:
    """request: graph, fn_name, target (string), specs (fallback chain),
    out_dir, and optionally stream (indices of outputs to write with
    streaming stores; by default streaming.stream_outputs decides) and
    prefetch (indices of inputs a template may prefetch; by default
    streaming.prefetch_inputs decides). ``progress(k, failures)`` is
    called before the k-th spec is tried, with the failures so far."""
    import halide as hl

    from ..schedules.autoschedule import apply_schedule, set_estimates
    from .compile import compile_pipeline
    from .lowering import lower_group
    from .streaming import prefetch_inputs, prepare_output, stream_outputs

    graph = request["graph"]
    fn_name = request["fn_name"]
    target = hl.Target(request["target"])
    out_dir = Path(request["out_dir"])
    failures = []
    # outputs written with streaming stores: the caller's choice (it named the kernel after it)
    stream = request.get("stream")
    if stream is None:  # as kernel_name decides it, by the first spec
        stream = stream_outputs(graph, target, request["specs"][0] if request["specs"] else None)
    prefetchable = request.get("prefetch")
    if prefetchable is None:
        prefetchable = prefetch_inputs(graph, target)
    # a CUDA kernel also keeps its PTX (<fn>.device_code) for inspection and tests
    extras = ("stmt", "schedule") + (("device_code",) if target.has_gpu_feature() else ())
    t0 = time.perf_counter()
    for k, spec in enumerate(request["specs"]):
        if progress is not None:
            progress(k, failures)
        try:
            lowered = lower_group(graph, fn_name, spec, target, request.get("fast_math", False),
                                  stream)
            streamed = [prepare_output(lowered.outputs[k], graph.outputs[k].shape)
                        for k in stream]
            # the shifted rows' stores are aligned (lowering.Lowerer.shift_rows)
            realign = streamed[:1] if lowered.shifted is not None else []
            set_estimates(lowered.params, lowered.outputs,
                          [i.shape for i in graph.inputs], [o.shape for o in graph.outputs])
            t_sched = time.perf_counter()
            results, text = apply_schedule(lowered, target, spec)
            sched_seconds = time.perf_counter() - t_sched
            # software prefetches the template asked for (templates.py), on large inputs
            prefetch = {lowered.params[k].name(): ahead
                        for k, ahead in lowered.prefetch.items() if k in prefetchable}
            kernel = compile_pipeline(lowered.pipeline, lowered.params, fn_name,
                                      lowered.target or target, out_dir, extras, results,
                                      streamed, prefetch, realign)
            if text is not None and kernel.schedule_path:
                kernel.schedule_path.write_text(f"// {spec}\n{text}\n")
        except (hl.HalideError, CompileError, RuntimeError, HalojitError) as e:
            failures.append(f"{spec}: {str(e).strip()}")
            continue
        info = {
            "fn_name": fn_name, "so": str(kernel.so_path),
            "stmt": str(kernel.stmt_path) if kernel.stmt_path else None,
            "schedule": str(kernel.schedule_path) if kernel.schedule_path else None,
            "spec": spec.key, "requested": request["specs"][0].key,
            "streamed": list(kernel.streamed),
            "prefetched": list(kernel.prefetched),
            "schedule_seconds": sched_seconds, "compile_seconds": time.perf_counter() - t0,
            "failures": failures,
        }
        info_path = out_dir / f"{fn_name}.json"
        tmp = info_path.with_suffix(f".json.{os.getpid()}")
        tmp.write_text(json.dumps(info))
        os.replace(tmp, info_path)
        return info
    raise CompileError(f"every schedule failed for kernel {fn_name}:\n  " + "\n  ".join(failures))


# -- the worker pool ----------------------------------------------------------------
# Workers are plain `python -m halojit.generators.worker` children speaking
# length-prefixed pickles over pipes: unlike multiprocessing's spawn, they
# never re-import the user's __main__ (scripts need no `if __name__` guard).

class WorkerDied(Exception):
    """The worker process died (a crash in Halide, or killed at the compile
    timeout) while trying spec ``index`` of the request, after the earlier
    ones failed with ``failures``."""

    def __init__(self, message: str, index: int = 0, failures=(), timed_out: bool = False):
        super().__init__(message)
        self.index, self.failures, self.timed_out = index, list(failures), timed_out


def spawn_module(module: str) -> subprocess.Popen:
    """``python -m module`` with pipes on stdin/stdout, importing the very
    halojit this process runs: ``python -m`` puts the cwd first on sys.path,
    so the child starts in the directory holding this halojit (not a source
    tree that happens to be the cwd)."""
    import halojit
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(halojit.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env, cwd=root)


class _Worker:
    def __init__(self):
        self.proc = spawn_module("halojit.generators.worker")

    def call(self, request: dict, timeout: float = 0) -> dict:
        """The worker's result for ``request``. It reports each spec of
        the fallback chain as it starts it; one that runs past ``timeout``
        seconds (0: no limit) gets the worker killed."""
        data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        index, failures, timer = 0, [], None
        expired = threading.Event()

        def kill():
            expired.set()
            self.close()
        try:
            self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
            self.proc.stdin.flush()
            while True:
                if timeout:
                    timer = threading.Timer(timeout, kill)
                    timer.daemon = True
                    timer.start()
                status, value = _read_message(self.proc.stdout)
                if timer is not None:
                    timer.cancel()
                if status != "spec":
                    break
                index, failures = value
        except (OSError, EOFError, struct.error, pickle.UnpicklingError) as e:
            if timer is not None:
                timer.cancel()
            self.close()
            raise WorkerDied(str(e), index, failures, expired.is_set()) from None
        if status == "ok":
            return value
        raise CompileError(value)

    def close(self):
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except Exception:
            pass


def _read_message(stream):
    header = stream.read(8)
    if len(header) < 8:
        raise EOFError("worker closed its pipe")
    (n,) = struct.unpack("<Q", header)
    payload = stream.read(n)
    if len(payload) < n:
        raise EOFError("worker closed its pipe")
    return pickle.loads(payload)


_idle: list[_Worker] = []
_pool_lock = threading.Lock()


def _acquire() -> _Worker:
    with _pool_lock:
        if _idle:
            return _idle.pop()
    return _Worker()


def _release(w: _Worker):
    if w.proc.poll() is not None:  # killed at the timeout just as it answered: not reusable
        return
    with _pool_lock:
        _idle.append(w)


@atexit.register
def _shutdown():
    with _pool_lock:
        workers = list(_idle)
        _idle.clear()
    for w in workers:
        try:
            w.proc.stdin.close()
            w.proc.wait(timeout=2)
        except Exception:
            w.close()


def _workers() -> int:
    raw = os.environ.get("HALOJIT_COMPILE_WORKERS", "").strip()
    if raw:
        return max(0, int(raw))
    return max(1, min(4, os.cpu_count() or 1))


def _run_one(request: dict) -> dict:
    """Compile ``request`` in a worker process. A scheduler whose compile
    kills the worker (a Halide crash: SIGSEGV, SIGFPE) or runs past
    HALOJIT_COMPILE_TIMEOUT seconds (the worker is killed) is recorded as a
    failure and the rest of the fallback chain runs in a new worker, as
    after any other failure."""
    from ..config import get_config
    timeout = get_config().compile_timeout
    specs, failed = list(request["specs"]), []
    while True:
        w = _acquire()
        try:
            result = w.call(dict(request, specs=specs), timeout)
        except WorkerDied as e:
            why = (f"took longer than {timeout} s (HALOJIT_COMPILE_TIMEOUT); its worker was killed"
                   if e.timed_out else "the Halide compiler crashed (its worker process died)")
            failed += e.failures + [f"{specs[e.index]}: {why}"]
            specs = specs[e.index + 1:]
            if specs:
                continue
            raise CompileError(
                f"every schedule failed for kernel {request['fn_name']}, the last one because "
                f"{why}; the kernel was not built:\n  " + "\n  ".join(failed) + "\nTry another "
                "autoscheduler, or set HALOJIT_COMPILE_WORKERS=0 to reproduce in-process.") from None
        except BaseException:
            _release(w)
            raise
        _release(w)
        if failed:
            result = dict(result, failures=failed + list(result["failures"]),
                          requested=request["specs"][0].key)
        return result


def compile_groups(requests: list[dict]) -> list[dict]:
    """Compile every request (in parallel worker processes); results in order."""
    n = _workers()
    if n == 0 or not requests:
        return [compile_group(r) for r in requests]
    if len(requests) == 1:
        return [_run_one(requests[0])]
    with cf.ThreadPoolExecutor(max_workers=min(n, len(requests))) as ex:
        return list(ex.map(_run_one, requests))


def main():
    """Serve requests on stdin/stdout until stdin closes."""
    out = os.fdopen(os.dup(1), "wb")
    # Halide's warnings go through a buffered stdout flushed at exit; they
    # must neither corrupt the protocol nor reach the user's terminal.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    stdin = sys.stdin.buffer
    while True:
        try:
            request = _read_message(stdin)
        except EOFError:
            return
        def progress(k, failures):  # the caller times each spec from here
            data = pickle.dumps(("spec", (k, list(failures))), protocol=pickle.HIGHEST_PROTOCOL)
            out.write(struct.pack("<Q", len(data)) + data)
            out.flush()
        try:
            reply = ("ok", _compile_quietly(request, progress))
        except CompileError as e:
            reply = ("error", str(e))
        except Exception as e:  # noqa: BLE001 - reported to the caller, who raises
            reply = ("error", f"{type(e).__name__}: {e}")
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(struct.pack("<Q", len(data)) + data)
        out.flush()


if __name__ == "__main__":
    main()
