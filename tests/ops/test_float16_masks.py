"""Float16 comparisons and-ed with a per-row bool, vectorized: Halide 21's
avx512_sapphirerapids code (AVX512-FP16) inverted every lane of
(x > 0).any(-1, keepdims=True) & (x < 1) for rows 16-33 wide, so kernels are
built without that feature (compile.host_target). Checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.generators.compile import host_target

from helpers import assert_same


def rand16(*shape, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float16)
    x.flat[::11] = np.float16(1.0)  # the compare's own boundary
    x.flat[5::13] = np.nan
    return x


@pytest.mark.parametrize("width", [16, 17, 33, 40, 64])
@pytest.mark.parametrize("rows", [4, 100])
def test_row_any_and_compare(rows, width):
    x = rand16(rows, width, seed=rows + width)
    fn = lambda x: (x > 0).any(axis=-1, keepdims=True) & (x < 1)  # noqa: E731
    assert_same(halojit.trace(fn)(x), fn(x))


@pytest.mark.parametrize("shape", [(4, 33), (700, 17)])
def test_compare_and_row_mask_input(shape):
    x = rand16(*shape, seed=3)
    m = np.random.default_rng(4).random(shape[0]) > 0.3
    fn = lambda x, m: np.where((x < 1) & m[:, None], x, np.float16(0))  # noqa: E731
    assert_same(halojit.trace(fn)(x, m), fn(x, m))


def test_all_or_compare_in_float16():
    x = rand16(64, 33, seed=7)
    fn = lambda x: (x > -3).all(axis=-1, keepdims=True) | (x >= 0.5)  # noqa: E731
    assert_same(halojit.trace(fn)(x), fn(x))


def test_host_target_leaves_out_the_miscompiling_feature():
    import halide as hl
    assert not host_target("host").has_feature(hl.TargetFeature.AVX512_SapphireRapids)
    assert not host_target("x86-64-linux-avx512_sapphirerapids-avx512_skylake-avx512-avx2-avx"
                           "-f16c-fma-sse41").has_feature(hl.TargetFeature.AVX512_SapphireRapids)
