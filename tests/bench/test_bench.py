"""The benchmark suite on tiny sizes: JSON layout, the numpy check that catches a
wrong peer, the report and the CLI. Runs without numba/numexpr/jax/torch."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from halojit.bench import measure, report
from halojit.bench.peers import HalojitPeer, NumexprPeer, NumpyPeer, Peer
from halojit.bench.suite import run


class BrokenPeer(Peer):
    """Returns numpy's result plus one: the suite must refuse to time it."""
    name = label = "broken"

    def prepare(self, w, args):
        return lambda: w.fn(*args) + 1


def _peers():
    peers = [NumpyPeer(), HalojitPeer(), BrokenPeer()]
    ne = NumexprPeer()
    if ne.available() is None:  # optional: fast, and it exercises a real peer
        peers.append(ne)
    return peers


@pytest.fixture(scope="module")
def result():
    r = run(sizes=("tiny",), only=["chain", "row_sum"], peers=_peers(), repeat=2,
            compile_times=False, log=lambda s: None)
    return report.summarize(r)


def test_layout(result):
    assert set(result) >= {"machine", "halojit", "numpy", "repeat", "peers", "roofline",
                           "sizes", "targets"}
    assert result["roofline"]["copy_gbs"] > 0 and result["roofline"]["read_gbs"] > 0
    rows = result["sizes"]["tiny"]["rows"]
    assert [r["workload"] for r in rows] == ["chain", "row_sum"]
    for r in rows:
        assert r["bytes"] > 0 and r["shapes"]
        for name in ("numpy", "halojit"):
            e = r["peers"][name]
            assert e["min_s"] <= e["median_s"] and e["runs"] == 2
            assert e["max_rel_err"] <= measure.TOLERANCE
        assert "kernel_s" in r["peers"]["halojit"]
        assert r["derived"]["speedup_vs_numpy"]["numpy"] == pytest.approx(1.0)
    chain = rows[0]
    assert "median_s" in chain["peers"]["halojit_out"]  # memory-bound: out= variant timed
    assert "halojit_out" not in rows[1]["peers"]
    json.loads(json.dumps(result, default=float))  # JSON-ready


def test_wrong_result_is_caught_not_timed(result):
    for r in result["sizes"]["tiny"]["rows"]:
        e = r["peers"]["broken"]
        assert e["error"].startswith("wrong result") and "median_s" not in e
    assert "WRONG" in report.table(result, "tiny")
    assert "broken" in report.errors(result)


def test_check():
    want = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert measure.check(want.copy(), want, "x") == 0.0
    with pytest.raises(measure.WrongResult, match="shape"):
        measure.check(want.ravel(), want, "x")
    bad = want.copy()
    bad[0, 0] = np.nan
    with pytest.raises(measure.WrongResult, match="non-finite"):
        measure.check(bad, want, "x")
    with pytest.raises(measure.WrongResult, match="relative error"):
        measure.check(want * 1.01, want, "x")


def test_interleaved_timing_warms_each_contender_before_each_run():
    calls = {"a": 0, "b": 0}

    def counter(name):
        def fn():  # at least 2 ms a call, so a 10 ms warm-up is 1 to 5 calls
            calls[name] += 1
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 2e-3:
                pass
        return fn
    fns = {k: counter(k) for k in calls}
    r = measure.time_interleaved(fns, repeat=3, min_batch_s=1e-3, settle_s=0, warm_s=0)
    assert calls == {"a": 5, "b": 5}  # _batch's 2 probes (a slow one ends it) + 3 runs, none warm
    assert all(v["runs"] == 3 and v["calls_per_run"] == 1 for v in r.values())
    calls.update(a=0, b=0)
    measure.time_interleaved(fns, repeat=3, min_batch_s=1e-3, settle_s=0, warm_s=0.01)
    for n in calls.values():  # 1 to 5 warm-up calls before each of the 3 runs
        assert 2 + 3 + 3 <= n <= 2 + 3 + 15
    calls["a"] = 0
    measure.time_interleaved({"a": fns["a"]}, repeat=6, min_batch_s=1e-3, settle_s=0,
                             warm_s=0.01)
    assert 2 + 6 + 1 <= calls["a"] <= 2 + 6 + 5  # alone: warmed before the first run only


def test_batch_size_ignores_slow_early_calls():
    # halojit's second call of a signature registers its C fast path (100-300
    # us); a batch sized from that call alone was 3 calls, not hundreds
    calls = []

    def fn():
        calls.append(1)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < (5e-4 if len(calls) <= 2 else 2e-5):
            pass
    r = measure.time_interleaved({"f": fn}, repeat=1, min_batch_s=1e-3, settle_s=0, warm_s=0)
    assert 10 <= r["f"]["calls_per_run"] <= 50, r  # sized from the old first calls: 2


def test_targets_met_or_not():
    row = {"workload": "chain", "kind": "memory", "bytes": 1, "peers": {},
           "derived": {"speedup_vs_numpy": {"halojit": 5.0}, "vs_best_peer": 1.5,
                       "halojit_out_copy_fraction": 0.7}}
    got = {t["target"]: t["met"] for t in report._targets("large", row, {"cold_s": 2.0,
                                                                          "kernels": 1})}
    assert got == {">= 4x numpy": True, ">= 2x best peer": False,
                   "out= >= 60% of copy roof": True, "compile cold < 1 s": False}


def test_cli_writes_json_and_table(tmp_path, capsys):
    from halojit.__main__ import main as halojit_main  # `halojit bench ...`
    assert halojit_main(["bench", "--size", "tiny", "--only", "bias_relu", "--peers", "numpy",
                         "--repeat", "1", "--no-compile", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["sizes"]["tiny"]["rows"][0]["workload"] == "bias_relu"
    out = capsys.readouterr().out
    assert "bias_relu" in out and "issue 4 targets" in out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "speedup.png").stat().st_size > 0


def test_bench_run_py_is_a_wrapper(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[2] / "bench" / "run.py"
    p = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "--size" in p.stdout


def test_compile_times_in_new_processes():
    got = measure.compile_times("tiny", ["bias_relu"])
    c = got["bias_relu"]
    assert "error" not in c, c
    assert c["cold_s"] > 0 and c["warm_s"] > 0 and c["kernels"] >= 1
