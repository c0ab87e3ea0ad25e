"""Tune the benchmark workloads (bench/run.py) and compare tuned with default
kernels end to end; prints one row per fusion group. Not a test (slow):

    HALOJIT_CACHE_DIR=/tmp/hj-tune-bench python tests/tune/tune_workloads.py \
        [--budget 60] [--only softmax ...] [--size large|small]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import halojit  # noqa: E402


# The benchmark suite's functions and "large" shapes (halojit/bench/workloads.py),
# copied so this script does not move with the suite.
def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def layernorm(x, g, b):
    m = np.mean(x, axis=-1, keepdims=True)
    v = np.var(x, axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * g + b


def row_sum(x):
    return np.sum(x, axis=1)


def full_sum(x):
    return np.sum(x)


def blur3x3(img):
    bx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) / 3
    return (bx[:-2] + bx[1:-1] + bx[2:]) / 3


def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def mlp(x, w1, b1, w2):
    return gelu(x @ w1 + b1) @ w2


def chain(a, b, c):
    return np.exp(a * b + 1) * c - a / (1 + np.abs(b))


def workloads(size):
    rows, side, (batch, d, hidden) = ((16384, 4096, (512, 1024, 4096)) if size == "large"
                                      else (4, 64, (16, 64, 256)))
    rng = np.random.default_rng(0)

    def f32(*shape, scale=1.0):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)
    return [
        ("softmax", softmax, lambda: [f32(rows, 1024)], None),
        ("layernorm", layernorm, lambda: [f32(rows, 1024), f32(1024), f32(1024)], None),
        ("row_sum", row_sum, lambda: [f32(side, side)], None),
        ("full_sum", full_sum, lambda: [f32(side, side)], None),
        ("blur3x3", blur3x3, lambda: [f32(side, side)], None),
        ("mlp", mlp, lambda: [f32(batch, d), f32(d, hidden, scale=d ** -0.5), f32(hidden),
                              f32(hidden, d, scale=hidden ** -0.5)], None),
        ("chain", chain, lambda: [f32(rows, 1024) for _ in range(3)], None),
        ("gelu", gelu, lambda: [f32(rows, 1024)], None),
    ]


def paired(fa, fb, args, rounds=15, reps=7):
    """Rounds of (best of ``reps`` runs of fa, then of fb), back to back:
    load on a shared VM comes in bursts, so the median over rounds of the
    per-round ratio is robust where single timings are not. Returns
    (fa's best, fb's best, median ratio fa/fb)."""
    ta, tb, ratios = [], [], []
    for _ in range(rounds):
        pair = []
        for f in (fa, fb):
            f(*args)
            best = float("inf")
            for _ in range(reps):
                t0 = time.perf_counter()
                f(*args)
                best = min(best, time.perf_counter() - t0)
            pair.append(best)
        ta.append(pair[0])
        tb.append(pair[1])
        ratios.append(pair[0] / pair[1])
    ratios.sort()
    return min(ta), min(tb), ratios[len(ratios) // 2]


def untuned(fn, args):
    """fn compiled with the default schedules: built against an empty tuning
    database (a separate cache dir), so each group gets default_spec."""
    saved = os.environ["HALOJIT_CACHE_DIR"]
    os.environ["HALOJIT_CACHE_DIR"] = saved + "-untuned"
    try:
        f = halojit.trace(fn)
        f(*args)
        return f
    finally:
        os.environ["HALOJIT_CACHE_DIR"] = saved


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--budget", type=float, default=60.0)
    p.add_argument("--size", default="large")
    p.add_argument("--only", nargs="*")
    p.add_argument("--verify", action="store_true",
                   help="no tuning: compare the recorded database with the defaults")
    a = p.parse_args(argv)
    print(f"# {os.cpu_count()} cores, load {os.getloadavg()}, budget {a.budget}s per workload")
    rows = []
    for name, fn, make, _ in workloads(a.size):
        if a.only and name not in a.only:
            continue
        args = make()
        tuned = halojit.trace(fn)
        rep = None if a.verify else tuned.tune(*args, budget_s=a.budget)
        print(rep, flush=True)
        # end to end: default schedule vs tuning database, interleaved rounds
        default = untuned(fn, args)
        want = fn(*args)
        for f in (default, tuned):
            got = f(*args)
            assert np.allclose(got, want, rtol=1e-3, atol=1e-4), name
        del got
        out = np.empty(np.shape(want), np.asarray(want).dtype)  # no allocation in the timing
        e2e = paired(lambda *a: default(*a, out=out), lambda *a: tuned(*a, out=out), args)
        used = [g.scheduler for g in tuned.lower(*args).groups]
        print(f"{name}: compiled with {used}")
        for g in (rep.groups if rep else []):
            rows.append((name, g, e2e))
        print(f"{name}: end to end default {e2e[0] * 1e3:.3f} ms, tuned {e2e[1] * 1e3:.3f} ms, "
              f"paired ratio {e2e[2]:.2f}x; load {os.getloadavg()[0]:.2f}", flush=True)
    print("\n| workload | group | kind | default ms | tuned ms | speedup | end to end "
          "default / tuned ms (paired ratio) | recipe |")
    print("|---|---|---|---|---|---|---|---|")
    for name, g, e2e in rows:
        d = f"{g.default_s * 1e3:.3f}" if g.default_s else "-"
        b = f"{g.best_s * 1e3:.3f}" if g.best_s else "-"
        s = f"{g.speedup:.2f}x" if g.speedup else "-"
        print(f"| {name} | {', '.join(g.ops)[:40]} | {g.kind} | {d} | {b} | {s} | "
              f"{e2e[0] * 1e3:.3f} / {e2e[1] * 1e3:.3f} ({e2e[2]:.2f}x) | `{g.best}` |")


if __name__ == "__main__":
    main()
