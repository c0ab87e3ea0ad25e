"""2-D groups that read a value through shifted slices (blurs, finite
differences) take the Stencil template by default (build.default_spec):
values against numpy for small (one strip, no parallel loop) and large
(parallel strips) images, heights that no strip size divides, widths under
the vector, non-contiguous views, NaN/inf and float64, and the caller's
arrays left untouched."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.generators.build import SERIAL_MAX_ELEMENTS

from helpers import assert_same


def blur(img):  # the benchmark's separable 3x3 blur
    h = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) / 3
    return (h[:-2] + h[1:-1] + h[2:]) / 3


def gradient_norm(img):  # central differences: no shared first stage
    dx = img[1:-1, 2:] - img[1:-1, :-2]
    dy = img[2:, 1:-1] - img[:-2, 1:-1]
    return np.sqrt(dx * dx + dy * dy)


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def only_group(f, x):
    (g,) = f.lower(x).groups
    return g


@pytest.mark.parametrize("fn", [blur, gradient_norm])
@pytest.mark.parametrize("shape", [
    (66, 66),                                 # small: one strip, serial
    (7, 300),                                 # small, short
    (SERIAL_MAX_ELEMENTS // 40 + 37, 42),     # large, narrower than the vector (40 wide out)
    (SERIAL_MAX_ELEMENTS // 200 + 131, 203),  # large, strips do not divide the height
])
def test_stencil_default_matches_numpy(fn, shape):
    x = rand(*shape, seed=sum(shape))
    x[3, 5], x[4, 9], x[-2, -3] = np.nan, np.inf, -np.inf
    before = x.copy()
    f = halojit.trace(fn)
    g = only_group(f, x)
    assert g.scheduler.startswith("Stencil"), g.scheduler
    serial = x.size < SERIAL_MAX_ELEMENTS
    assert (".parallel(" in g.schedule) == (not serial), g.schedule
    with np.errstate(invalid="ignore"):
        want = fn(x)
    assert_same(f(x), want, rtol=1e-6, atol=1e-6)
    out = np.full_like(want, 7.0)
    f(x, out=out)
    assert_same(out, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(x, before)


def test_stencil_default_on_a_strided_view_and_float64():
    base = rand(900, 130, seed=3, dtype=np.float64)
    x = base[::2, 1:-1]  # every other row, inner columns: a non-contiguous view
    f = halojit.trace(blur)
    assert only_group(f, x).scheduler.startswith("Stencil")
    assert_same(f(x), blur(x), rtol=1e-12, atol=1e-12)
    assert_same(f(base), blur(base), rtol=1e-12, atol=1e-12)  # a second shape


def test_zero_size_and_one_row_images_are_not_stencils():
    # no 2-D output with both axes > 1: the template does not apply, numpy's answer still
    f = halojit.trace(blur)
    for shape in [(3, 40), (0, 40), (2, 5)]:
        x = rand(*shape, seed=1)
        assert_same(f(x), blur(x))
