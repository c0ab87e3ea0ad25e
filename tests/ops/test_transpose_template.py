"""The Transpose template (default for large elementwise groups that read an
input through a transpose of its last axis): values against numpy at shapes
with tails of every tile and block, N-D permutations, a narrow (channels
last) output, broadcasts, integer and bool dtypes, NaN/inf, strided views,
out=, and the groups it leaves to the autoscheduler. Elementwise work on
operands all transposed one way is returned in numpy's layout instead
(passes/views.py): those tests ask for C order with np.ascontiguousarray,
which keeps the transpose in the kernel."""

from __future__ import annotations

import numpy as np
import pytest

from halojit.generators.build import SERIAL_MAX_ELEMENTS
from halojit.schedules.transpose import transposed_axis

from helpers import assert_same, local_graphs
from helpers import one_group as traced, seeded_array as rand

pytestmark = pytest.mark.level3


def local(fn, *args):
    (graph,) = local_graphs(fn, *args)
    return graph


def test_default_for_large_transposed_reads_with_specials():
    """x.T + y above the serial threshold, both axes with tails of the
    64-wide tiles and 8-wide blocks; NaN and inf where numpy has them."""
    x = rand((300, 257), seed=1)
    y = rand((257, 300), seed=2)
    x[5, 7] = np.nan
    x[299, 256] = np.inf
    y[3, 9] = -np.inf
    assert x.size > SERIAL_MAX_ELEMENTS
    keep = x.copy()
    f, g = traced(lambda a, b: a.T + b, x, y)
    assert g.scheduler.startswith("Transpose"), g.scheduler
    assert_same(f(x, y), x.T + y)
    np.testing.assert_array_equal(x, keep)
    out = np.empty((257, 300), np.float32)
    f(x, y, out=out)
    assert_same(out, x.T + y)


@pytest.mark.parametrize("shape,perm", [
    ((37, 70, 5), (2, 0, 1)),      # last axis to the front: 3-wide rows (the narrow path)
    ((6, 40, 33), (0, 2, 1)),      # batched 2-D transposes
    ((9, 20, 17), (2, 1, 0)),
    ((3, 4, 50, 19), (0, 3, 1, 2)),
])
@pytest.mark.parametrize("params", [{"tile": 64, "block": 8}, {"tile": 16, "block": 4},
                                    {"tile": 32, "block": 16}])
def test_permutations_and_tiles_match_numpy(shape, perm, params):
    x = rand(shape, seed=sum(shape))
    fn = lambda a: np.ascontiguousarray(np.transpose(a, perm) * np.float32(2) + 1)  # noqa: E731
    f, g = traced(fn, x, autoscheduler=("Transpose", params))
    assert g.scheduler.startswith("Transpose"), g.scheduler
    assert_same(f(x), fn(x))


@pytest.mark.parametrize("dtype", [np.int16, np.uint8, np.float64, np.bool_])
def test_dtypes(dtype):
    x = rand((90, 70), dtype, seed=3)
    y = rand((70, 90), dtype, seed=4)
    fn = (lambda a, b: a.T ^ b) if dtype == np.bool_ else (lambda a, b: a.T + b)
    f, g = traced(fn, x, y, autoscheduler="Transpose")
    assert g.scheduler.startswith("Transpose"), g.scheduler
    assert_same(f(x, y), fn(x, y))   # integer wrap-around as numpy


def test_channels_last_and_a_broadcast_bias():
    """CHW -> HWC with a per-channel scale: the output's last axis is 3
    wide, so vectors run along the input's rows; a 2-D (3, n) -> (n, 3)
    has no outer axis to parallelize but its rows."""
    img = rand((3, 67, 45), seed=5)
    scale = np.array([0.5, 2.0, -1.0], np.float32)
    fn = lambda a, s: np.ascontiguousarray(np.transpose(a, (1, 2, 0)) * s)  # noqa: E731
    f, g = traced(fn, img, scale, autoscheduler="Transpose")
    assert g.scheduler.startswith("Transpose") and "narrow" in g.schedule
    got = f(img, scale)
    assert_same(got, fn(img, scale))
    assert got.flags.c_contiguous
    pts = rand((3, 1001), seed=6)
    f, g = traced(lambda a: (a.T - 1).copy(), pts, autoscheduler="Transpose")
    assert g.scheduler.startswith("Transpose")
    assert_same(f(pts), pts.T - 1)


def test_strided_view_input():
    base = rand((200, 130), seed=7)
    x = base[::2, 1:]                           # (100, 129), not contiguous
    f, g = traced(lambda a: a.T * 3, x, autoscheduler="Transpose")
    assert_same(f(x), x.T * 3)


def test_which_groups_fit():
    big = np.ones((64, 48), np.float32)
    assert transposed_axis(local(lambda a: a.T * 1, big)) == 0
    assert transposed_axis(local(lambda a, b: a.T + b, big, big.T.copy())) == 0
    assert transposed_axis(local(lambda a, b: np.transpose(a, (2, 0, 1)) + b,
                                 np.ones((5, 6, 40)), np.ones(6))) == 0
    assert transposed_axis(local(lambda a: np.transpose(a, (0, 2, 1)) * 2,
                                 np.ones((5, 6, 40)))) == 1
    # the last axis stays last (heads reshuffle): rows are read in order
    assert transposed_axis(local(lambda a: a.transpose(1, 0, 2) * 2, np.ones((8, 9, 10)))) is None
    # HWC -> CHW: the input's rows land on a 3-long axis, read as strided vectors
    assert transposed_axis(local(lambda a: np.transpose(a, (2, 0, 1)) * 2,
                                 np.ones((40, 50, 3)))) is None
    # a reduction, or a transpose of a transposed value: not this template
    assert transposed_axis(local(lambda a: a.T.sum(axis=0), big)) is None
    assert transposed_axis(local(lambda a: (a.T * 2).T + 1, big)) is None
    # a transpose of a value computed elementwise reads its inputs transposed
    assert transposed_axis(local(lambda a, b: (a * 2 + b).T, big, big[0])) == 0


def test_transposed_computed_value():
    """(x * 2 + b).T + 1: the product inlines into the transposed write,
    tiled as x.T is (Adams2019 wrote it down the columns, 6x slower at
    (8192, 512)); NaN and inf where numpy has them. Returned as it is,
    (x * 2 + b).T is a view of the product, as in numpy (passes/views.py)."""
    x = rand((300, 257), seed=3)
    b = rand((257,), seed=4)
    x[7, 5] = np.nan
    b[9] = np.inf
    f, g = traced(lambda x, b: np.ascontiguousarray((x * 2 + b).T + 1), x, b)
    assert g.scheduler.startswith("Transpose")
    assert_same(f(x, b), (x * 2 + b).T + 1)
    f, g = traced(lambda x, b: (x * 2 + b).T, x, b)
    assert g.scheduler.startswith("Elementwise")
    got = f(x, b)
    assert_same(got, (x * 2 + b).T)
    assert got.T.flags.c_contiguous
