"""``halojit bench``: run the suite, print the tables, write JSON and a PNG plot."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from . import report
from .peers import PEER_NAMES, default_peers
from .suite import run
from .workloads import SIZES, workloads


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", choices=["large", "small", "both"] + [s for s in SIZES if s not in
                                                                    ("large", "small")],
                   default="both", help="large: 16M float32 elements; small: 1K-4K (default both)")
    p.add_argument("--only", nargs="+", metavar="WORKLOAD",
                   choices=[w.name for w in workloads("tiny")], help="workloads to run")
    p.add_argument("--peers", nargs="+", metavar="PEER", choices=PEER_NAMES,
                   help="peers to run besides numpy and halojit (default all installed: "
                        f"{', '.join(PEER_NAMES[2:])})")
    p.add_argument("--repeat", type=int, default=11, help="warm runs per timing (default 11)")
    p.add_argument("--no-compile", action="store_true",
                   help="skip the cold/warm compile times measured in new processes")
    p.add_argument("--wait-quiet", type=float, default=None, metavar="LOAD",
                   help="first wait (at most 30 min) until the 1-minute load average is "
                        "below LOAD: a shared machine's neighbours skew timings")
    p.add_argument("--out", default=None,
                   help="folder for results.json and speedup.png (default bench/results when "
                        "./bench exists, else ./halojit-bench)")


def main(argv=None, args=None) -> int:
    if args is None:
        p = argparse.ArgumentParser(prog="halojit bench", description=__doc__)
        add_arguments(p)
        args = p.parse_args(argv)
    sizes = ("large", "small") if args.size == "both" else (args.size,)
    peers = default_peers()
    if args.peers:
        keep = set(args.peers) | {"numpy", "halojit"}  # the reference and the subject
        peers = [p for p in peers if p.name in keep]
    out = Path(args.out) if args.out else (Path("bench/results") if Path("bench").is_dir()
                                           else Path("halojit-bench"))
    if args.wait_quiet is not None:
        _wait_quiet(args.wait_quiet)
    t0 = time.perf_counter()
    result = run(sizes=sizes, only=args.only, peers=peers, repeat=args.repeat,
                 compile_times=not args.no_compile,
                 log=lambda s: print(s, flush=True))
    result["wall_s"] = time.perf_counter() - t0
    report.summarize(result)
    print()
    print(report.render(result))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    report.write_json(result, out / f"results-{stamp}.json")
    report.write_json(result, out / "results.json")
    (out / "results.md").write_text(report.header(result) + "\n\n" + report.markdown(result) + "\n")
    png = report.plot(result, out / "speedup.png")
    print(f"\nwrote {out / 'results.json'}" + (f" and {png}" if png else
                                                " (no plot: matplotlib not installed)"))
    return 0


def _wait_quiet(load: float, limit_s: float = 1800.0) -> None:
    deadline = time.monotonic() + limit_s
    while os.getloadavg()[0] >= load and time.monotonic() < deadline:
        print(f"# waiting for load < {load} (now {os.getloadavg()[0]:.2f})", flush=True)
        time.sleep(15)
