"""Tuning runs (``TracedFunction.tune``): for every fusion group of a
function at the example's shapes, compile candidate schedules in parallel
(through any concurrent.futures Executor), check each against the numpy
reference and time it in a clean process one at a time, and record the best
recipe in the tuning database (``tunedb``), where later compiles find it.

A group's run, within its share of the budget:
  1. compile a batch of candidates in parallel (the default first);
  2. time the batch serially while no compile runs (a crash, hang or wrong
     result is recorded and skipped);
  3. repeat until the candidates or the share run out (keeping time for
     step 4); then re-time the default and the fastest few in interleaved
     rounds (noise on a shared machine comes in bursts) and keep a candidate
     only when it beats the default by ``MARGIN`` and in most rounds.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..config import get_config
from ..errors import HalojitError, UnsupportedError
from . import tunedb
from .autoschedule import ScheduleSpec, fallback_chain
from .candidates import candidate_specs, group_kind
from .tune_worker import (CRASH, ERROR, OK, SKIPPED, TIMEOUT, WRONG, Timer, TimerDied,
                          compile_candidate)

MARGIN = 0.03          # a candidate must be this much faster than the default to win
CONFIRM_TOP = 3        # candidates re-timed against the default at the end of a group
CONFIRM_ROUNDS = 5
COMPILE_TIMEOUT_S = 120.0
SETUP_TIMEOUT_S = 120.0


@dataclass
class CandidateResult:
    """One candidate of a group: its recipe and what happened to it."""

    spec: ScheduleSpec
    status: str = SKIPPED
    seconds: float | None = None       # best run time, over the confirmation rounds too
    median_s: float | None = None      # median run time of its first timing
    compile_s: float | None = None
    message: str = ""


@dataclass
class GroupReport:
    """A group's tuning result: default and best time, winning recipe."""

    ops: list[str]
    kind: str
    avals: str
    group_key: str
    default: ScheduleSpec
    best: ScheduleSpec | None = None
    default_s: float | None = None
    best_s: float | None = None
    candidates: list[CandidateResult] = field(default_factory=list)
    recorded: bool = False
    note: str = ""
    # median over the confirmation rounds of default / best, each round's two
    # timings back to back (robust to load that comes and goes); None when
    # the best is the default or was never re-timed
    paired: float | None = None

    @property
    def speedup(self) -> float | None:
        return self.default_s / self.best_s if self.default_s and self.best_s else None

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.candidates)


@dataclass
class TuneReport:
    """What ``f.tune`` returns; ``str(report)`` is the summary table."""

    function: str
    target: str
    groups: list[GroupReport]
    budget_s: float
    elapsed_s: float
    stopped_by_budget: bool
    db_path: Path

    def table(self) -> str:
        lines = [f"tuning {self.function} for {self.target}: {len(self.groups)} group(s) in "
                 f"{self.elapsed_s:.1f}s of a {self.budget_s:.0f}s budget"
                 + (" (stopped by the budget)" if self.stopped_by_budget else ""),
                 f"{'group':28s} {'kind':11s} {'cands':>9s} {'default ms':>10s} "
                 f"{'tuned ms':>9s} {'speedup':>7s}  recipe"]
        for g in self.groups:
            ops = ", ".join(g.ops)
            ops = ops if len(ops) <= 28 else ops[:25] + "..."
            timed = g.count(OK)
            failed = sum(g.count(s) for s in (WRONG, CRASH, TIMEOUT, ERROR))
            cands = f"{timed}+{failed}x" if failed else f"{timed}"
            d = f"{g.default_s * 1e3:10.3f}" if g.default_s else f"{'-':>10s}"
            b = f"{g.best_s * 1e3:9.3f}" if g.best_s else f"{'-':>9s}"
            s = f"{g.speedup:6.2f}x" if g.speedup else f"{'-':>7s}"
            recipe = str(g.best) if g.best is not None else g.note or "-"
            lines.append(f"{ops:28s} {g.kind:11s} {cands:>9s} {d} {b} {s}  {recipe}")
        lines.append(f"cands: candidates timed + failed (wrong, crash, timeout, compile error); "
                     f"database {self.db_path}")
        return "\n".join(lines)

    __str__ = table

    def __repr__(self):
        return f"<TuneReport\n{self.table()}\n>"


# -- the run ----------------------------------------------------------------------------
def tune_function(tf, args, kwargs, budget_s: float = 60.0, workers: int | None = None,
                  executor: cf.Executor | None = None, progress: bool | None = None,
                  specs_for=None) -> TuneReport:
    """The body of ``TracedFunction.tune``; ``specs_for(local, default)``
    overrides the candidate list (tests)."""
    from ..generators.compile import ensure_runtime, host_target
    from ..graph.fusion import group_graph, group_key

    t0 = time.monotonic()
    if budget_s is None or not budget_s > 0:
        raise ValueError(f"{tf.__name__}.tune: budget_s must be a positive number of seconds, "
                         f"got {budget_s!r}.")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ValueError(f"{tf.__name__}.tune: workers must be a positive integer, got {workers!r}.")
    deadline = t0 + float(budget_s)
    if tf.backend != "halide" or tf.opt_level < 3:
        raise UnsupportedError(
            f"{tf.__name__}.tune: only the Halide backend at opt_level 3 has schedules to tune "
            f"(this function: backend={tf.backend}, opt_level={tf.opt_level}).")
    converted = tf._convert(args)
    values = [v for v, _ in converted]
    avals = [a for _, a in converted]
    spec = tf._get_spec(values, avals, kwargs)
    if spec is None:
        raise UnsupportedError(f"{tf.__name__}.tune: the function uses exclude_from_trace, so it "
                               "is replayed segment by segment; tune the traced parts separately.")
    graph = spec.graph
    target = host_target(tf.target)
    report = TuneReport(tf.__name__, str(target), [], float(budget_s), 0.0, False,
                        tunedb.db_path())
    kernels = getattr(spec.executor, "kernels", None)
    if not kernels:
        report.elapsed_s = time.monotonic() - t0
        return report  # zero-size or kernel-free graph: nothing to tune
    groups, seen = [], set()
    for k in kernels:
        local = group_graph(k.group)
        gk = group_key(local)
        if gk not in seen:
            seen.add(gk)
            groups.append((k.group, local, gk))
    inputs = values + [b.read() for b in spec.bindings]
    reference = _group_values(graph, inputs, [g for g, _, _ in groups])
    runtime = ensure_runtime(target)
    n_workers = workers or getattr(executor, "_max_workers", None) or os.cpu_count() or 1
    own = executor is None
    if own:
        executor = cf.ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="halojit-tune")
    bar = _Progress(tf.__name__, float(budget_s), t0, progress)
    try:
        with tempfile.TemporaryDirectory(dir=_tmp_root(), prefix="tune-") as tmp:
            for gi, (_, local, gk) in enumerate(groups):
                now = time.monotonic()
                share = (deadline - now) / (len(groups) - gi)
                run = _GroupRun(local, gk, target, executor, n_workers, Path(tmp), runtime,
                                reference[gi], now + share, deadline, bar, specs_for,
                                f"{gi + 1}/{len(groups)}")
                report.groups.append(run.report)
                if now >= deadline:
                    report.stopped_by_budget = True
                    run.report.note = "skipped: budget spent"
                    continue
                try:
                    run.run()
                except KeyboardInterrupt:
                    report.stopped_by_budget = True
                    run.finish()
                    break
                report.stopped_by_budget |= run.stopped
    finally:
        bar.close()
        if own:
            executor.shutdown(wait=False, cancel_futures=True)
    if tf.autoscheduler is not None:
        for g in report.groups:
            g.note = g.note or "recorded; this function's autoscheduler= overrides it"
    # Specializations built before the run keep their old kernels: rebuild on next call.
    with tf._lock:
        for key in [k for k, s in tf._cache.items() if s is spec]:
            tf._cache.pop(key, None)
    report.elapsed_s = time.monotonic() - t0
    return report


def _tmp_root() -> Path:
    path = get_config().cache_dir
    path.mkdir(parents=True, exist_ok=True)
    return path


def _group_values(graph, inputs, groups) -> list[tuple[list, list]]:
    """(inputs, reference outputs) of every group, from one numpy
    interpretation of the whole graph: real intermediate values."""
    from ..generators.build import _prep_input
    from ..graph.interpret import interpret
    from ..graph.ir import make_graph
    wanted = []
    for g in groups:
        for n in list(g.inputs) + list(g.outputs):
            if n not in wanted:
                wanted.append(n)
    vals = dict(zip(wanted, interpret(make_graph(graph.inputs, wanted), inputs)))

    def arr(n, prep):
        a = np.asarray(vals[n], dtype=n.dtype)
        if prep:
            a = _prep_input(a)
        elif not a.flags.c_contiguous:  # (ascontiguousarray would make a 0-d array 1-d)
            a = np.ascontiguousarray(a)
        return a.view(np.uint8) if a.dtype == np.bool_ else a
    return [([arr(n, True) for n in g.inputs], [arr(n, False) for n in g.outputs]) for g in groups]


class _Progress:
    """A tqdm bar over the budget's seconds; the text says the group,
    candidates done, the best so far and the time left."""

    def __init__(self, name, budget, t0, enabled):
        from tqdm.auto import tqdm
        self.t0, self.budget = t0, budget
        self.name = name
        self.bar = tqdm(total=round(budget, 1), desc=f"tune {name}", unit="s", file=sys.stderr,
                        disable=None if enabled is None else not enabled, leave=True,
                        bar_format="{percentage:3.0f}%|{bar:20}| {desc}")

    def update(self, text):
        el = min(time.monotonic() - self.t0, self.budget)
        self.bar.n = round(el, 1)
        self.bar.set_description_str(f"tune {self.name}: {text}, "
                                     f"{max(0.0, self.budget - el):.0f}s left")

    def close(self):
        self.bar.close()


class _GroupRun:
    """One group's batches, timing, confirmation and record."""

    def __init__(self, local, gk, target, executor, n_workers, tmp, runtime, values,
                 share_deadline, deadline, bar, specs_for, label):
        from ..generators.build import default_spec
        self.local, self.gk, self.target = local, gk, target
        self.executor, self.batch = executor, max(2, 2 * n_workers)
        self.tmp, self.runtime, self.values = tmp, runtime, values
        self.share_deadline, self.deadline = share_deadline, deadline
        self.share = max(0.0, share_deadline - time.monotonic())
        self.reserve = 0.0
        self.bar, self.label = bar, label
        default = default_spec(local, target)
        self.report = GroupReport(
            [n.op for n in local.nodes if n.op not in ("input", "constant")], group_kind(local),
            ", ".join(str(i.aval) for i in local.inputs), gk, default)
        previous = tunedb.lookup(gk, str(target))
        self.specs = (specs_for(local, default) if specs_for is not None else
                      candidate_specs(local, default, previous, seed=time.time_ns()))
        self.results: dict[str, CandidateResult] = {}
        self.so: dict[str, Path] = {}
        self.compiled: dict[str, dict] = {}
        self.timer = Timer()
        self.rounds: list[dict[str, float]] = []  # confirmation rounds: key -> best run
        self.stopped = False

    # -- helpers
    def left(self, share=True) -> float:
        return (self.share_deadline if share else self.deadline) - time.monotonic()

    def fn_name(self, spec) -> str:
        from ..generators.build import kernel_name
        return kernel_name(self.local, spec, self.target)

    def show(self):
        r = self.report
        ok = [c for c in self.results.values() if c.status == OK]
        best = min(ok, key=lambda c: c.seconds) if ok else None
        text = f"group {self.label} ({', '.join(r.ops[:3])}{'...' if len(r.ops) > 3 else ''})"
        text += f" {len(self.results)}/{len(self.specs)} cand"
        if best is not None:
            base = self.results.get(r.default.key)
            sp = (f" ({base.seconds / best.seconds:.2f}x)" if base is not None and base.seconds
                  else "")
            text += f", best {best.seconds * 1e3:.3f} ms{sp}"
        self.bar.update(text)

    def run_timeout(self) -> float:
        """A candidate far slower than the default is as good as hung."""
        base = self.results.get(self.report.default.key)
        limit = 60.0 if base is None or base.seconds is None else 2.0 + 60 * base.seconds
        return max(1.0, min(limit, self.left(share=False)))

    # -- the run
    def run(self):
        inputs, expected = self.values
        setup = {"op": "setup", "runtime": str(self.runtime), "inputs": inputs,
                 "expected": expected, "threads": get_config().num_threads}
        try:
            self.timer.start(setup, min(SETUP_TIMEOUT_S, max(1.0, self.left(share=False))))
        except TimerDied as e:
            self.report.note = f"could not start the timing process: {e}"
            return self.finish()
        queue = list(self.specs)
        self.reserve = 0.0
        try:
            while queue and self.left() - self.reserve > 0:
                batch, queue = queue[:self.batch], queue[self.batch:]
                self.compile_batch(batch)
                for spec in batch:
                    if self.left() - self.reserve <= 0 and spec.key != self.report.default.key:
                        break
                    self.time_one(spec)
                    self.reserve = self.confirm_cost()
                self.show()
            self.stopped = bool(queue)  # candidates left untried: the budget ended the group
            self.confirm()
        finally:
            self.timer.close()
        self.finish()

    def compile_batch(self, batch):
        from ..runtime.cache import is_valid_so, kernel_dir
        futures, longest = {}, 0.0
        for spec in batch:
            fn = self.fn_name(spec)
            cached = kernel_dir(self.target) / f"{fn}.so"
            if is_valid_so(cached, remove=False) and cached.with_suffix(".json").exists():
                self.so[spec.key] = cached  # the kernel cache already has it (e.g. the default)
                try:
                    used = json.loads(cached.with_suffix(".json").read_text())["spec"]
                except (OSError, ValueError, KeyError):
                    used = spec.key
                self.compiled[spec.key] = {"status": OK, "compile_s": 0.0, "used": used}
                continue
            # the default may use the whole budget; others only the share's candidate time
            left = (self.left(share=False) if spec == self.report.default
                    else self.left() - self.reserve)
            timeout = min(COMPILE_TIMEOUT_S, max(1.0, left))
            request = {"graph": self.local, "fn_name": fn, "target": str(self.target),
                       "spec": spec, "timeout_s": timeout}
            if spec == self.report.default:  # the baseline is what a compile would give
                request["specs"] = fallback_chain(spec)
            futures[self.executor.submit(compile_candidate, request)] = spec
            longest = max(longest, timeout)
        if not futures:
            return
        done, pending = cf.wait(futures, timeout=longest + 5.0)
        for fut in pending:
            fut.cancel()
            spec = futures[fut]
            self.results[spec.key] = CandidateResult(spec, SKIPPED, message="budget spent "
                                                     "while compiling")
        for fut in done:
            spec = futures[fut]
            try:
                res = fut.result()
            except Exception as e:  # noqa: BLE001 - an executor's failure is the candidate's
                res = {"status": ERROR, "message": f"{type(e).__name__}: {e}"}
            self.compiled[spec.key] = res
            if res.get("status") != OK:
                self.results[spec.key] = CandidateResult(
                    spec, res.get("status", ERROR), compile_s=res.get("compile_s"),
                    message=str(res.get("message", ""))[:2000])
                continue
            path = self.tmp / f"{self.fn_name(spec)}.so"
            path.write_bytes(res["so"])
            self.so[spec.key] = path

    def time_one(self, spec):
        if spec.key in self.results or spec.key not in self.so:
            return
        info = self.compiled.get(spec.key, {})
        result = CandidateResult(spec, compile_s=info.get("compile_s"))
        if info.get("used", spec.key) != spec.key:
            result.message = f"fell back to {info['used']}; "
        self.results[spec.key] = result
        req = {"op": "time", "so": str(self.so[spec.key]), "fn_name": self.fn_name(spec)}
        try:
            out = self.timer.call(req, self.run_timeout())
        except TimerDied as e:
            result.status, result.message = e.status, str(e)
            if e.status != ERROR:
                try:
                    self.timer.restart(min(SETUP_TIMEOUT_S, max(1.0, self.left(share=False))))
                except TimerDied:
                    pass
            return
        result.status = out["status"]
        result.seconds = out.get("seconds")
        result.median_s = out.get("median")
        result.message += out.get("message", "")
        self.show()

    def confirm_cost(self) -> float:
        """Seconds to keep for the confirmation rounds (at most a quarter of the share)."""
        base = self.results.get(self.report.default.key)
        t = base.seconds if base is not None and base.seconds else 0.01
        per_call = max(0.3, 5 * t) + t + 0.02  # the timer's 5-25 runs, at least 0.3 s
        return min(CONFIRM_ROUNDS * (CONFIRM_TOP + 1) * per_call, 0.25 * self.share)

    def confirm(self):
        """Re-time the default and the fastest candidates, interleaved."""
        default = self.report.default.key
        ok = sorted((c for c in self.results.values() if c.status == OK),
                    key=lambda c: c.seconds)
        top = [c for c in ok if c.spec.key != default][:CONFIRM_TOP]
        if default in self.results and self.results[default].status == OK:
            top.append(self.results[default])
        if len(top) < 2 or self.timer.proc is None:
            return
        for _ in range(CONFIRM_ROUNDS):
            times = {}
            for c in top:
                if self.left(share=False) <= 0:
                    return
                try:
                    out = self.timer.call({"op": "time", "so": str(self.so[c.spec.key]),
                                           "fn_name": self.fn_name(c.spec), "check": False},
                                          self.run_timeout())
                except TimerDied:
                    return
                times[c.spec.key] = out["seconds"]
                c.seconds = min(c.seconds, out["seconds"])
            self.rounds.append(times)

    def winner(self, ok: list[CandidateResult], base) -> CandidateResult:
        """The fastest candidate that beats the default by MARGIN and in most
        confirmation rounds (paired, back to back: load comes in bursts);
        one never re-timed must win by twice the margin. Else the default."""
        if base is None or base.status != OK:
            return min(ok, key=lambda c: c.seconds)
        for c in sorted((c for c in ok if c is not base), key=lambda c: c.seconds):
            if c.seconds > base.seconds * (1 - MARGIN):
                break
            paired = [r for r in self.rounds if c.spec.key in r and base.spec.key in r]
            if paired:
                if 2 * sum(r[c.spec.key] < r[base.spec.key] for r in paired) > len(paired):
                    return c
            elif c.seconds <= base.seconds * (1 - 2 * MARGIN):
                return c
        return base

    def finish(self):
        """Pick the winner, install its kernel, record the group."""
        r = self.report
        r.candidates = [self.results.get(s.key) or CandidateResult(s) for s in self.specs]
        base = self.results.get(r.default.key)
        r.default_s = base.seconds if base is not None and base.status == OK else None
        ok = [c for c in r.candidates if c.status == OK]
        if not ok:
            r.note = r.note or "no candidate ran correctly"
            return
        best = self.winner(ok, base)
        r.best, r.best_s = best.spec, best.seconds
        ratios = sorted(t[r.default.key] / t[best.spec.key] for t in self.rounds
                        if best is not base and r.default.key in t and best.spec.key in t)
        r.paired = ratios[len(ratios) // 2] if ratios else None
        try:
            self.install(best.spec)
            tunedb.save(tunedb.Record(
                self.gk, r.avals, str(self.target), ", ".join(r.ops), r.kind, r.best, r.best_s,
                r.default, r.default_s,
                candidates=[tunedb.CandidateRecord(c.spec, c.status, c.seconds, c.compile_s,
                                                   c.message)
                            for c in r.candidates if c.status != SKIPPED]))
            r.recorded = True
        except (OSError, HalojitError) as e:
            r.note = f"not recorded: {e}"
        except Exception as e:  # sqlite3.Error and friends: the run's results still count
            r.note = f"not recorded: {type(e).__name__}: {e}"

    def install(self, spec):
        """Put the winner's kernel into the kernel cache under the name a
        later compile looks up, so the measured kernel is the one used."""
        from ..runtime.cache import atomic_write, is_valid_so, kernel_dir
        fn = self.fn_name(spec)
        out = kernel_dir(self.target)
        so = out / f"{fn}.so"
        if self.so.get(spec.key) == so or (is_valid_so(so, remove=False)
                                          and so.with_suffix(".json").exists()):
            return
        res = self.compiled.get(spec.key) or {}
        paths = {}
        for name, suffix in (("schedule", ".schedule.h"), ("stmt", ".stmt")):
            if res.get(name):
                paths[name] = str(out / f"{fn}{suffix}")
                atomic_write(paths[name], res[name])
        atomic_write(so, self.so[spec.key].read_bytes())
        atomic_write(out / f"{fn}.json", json.dumps({
            "fn_name": fn, "so": str(so), "stmt": paths.get("stmt"),
            "schedule": paths.get("schedule"), "spec": spec.key, "requested": spec.key,
            "compile_seconds": res.get("compile_s", 0.0), "failures": [], "tuned": True}))
