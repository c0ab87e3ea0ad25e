"""Run the suite: every workload through every contender on the same inputs,
checked against numpy, timed, with the roofline and compile times; returns
one JSON-ready dict (``report`` prints and plots it)."""

from __future__ import annotations

import os
import platform
import sys
import time

import numpy as np

from . import measure
from . import workloads as W
from .peers import Peer, Skip, default_peers


def machine_info() -> dict:
    info = {"platform": platform.platform(), "machine": platform.machine(),
            "cores": os.cpu_count(), "python": sys.version.split()[0], "cpu": platform.processor()}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        info["loadavg"] = list(os.getloadavg())
    except OSError:
        pass
    info["halojit_commit"] = _git_commit()
    return info


def _git_commit() -> str | None:
    """The checkout's commit (with "+dirty" for uncommitted changes), when halojit
    runs from one; None from an installed wheel."""
    import subprocess
    from pathlib import Path

    import halojit
    root = Path(halojit.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--",
                                "halojit", "csrc"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return (head + ("+dirty" if dirty else "")) or None
    except (OSError, subprocess.SubprocessError):
        return None


def run_workload(w: W.Workload, peers: list[Peer], repeat: int, with_out: bool) -> dict:
    """One workload: each contender prepared, first call timed and checked against
    numpy, then all timed together in rounds (``measure.time_interleaved``)."""
    args = w.inputs()
    want = np.asarray(w.fn(*args))
    row = {"workload": w.name, "title": w.title, "kind": w.kind,
           "shapes": [list(a.shape) for a in args],
           "bytes": int(sum(a.nbytes for a in args) + want.nbytes), "peers": {}}
    if w.kind == W.MATMUL:
        row["flops"] = W.mlp_flops(args)
    ready = {}
    for p in peers:
        entry = row["peers"][p.name] = {}
        fn = _first_call(entry, lambda: p.prepare(w, args), p.to_numpy, want, f"{w.name}/{p.name}")
        if fn is not None:
            ready[p.name] = fn
        if p.name == "halojit" and fn is not None and with_out and w.kind == W.MEMORY:
            traced, out = p.traced, np.empty(want.shape, want.dtype)

            def run_out():
                traced(*args, out=out)
                return out
            fn = _first_call(row["peers"].setdefault("halojit_out", {}), lambda: run_out,
                             np.asarray, want, f"{w.name}/halojit out=")
            if fn is not None:
                ready["halojit_out"] = fn
    # a large matmul wakes numpy's BLAS threads, which then spin: let them sleep
    blas = w.kind == W.MATMUL and row["flops"] > 1e8
    try:
        for name, stats in measure.time_interleaved(ready, repeat,
                                                    settle_s=0.3 if blas else 5e-4).items():
            row["peers"][name].update(stats)
    except Exception as e:  # a contender that breaks while timed: the row says so
        row["error"] = f"timing failed: {type(e).__name__}: {str(e)[:300]}"
    hj = row["peers"].get("halojit", {})
    if "min_s" in hj:
        traced = next(p for p in peers if p.name == "halojit").traced
        # the fixed cost of a call above its kernels: the best single call's
        # wall time minus the kernels' best run times from the runtime's own
        # per-kernel timers, both taken one call at a time after a warm-up
        # (a batch's average, hj["min_s"], overlaps one call's tail with the
        # next and came out below the kernels' single-run times: 0.0-0.3 us
        # "negative overhead")
        fn = ready["halojit"]
        measure.warm_up(fn)
        calls = max(repeat, min(2000, int(0.05 / max(hj["min_s"], 1e-7))))
        hj["call_min_s"] = measure.single_call_min(fn, calls)
        prof = traced.profile(*args, repeat=max(11, min(calls, 200)))
        hj["kernels"] = len(prof)
        hj["kernel_s"] = sum(k["run_seconds"] for k in prof)
        hj["overhead_s"] = hj["call_min_s"] - hj["kernel_s"]
    return row


def _first_call(entry: dict, prepare, to_numpy, want, what: str):
    """Prepare and call once (timed: JIT compiles happen here), check against
    numpy; the callable, or None with the reason recorded in ``entry``."""
    try:
        t0 = time.perf_counter()
        fn = prepare()
        got = fn()
        entry["first_call_s"] = time.perf_counter() - t0
        entry["max_rel_err"] = measure.check(to_numpy(got), want, what)
        return fn
    except Skip as e:
        entry["skipped"] = str(e)
    except measure.WrongResult as e:
        entry["error"] = f"wrong result: {e}"
    except Exception as e:  # a peer that breaks must not end the run
        entry["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    return None


def run(sizes=("large", "small"), only=None, peers=None, repeat: int = 11,
        roofline_elems: int | None = None, compile_times: bool = True,
        with_out: bool = True, log=print) -> dict:
    """Run the suite and return its results (see ``report`` for the layout)."""
    import halojit
    peers = default_peers() if peers is None else list(peers)
    result = {"machine": machine_info(), "halojit": halojit.__version__,
              "numpy": np.__version__, "repeat": repeat, "peers": {}, "sizes": {}}
    usable = []
    for p in peers:
        note = p.available()
        result["peers"][p.name] = ({"available": True, "version": p.version(), "label": p.label}
                                   if note is None else {"available": False, "note": note,
                                                         "label": p.label})
        if note is None:
            usable.append(p)
        else:
            log(f"# {p.label}: skipped: {note}")
    names = {p.name for p in usable}
    if roofline_elems is None:  # 64 MiB arrays, beyond any private cache; tiny for tests
        roofline_elems = 2 ** 16 if set(sizes) <= {"tiny"} else 16 * 2 ** 20
    def measure_roofline():
        log(f"# roofline over {roofline_elems * 4 / 2 ** 20:.0f} MiB arrays ...")
        return measure.roofline(roofline_elems, repeat, use_numba="numba" in names,
                                use_halojit="halojit" in names)
    roofs = []
    for size in sizes:
        roofs.append(measure_roofline())
        rows = []
        for w in W.workloads(size):
            if only and w.name not in only:
                continue
            log(f"# {size}: {w.name} ...")
            rows.append(run_workload(w, usable, repeat, with_out))
            rows[-1]["loadavg_1m"] = os.getloadavg()[0]
        entry = {"rows": rows}
        if size == "large" and any(r["kind"] == W.MATMUL for r in rows):
            m, k, n = W.SIZES[size]["mlp"]
            entry["sgemm_gflops"] = measure.sgemm_gflops(m, k, n, repeat)
        if compile_times and "halojit" in names:
            log(f"# {size}: compile times in new processes ...")
            entry["compile"] = measure.compile_times(size, [r["workload"] for r in rows])
        result["sizes"][size] = entry
    # measured before each size and at the end, the best kept: a neighbour's burst
    # on a shared machine must not lower the roof (and so flatter every fraction)
    result["roofline"] = measure.best_roofline(*roofs, measure_roofline())
    try:
        result["machine"]["loadavg_after"] = list(os.getloadavg())
    except OSError:
        pass
    return result
