"""GPU-only: the random programs of tests/graph/test_random_programs.py
(5-30 numpy ops over random shapes and dtypes) compiled for host-cuda and
run on the device equal numpy eager."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from cuda_helpers import TARGET, needs_gpu

pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402

from graph.test_random_programs import programs, run  # noqa: E402
from helpers import assert_same  # noqa: E402
import halojit  # noqa: E402

pytestmark = needs_gpu


@settings(max_examples=25, deadline=None)
@given(case=programs())
def test_random_program_on_device(case):
    program, inputs = case
    copies = [np.copy(x) for x in inputs]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = run(program, *inputs)
        f = halojit.trace(lambda *xs: run(program, *xs), target=TARGET)
        for call in ("miss", "hit"):
            got = f(*inputs)
            assert len(got) == len(want)
            for k, (g, w) in enumerate(zip(got, want)):
                assert_same(g, w, what=f"{call} output {k} of {program}")
    for x, c in zip(inputs, copies):
        np.testing.assert_array_equal(x, c, strict=True)
