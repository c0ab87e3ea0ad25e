"""The two jobs of a tuning run that may crash or hang, each in a process of
its own: ``compile_candidate`` (submitted to any concurrent.futures
Executor; returns the kernel's bytes, so it can run on another machine) and
``Timer`` (a clean local process that checks candidates against the numpy
reference and times them, one at a time).

Protocol with the timer process: length-prefixed pickles over pipes, as in
``generators/worker.py``; reads have deadlines, and a process that misses
one is killed.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

# statuses of a candidate
OK, WRONG, CRASH, TIMEOUT, ERROR, SKIPPED = "ok", "wrong", "crash", "timeout", "error", "skipped"


# -- compiling (executor side) -------------------------------------------------------
def compile_candidate(request: dict) -> dict:
    """Compile one candidate schedule in a worker subprocess, with a timeout.

    request: graph (the group's standalone Graph), fn_name, target (string),
    spec (ScheduleSpec), timeout_s, and optionally specs (a fallback chain
    that replaces spec; the default's, as a compile would use). Returns a plain dict (never raises for a
    bad candidate): status ok with ``so`` (the .so bytes), ``schedule`` and
    ``stmt`` texts, ``used`` (the spec that compiled) and ``compile_s``; or status error / crash / timeout with
    ``message``. Self-contained, so a Dask or Ray worker can run it.
    """
    from ..errors import CompileError
    from ..generators.worker import WorkerDied, _acquire, _release
    t0 = time.perf_counter()
    timeout = max(1.0, float(request.get("timeout_s", 60.0)))
    with tempfile.TemporaryDirectory(prefix="halojit-cand-") as tmp:
        req = {"graph": request["graph"], "fn_name": request["fn_name"],
               "target": request["target"], "specs": request.get("specs") or [request["spec"]],
               "out_dir": tmp}
        w = _acquire()  # a pooled compile worker; a killed or crashed one is dropped
        fired = threading.Event()

        def kill():
            fired.set()
            w.close()
        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            info = w.call(req)
        except WorkerDied as e:
            status = TIMEOUT if fired.is_set() else CRASH
            msg = (f"compile took longer than {timeout:.0f}s" if status == TIMEOUT
                   else f"the compiler process died ({e})")
            return {"status": status, "message": msg, "compile_s": time.perf_counter() - t0}
        except CompileError as e:
            timer.cancel()
            _release(w)
            return {"status": ERROR, "message": str(e).strip()[-2000:],
                    "compile_s": time.perf_counter() - t0}
        finally:
            timer.cancel()
        if fired.is_set():  # killed just as it answered
            return {"status": TIMEOUT, "message": f"compile took longer than {timeout:.0f}s",
                    "compile_s": time.perf_counter() - t0}
        _release(w)
        return {"status": OK, "so": Path(info["so"]).read_bytes(),
                "schedule": _text(info.get("schedule")), "stmt": _text(info.get("stmt")),
                "used": info["spec"], "compile_s": time.perf_counter() - t0}


def _text(path) -> str:
    try:
        return Path(path).read_text() if path else ""
    except OSError:
        return ""


# -- checking and timing (timer process side) ------------------------------------------
def tolerance(dtype) -> tuple[float, float]:
    """(rtol, atol relative to the output's largest magnitude): schedules
    reorder float sums, nothing else may differ."""
    dt = np.dtype(dtype)
    if dt.kind != "f":
        return 0.0, 0.0
    return {2: (1e-2, 1e-3), 4: (1e-3, 1e-5)}.get(dt.itemsize, (1e-7, 1e-10))


def mismatch(got: np.ndarray, want: np.ndarray) -> str | None:
    """Why ``got`` is not ``want`` within the schedule tolerance, or None."""
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if want.dtype.kind != "f":
        bad = got != want
        if bad.any():
            return f"{int(bad.sum())} of {want.size} values differ"
        return None
    rtol, atol = tolerance(want.dtype)
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_w = np.isnan(w)
    if (np.isnan(g) != nan_w).any():
        return "NaN in different places"
    fin = np.isfinite(w)
    if (g[~fin & ~nan_w] != w[~fin & ~nan_w]).any():
        return "infinities differ"
    if not fin.any():
        return None
    scale = float(np.max(np.abs(w[fin]))) if fin.any() else 1.0
    err = np.abs(g[fin] - w[fin])
    limit = atol * max(scale, 1.0) + rtol * np.abs(w[fin])
    if (err > limit).any():
        k = int(np.argmax(err - limit))
        return f"max error {float(err[k]):.3g} at a value {float(w[fin][k]):.3g}"
    return None


class _Bench:
    """The timer process's state: one group's inputs and reference outputs."""

    def __init__(self):
        self.inputs = self.expected = None
        self.kernels = {}

    def setup(self, req):
        from .. import _rt
        if not _rt.runtime_loaded():
            _rt.load_runtime(req["runtime"])
            if req.get("threads"):
                _rt.set_num_threads(req["threads"])
        # Fresh, writable numpy-owned copies, as a user's arrays are (unpickled
        # arrays are views of the pickle's buffer).
        self.inputs = [np.array(a, copy=True) for a in req["inputs"]]
        self.expected = [np.array(a, copy=True) for a in req["expected"]]
        self.outs = [np.empty_like(e) for e in self.expected]
        return {}

    def time(self, req):
        from .. import _rt
        key = (req["so"], req["fn_name"])
        plan = self.kernels.get(key)
        if plan is None:
            kernel = _rt.Kernel(req["so"], req["fn_name"])
            n_in, n_out = len(self.inputs), len(self.outs)
            plan = _rt.Plan([kernel], [(0, list(range(n_in + n_out)))], [None] * (n_in + n_out),
                            n_in, n_out)
            self.kernels[key] = plan
        for o in self.outs:
            o.fill(0)
        plan.run(self.inputs, self.outs)
        if req.get("check", True):
            for k, (got, want) in enumerate(zip(self.outs, self.expected)):
                why = mismatch(got, want)
                if why:
                    return {"status": WRONG, "message": f"output {k}: {why}"}
        # at least min_runs, more while under max_s; the best run is the one least
        # disturbed by other load (a shared VM), as Halide's benchmark() reports
        times, spent = [], 0.0
        while len(times) < req.get("max_runs", 25):
            t0 = time.perf_counter()
            plan.run(self.inputs, self.outs)
            dt = time.perf_counter() - t0
            times.append(dt)
            spent += dt
            if len(times) >= req.get("min_runs", 5) and spent >= req.get("max_s", 0.3):
                break
        times.sort()
        return {"status": OK, "seconds": times[0], "median": times[len(times) // 2],
                "runs": len(times)}


def main():
    """Serve setup / time requests on stdin until it closes."""
    from ..generators.worker import _read_message
    out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    bench = _Bench()
    stdin = sys.stdin.buffer
    while True:
        try:
            req = _read_message(stdin)
        except EOFError:
            return
        try:
            reply = ("ok", getattr(bench, req["op"])(req))
        except Exception as e:  # noqa: BLE001 - reported to the driver
            reply = ("error", f"{type(e).__name__}: {e}")
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(struct.pack("<Q", len(data)) + data)
        out.flush()


# -- the driver's handle on a timer process --------------------------------------------
class TimerDied(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Timer:
    """A clean local process that times kernels one at a time. A call that
    crashes or runs past its timeout raises TimerDied (status crash or
    timeout) and leaves the timer ready to ``restart``."""

    def __init__(self):
        self.proc = None
        self.setup_request = None

    def start(self, setup: dict, timeout: float):
        self.close()
        from ..generators.worker import spawn_module
        self.proc = spawn_module("halojit.schedules.tune_worker")
        self.setup_request = setup
        self.call(setup, timeout)

    def restart(self, timeout: float):
        self.start(self.setup_request, timeout)

    def call(self, request: dict, timeout: float) -> dict:
        data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        deadline = time.monotonic() + timeout
        try:
            self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
            self.proc.stdin.flush()
            header = self._read(8, deadline)
            (n,) = struct.unpack("<Q", header)
            status, value = pickle.loads(self._read(n, deadline))
        except TimeoutError:
            self.close()
            raise TimerDied(TIMEOUT, f"no result within {timeout:.1f}s") from None
        except (OSError, EOFError, struct.error, pickle.UnpicklingError) as e:
            code = self.proc.poll()
            self.close()
            raise TimerDied(CRASH, f"the timing process died (exit {code}): {e}") from None
        if status != "ok":
            raise TimerDied(ERROR, value)
        return value

    def _read(self, n: int, deadline: float) -> bytes:
        fd = self.proc.stdout.fileno()
        buf = bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, min(n - len(buf), 1 << 20))
            if not chunk:
                raise EOFError("timing process closed its pipe")
            buf += chunk
        return bytes(buf)

    def close(self):
        if self.proc is None:
            return
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except Exception:
            pass
        for s in (self.proc.stdin, self.proc.stdout):
            try:
                s.close()
            except Exception:
                pass
        self.proc = None


if __name__ == "__main__":
    main()
