"""The RowArg template (schedules/row_arg.py): argmax/argmin over the last
axis of long rows, with several accumulator vectors per row. Every result
is compared with numpy exactly: first occurrence of ties, the first NaN,
-0.0 equal to +0.0, the tail of a row past a whole number of vectors."""

from __future__ import annotations

import numpy as np
import pytest

import halojit

pytestmark = pytest.mark.level3


def _rows(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.001
    if np.dtype(dtype).kind == "f":
        x = rng.integers(-50, 50, shape).astype(dtype)  # many ties
        rows = x.reshape(-1, shape[-1])
        rows[0, 700 % shape[-1]] = np.nan
        rows[-1, :] = np.nan                      # every element NaN
        if len(rows) > 2:
            rows[1, :] = -0.0
            rows[1, shape[-1] - 1] = 0.0          # equal to -0.0: the first wins
            rows[2, :] = -np.inf
            rows[2, -1] = np.nan                  # the NaN in the tail
        if len(rows) > 3:
            rows[3, 5] = np.inf
        return x
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, shape, dtype=dtype)


SHAPES = [(8, 512), (5, 1029), (3, 4, 777), (33, 2048)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.uint8, np.int32,
                                   np.bool_], ids=lambda d: np.dtype(d).name)
def test_row_argmax_argmin(shape, dtype):
    x = _rows(shape, dtype, sum(shape))
    for op in ("argmax", "argmin"):
        def fn(a, op=op):
            return getattr(a, op)(axis=-1)
        f = halojit.trace(fn)
        np.testing.assert_array_equal(f(x), fn(x), strict=True, err_msg=op)
        assert [g.scheduler.split(";")[0] for g in f.lower(x).groups] == ["RowArg"]


def test_views_prologue_epilogue_and_keepdims():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 1500)).astype(np.float32)
    x[7, 9] = np.nan
    cases = {
        "strided": lambda a: a[:, ::2].argmax(axis=-1),
        "reversed": lambda a: a[::-1, ::-1].argmin(axis=1),
        "transposed": lambda a: a.T[:600].T.argmax(axis=-1),
        "prologue": lambda a: np.abs(a * 2 - 1).argmin(axis=-1),
        "epilogue": lambda a: a.argmax(axis=-1) + 1,
        "keepdims": lambda a: np.argmax(a, axis=-1, keepdims=True),
        "np.argmin": lambda a: np.argmin(np.exp(a), axis=1),
    }
    for name, fn in cases.items():
        before = x.copy()
        np.testing.assert_array_equal(halojit.trace(fn)(x), fn(x), strict=True, err_msg=name)
        np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("spec", ["RowArg;unroll=1", "RowArg;unroll=2;rows=32",
                                  "RowArg;unroll=8;parallel=0"])
def test_parameters_keep_the_results(spec):
    x = _rows((50, 1111), np.float32, 9)
    f = halojit.trace(lambda a: a.argmax(axis=-1), autoscheduler=spec)
    np.testing.assert_array_equal(f(x), x.argmax(axis=-1), strict=True)
    (group,) = f.lower(x).groups
    assert group.scheduler.startswith("RowArg;")
    assert set(spec.split(";")[1:]) <= set(group.scheduler.split(";")[1:])


def test_short_rows_and_other_axes_keep_their_schedulers():
    x = np.random.default_rng(0).standard_normal((64, 300)).astype(np.float32)
    for fn in (lambda a: a.argmax(axis=-1), lambda a: a.argmax(axis=0),
               lambda a: a.argmax()):
        f = halojit.trace(fn)
        np.testing.assert_array_equal(f(x), fn(x), strict=True)
        assert all(not g.scheduler.startswith("RowArg") for g in f.lower(x).groups)
