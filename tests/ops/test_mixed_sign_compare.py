"""Comparisons of a signed integer with uint64: numpy's loop takes the pair
as is and compares values (a negative is below every unsigned value), where
Halide compared one type's bits: ``a < u`` of int64 -1 and uint64 2**64 - 1
was False (halide_ops._mixed_sign_compare)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_matches_numpy

OPS = ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal"]
A = np.array([-1, 0, 5, -2**63, 2**62, 7, -7], np.int64)
U = np.array([2**64 - 1, 2**63, 1, 0, 2**62, 7, 2**64 - 7], np.uint64)


@pytest.mark.parametrize("name", OPS)
def test_signed_against_uint64(name, opt_level):
    op = getattr(np, name)

    def f(a, u):
        return (op(a, u), op(u, a), op(a.astype(np.int8), u), op(u, a.astype(np.int32)),
                op(a, np.uint64(2**64 - 1)), np.where(op(a, u), a, -1))

    assert_matches_numpy(f, (A, U), opt_level)


def test_after_a_float_cast(opt_level):
    v = np.array([-0.5, -1.7, 2.0, 30.0], np.float32)
    u = np.array([1, 2, 3, 2**63], np.uint64)
    assert_matches_numpy(lambda v, u: (v * 10).astype(np.int32) < u, (v, u), opt_level)
