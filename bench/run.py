"""Benchmark halojit against numpy (and numexpr, numba when installed) on the
same inputs in one run; every result is checked against numpy before it is
timed. Prints a table of medians and speedups and writes JSON.

    python bench/run.py [--size large|small] [--json results.json] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np


def median_ms(fn, repeat=11):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2] * 1e3, times[0] * 1e3


# -- workloads: (name, numpy function, input factory, numexpr string or None) ---------------
def chain(a, b, c):
    return np.exp(a * b + 1) * c - a / (1 + np.abs(b))


def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, g, b):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b


def row_sum(x):
    return x.sum(axis=1)


def full_sum(x):
    return x.sum()


def bias_relu(x, b):
    return np.maximum(x + b, 0)


def blur(img):
    bx = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) / 3
    return (bx[:-2] + bx[1:-1] + bx[2:]) / 3


def mlp(x, w1, b1, w2):
    return gelu(x @ w1 + b1) @ w2


def workloads(size):
    rng = np.random.default_rng(0)

    def f32(*shape):
        return rng.standard_normal(shape, dtype=np.float32)
    big = size == "large"
    n = 4096 if big else 32  # rows of 1024: 16M elements (64 MiB) or 32K
    sq = 4096 if big else 64
    return [
        ("chain", chain, lambda: [f32(n, 1024) for _ in range(3)],
         "exp(a*b+1)*c - a/(1+abs(b))"),
        ("gelu", gelu, lambda: [f32(n, 1024)],
         "0.5*x*(1+tanh(0.7978845608*(x+0.044715*x*x*x)))"),
        ("softmax", softmax, lambda: [f32(n, 1024)], None),
        ("layernorm", layernorm, lambda: [f32(n, 1024), f32(1024), f32(1024)], None),
        ("row_sum", row_sum, lambda: [f32(sq, sq)], None),
        ("full_sum", full_sum, lambda: [f32(sq, sq)], None),
        ("bias_relu", bias_relu, lambda: [f32(n, 1024), f32(1024)], None),
        ("blur3x3", blur, lambda: [f32(sq, sq)], None),
        ("mlp", mlp, lambda: [f32(512 if big else 16, 1024), f32(1024, 4096) * 0.03,
                              f32(4096), f32(4096, 1024) * 0.03], None),
    ]


def check(got, want, name):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = np.maximum(np.abs(want), 1.0)
    err = float(np.max(np.abs(got - want) / scale)) if want.size else 0.0
    if not err < 1e-3:
        raise AssertionError(f"{name}: result differs from numpy (max relative error {err:.2e})")
    return err


def run(size, only=None, repeat=11):
    import halojit
    try:
        import numexpr
    except ImportError:
        numexpr = None
    rows = []
    for name, fn, make, ne_expr in workloads(size):
        if only and name not in only:
            continue
        args = make()
        want = fn(*args)
        row = {"workload": name, "shapes": [list(a.shape) for a in args]}
        row["numpy_ms"], row["numpy_min_ms"] = median_ms(lambda: fn(*args), repeat)
        f = halojit.trace(fn)
        t0 = time.perf_counter()
        got = f(*args)
        row["first_call_s"] = time.perf_counter() - t0
        row["max_rel_err"] = check(got, want, name)
        row["halojit_ms"], row["halojit_min_ms"] = median_ms(lambda: f(*args), repeat)
        row["kernels"] = f.lower(*args).kernel_count
        if numexpr is not None and ne_expr is not None:
            names = "abc" if len(args) == 3 else "x"
            env = dict(zip(names, args))
            check(numexpr.evaluate(ne_expr, local_dict=env), want, name + "/numexpr")
            row["numexpr_ms"], _ = median_ms(lambda: numexpr.evaluate(ne_expr, local_dict=env), repeat)
        row["speedup_vs_numpy"] = row["numpy_ms"] / row["halojit_ms"]
        rows.append(row)
        print(_format_row(row), flush=True)
    return rows


def _format_row(r):
    ne = f"{r['numexpr_ms']:9.2f}" if "numexpr_ms" in r else f"{'-':>9}"
    return (f"{r['workload']:10s} {r['numpy_ms']:9.2f} {ne} {r['halojit_ms']:9.2f} "
            f"{r['speedup_vs_numpy']:7.2f}x {r['kernels']:4d} {r['first_call_s']:8.2f}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--size", choices=["large", "small"], default="large")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--only", nargs="*", help="workload names to run")
    p.add_argument("--repeat", type=int, default=11)
    args = p.parse_args(argv)
    print(f"# {platform.machine()} {os.cpu_count()} cores, numpy {np.__version__}, "
          f"python {sys.version.split()[0]}, size={args.size}; medians of {args.repeat} warm runs, ms")
    print(f"{'workload':10s} {'numpy':>9} {'numexpr':>9} {'halojit':>9} {'speedup':>8} "
          f"{'kern':>4} {'1st call':>8}")
    rows = run(args.size, args.only, args.repeat)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": platform.platform(), "cores": os.cpu_count(),
                       "size": args.size, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
