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


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="numpy's out-of-range values are the x86 conversion's")
@pytest.mark.parametrize("fdt", FLOATS)
@pytest.mark.parametrize("idt", [np.int8, np.uint8, np.int16, np.uint16])
def test_out_of_range_to_short_ints_wrap_as_numpy(fdt, idt):
    """numpy truncates to int32 (out of range and NaN: INT_MIN), then wraps:
    -1.0 -> 255 as uint8, 300.0 -> 44, 1e10 -> 0. The same at every length:
    vectorized, the kernels saturated (-1.0 -> 0) where one element wrapped."""
    vals = [-1, -2.7, 300, -129, 200, 65535.5, 70000, -70000.5, 1e10, -1e10, 3e9, 2.2e9,
            np.inf, -np.inf, np.nan, 2.0 ** 31, -2.0 ** 31, 12.9, -0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = np.array(vals, np.float64).astype(fdt)
        f = jit(lambda v: v.astype(idt), 3)
        for reps in (1, 67):  # one lane each, and full vectors with a tail
            v = np.tile(base, reps)
            got = f(v)
            want = v.astype(idt)
            np.testing.assert_array_equal(got, want, strict=True, err_msg=f"{reps} copies")
