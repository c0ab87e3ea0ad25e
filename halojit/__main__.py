"""The ``halojit`` command line (``python -m halojit``): demo, info, bench, tune, inspect,
cache clear; ``--cmake-dir`` tells C++ projects where the embedding package is."""

from __future__ import annotations

import argparse
import shutil
import sys
import time


def _median_time(fn, *args, repeat=11, warmup_s=0.2):
    # warm runs first, for both contenders: on the 2-core VM the first ~40
    # calls of the dense layer took 0.83 ms each and later ones 0.42 ms (half
    # speed: likely both pool threads sharing one CPU until the OS moves one),
    # and numpy's OpenBLAS threads spin for a while after a matmul
    end = time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        fn(*args)
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
        t_hj = _median_time(f, *inputs)
        t_np = _median_time(fn, *inputs)
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
    print("targets      host, host-cuda, or any Halide target string")
    cap, where = halojit.cuda.target_capability()
    if halojit.cuda.is_available():
        devs = "; ".join(f"{d.index}: {d.name} (sm_{d.capability}, {d.multiprocessors} SMs)"
                         for d in halojit.cuda.devices())
        print(f"cuda         {devs}; host-cuda compiles for sm_{cap} ({where})")
    else:
        print(f"cuda         no device ({halojit.cuda.unavailable_reason()}); host-cuda compiles "
              f"for sm_{cap} ({where}), running needs a GPU")
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
        from halojit.runtime.artifact import LEVELS
        runs = [n for n, lv in LEVELS.items() if all(_rt.cpu_has_feature(f) for f in lv.requires)]
        print(f"artifacts    format {_rt.ARTIFACT_FORMAT}; levels this CPU runs: "
              f"{', '.join(runs) or 'none'}; C++ package: halojit --cmake-dir")
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
    print(f"cleared {'everything' if args.all else 'compiled kernels'} in {cfg.cache_dir}"
          + ("" if args.all else " (kept the tuning database; --all removes it)"))
    return 0


def cmd_inspect(args) -> int:
    from .errors import ArtifactError
    from .runtime.artifact import describe
    try:
        text, ok = describe(args.artifact, check=args.check, level=args.level)
    except (ArtifactError, FileNotFoundError) as e:
        print(f"halojit inspect: {e}", file=sys.stderr)
        return 2
    print(text)
    return 0 if ok else 1


def _embedding_dir(kind: str) -> str:
    """Where the wheel keeps the C++ embedding files (``--cmake-dir`` etc.)."""
    from pathlib import Path

    import halojit
    rel = {"cmake": ("share", "cmake", "halojit"), "include": ("include",), "lib": ("lib",)}[kind]
    for root in halojit.__path__:  # the package, then an installed copy (see __init__)
        path = Path(root, *rel).resolve()
        if path.is_dir():
            return str(path)
    raise SystemExit(f"halojit: no {'/'.join(rel)} next to halojit; the C++ embedding files come "
                     "with an installed halojit (pip install .), not with the source tree.")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="halojit", description=__doc__)
    for kind, what in (("cmake", "the CMake package dir, for -Dhalojit_DIR=..."),
                       ("include", "the C/C++ headers"), ("lib", "libhalojit.so")):
        parser.add_argument(f"--{kind}-dir", action="store_true", help=f"print the path of {what}")
    sub = parser.add_subparsers(dest="command")
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
    tune = sub.add_parser("tune", help="tuning runs: measure schedules, keep the best; "
                          "--list, --export, --import the tuning database")
    from .schedules.tune_cli import add_arguments as _tune_arguments, cmd_tune
    _tune_arguments(tune)
    tune.set_defaults(fn=cmd_tune)
    inspect = sub.add_parser("inspect", help="print an artifact's inputs, outputs, levels; "
                             "--check runs its test vectors")
    inspect.add_argument("artifact", help="a .hjm file written by TracedFunction.dump")
    inspect.add_argument("--check", action="store_true",
                         help="run the test vectors; exit 1 when one does not match")
    inspect.add_argument("--level", default=None,
                         help="CPU feature level to load (default: the best this CPU runs)")
    inspect.set_defaults(fn=cmd_inspect)
    cache = sub.add_parser("cache", help="`cache clear` removes compiled kernels")
    cache.add_argument("action", choices=["clear", "dir"])
    cache.add_argument("--all", action="store_true", help="also remove the tuning database")
    cache.set_defaults(fn=cmd_cache)
    args = parser.parse_args(argv)
    dirs = [k for k in ("cmake", "include", "lib") if getattr(args, f"{k}_dir")]
    if dirs:
        for kind in dirs:
            print(_embedding_dir(kind))
        return 0
    if args.command is None:
        parser.error("a command is required (demo, info, bench, tune, inspect, cache) or "
                     "--cmake-dir")
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
