"""Float -> integer casts that feed integer arithmetic or another integer cast.

Halide 21 folds reinterpret(uint, cast(int, float)), the form of halojit's
wrapping signed add, subtract and multiply and of an astype to unsigned,
into cast(uint, float), which LLVM makes poison for negative values:
``(v * 10).astype(np.int32) + 1`` came back wrong wherever v < 0
(halide_ops.cast keeps the float cast behind a select). Compared with numpy
exactly, at the Halide backend, over negative and positive values; NaN
gives numpy's value on x86.
"""

from __future__ import annotations

import platform
import warnings

import numpy as np
import pytest
from helpers import assert_matches_numpy, jit

FLOATS = [np.float16, np.float32, np.float64]
SIGNED = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]


def _values(dtype, n=1003):
    rng = np.random.default_rng(11)
    return np.clip(rng.standard_normal(n) * 40, -120, 120).astype(dtype)  # int8 range, both signs


@pytest.mark.parametrize("fdt", FLOATS)
@pytest.mark.parametrize("idt", SIGNED)
def test_cast_then_wrapping_arithmetic(fdt, idt):
    v = _values(fdt)
    k = np.random.default_rng(2).integers(-50, 50, v.shape).astype(idt)

    def f(v, k):
        i = np.trunc(v).astype(idt)
        return i + k, i - idt(3), i * k, np.floor(v).astype(np.int64) + 7

    assert_matches_numpy(f, (v, k), 3)


@pytest.mark.parametrize("fdt", FLOATS)
@pytest.mark.parametrize("idt", SIGNED)
def test_cast_then_other_integer_casts(fdt, idt):
    v = _values(fdt)

    def f(v):
        i = v.astype(idt)
        return i.astype(np.uint8), i.astype(np.uint64), i.astype(np.int8)

    assert_matches_numpy(f, (v,), 3)


@pytest.mark.parametrize("udt", UNSIGNED)
def test_cast_to_unsigned_then_signed(udt):
    v = np.abs(_values(np.float32))

    def f(v):
        return v.astype(udt).astype(np.int16) - np.int16(5)

    assert_matches_numpy(f, (v,), 3)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="numpy's NaN -> int values are the x86 conversion's")
@pytest.mark.parametrize("idt", SIGNED + UNSIGNED)
def test_nan_to_int_is_numpys(idt):
    v = np.array([np.nan, 1.5, -0.0, np.nan], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = v.astype(idt)
        got = jit(lambda v: v.astype(idt), 3)(v)
    np.testing.assert_array_equal(got, want, strict=True)
