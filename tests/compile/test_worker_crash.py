"""A scheduler whose compile kills the worker process (a Halide crash) is a
failure like any other: the next scheduler of the fallback chain runs in a
new worker, and only a chain that crashes throughout raises CompileError.

The workers here are stand-ins (no process, no Halide): ``_run_one``'s
bookkeeping is what is tested. The last test compiles kernels that once
crashed the real compiler."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import jit

from halojit.errors import CompileError
from halojit.generators import worker


class _Spec:
    def __init__(self, key):
        self.key = key

    def __str__(self):
        return self.key


class _FakeWorker:
    """Dies on the specs named in ``crash``; otherwise compiles the first spec."""

    def __init__(self, crash, log):
        self.crash, self.log = crash, log

    def call(self, request):
        spec = request["specs"][0]
        self.log.append(spec.key)
        if spec.key in self.crash:
            raise worker.WorkerDied("killed by SIGFPE")
        return {"fn_name": request["fn_name"], "spec": spec.key, "requested": spec.key,
                "failures": []}


@pytest.fixture
def fake_pool(monkeypatch):
    def install(crash):
        log, released = [], []
        monkeypatch.setattr(worker, "_acquire", lambda: _FakeWorker(crash, log))
        monkeypatch.setattr(worker, "_release", released.append)
        return log, released
    return install


def _request(*keys):
    return {"fn_name": "hj_test", "specs": [_Spec(k) for k in keys]}


def test_crash_falls_back_to_the_next_scheduler(fake_pool):
    log, released = fake_pool({"Elementwise"})
    res = worker._run_one(_request("Elementwise", "Adams2019", "Li2018"))
    assert log == ["Elementwise", "Adams2019"]
    assert res["spec"] == "Adams2019" and res["requested"] == "Elementwise"
    assert len(res["failures"]) == 1 and "Elementwise" in res["failures"][0]
    assert "crashed" in res["failures"][0]
    assert len(released) == 1  # the dead worker is not returned to the pool


def test_no_crash_no_failures(fake_pool):
    log, released = fake_pool(set())
    res = worker._run_one(_request("Elementwise", "Adams2019"))
    assert log == ["Elementwise"] and res["failures"] == [] and len(released) == 1


def test_every_scheduler_crashing_raises(fake_pool):
    log, released = fake_pool({"A", "B"})
    with pytest.raises(CompileError, match="crashed while compiling kernel hj_test with every"):
        worker._run_one(_request("A", "B"))
    assert log == ["A", "B"] and released == []


@pytest.mark.parametrize("dtype,n", [(np.float32, 131072), (np.float64, 65536),
                                     (np.float16, 131072)])
def test_compare_on_one_task_1d_arrays_compiles(dtype, n):
    """A 1-D array shorter than one Elementwise task but a multiple of its
    vector: the template's chunk loop (wider than the axis) around a float
    comparison's is_nan crashed Halide 21's simplifier with SIGFPE and the
    kernel was not built (np.ones(131072, np.float32) < 0). Now the template
    has no such loop, and a crash would fall back to Adams2019."""
    x = np.random.default_rng(7).standard_normal(n).astype(dtype)
    x[::97] = np.nan
    keep = x.copy()
    for fn in (lambda a: (a < 0) | (a == 1), lambda a: np.where(a > 0.5, a, -a)):
        got = jit(fn, 3)(x)
        want = fn(x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)  # NaN where numpy has NaN
    np.testing.assert_array_equal(x, keep)
