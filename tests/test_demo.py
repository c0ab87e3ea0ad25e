"""The README's main job, ``halojit demo``: every case matches numpy and
reports a speedup (its value depends on the machine; not asserted)."""

import re
import subprocess
import sys


def test_demo_runs_and_matches_numpy():
    p = subprocess.run([sys.executable, "-m", "halojit", "demo", "--size", "64"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    errors = [float(e) for e in re.findall(r"max relative error vs numpy = (\S+)", p.stdout)]
    assert len(errors) == 3 and max(errors) < 1e-4, p.stdout
    assert len(re.findall(r"speedup +\d+\.\d+x", p.stdout)) == 3, p.stdout
