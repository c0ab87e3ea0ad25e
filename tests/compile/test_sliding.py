"""Halide 21's sliding window gave uninitialized values where Adams2019
stored a Func outside the loop it computed it in and the Func's region per
iteration joins a moving point to a fixed block: ``t = x * 2; t[:, None] +
t`` of 65-181 elements (parallelism=1) read 3.6e35 where 4.0 was due at
13460 of 16641 outputs. autoschedule.unslide computes such Funcs at their
store level."""

from __future__ import annotations

import re

import numpy as np
import pytest

import halojit
from halojit.schedules.autoschedule import load_plugin, unslide

pytestmark = pytest.mark.level3


def _outer_sum(x):
    t = x * 2
    return t[:, None] + t


def _outer_exp(x):
    t = np.exp(x)
    return t[:, None] * t


def _setitem_outer(x):
    t = x.copy()
    t[[0, 33, 13]] = x[0]
    return t - t[:, None]


@pytest.mark.parametrize("fn,n", [(_outer_sum, 63), (_outer_sum, 65), (_outer_sum, 129),
                                  (_outer_sum, 181), (_outer_exp, 150), (_setitem_outer, 63)])
def test_outer_of_a_computed_vector(fn, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(halojit.trace(fn)(x), fn(x), rtol=1e-6, atol=0)


def test_subtract_outer_int32_is_exact():
    x = np.arange(-60, 69, dtype=np.int32)  # 129 elements
    def fn(a):
        t = a * 2
        return np.subtract.outer(t, t)
    np.testing.assert_array_equal(halojit.trace(fn)(x), fn(x))


def _outer_pipeline(hl, n):
    inp = hl.ImageParam(hl.Float(32), 1, "in0")
    v0, v1 = hl.Var("v0"), hl.Var("v1")
    t = hl.Func("t")
    t[v0] = inp[v0] * 2.0
    out = hl.Func("out")
    out[v1, v0] = t[v0] + t[v1]
    inp.set_estimates([hl.Range(0, n)])
    out.set_estimates([hl.Range(0, n), hl.Range(0, n)])
    return inp, hl.Pipeline([out])


def test_unslide_moves_compute_to_the_store_level():
    import halide as hl
    n = 129
    inp, pipeline = _outer_pipeline(hl, n)
    load_plugin("Adams2019")
    results = pipeline.apply_autoscheduler(
        hl.Target("host-strict_float"), hl.AutoschedulerParams("Adams2019", {"parallelism": "1"}))
    # the source names out "out_1" where this process made an "out" before
    slid = re.search(r"\.store_at\(out(_\d+)?, v1\)", results.schedule_source) is not None
    changed = unslide(pipeline, results)
    assert changed == (["t"] if slid else [])
    if slid:
        assert "computed at the store level" in results.schedule_source
    x = np.arange(n, dtype=np.float32) - 40
    inp.set(hl.Buffer(x))
    got = np.asarray(pipeline.realize([n, n], hl.Target("host-strict_float")))
    np.testing.assert_array_equal(got, (2 * x)[:, None] + 2 * x)


class _Results:
    def __init__(self, source):
        self.schedule_source = source


def test_unslide_reads_store_root_and_leaves_unknown_forms():
    import halide as hl
    _, pipeline = _outer_pipeline(hl, 8)
    plain = "Func out = pipeline.get_func(1);\nFunc t = pipeline.get_func(0);\nVar v0(\"v0\");\n"
    # computed where it is stored: nothing to change
    same = _Results(plain + "t\n    .compute_at(out, v0)\n    .store_at(out, v0);\n")
    assert unslide(pipeline, same) == [] and "halojit" not in same.schedule_source
    # stored at root, computed inside: computed at root
    root = _Results(plain + "t\n    .store_root()\n    .compute_at(out, v0);\n")
    assert unslide(pipeline, root) == ["t"]
    # a loop this parser cannot name: the schedule is kept as it is
    unknown = _Results(plain + "t\n    .compute_at(out, v0)\n    .store_at(out, r4_x);\n")
    assert unslide(pipeline, unknown) == []
    # a parallel loop between the two levels: not slid, kept
    plain += "Var v1(\"v1\");\nVar v0i(\"v0i\");\n"
    consumer = "out\n    .split(v0, v0, v0i, 8)\n    .parallel(v0i)\n    .reorder({v0i, v1, v0});\n"
    par = _Results(plain + consumer + "t\n    .compute_at(out, v0i)\n    .store_at(out, v0);\n")
    assert unslide(pipeline, par) == []
    # a serial one: computed at the store level
    ser = _Results(plain + consumer.replace("parallel(v0i)", "parallel(v0)")
                   + "t\n    .compute_at(out, v0i)\n    .store_at(out, v1);\n")
    assert unslide(pipeline, ser) == ["t"]


def test_mullapudi_row_sum_schedules_without_falling_back():
    """Mullapudi2016 inlines an input's wrapper Func, so the indices of the
    source's get_func lines overran the scheduled pipeline (3 Funcs) and
    unslide raised: every Mullapudi2016 candidate of a row sum failed."""
    x = np.random.default_rng(3).standard_normal((96, 200)).astype(np.float32)
    f = halojit.trace(lambda a: a.sum(axis=1), autoscheduler="Mullapudi2016")
    schedule = f.lower(x).groups[0].schedule
    assert "Mullapudi2016" in schedule and "Adams2019" not in schedule
    np.testing.assert_allclose(f(x), x.sum(axis=1), rtol=1e-5, atol=1e-5)
