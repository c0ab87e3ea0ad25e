"""Tuning runs end to end on tiny shapes: the report, the database record used
by a compile in a new process, bad candidates skipped, the budget, the
executor seam, the command line."""

from __future__ import annotations

import concurrent.futures as cf
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import halojit
from halojit.errors import UnsupportedError
from halojit.schedules import ScheduleSpec, make_spec, tunedb
from halojit.schedules.tune import tune_function
from halojit.schedules.tune_worker import CRASH, OK, TIMEOUT, WRONG, compile_candidate

sys.path.insert(0, str(Path(__file__).parent))
import funcs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.level3


def x_of(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _pythonpath(*paths) -> str:
    """``paths`` ahead of the caller's PYTHONPATH (which may hold halide itself)."""
    return os.pathsep.join([*map(str, paths), *filter(None, [os.environ.get("PYTHONPATH")])])


def run_python(code: str) -> str:
    path = _pythonpath(ROOT, Path(__file__).parent)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=path), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_report_and_the_record_used_by_a_new_process():
    """The recorded best is what a fresh process compiles, from the kernel
    cache (the tuned kernel itself, no recompile)."""
    x = x_of(8, 48)
    f = halojit.trace(funcs.softmax)
    rows = make_spec("RowReduce", {"rows_per_task": 2, "vector": 8})
    li = make_spec("Li2018")
    report = tune_function(f, [x], {}, budget_s=60, specs_for=lambda local, d: [d, rows, li])
    (g,) = report.groups
    assert g.kind == "reduction" and g.ops == ["max", "subtract", "exp", "sum", "divide"]
    assert [c.spec for c in g.candidates] == [g.default, rows, li]
    assert all(c.status == OK and c.seconds > 0 for c in g.candidates)
    assert g.default_s == g.candidates[0].seconds
    assert g.best in (g.default, rows, li) and g.best_s <= g.default_s
    assert g.speedup == pytest.approx(g.default_s / g.best_s)
    assert g.paired is None or g.paired > 0  # default / winner over the confirmation rounds
    assert g.recorded and not report.stopped_by_budget
    assert "reduction" in str(report) and str(g.best) in str(report)
    np.testing.assert_allclose(f(x), funcs.softmax(x), rtol=1e-5)  # rebuilt with the record

    # A record without the default among the candidates: the winner is not the
    # default, so a new process can only get it from the database.
    y = x_of(8, 40)
    report = tune_function(halojit.trace(funcs.softmax), [y], {}, budget_s=60,
                           specs_for=lambda local, d: [rows])
    assert report.groups[0].best == rows and report.groups[0].default_s is None
    (rec,) = [r for r in tunedb.load_all() if r.group_key == report.groups[0].group_key]
    assert rec.recipe == rows
    out = run_python(
        "import numpy as np, funcs, halojit\n"
        "f = halojit.trace(funcs.softmax)\n"
        "y = np.random.default_rng(0).standard_normal((8, 40), dtype=np.float32)\n"
        "lo = f.lower(y)\n"
        "assert np.allclose(f(y), funcs.softmax(y), rtol=1e-5)\n"
        "print(lo.groups[0].scheduler, f.stats()['compiles'])\n")
    assert out.split() == [rows.key, "0"]
    # a user-given autoscheduler still wins over the database
    g = halojit.trace(funcs.softmax, autoscheduler="Li2018").lower(y).groups[0]
    assert g.scheduler.startswith("Li2018")


def _hanging_kernel(fn_name, target) -> bytes:
    """A kernel with the signature of funcs.double on 2-D float32 that loops
    for ages (2**60 iterations per element)."""
    import tempfile

    import halide as hl

    from halojit.generators.compile import compile_pipeline
    inp = hl.ImageParam(hl.Float(32), 2, "x")
    x, y = hl.Var("x"), hl.Var("y")
    r = hl.RDom([(0, 1 << 30), (0, 1 << 30)])
    out = hl.Func("out")
    out[x, y] = hl.f32(0)
    out[x, y] = out[x, y] * hl.f32(1.0001) + inp[x, y] * hl.cast(hl.Float(32), r.x + r.y)
    with tempfile.TemporaryDirectory() as tmp:
        k = compile_pipeline(hl.Pipeline(out), [inp], fn_name, hl.Target(target), Path(tmp), ())
        return k.so_path.read_bytes()


class FaultyExecutor(cf.ThreadPoolExecutor):
    """A local executor that counts submissions and turns chosen candidates
    into a wrong kernel (another function compiled under the candidate's
    name) or a hanging one: the seam a Dask or Ray executor plugs into."""

    def __init__(self, wrong_key, hang_key, wrong_graph):
        super().__init__(max_workers=2)
        self.wrong_key, self.hang_key, self.wrong_graph = wrong_key, hang_key, wrong_graph
        self.submitted = []

    def submit(self, fn, /, *args, **kwargs):
        (request,) = args
        self.submitted.append(request["spec"])
        if request["spec"].key == self.wrong_key:
            args = (dict(request, graph=self.wrong_graph, spec=make_spec("Adams2019")),)
        elif request["spec"].key == self.hang_key:
            so = _hanging_kernel(request["fn_name"], request["target"])
            return super().submit(lambda: {"status": OK, "so": so, "compile_s": 0.0})
        return super().submit(fn, *args, **kwargs)


def test_crashing_hanging_and_wrong_candidates_are_recorded_and_skipped():
    from halojit.graph.fusion import group_graph, partition
    x = x_of(16, 24, seed=1)
    f = halojit.trace(funcs.double)
    other = halojit.trace(lambda x: x * np.float32(3))
    conv = other._convert([x])
    wrong_graph = group_graph(partition(other._get_spec([x], [a for _, a in conv], {}).graph)[0])
    crash = ScheduleSpec("Adams2019", (("no_such_param", "1"),))  # Halide std::terminates
    wrong = make_spec("Mullapudi2016", {"balance": 7})
    hang = make_spec("Mullapudi2016", {"balance": 9})
    good = make_spec("Li2018")
    ex = FaultyExecutor(wrong.key, hang.key, wrong_graph)
    try:
        report = tune_function(f, [x], {}, budget_s=90, executor=ex,
                               specs_for=lambda local, d: [d, crash, wrong, hang, good])
    finally:
        ex.shutdown()
    (g,) = report.groups
    status = {c.spec.key: c for c in g.candidates}
    assert status[crash.key].status == CRASH, status[crash.key]
    assert status[wrong.key].status == WRONG and "output 0" in status[wrong.key].message
    assert status[hang.key].status == TIMEOUT
    assert status[good.key].status == OK and status[g.default.key].status == OK
    assert g.best in (g.default, good) and g.recorded
    # every compile went through the executor, except the default already in the kernel cache
    assert {s.key for s in ex.submitted} == {crash.key, wrong.key, hang.key, good.key}
    (rec,) = [r for r in tunedb.load_all(candidates=True) if r.group_key == g.group_key]
    assert sorted(c.status for c in rec.candidates) == sorted([OK, CRASH, WRONG, TIMEOUT, OK])
    np.testing.assert_array_equal(f(x), x * 2)


def test_the_budget_stops_the_run_and_keeps_what_it_has():
    x = x_of(8, 56, seed=2)
    f = halojit.trace(funcs.softmax)
    t0 = time.monotonic()
    report = f.tune(x, budget_s=4.0, workers=2)
    elapsed = time.monotonic() - t0
    (g,) = report.groups
    assert elapsed < 4.0 + 3.0, elapsed
    assert report.stopped_by_budget
    assert any(c.status == "skipped" for c in g.candidates)  # hundreds planned, few tried
    assert g.default_s is not None and g.best_s <= g.default_s and g.recorded
    (rec,) = [r for r in tunedb.load_all() if r.group_key == g.group_key]
    assert rec.recipe == g.best


def test_compile_candidate_reports_a_compile_error_as_data():
    from halojit.generators.compile import host_target
    from halojit.graph.fusion import group_graph, partition
    x = x_of(4, 8)
    f = halojit.trace(funcs.double)
    conv = f._convert([x])
    local = group_graph(partition(f._get_spec([x], [a for _, a in conv], {}).graph)[0])
    res = compile_candidate({"graph": local, "fn_name": "hj_tune_test_err",
                             "target": str(host_target("host")),
                             "spec": make_spec("RowReduce"), "timeout_s": 60})
    assert res["status"] == "error" and "RowReduce does not apply" in res["message"]


def test_tune_refuses_what_it_cannot_tune():
    x = x_of(4, 8)
    with pytest.raises(UnsupportedError, match="Halide backend"):
        halojit.trace(funcs.double, backend="numpy").tune(x)
    with pytest.raises(ValueError, match="budget_s"):
        halojit.trace(funcs.double).tune(x, budget_s=0)


def test_command_line_tune_list_export_import(tmp_path):
    env = dict(os.environ, PYTHONPATH=_pythonpath(ROOT), HALOJIT_CACHE_DIR=os.environ["HALOJIT_CACHE_DIR"])

    def cli(*args, **extra):
        proc = subprocess.run([sys.executable, "-m", "halojit", "tune", *args], cwd=ROOT,
                              capture_output=True, text=True, env=dict(env, **extra), timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout
    out = cli("tests/tune/funcs.py:softmax", "--shapes", "4x40:float32", "--budget", "5",
              "--export", str(tmp_path / "db.json"))
    assert "reduction" in out and "exported" in out
    listed = cli("--list")
    assert "f32[4,40]" in listed
    fresh = tmp_path / "fresh-cache"
    out = cli("--import", str(tmp_path / "db.json"), "--list", HALOJIT_CACHE_DIR=str(fresh))
    assert "imported" in out and "f32[4,40]" in out
    # `cache clear` keeps the database; --all removes it
    from halojit.__main__ import main
    old = os.environ["HALOJIT_CACHE_DIR"]
    os.environ["HALOJIT_CACHE_DIR"] = str(fresh)
    try:
        assert main(["cache", "clear"]) == 0 and (fresh / tunedb.DB_NAME).exists()
        assert main(["cache", "clear", "--all"]) == 0 and not (fresh / tunedb.DB_NAME).exists()
    finally:
        os.environ["HALOJIT_CACHE_DIR"] = old
    bad = subprocess.run([sys.executable, "-m", "halojit", "tune", "x.py:f", "--shapes", "3xa"],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2 and "halojit tune:" in bad.stderr


def test_a_scalar_output_group_is_checked_and_timed():
    x = x_of(16, 16, seed=3)
    report = tune_function(halojit.trace(funcs.total), [x], {}, budget_s=60,
                           specs_for=lambda local, d: [d, make_spec("Li2018")])
    (g,) = report.groups
    assert [c.status for c in g.candidates] == [OK, OK], [c.message for c in g.candidates]


def test_a_candidate_must_beat_the_default_in_most_confirmation_rounds():
    from types import SimpleNamespace

    from halojit.schedules.tune import CandidateResult, _GroupRun
    d = CandidateResult(make_spec("Adams2019"), OK, 1.00)
    a = CandidateResult(make_spec("Li2018"), OK, 0.90)  # best run 10% faster ...
    b = CandidateResult(make_spec("RowReduce"), OK, 0.93)
    k = lambda c: c.spec.key  # noqa: E731
    lucky = [{k(d): 1.0, k(a): 1.1, k(b): 0.95}, {k(d): 1.0, k(a): 0.9, k(b): 0.96},
             {k(d): 1.0, k(a): 1.2, k(b): 0.94}]  # ... but a loses 2 of 3 rounds
    run = SimpleNamespace(rounds=lucky)
    assert _GroupRun.winner(run, [d, a, b], d) is b
    run.rounds = [{k(d): 1.0, k(a): 1.1, k(b): 1.05}] * 3
    assert _GroupRun.winner(run, [d, a, b], d) is d
    run.rounds = []  # never re-timed: twice the margin needed
    assert _GroupRun.winner(run, [d, CandidateResult(a.spec, OK, 0.96)], d) is d
    assert _GroupRun.winner(run, [d, a], d) is a
    assert _GroupRun.winner(run, [a, b], None) is a  # no default: the fastest


def test_bench_table_on_tiny_workloads():
    """`halojit tune --bench`: one row per reduction/stencil/matmul group of
    the benchmark workloads, with times, speedup and the target tally."""
    from halojit.schedules.tune_table import TARGET_KINDS, bench_table
    table = bench_table("tiny", budget_s=3, only=["row_sum", "blur3x3"], progress=False)
    assert [(name, g.kind) for name, g in table.rows] == [("row_sum", "reduction"),
                                                          ("blur3x3", "stencil")]
    assert all(g.default_s and g.best_s and g.speedup >= 1.0 for _, g in table.rows)
    text = table.markdown()
    assert text.count("\n| row_sum | sum | reduction |") == 1 and "blur3x3" in text
    assert f"of 2 {'/'.join(TARGET_KINDS)} groups" in text and "target" in text
    assert "cores" in table.machine
    proc = subprocess.run([sys.executable, "-m", "halojit", "tune", "--bench", "--size", "tiny",
                           "--only", "full_sum", "--budget", "2"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=_pythonpath(ROOT)))
    assert proc.returncode == 0, proc.stderr
    assert "| full_sum | sum | reduction |" in proc.stdout and "of 1 " in proc.stdout
