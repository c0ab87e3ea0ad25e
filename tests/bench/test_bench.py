"""The benchmark suite on tiny sizes: JSON layout, the numpy check that catches a
wrong peer, the report and the CLI. Runs without numba/numexpr/jax/torch."""

from __future__ import annotations

import json

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
