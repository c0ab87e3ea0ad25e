"""Python loops unrolled into one long elementwise group on a small array:
such groups take the Elementwise template as one serial task. Under
Adams2019 a Mandelbrot iteration of 30 steps on (30, 40) float64 failed to
schedule, Mullapudi2016 failed, and Li2018, next in the fallback chain,
compiled for over 20 minutes in 16 GB (6 steps: 48 s)."""

from __future__ import annotations

import numpy as np
import pytest

import halojit

pytestmark = pytest.mark.level3


def mandelbrot(c_re, c_im, steps=30):
    zr, zi = np.zeros_like(c_re), np.zeros_like(c_im)
    count = np.zeros(c_re.shape, np.int32)
    for _ in range(steps):
        zr, zi = zr * zr - zi * zi + c_re, 2 * zr * zi + c_im
        inside = zr * zr + zi * zi < 4
        count = count + inside
        zr, zi = np.where(inside, zr, 2.0), np.where(inside, zi, 2.0)
    return count


@pytest.mark.parametrize("shape", [(30, 40), (1, 700)])
def test_mandelbrot_steps_compile_as_one_serial_elementwise_group(shape):
    re_, im = np.meshgrid(np.linspace(-2, 1, shape[1]), np.linspace(-1.5, 1.5, shape[0]))
    f = halojit.trace(mandelbrot)
    (g,) = f.lower(re_, im).groups
    assert g.scheduler.startswith("Elementwise;parallel=0"), g.scheduler
    np.testing.assert_array_equal(f(re_, im), mandelbrot(re_, im))
