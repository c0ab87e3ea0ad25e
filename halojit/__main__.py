"""The ``halojit`` command line: demo, info, bench, cache clear (``python -m halojit``)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time


def _median_time(fn, *args, repeat=11):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def cmd_demo(args) -> int:
    import numpy as np

    import halojit

    def gelu_layer(x, w, b):
        h = x @ w + b
        return 0.5 * h * (1 + np.tanh(0.79788456 * (h + 0.044715 * h * h * h)))

    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def chain(a, b, c):
        return np.exp(a * b + 1) * c - a / (1 + np.abs(b))

    rng = np.random.default_rng(0)
    n = args.size
    cases = [
        ("elementwise chain exp(a*b+1)*c - a/(1+|b|)", chain,
         [rng.standard_normal((n, 1024), dtype=np.float32) for _ in range(3)]),
        ("softmax over the last axis", softmax,
         [rng.standard_normal((n, 1024), dtype=np.float32)]),
        ("dense layer + tanh-GELU", gelu_layer,
         [rng.standard_normal((256, 512), dtype=np.float32),
          rng.standard_normal((512, 512), dtype=np.float32) * 0.05,
          rng.standard_normal(512, dtype=np.float32)]),
    ]
    print(f"halojit {halojit.__version__} demo (backend {halojit.config().backend}, "
          f"cache {halojit.config().cache_dir})\n")
    for title, fn, inputs in cases:
        f = halojit.trace(fn)
        t0 = time.perf_counter()
        lowered = f.lower(*inputs)
        first = time.perf_counter() - t0
        print(f"== {title}: {', '.join(f'{x.dtype}{list(x.shape)}' for x in inputs)}")
        print(lowered.graph)
        print(f"fusion groups: {lowered.kernel_count} kernel(s); trace+compile {first:.2f}s "
              f"(0 s when the disk cache is warm)")
        got = f(*inputs)
        want = fn(*inputs)
        scale = np.maximum(np.abs(want.astype(np.float64)), 1.0)
        err = float(np.max(np.abs(got.astype(np.float64) - want) / scale))
        t_np = _median_time(fn, *inputs)
        t_hj = _median_time(f, *inputs)
        print(f"result {got.dtype}{list(got.shape)}, max relative error vs numpy = {err:.1e}")
        print(f"numpy {t_np * 1e3:8.2f} ms   halojit {t_hj * 1e3:8.2f} ms   "
              f"speedup {t_np / t_hj:5.2f}x\n")
    return 0


def cmd_info(args) -> int:
    import halide as hl
    import numpy as np

    import halojit
    from halojit.schedules import SCHEDULERS, default_parallelism
    cfg = halojit.config()
    print(f"halojit      {halojit.__version__}")
    from importlib.metadata import version
    print(f"halide       {version('halide')}")
    print(f"numpy        {np.__version__}")
    print(f"python       {sys.version.split()[0]}")
    print(f"host target  {hl.get_host_target()}")
    print(f"targets      host, host-cuda, or any Halide target string")
    print(f"backend      {cfg.backend} (HALOJIT_BACKEND)")
    print(f"autoscheduler Adams2019 (parallelism={default_parallelism()}); "
          f"available: {', '.join(sorted(SCHEDULERS))}")
    print(f"cache dir    {cfg.cache_dir}")
    kernels = list(cfg.cache_dir.glob("kernels/*/*.so")) if cfg.cache_dir.exists() else []
    size = sum(p.stat().st_size for p in kernels)
    print(f"cached       {len(kernels)} kernel(s), {size / 1e6:.1f} MB")
    try:
        from halojit import _rt
        print(f"runtime      halojit._rt {_rt.version()}")
    except ImportError as e:
        print(f"runtime      not built ({e})")
    return 0


def cmd_bench(args) -> int:
    from .bench.cli import main
    return main(args=args)


def cmd_cache(args) -> int:
    import halojit
    cfg = halojit.config()
    if args.action != "clear":
        print(cfg.cache_dir)
        return 0
    removed = 0
    for sub in ("kernels", "runtime"):
        p = cfg.cache_dir / sub
        if p.exists():
            shutil.rmtree(p)
            removed += 1
    if args.all and cfg.cache_dir.exists():
        shutil.rmtree(cfg.cache_dir)
    print(f"cleared {'everything' if args.all else 'compiled kernels'} in {cfg.cache_dir}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="halojit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="trace, compile and run real functions; compare with numpy")
    demo.add_argument("--size", type=int, default=4096, help="rows of the demo arrays")
    demo.set_defaults(fn=cmd_demo)
    info = sub.add_parser("info", help="versions, targets, autoschedulers, cache")
    info.set_defaults(fn=cmd_info)
    bench = sub.add_parser("bench", help="benchmark suite against numpy and its peers, "
                           "with the bandwidth roofline and issue 4's targets")
    from .bench.cli import add_arguments as _bench_arguments
    _bench_arguments(bench)
    bench.set_defaults(fn=cmd_bench)
    cache = sub.add_parser("cache", help="`cache clear` removes compiled kernels")
    cache.add_argument("action", choices=["clear", "dir"])
    cache.add_argument("--all", action="store_true", help="also remove the tuning database")
    cache.set_defaults(fn=cmd_cache)
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
