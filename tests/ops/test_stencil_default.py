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
from halojit.generators.build import SERIAL_MAX_ELEMENTS, SMALL_STENCIL_ELEMENTS

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
    (66, 66),                                 # small: one strip, serial, computed whole
    (7, 300),                                 # small, short
    (122, 121),                               # one strip, serial, a sliding window
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


@pytest.mark.parametrize("shape, sliding", [
    ((66, 66), "0"), ((34, 130), "0"), ((67, 66), "1"), ((122, 121), "1"), ((300, 300), "1")])
def test_small_strips_are_computed_whole(shape, sliding):
    # a serial strip of at most SMALL_STENCIL_ELEMENTS outputs computes its
    # first pass whole; larger ones slide a window of rows
    x = rand(*shape, seed=3)
    x[1, 1], x[-1, 7] = np.nan, -np.inf
    f = halojit.trace(blur)
    spec = dict(kv.split("=") for kv in only_group(f, x).scheduler.split(";")[1:])
    assert spec["sliding"] == sliding, spec
    assert ((shape[0] - 2) * (shape[1] - 2) <= SMALL_STENCIL_ELEMENTS) == (sliding == "0")
    with np.errstate(invalid="ignore"):
        assert_same(f(x), blur(x), rtol=1e-6, atol=1e-6)


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


PATTERNS = {
    "downsample": lambda x: (x[::2, ::2] + x[1::2, 1::2] + x[::2, 1::2] + x[1::2, ::2]) * 0.25,
    "diff_rows": lambda x: x[1:] - x[:-1],
    "diff_cols_squared": lambda x: (x[:, 1:] - x[:, :-1]) ** 2,
    "sobel": lambda x: np.hypot(
        (x[:-2, 2:] + 2 * x[1:-1, 2:] + x[2:, 2:]) - (x[:-2, :-2] + 2 * x[1:-1, :-2] + x[2:, :-2]),
        (x[2:, :-2] + 2 * x[2:, 1:-1] + x[2:, 2:]) - (x[:-2, :-2] + 2 * x[:-2, 1:-1] + x[:-2, 2:])),
    "transposed": lambda x: x.T[1:, :] + x.T[:-1, :],
    "reversed": lambda x: x[::-1, :][1:] + x[:-1],
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
@pytest.mark.parametrize("shape", [(60, 70), (1200, 334)])
def test_other_slicing_patterns_take_stencil_and_match_numpy(name, shape):
    """Strided, reversed and transposed slices, and a stencil with a
    transcendental: the template's strips and sliding windows stay exact
    (Halide's bounds inference sizes them)."""
    fn = PATTERNS[name]
    x = rand(*shape, seed=len(name))
    f = halojit.trace(fn)
    assert only_group(f, x).scheduler.startswith("Stencil")
    assert_same(f(x), fn(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8])
def test_integer_box_filter_floor_divides_as_numpy(dtype):
    x = np.random.default_rng(5).integers(0, 200, (1200, 334)).astype(dtype)
    fn = lambda x: (x[:-2] + x[1:-1] + x[2:]) // 3  # noqa: E731 - uint8 wraps, as numpy
    f = halojit.trace(fn)
    assert only_group(f, x).scheduler.startswith("Stencil")
    assert_same(f(x), fn(x))


def test_two_input_stencil_matches_numpy():
    a, b = rand(700, 90, seed=8), rand(700, 90, seed=9)[:, ::-1]
    fn = lambda a, b: a[1:, 1:] * b[:-1, :-1] + a[:-1, 1:]  # noqa: E731
    f = halojit.trace(fn)
    assert f.lower(a, b).groups[0].scheduler.startswith("Stencil")
    assert_same(f(a, b), fn(a, b), rtol=1e-6, atol=1e-6)


def heat(u, steps=3):  # explicit heat-equation steps, zero boundary: a chain of stencils
    for _ in range(steps):
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
        u = np.pad(u[1:-1, 1:-1] + 0.1 * lap, 1)
    return u


def shrinking_heat(u):  # no pad: each step loses the border
    for _ in range(3):
        u = u[1:-1, 1:-1] + 0.1 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                   - 4 * u[1:-1, 1:-1])
    return u


def pad_blur(x):  # same-size blur of an edge-padded image
    p = np.pad(x, 1, mode="edge")
    return blur(p)


@pytest.mark.parametrize("fn", [heat, shrinking_heat, pad_blur])
@pytest.mark.parametrize("shape", [(40, 70), (SERIAL_MAX_ELEMENTS // 150 + 29, 150)])
def test_stencil_chains_store_each_stage_per_strip(fn, shape):
    """A chain of stencils (or a pad inside one) takes Stencil without the
    sliding window (schedules.templates.stencil_chain: Halide recomputed
    every row of each intermediate 3x per level there, 8 heat steps on
    (2048, 2048) took 119 ms), small strips, exact against numpy at both
    sizes, with NaN/inf spreading as numpy's."""
    x = rand(*shape, seed=shape[0])
    x[7, 9], x[-5, 20] = np.nan, np.inf
    before = x.copy()
    f = halojit.trace(fn)
    g = only_group(f, x)
    assert g.scheduler.startswith("Stencil") and "sliding=0" in g.scheduler, g.scheduler
    with np.errstate(invalid="ignore"):
        want = fn(x)
    assert_same(f(x), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(x, before)


def test_a_single_stencil_keeps_the_sliding_window():
    x = rand(SERIAL_MAX_ELEMENTS // 100 + 3, 100)
    assert "sliding=1" in only_group(halojit.trace(blur), x).scheduler
    assert "sliding=1" in only_group(halojit.trace(gradient_norm), x).scheduler


def test_slices_of_inputs_read_twice_are_not_stored():
    """``u[1:-1, 1:-1]`` read by two ops stays a shifted load, not a stored
    copy: a copy between two stencil stages hid the footprint from Halide."""
    x = rand(300, 200, seed=4)
    fn = lambda u: u[1:-1, 1:-1] * 3 + np.sqrt(np.abs(u[1:-1, 1:-1])) + u[2:, 1:-1]  # noqa: E731
    f = halojit.trace(fn)
    assert "produce t_" not in only_group(f, x).stmt
    assert_same(f(x), fn(x), rtol=1e-6, atol=1e-6)
