"""Timing, checking against numpy, the bandwidth roofline and compile times.

Times are seconds. A "run" is one call, or for calls under ~1 ms a batch of
calls timed together and divided, so perf_counter's resolution never shows.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TOLERANCE = 1e-3  # max |got - want| / max(|want|, 1), elementwise


class WrongResult(AssertionError):
    """A contender's result differs from numpy's."""


def check(got, want, what: str) -> float:
    """Max relative error of ``got`` against numpy's ``want``; raises WrongResult."""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        raise WrongResult(f"{what}: shape {got.shape}, numpy gives {want.shape}")
    g, w = got.astype(np.float64), want.astype(np.float64)
    if not np.array_equal(np.isfinite(g), np.isfinite(w)):
        raise WrongResult(f"{what}: non-finite values where numpy has finite ones (or back)")
    fin = np.isfinite(w)
    err = float(np.max(np.abs(g[fin] - w[fin]) / np.maximum(np.abs(w[fin]), 1.0))) if fin.any() else 0.0
    if not err <= TOLERANCE:
        raise WrongResult(f"{what}: max relative error {err:.2e} vs numpy (tolerance {TOLERANCE:g})")
    return err


def _batch(fn, min_batch_s: float) -> int:
    """Calls per run so that one run lasts at least ``min_batch_s``, from the
    best of up to three timed calls after an untimed one. halojit's second
    call of a signature registers its C fast path (100-300 us; 2 us a call
    after): sized from that call alone, the small row sum ran in batches of
    3, and the first call of each run (after the other contenders and a
    pause) costs some 10-20 us on this VM, so it read 9.3 us a call against
    2.2 us in batches of 200, same process and kernel."""
    fn()
    single = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        single = min(single, time.perf_counter() - t0)
        if single >= min_batch_s:
            break
    return 1 if single >= min_batch_s else min(10000, max(1, int(min_batch_s / max(single, 1e-7))))


def _stats(times: list[float], inner: int) -> dict:
    times = sorted(times)
    return {"median_s": times[len(times) // 2], "min_s": times[0], "runs": len(times),
            "calls_per_run": inner}


WARM_S = 0.06


def warm_up(fn, seconds: float = WARM_S) -> None:
    """Call ``fn`` for at least ``seconds`` (once at least), untimed: see
    ``time_interleaved``'s ``warm_s``."""
    t0 = time.perf_counter()
    while True:
        fn()
        if time.perf_counter() - t0 >= seconds:
            return


def single_call_min(fn, calls: int) -> float:
    """The best of ``calls`` calls, each timed alone (seconds)."""
    best = float("inf")
    for _ in range(max(1, calls)):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def time_calls(fn, repeat: int, min_batch_s: float = 1e-3) -> dict:
    """Median and min seconds per call over ``repeat`` warm runs (fn already warmed)."""
    return time_interleaved({"fn": fn}, repeat, min_batch_s)["fn"]


def time_interleaved(fns: dict, repeat: int, min_batch_s: float = 1e-3,
                     settle_s: float = 5e-4, warm_s: float = WARM_S) -> dict:
    """Like ``time_calls`` for several contenders, run in rounds (one run of each
    per round), so a neighbour's burst on a shared machine hits all of them
    alike instead of one contender's whole series. Each fn is already warmed.

    ``settle_s`` is a pause after each run so the contender's idle worker
    threads stop spinning before the next one runs: OpenBLAS's spin for
    50-200 ms after a large sgemm, which halved the cores of whatever came
    next (measured: halojit's MLP 27 -> 52 ms, its chain 9.7 -> 17.8 ms right
    after numpy's MLP; 0.5 ms is enough for numba, numexpr, OpenMP).

    ``warm_s``: before each timed run the contender is called, untimed, for at
    least this long. The VM this suite grew up on runs memory-bound work at
    half speed for the first 30-60 ms after the cores were idle or busy with
    something else (a 64 MiB row sum, per call after a 0.2 s sleep: 2.9 2.4
    2.6 2.0 1.6 1.4 1.3 ms; after 60 ms of calls: 1.2 from the first). A
    single-threaded Python spin does not end it; the contender's own calls do.
    Without the warm-up, whoever ran after numpy's single-threaded pass was
    timed in the slow state (halojit's row sum 1.74 ms in the suite against
    1.33 alone)."""
    inner = {name: _batch(fn, min_batch_s) for name, fn in fns.items()}
    times = {name: [] for name in fns}
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for round_ in range(max(1, repeat)):
            # alone, a contender stays warm from one run to the next
            warm = warm_s > 0 and (round_ == 0 or len(fns) > 1)
            for name, fn in fns.items():
                n = inner[name]
                if warm:
                    warm_up(fn, warm_s)
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                times[name].append((time.perf_counter() - t0) / n)
                if len(fns) > 1:
                    time.sleep(settle_s)
    finally:
        if gc_was:
            gc.enable()
    return {name: _stats(times[name], inner[name]) for name in fns}


# -- roofline ------------------------------------------------------------------------------
def roofline(n_elems: int, repeat: int, use_numba: bool = True, use_halojit: bool = True) -> dict:
    """Best multi-threaded copy into a preallocated array and best read-only stream.

    Copy GB/s counts bytes read + bytes written (STREAM's convention); read
    GB/s counts bytes read. Each candidate is listed; the best one is the roof.
    """
    src = np.random.default_rng(1).standard_normal(n_elems, dtype=np.float32)
    dst = np.zeros_like(src)  # touched: no page faults inside the timing
    side = 1 << (max(n_elems.bit_length() - 1, 0) // 2)
    sq = src[:side * side].reshape(side, -1)  # row sums read with unit stride per thread
    nbytes = src.nbytes
    copies, reads = {}, {}
    copies["numpy copyto (1 thread)"] = lambda: np.copyto(dst, src)
    reads["numpy sum (1 thread)"] = lambda: src.sum()
    if use_numba:
        try:
            nb_copy, nb_read = _numba_stream()
            copies["numba parallel copy"] = lambda: nb_copy(src, dst)
            reads["numba parallel row sums (fastmath)"] = lambda: nb_read(sq)
        except ImportError:
            pass
    if use_halojit:
        import halojit
        neg = halojit.trace(lambda x: -x)  # one read, one write: a copy's traffic
        total = halojit.trace(lambda x: x.sum())
        rows = halojit.trace(lambda x: x.sum(axis=1))
        copies["halojit -x with out="] = lambda: neg(src, out=dst)
        reads["halojit x.sum()"] = lambda: total(src)
        reads["halojit x.sum() 2-D"] = lambda: total(sq)
        reads["halojit x.sum(axis=1)"] = lambda: rows(sq)
    out = {"bytes": nbytes, "copy": {}, "read": {}}
    read_bytes = {name: sq.nbytes if ("2-D" in name or "row" in name) else nbytes
                  for name in reads}
    for kind, cands in (("copy", copies), ("read", reads)):
        for name, fn in cands.items():
            fn()
            t = time_calls(fn, max(repeat, 30))["min_s"]  # cheap; more runs, steadier best
            out[kind][name] = (2 * nbytes if kind == "copy" else read_bytes[name]) / t / 1e9
        best = max(out[kind], key=out[kind].get)
        out[f"{kind}_gbs"], out[f"{kind}_by"] = out[kind][best], best
    return out


def best_roofline(*runs: dict) -> dict:
    """Candidate by candidate, the best GB/s of several roofline runs."""
    out = {"bytes": runs[0]["bytes"], "copy": {}, "read": {}}
    for kind in ("copy", "read"):
        for r in runs:
            for name, v in r[kind].items():
                out[kind][name] = max(v, out[kind].get(name, 0.0))
        best = max(out[kind], key=out[kind].get)
        out[f"{kind}_gbs"], out[f"{kind}_by"] = out[kind][best], best
    out["runs"] = [{k: r[f"{k}_gbs"] for k in ("copy", "read")} for r in runs]
    return out


def _numba_stream():
    import numba as nb

    @nb.njit(parallel=True)
    def copy(src, dst):
        for i in nb.prange(src.shape[0]):
            dst[i] = src[i]

    @nb.njit(parallel=True, fastmath=True)
    def read(sq):  # one vectorized row sum per iteration: a prange reduction is not
        partial = np.empty(sq.shape[0], np.float32)  # vectorized (10.8 GB/s vs ~55 here)
        for i in nb.prange(sq.shape[0]):
            s = np.float32(0)
            for j in range(sq.shape[1]):
                s += sq[i, j]
            partial[i] = s
        return partial.sum()
    return copy, read


def sgemm_gflops(m: int, k: int, n: int, repeat: int) -> float:
    """numpy's float32 matmul (its BLAS) at (m, k) @ (k, n), GFLOP/s."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), np.float32)
    f = lambda: np.matmul(a, b, out=c)  # noqa: E731
    f()
    return 2.0 * m * k * n / time_calls(f, repeat)["min_s"] / 1e9


# -- compile times in new processes ----------------------------------------------------------
_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import halojit
import numpy as np
from halojit.bench.workloads import MEMORY, workloads
t_import = time.perf_counter() - t0
w = {w.name: w for w in workloads(sys.argv[1])}[sys.argv[2]]
args = w.inputs()
f = halojit.trace(w.fn)
# A memory-bound workload writes into an array touched beforehand: a fresh
# 64 MiB output's first-touch page faults (10-25 ms on the 2-core VMs,
# numpy's own fill pays them too) are no part of a compile or a load, and
# later calls reuse pooled memory that no longer pays them.
out = None
if w.kind == MEMORY:
    want = np.asarray(w.fn(*args))
    out = np.ones(want.shape, want.dtype)
    del want
call = (lambda: f(*args)) if out is None else (lambda: f(*args, out=out))
t0 = time.perf_counter()
r = call()
t = time.perf_counter() - t0
del r
runs = []
for _ in range(3):
    t0 = time.perf_counter()
    r = call()
    runs.append(time.perf_counter() - t0)
    del r
print(json.dumps({"first_call_s": t, "run_s": min(runs), "import_s": t_import,
                  "kernels": f.stats()["compiles"], "out": out is not None}))
"""


def _child(size: str, name: str, cache_dir: Path) -> dict:
    import halojit
    env = dict(os.environ, HALOJIT_CACHE_DIR=str(cache_dir))
    # as on a user's machine: Python's bytecode cache on (a sandbox that sets
    # PYTHONDONTWRITEBYTECODE recompiles halojit's sources in every new
    # process, ~15 ms of "warm" load that an installed package never pays)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    root = str(Path(halojit.__file__).resolve().parent.parent)  # a checkout or site-packages
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run([sys.executable, "-c", _CHILD, size, name], env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"compile-time child for {name} failed: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def compile_times(size: str, names: list[str]) -> dict:
    """Per workload, the first call in a new process less a later call: cold (no
    compiled kernels; the shared Halide runtime, built once per cache dir,
    already there) and warm (the same cache dir again, another new process).
    Memory-bound workloads write with ``out=`` into an array touched before
    (see _CHILD): what is left is the compile or the load, not page faults."""
    base = Path(tempfile.mkdtemp(prefix="halojit-bench-cache-"))
    try:
        prime = _child("tiny", "bias_relu", base / "prime")  # builds the runtime
        runtime = base / "prime" / "runtime"
        out = {"runtime_build_s": prime["first_call_s"]}
        for name in names:
            d = base / name
            if runtime.exists():
                shutil.copytree(runtime, d / "runtime")
            try:
                cold = _child(size, name, d)
                warm = _child(size, name, d)
                # the first call less a warm call: the compile (cold) or load (warm)
                # part, not the kernels' run time, which for a 64 MiB workload is
                # itself 4-50 ms
                out[name] = {"cold_s": cold["first_call_s"] - cold["run_s"],
                             "warm_s": warm["first_call_s"] - warm["run_s"],
                             "cold_first_call_s": cold["first_call_s"],
                             "warm_first_call_s": warm["first_call_s"],
                             "run_s": warm["run_s"], "kernels": cold["kernels"],
                             "import_s": warm["import_s"], "out": warm.get("out", False)}
            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                out[name] = {"error": str(e)}
        return out
    finally:
        shutil.rmtree(base, ignore_errors=True)
