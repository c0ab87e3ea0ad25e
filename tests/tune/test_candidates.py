"""Candidate schedules of a group (no compiles): families, order, no duplicates."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from halojit.schedules import make_spec
from halojit.schedules.candidates import RANDOM_SAMPLES, candidate_specs, group_kind

sys.path.insert(0, str(Path(__file__).parent))
import funcs  # noqa: E402
from helpers import local_graphs  # noqa: E402,F401 (test_templates imports it from here)


def test_every_family_is_sampled_early_and_the_default_comes_first():
    (local,) = local_graphs(funcs.softmax, np.ones((64, 256), np.float32))
    assert group_kind(local) == "reduction"
    default = make_spec("Adams2019")
    previous = make_spec("RowReduce", {"rows_per_task": 2})
    specs = candidate_specs(local, default, previous, seed=1)
    assert specs[:2] == [default, previous]
    assert len({s.key for s in specs}) == len(specs)
    head = {s.name for s in specs[:12]}
    assert {"RowReduce", "Adams2019", "Mullapudi2016", "Li2018"} <= head
    assert "Matmul" not in {s.name for s in specs}  # does not fit a softmax
    samples = [dict(s.params) for s in specs if dict(s.params).get("beam_size") == "1"]
    assert len(samples) >= RANDOM_SAMPLES - 2  # distinct seeds: (almost) no duplicates
    assert {p["random_dropout"] for p in samples} == {"1", "2", "3", "4", "5"}
    assert len({p["random_dropout_seed"] for p in samples}) == len(samples)
    # another seed, other samples; the same seed, the same list
    assert candidate_specs(local, default, None, seed=2)[1:] != specs[2:]
    assert candidate_specs(local, default, previous, seed=1) == specs


def test_kinds_and_templates_follow_the_group():
    blur, = local_graphs(lambda x: (x[:, :-2] + x[:, 1:-1] + x[:, 2:]) / 3,
                         np.ones((16, 16), np.float32))
    assert group_kind(blur) == "stencil"
    groups = local_graphs(lambda x, w: np.maximum(x @ w, 0), np.ones((8, 16), np.float32),
                          np.ones((16, 32), np.float32))
    (mm,) = [g for g in groups if group_kind(g) == "matmul"]
    names = {s.name for s in candidate_specs(mm, make_spec("Matmul"), seed=0)}
    assert "Matmul" in names and "RowReduce" not in names
    (ew,) = local_graphs(funcs.double, np.ones((4, 4), np.float32))
    assert group_kind(ew) == "elementwise"


def test_sorts_and_selections_are_their_own_kind():
    x = np.zeros(5000, np.float32)
    kinds = {group_kind(g) for g in local_graphs(lambda x: np.sort(x)[-3:] + np.median(x), x)}
    assert "sort" in kinds and "elementwise" not in kinds, kinds
