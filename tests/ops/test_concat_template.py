"""The Concat template (default for groups whose output is a concatenation
or pad along the last axis: np.concatenate/hstack, np.roll, np.pad): values
against numpy for every pad mode, pieces narrower than a vector, 1-D to
4-D, above and below the serial threshold, integer and bool dtypes,
NaN/inf, strided views, out=, the template's parameters, and the groups
it leaves to other schedules."""

from __future__ import annotations

import numpy as np
import pytest

from halojit.schedules.concat import concat_fits

from helpers import assert_same, local_graphs
from helpers import one_group as traced, seeded_array as rand

pytestmark = pytest.mark.level3


def check(fn, *args, scheduler="Concat", autoscheduler=None):
    """fn traced and run against numpy, its one group scheduled by
    ``scheduler``; the inputs unchanged; out= too."""
    keep = [a.copy() for a in args]
    f, g = traced(fn, *args, autoscheduler=autoscheduler)
    assert g.scheduler.startswith(scheduler), g.scheduler
    want = fn(*args)
    assert_same(f(*args), want)
    out = np.full(want.shape, 7, want.dtype)
    f(*args, out=out)
    assert_same(out, want)
    for a, k in zip(args, keep):
        np.testing.assert_array_equal(a, k)
    return g


@pytest.mark.parametrize("shape", [(600, 457), (40, 33), (5000,), (3, 50, 70), (200001,)])
def test_concatenate_and_hstack_with_specials(shape):
    """Small (one serial task), medium (one task) and large (parallel row
    tasks; for 1-D, column chunks); NaN and inf pass through."""
    x, y = rand(shape, seed=1), rand(shape, seed=2)
    x.flat[7] = np.nan
    y.flat[-1] = np.inf
    g = check(lambda a, b: np.concatenate([a, b * 2, a], axis=-1), x, y)
    assert "update(2)" in g.schedule
    check(lambda a, b: np.hstack([a, b]) if a.ndim < 3 else np.dstack([a, b]), x, y)
    # tasks of 1 MiB of output, at least two of them
    assert (".parallel(" in g.schedule) == (3 * x.size * 4 >= 2 << 20)


@pytest.mark.parametrize("shift", [1, 5, -3, 16, 250])
def test_roll_along_the_last_axis(shift):
    x = rand((260, 300), seed=shift % 7)
    check(lambda a: np.roll(a, shift, axis=-1), x)
    v = rand(70001, seed=3)                     # 1-D: tasks split the pieces' columns
    check(lambda a: np.roll(a, shift), v)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
@pytest.mark.parametrize("width", [1, (2, 7), ((3, 0), (0, 5))])
def test_pad_modes(mode, width):
    """Borders narrower than a vector on one or both sides; the rows are
    padded too (their index keeps its own clamps)."""
    x = rand((200, 333), seed=4)
    x[0, 0] = -np.inf
    x[-1, -1] = np.nan
    kw = {"constant_values": 2.5} if mode == "constant" else {}
    check(lambda a: np.pad(a, width, mode=mode, **kw), x)


@pytest.mark.parametrize("shape", [(20,), (1001,), (100001,), (1, 1001)])
def test_one_row_read_backwards(shape):
    """One row, pieces read backwards (a reversed slice, a reflected border)
    with a vector tail: the tail's loads stay in bounds (Halide 21 failed to
    compile them, and the group fell back to Adams2019, 6x slower)."""
    x = rand(shape, seed=9)
    x.flat[0] = np.nan
    check(lambda a: np.concatenate([a, a[..., ::-1], a[..., ::-3] * 2], axis=-1), x)
    for mode in ("reflect", "symmetric"):
        for width in (3, 17):
            check(lambda a: np.pad(a, [(0, 0)] * (a.ndim - 1) + [(width, width + 2)], mode=mode), x)


@pytest.mark.parametrize("shape,reps", [((70, 40), (1, 3)), ((5000,), 2), ((3, 20, 17), (1, 1, 2)),
                                        ((20, 17), (1, 1, 16)), ((33,), (1, 2))])
def test_tile_along_the_last_axis(shape, reps):
    """np.tile copying only along the last axis (leading axes of length 1
    added or not) is a concatenation; other reps keep their broadcast."""
    x = rand(shape, seed=14)
    x.flat[3] = np.nan
    check(lambda a: np.tile(a, reps), x)
    check(lambda a: np.tile(a * 2, (2,) + (1,) * len(shape)), x, scheduler="")


@pytest.mark.parametrize("dtype", [np.int16, np.uint8, np.int64, np.float64, np.bool_])
def test_dtypes(dtype):
    x, y = rand((60, 40), dtype, seed=5), rand((60, 24), dtype, seed=6)
    check(lambda a, b: np.concatenate([b, a], axis=1), x, y)
    check(lambda a: np.pad(a, ((1, 2), (17, 3)), mode="reflect"), x)


def test_strided_and_broadcast_operands():
    """A strided view, a transposed view and a broadcast row as pieces."""
    base = rand((130, 200), seed=7)
    x = base[::2, 3:]                            # (65, 197), not contiguous
    t = rand((40, 65), seed=8).T                 # (65, 40), transposed
    row = rand((1, 30), seed=9)
    check(lambda a, b, c: np.concatenate([a, np.broadcast_to(c, (65, 30)), b + 1], axis=1),
          x, t, row)


def test_shared_values_and_trig():
    """A value read by two pieces (stored once by the lowering, inlined by
    the template), and sin/cos whose fast path is checked per call: a huge
    argument takes the exact path."""
    x = rand((300, 300), seed=10)
    check(lambda a: (lambda t: np.concatenate([t, t * t], axis=1))(a + 1), x)
    f, g = traced(lambda a: np.concatenate([np.sin(a), np.cos(a)], axis=1), x)
    assert g.scheduler.startswith("Concat") and "sin/cos/tan" in g.schedule
    for v in (x, x * 1e6):
        got, want = f(v), np.concatenate([np.sin(v), np.cos(v)], axis=1)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("params", [{"vector": 16, "task_kib": 4}, {"vector": 128},
                                    {"vector": 32, "parallel": 0}])
def test_template_parameters(params):
    """Small tasks (many per piece), wide and narrow vectors, one task."""
    x = rand((257, 301), seed=11)
    check(lambda a: np.roll(a * 2, 7, axis=1), x, autoscheduler=("Concat", params))
    v = rand(100003, seed=12)
    check(lambda a: np.pad(a, (9, 40), mode="wrap"), v, autoscheduler=("Concat", params))


def test_which_groups_fit():
    x = np.ones((64, 48), np.float32)

    def fits(fn, *args):
        (graph,) = local_graphs(fn, *args)
        return concat_fits(graph)
    assert fits(lambda a: np.concatenate([a, a * 2], axis=1), x)
    assert fits(lambda a: np.roll(a, 3, axis=1), x)
    assert fits(lambda a: np.pad(a, ((0, 0), (1, 1))), x)
    assert not fits(lambda a: np.concatenate([a, a * 2], axis=0), x)    # rows: selects hoist
    assert not fits(lambda a: np.pad(a, ((1, 1), (0, 0))), x)
    assert not fits(lambda a: np.stack([a, a], axis=-1), x)               # 2 wide: Elementwise
    assert not fits(lambda a: np.concatenate([a, a.sum(axis=1, keepdims=True)], axis=1), x)
    assert not fits(lambda a: np.exp(np.concatenate([a, a], axis=1)), x)  # not the output
    # arithmetic on it is done per part first (passes/slices.py): the output again
    assert fits(lambda a: np.concatenate([a, a], axis=1) * 2, x)
    assert fits(lambda a: np.concatenate([a[None], a[None] + 1], axis=-1), x)  # unit reshapes
    assert not fits(lambda a: np.concatenate([a.reshape(48, 64), a.T], axis=-1), x)


@pytest.mark.parametrize("shape", [(300, 257), (5000,)])
def test_arithmetic_on_a_concatenation_is_done_per_part(shape):
    x, y = rand(shape, seed=21), rand(shape, seed=22)
    x.flat[3] = np.nan
    g = check(lambda a, b: np.concatenate([a, b * 0.5], axis=-1) * 2 - b[..., :1], x, y)
    assert "update(1)" in g.schedule


def test_groups_left_to_other_schedules():
    x = rand((300, 257), seed=13)
    check(lambda a: np.concatenate([a, a * 2], axis=0), x, scheduler="Adams2019")
    check(lambda a: np.stack([a, a + 1], axis=-1), x, scheduler="Elementwise")
