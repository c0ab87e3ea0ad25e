"""A scheduler whose compile kills the worker process (a Halide crash) or
runs past HALOJIT_COMPILE_TIMEOUT is a failure like any other: the rest of
the fallback chain runs in a new worker, and only a chain that fails
throughout raises CompileError.

The workers in the first tests are stand-ins (no process, no Halide):
``_run_one``'s bookkeeping is what is tested. Then real workers whose
startup (a sitecustomize module) makes one scheduler hang or crash, and
kernels that once crashed the real compiler."""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest
from helpers import jit

import halojit
from halojit.errors import CompileError
from halojit.generators import worker


class _Spec:
    def __init__(self, key):
        self.key = key

    def __str__(self):
        return self.key


class _FakeWorker:
    """Fails (as Halide errors) on the specs named in ``fail``, dies on those
    in ``crash`` (times out on those in ``hang``); compiles the first other
    spec of the chain."""

    def __init__(self, crash, log, fail=(), hang=()):
        self.crash, self.log, self.fail, self.hang = crash, log, fail, hang

    def call(self, request, timeout=0):
        failures = []
        for k, spec in enumerate(request["specs"]):
            self.log.append(spec.key)
            if spec.key in self.fail:
                failures.append(f"{spec}: Halide error")
                continue
            if spec.key in self.crash or spec.key in self.hang:
                raise worker.WorkerDied("killed", k, failures, timed_out=spec.key in self.hang)
            return {"fn_name": request["fn_name"], "spec": spec.key, "requested": spec.key,
                    "failures": failures}
        raise CompileError("every schedule failed")


@pytest.fixture
def fake_pool(monkeypatch):
    def install(crash, fail=(), hang=()):
        log, released = [], []
        monkeypatch.setattr(worker, "_acquire", lambda: _FakeWorker(crash, log, fail, hang))
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
    with pytest.raises(CompileError, match="every schedule failed for kernel hj_test, the last "
                                           "one because the Halide compiler crashed"):
        worker._run_one(_request("A", "B"))
    assert log == ["A", "B"] and released == []


def test_timeout_after_a_failure_keeps_both(fake_pool, monkeypatch):
    """The worker names the spec it is on, so the one that hangs (not the
    first of the chain) is the one recorded, after the failure before it,
    and the chain goes on after it."""
    monkeypatch.setenv("HALOJIT_COMPILE_TIMEOUT", "7")
    log, _ = fake_pool(set(), fail={"A"}, hang={"B"})
    res = worker._run_one(_request("A", "B", "C"))
    assert log == ["A", "B", "C"] and res["spec"] == "C" and res["requested"] == "A"
    assert res["failures"][0] == "A: Halide error"
    assert res["failures"][1].startswith("B: took longer than 7 s (HALOJIT_COMPILE_TIMEOUT)")


def test_every_scheduler_failing_names_them_all(fake_pool):
    log, _ = fake_pool({"C"}, fail={"A"}, hang={"B"})
    with pytest.raises(CompileError) as e:
        worker._run_one(_request("A", "B", "C"))
    assert log == ["A", "B", "C"]
    text = str(e.value)
    assert "A: Halide error" in text and "B: took longer" in text and "C: the Halide compiler crashed" in text


_SITE = """
import os, time
import halojit.generators.lowering as L
_orig = L.lower_group
def lower_group(graph, name, spec=None, *args, **kwargs):
    if spec is not None and spec.name == {name!r}:
        if {mode!r} == "hang":
            time.sleep(120)
        os.kill(os.getpid(), 11)
    return _orig(graph, name, spec, *args, **kwargs)
L.lower_group = lower_group
"""


@pytest.fixture
def rigged_workers(tmp_path, monkeypatch):
    """Fresh compile workers that hang (or crash) when lowering for one
    scheduler; the pool is emptied before and after."""
    def install(name, mode):
        (tmp_path / "sitecustomize.py").write_text(_SITE.format(name=name, mode=mode))
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
            [str(tmp_path)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        worker._shutdown()
    yield install
    worker._shutdown()


@pytest.mark.parametrize("mode", ["hang", "crash"])
def test_real_worker_falls_back(rigged_workers, monkeypatch, capfd, mode):
    monkeypatch.setenv("HALOJIT_COMPILE_TIMEOUT", "3")
    monkeypatch.setenv("HALOJIT_COMPILE_WORKERS", "1")
    monkeypatch.setenv("HALOJIT_LOG", "1")
    rigged_workers("Mullapudi2016", mode)
    x = np.random.default_rng(1).standard_normal((37, 45)).astype(np.float32)
    c = 2.0 if mode == "hang" else 3.0  # distinct kernels: no cache hit between the two
    f = halojit.trace(lambda a: np.tanh(a) * c + a.sum(0), autoscheduler="Mullapudi2016")
    t0 = time.perf_counter()
    (g,) = f.lower(x).groups
    assert time.perf_counter() - t0 < 60
    np.testing.assert_allclose(f(x), np.tanh(x) * c + x.sum(0), rtol=1e-5, atol=1e-5)
    assert not g.scheduler.startswith("Mullapudi2016"), g.scheduler
    why = "took longer than 3 s" if mode == "hang" else "crashed"
    log = capfd.readouterr().err
    assert any("fell back: Mullapudi2016" in line and why in line for line in log.splitlines()), log


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
