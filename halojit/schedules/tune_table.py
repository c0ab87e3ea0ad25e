"""The tuning table of the benchmark workloads (``halojit.bench.workloads``):
tune each workload at one size in this process and print, per reduction,
stencil and matmul group, the default and tuned time, the speedup, the
paired ratio and the winning recipe, then issue 6's target tally.

    halojit tune --bench [--size large] [--budget 40] [--only softmax blur3x3] [--all-kinds]
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field

TARGET_KINDS = ("reduction", "stencil", "matmul")
TARGET_SPEEDUP = 1.2  # issue 6: on at least half of the TARGET_KINDS groups


@dataclass
class BenchTable:
    size: str
    budget_s: float
    machine: str
    rows: list = field(default_factory=list)  # (workload name, GroupReport)
    loads: tuple = ()                          # 1-minute load average before, after
    elapsed_s: float = 0.0

    def counted(self):
        return [g for _, g in self.rows if g.kind in TARGET_KINDS]

    def tally(self) -> str:
        groups = self.counted()
        fast = sum((g.speedup or 1.0) >= TARGET_SPEEDUP for g in groups)
        slower = [g for g in groups if g.speedup is not None and g.speedup < 1.0]
        met = 2 * fast >= len(groups) > 0 and not slower
        return (f"{fast} of {len(groups)} {'/'.join(TARGET_KINDS)} groups at >= "
                f"{TARGET_SPEEDUP}x, {len(slower)} slower than the default: target "
                f"{'met' if met else 'not met'}")

    def markdown(self) -> str:
        lines = [f"{self.machine}; size {self.size}, {self.budget_s:.0f} s per workload, "
                 f"{self.elapsed_s:.0f} s in all, load average {self.loads[0]:.2f} before, "
                 f"{self.loads[1]:.2f} after", "",
                 "| workload | group | kind | default ms | tuned ms | speedup | paired | "
                 "candidates | winning recipe |",
                 "|---|---|---|---|---|---|---|---|---|"]
        for name, g in self.rows:
            ops = ", ".join(g.ops)
            ops = ops if len(ops) <= 40 else ops[:37] + "..."
            ms = [f"{t * 1e3:.3f}" if t else "-" for t in (g.default_s, g.best_s)]
            sp = f"{g.speedup:.2f}x" if g.speedup else "-"
            pr = f"{g.paired:.2f}x" if g.paired else "-"
            recipe = ("the default " if g.best == g.default else "") + \
                (f"`{g.best}`" if g.best is not None else g.note or "-")
            lines.append(f"| {name} | {ops} | {g.kind} | {ms[0]} | {ms[1]} | {sp} | {pr} | "
                         f"{sum(c.status == 'ok' for c in g.candidates)} | {recipe} |")
        lines += ["", self.tally()]
        return "\n".join(lines)

    __str__ = markdown


def machine() -> str:
    from .. import __version__
    from ..runtime.cache import halide_version
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{os.cpu_count()} cores ({model}), halojit {__version__}, "
            f"Halide {halide_version()}")


def bench_table(size: str = "large", budget_s: float = 40.0, only=None, all_kinds=False,
                workers=None, progress=None) -> BenchTable:
    """Tune every benchmark workload at ``size``; groups of other kinds than
    TARGET_KINDS keep their default (one timing) unless ``all_kinds``."""
    import halojit
    from ..bench.workloads import workloads
    from .candidates import candidate_specs, group_kind
    from .tune import tune_function

    def specs_for(local, default):
        if not all_kinds and group_kind(local) not in TARGET_KINDS:
            return [default]
        return candidate_specs(local, default, None, seed=time.time_ns())

    t0 = time.monotonic()
    table = BenchTable(size, budget_s, machine())
    load0 = os.getloadavg()[0]
    for w in workloads(size):
        if only and w.name not in only:
            continue
        tf = halojit.trace(w.fn)
        report = tune_function(tf, w.inputs(), {}, budget_s=budget_s, workers=workers,
                               progress=progress, specs_for=specs_for)
        table.rows += [(w.name, g) for g in report.groups if all_kinds or g.kind in TARGET_KINDS]
    table.loads = (load0, os.getloadavg()[0])
    table.elapsed_s = time.monotonic() - t0
    return table
