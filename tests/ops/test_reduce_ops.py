"""Table-driven tests of the reductions (sum mean max min prod var std argmax
argmin any all; functions and methods) x axis/keepdims x dtypes x shapes,
against numpy eager at each opt level.
"""

from __future__ import annotations


import warnings

import numpy as np
import pytest

import halojit

from helpers import (HAS_HALIDE_BACKEND, Case, DTYPES, FLOAT_DTYPES, assert_matches_numpy,
                     level_params, numpy_eager, random_array)

REDUCTIONS = ("sum", "mean", "max", "min", "prod", "var", "std", "argmax", "argmin", "any",
              "all")
ARG = ("argmax", "argmin")
# axis, keepdims on a (2, 3, 4) array; arg-reductions take one axis (or None).
AXES = (None, 1, -1, (0, 2), (-1, 0), ())
ARG_AXES = (None, 0, -1)


def _fn(name, axis, keepdims, style):
    if style == "method":
        return lambda x: getattr(x, name)(axis=axis, keepdims=keepdims)
    return lambda x: getattr(np, name)(x, axis=axis, keepdims=keepdims)


def _data(name, dtype, shape, rng):
    dt = np.dtype(dtype)
    if name == "prod" and dt.kind in "iu":
        return random_array(rng, shape, dt, 0 if dt.kind == "u" else -3, 3)
    if dt.kind in "iu" and name in ("var", "std", "mean"):
        return random_array(rng, shape, dt, -1000, 1000)
    if dt.kind == "f":
        return random_array(rng, shape, dt, -4.0, 4.0)
    return random_array(rng, shape, dt)  # sums of full-range ints wrap as in numpy


def reduction_cases():
    cases = []
    for name in REDUCTIONS:
        for dtype in DTYPES:
            rng = np.random.default_rng([REDUCTIONS.index(name), DTYPES.index(dtype)])
            x = _data(name, dtype, (2, 3, 4), rng)
            for axis in (ARG_AXES if name in ARG else AXES):
                for keepdims in (False, True):
                    style = "method" if keepdims else "function"
                    cases.append(Case(f"{name}-{dtype}-axis{axis}-keep{int(keepdims)}",
                                      _fn(name, axis, keepdims, style), (x,)))
            # 0-d, a non-contiguous and negative-stride view, a 1-D vector
            cases.append(Case(f"{name}-{dtype}-0d", _fn(name, None, False, "function"),
                              (_data(name, dtype, (), rng),)))
            cases.append(Case(f"{name}-{dtype}-view", _fn(name, 0, False, "method"),
                              (_data(name, dtype, (4, 6), rng)[::-2, 1::2],)))
            cases.append(Case(f"{name}-{dtype}-1d", _fn(name, None, False, "method"),
                              (_data(name, dtype, (9,), rng),)))
            # zero-size: identity reductions give the identity (mean/var NaN);
            # max/min/argmax/argmin raise ValueError like numpy.
            empty = _data(name, dtype, (0, 3), rng)
            for axis in (0, 1):
                fn = _fn(name, axis, False, "function")
                bad = name in ("max", "min", "argmax", "argmin") and axis == 0
                cases.append(Case(f"{name}-{dtype}-empty-axis{axis}", fn, (empty,), bad))
    return cases


REDUCTION_CASES = reduction_cases()


@pytest.mark.parametrize("case,opt_level", level_params(REDUCTION_CASES))
def test_reduction(case, opt_level):
    assert_matches_numpy(case.fn, case.args, opt_level, expect_error=case.expect_error)


def nan_cases():
    """NaN propagates through max/min/sum; argmax/argmin point at the first NaN."""
    cases = []
    for dtype in FLOAT_DTYPES:
        x = np.array([[1.0, np.nan, 3.0, -np.inf], [np.inf, 2.0, np.nan, 0.0],
                      [-0.0, 0.0, 5.0, 5.0]], dtype)
        for name in REDUCTIONS:
            for axis in ((None, 0, 1) if name not in ARG else (None, 1)):
                cases.append(Case(f"{name}-{dtype}-nan-axis{axis}",
                                  _fn(name, axis, False, "function"), (x,)))
    ties = np.array([[3, 1, 3, 1], [0, 0, 0, 0]], np.int32)  # first index wins
    for name in ARG:
        cases.append(Case(f"{name}-ties", _fn(name, 1, False, "function"), (ties,)))
    return cases


NAN_CASES = nan_cases()


@pytest.mark.parametrize("case,opt_level", level_params(NAN_CASES))
def test_reduction_nan_inf(case, opt_level):
    assert_matches_numpy(case.fn, case.args, opt_level)


def option_cases():
    rng = np.random.default_rng(3)
    f32 = random_array(rng, (5, 6), np.float32)
    i8 = random_array(rng, (5, 6), np.int8)
    u16 = random_array(rng, (5, 6), np.uint16)
    b = random_array(rng, (5, 6), np.bool_)
    f16 = random_array(rng, (64,), np.float16, 0.0, 10.0)
    cases = [
        Case("var-ddof1", lambda x: np.var(x, ddof=1), (f32,)),
        Case("std-ddof1-axis0", lambda x: x.std(axis=0, ddof=1), (f32,)),
        Case("var-ddof-int", lambda x: np.var(x, axis=1, ddof=2), (i8,)),
        Case("sum-dtype-f64", lambda x: np.sum(x, dtype=np.float64), (f32,)),
        Case("sum-dtype-i8", lambda x: x.sum(axis=0, dtype=np.int8), (i8,)),
        Case("sum-dtype-f32-int", lambda x: np.sum(x, axis=1, dtype=np.float32), (u16,)),
        Case("mean-dtype-f64", lambda x: np.mean(x, axis=0, dtype=np.float64), (f32,)),
        Case("prod-dtype-f32", lambda x: np.prod(x, axis=1, dtype=np.float32), (i8,)),
        Case("mean-f16", lambda x: np.mean(x), (f16,)),
        Case("sum-f16", lambda x: np.sum(x), (f16,)),
        Case("var-f16", lambda x: np.var(x), (f16,)),
        Case("sum-bool", lambda x: x.sum(axis=1), (b,)),
        Case("mean-bool", lambda x: x.mean(), (b,)),
        Case("amax", lambda x: np.amax(x, axis=1), (f32,)),
        Case("amin", lambda x: np.amin(x, axis=(0, 1), keepdims=True), (u16,)),
        Case("argmax-keepdims", lambda x: np.argmax(x, axis=1, keepdims=True), (f32,)),
        Case("argmin-none-keepdims", lambda x: np.argmin(x, keepdims=True), (i8,)),
        Case("add-reduce", lambda x: np.add.reduce(x, axis=1), (i8,)),
        Case("maximum-reduce", lambda x: np.maximum.reduce(x), (f32,)),
        Case("logical_or-reduce", lambda x: np.logical_or.reduce(x, axis=0), (b,)),
        Case("any-of-floats", lambda x: np.any(x > 1, axis=0), (f32,)),
        Case("all-of-ints", lambda x: x.all(axis=1), (i8,)),
        Case("chained", lambda x: (x - x.mean(axis=1, keepdims=True)).max(), (f32,)),
        Case("mean-large-f32", lambda x: x.mean(), (np.full(10000, 0.1, np.float32),)),
        Case("sum-large-f32", lambda x: x.sum(), (np.full(10000, 0.1, np.float32),)),
    ]
    return cases


OPTION_CASES = option_cases()


@pytest.mark.parametrize("case,opt_level", level_params(OPTION_CASES))
def test_reduction_options(case, opt_level):
    assert_matches_numpy(case.fn, case.args, opt_level)


@pytest.mark.parametrize("name", ["sum", "max", "any", "argmax", "mean", "var"])
@pytest.mark.parametrize("axis", [0, -1, 1, (0,)])
def test_0d_reduction_axis_like_numpy(name, axis, opt_level):
    """numpy's ufunc reductions (not mean/var) accept axis 0 or -1 on a 0-d array."""
    x = np.array(5, np.int8)
    fn = (lambda x: getattr(np, name)(x, axis=axis, keepdims=True))
    try:
        numpy_eager(fn, x)
        bad = False
    except (TypeError, ValueError):
        bad = True
    assert_matches_numpy(fn, (x,), opt_level, expect_error=bad)


@pytest.mark.parametrize("axis", [3, -4, (0, 0), (1, -2)])
def test_bad_reduction_axis_raises_like_numpy(axis, opt_level):
    """numpy raises AxisError (a ValueError) or ValueError for repeated axes."""
    x = np.ones((2, 3, 4), np.float32)
    assert_matches_numpy(lambda x: x.sum(axis=axis), (x,), opt_level, expect_error=True)


def nan_skipping_cases():
    """np.nanmax/nanmin and np.fmax/fmin.reduce skip NaN in one pass: NaN
    only for an all-NaN slice. Shapes reach the vector partials of a last-axis
    reduction (with a tail), the column chunks of axis 0 and the chunked full
    reduction of a long vector."""
    cases = []
    rng = np.random.default_rng(11)
    for dtype in FLOAT_DTYPES:
        x = random_array(rng, (5, 301), dtype, -4.0, 4.0)
        x[rng.random(x.shape) < 0.4] = np.nan
        x[2] = np.nan
        x[:, 7] = np.nan
        x[0, 3], x[1, 4], x[3, 300], x[4, 0] = np.inf, -np.inf, -0.0, 9.0
        col = np.ascontiguousarray(x.T)  # (301, 5): axis 0 is long
        cases += [
            Case(f"nanmax-{dtype}-rows", lambda a: np.nanmax(a, axis=1), (x,)),
            Case(f"nanmin-{dtype}-cols", lambda a: np.nanmin(a, axis=0, keepdims=True), (col,)),
            Case(f"fmax-reduce-{dtype}-all", lambda a: np.fmax.reduce(a, axis=None), (x,)),
            Case(f"fmin-reduce-{dtype}-axis0", lambda a: np.fmin.reduce(a), (x,)),
            Case(f"nanmax-{dtype}-view", lambda a: np.nanmax(a[::-1, ::3], axis=1), (x,)),
        ]
    long = random_array(rng, (40000,), np.float32, -4.0, 4.0)
    long[rng.random(long.shape) < 0.9] = np.nan
    cases += [
        Case("nanmax-long", lambda a: np.nanmax(a), (long,)),
        Case("nanmin-long-all-nan", lambda a: np.nanmin(a), (np.full(40000, np.nan, np.float32),)),
        Case("nanmax-int", lambda a: np.nanmax(a, axis=0), (random_array(rng, (7, 9), np.int32),)),
        Case("fmin-reduce-uint8", lambda a: np.fmin.reduce(a, axis=1),
             (random_array(rng, (7, 9), np.uint8),)),
        Case("nanmax-empty", lambda a: np.nanmax(a, axis=0), (np.zeros((0, 3), np.float32),),
             True),
    ]
    return cases


NAN_SKIPPING_CASES = nan_skipping_cases()


# every case compiled (the point is the lowering's NaN-skipping combine)
@pytest.mark.parametrize("case,opt_level", level_params(NAN_SKIPPING_CASES, levels=[0])
                         + [pytest.param(c, 3, id=f"{c.id}-O3") for c in NAN_SKIPPING_CASES
                            if HAS_HALIDE_BACKEND])
def test_nan_skipping_extremes(case, opt_level):
    with warnings.catch_warnings():  # numpy warns of all-NaN slices
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_matches_numpy(case.fn, case.args, opt_level, expect_error=case.expect_error)


def _specials(shape, dtype, seed):
    """Ones with a NaN, an inf and a -inf at random places (distinct)."""
    x = np.ones(shape, dtype)
    where = np.random.default_rng(seed).choice(x.size, 3, replace=False)
    x.flat[where] = [np.nan, np.inf, -np.inf]
    return x


# Values that are a constant in real arithmetic but NaN for a NaN or inf
# operand. Halide's loop trimming proved such an update a no-op (its
# interval arithmetic knows no NaN) and dropped it: sum(y * 0) over a 2-D
# loop nest returned 0 (halide_ops.opaque). Every case compiled.
CONSTANT_LOOKING = [
    ("sum-y*0", lambda y: (y * 0).sum()),
    ("sum-0*y-axis1", lambda y: (0 * y).sum(axis=1)),
    ("sum-0/y-axis0", lambda y: (0 / y).sum(axis=0)),
    ("prod-y*0+1", lambda y: (y * 0 + 1).prod()),
    ("mean-y*0", lambda y: (y * 0).mean()),
    ("sum-y+y-2y", lambda y: (y + y - 2 * y).sum(axis=0)),
    ("einsum", lambda y: np.einsum("ij,ij->", y * 0, y)),
    ("matmul", lambda y: (y * 0) @ np.ones((y.shape[-1], 3), y.dtype)),
    ("dot-ravel", lambda y: np.dot((y * 0).ravel(), y.ravel())),
]


@pytest.mark.skipif(not HAS_HALIDE_BACKEND, reason="needs the Halide backend")
@pytest.mark.parametrize("shape", [(4, 5), (3, 100)], ids=str)
@pytest.mark.parametrize("name,fn", CONSTANT_LOOKING, ids=[c[0] for c in CONSTANT_LOOKING])
def test_reduction_of_constant_looking_values_keeps_nan(name, fn, shape):
    for dtype in (np.float32, np.float64):
        x = _specials(shape, dtype, sum(map(ord, name)))
        want = assert_matches_numpy(fn, (x,), 3)
        assert np.isnan(want).any()  # the case can fail: numpy's result holds a NaN


CONSTANT_INDEX = {
    "pad-edge-sum": lambda x: np.pad(x[:, None], ((0, 0), (1, 1)), mode="edge").sum(-1),
    "pad-wrap-prod": lambda x: np.pad(x[:, None], ((0, 0), (1, 1)), mode="wrap").prod(-1),
    "pad-edge-mean0": lambda x: np.pad(x[None, :], ((1, 1), (0, 0)), mode="edge").mean(0),
    "gather-0-sum": lambda x: x[:, None][:, [0, 0, 0]].sum(-1),
    "count-nonzero": lambda x: np.count_nonzero(np.pad(x[:, None], ((0, 0), (2, 2)), "edge"), -1),
    "wide-pad-sum": lambda x: np.pad(x[:, None], ((0, 0), (40, 40)), mode="edge").sum(-1),
    "wide-gather-sum": lambda x: x[:, None][:, [0] * 70].sum(-1),
    "col-pad-sum": lambda x: np.pad(x[None, :], ((40, 40), (0, 0)), mode="edge").sum(0),
}


@pytest.mark.level3
@pytest.mark.parametrize("n", [5, 3000])
@pytest.mark.parametrize("name", sorted(CONSTANT_INDEX))
def test_reduction_whose_operand_is_constant_along_the_axis(name, n):
    # the operand's index drops the reduced axis (a size-1 axis padded or
    # gathered): Halide took the update's RDom from its Exprs and ran it
    # once, so every one of these returned x (lowering._over)
    fn = CONSTANT_INDEX[name]
    x = np.random.default_rng(n).uniform(0.5, 1.5, n).astype(np.float32)
    got, want = halojit.trace(fn)(x), fn(x)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5)
