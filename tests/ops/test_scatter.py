"""Scatters (halojit.graph.numpy_scatter, the ``scatter`` op and the Scatter
template): item assignment through index arrays known at call time,
``ufunc.at``, ``np.histogram``, ``np.histogramdd`` and ``np.histogram2d``,
against numpy at opt levels 0 and 3.

Repeated positions take numpy's order (the last assignment wins, ufunc.at
applies every occurrence), float sums round in that order, and every
index is range-checked at every call.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import assert_matches_numpy, jit

import halojit
from halojit.errors import DTypeError, TraceError, UnsupportedError

RNG = np.random.default_rng(5)
X = RNG.standard_normal((6, 7)).astype(np.float32)
ROWS = RNG.integers(-6, 6, 9)  # negative and repeated rows
COLS = RNG.integers(0, 7, 9)
V9 = RNG.standard_normal(9).astype(np.float32)


def _assign(key_of, value_of, make=lambda x: x * 2):
    def f(x, rows, cols, v):
        y = make(x)
        y[key_of(rows, cols)] = value_of(x, v)
        return y
    return f


ASSIGN = {
    "rows": _assign(lambda r, c: r, lambda x, v: v[:, None]),
    "rows-scalar": _assign(lambda r, c: r, lambda x, v: 1.5),
    "two-axes": _assign(lambda r, c: (r, c), lambda x, v: v),
    "columns-slice": _assign(lambda r, c: (slice(1, 4), c), lambda x, v: -1.0),
    "rows-then-int": _assign(lambda r, c: (r, 2), lambda x, v: v),
    "2-d-index": _assign(lambda r, c: (r.reshape(3, 3), c.reshape(3, 3)),
                         lambda x, v: v.reshape(3, 3)),
    "non-contiguous-index": _assign(lambda r, c: (r[::2], c[::-2]), lambda x, v: v[:5]),
    "leading-ones": _assign(lambda r, c: (r, c), lambda x, v: v[None, :]),
    "empty-index": _assign(lambda r, c: r[:0], lambda x, v: 3.0),
    "int8": _assign(lambda r, c: (r, c), lambda x, v: 200,
                    lambda x: (x * 10).astype(np.int16)),
    "bool": _assign(lambda r, c: (r, c), lambda x, v: v > 0, lambda x: x > 0),
    "float16": _assign(lambda r, c: r, lambda x, v: x[0].astype(np.float16),
                       lambda x: x.astype(np.float16)),
    "augmented": None,  # below: y[r, c] += v adds once per distinct position, as numpy
}


def _augmented(x, rows, cols, v):
    y = x * 2
    y[rows, cols] += v
    return y


ASSIGN["augmented"] = _augmented


@pytest.mark.parametrize("name", ASSIGN)
def test_item_assignment_through_index_arrays(name, opt_level):
    assert_matches_numpy(ASSIGN[name], (X, ROWS, COLS, V9), opt_level)


def test_repeated_positions_last_assignment_wins(opt_level):
    idx = np.array([3, 1, 3, 3, 0])
    f = jit(lambda x, i: (lambda y: (y.__setitem__(i, np.arange(5.0)), y)[1])(x * 0), opt_level)
    got = f(np.ones(4), idx)
    np.testing.assert_array_equal(got, [4.0, 1.0, 0.0, 3.0])


def test_index_out_of_bounds_raises_at_every_call(opt_level):
    f = jit(ASSIGN["two-axes"], opt_level)
    f(X, ROWS, COLS, V9)
    bad = COLS.copy()
    bad[4] = 7
    for _ in range(2):
        with pytest.raises(IndexError, match="out of bounds for axis 1 with size 7"):
            f(X, ROWS, bad, V9)


def test_index_errors_are_numpys_index_errors(opt_level):
    four, three = np.array([0, 1, 2, 0]), np.array([0, 1, 2])
    with pytest.raises(IndexError, match="shape mismatch: indexing arrays could not be broadcast"):
        jit(_assign(lambda r, c: (four, three), lambda x, v: 1.0), opt_level)(X, ROWS, COLS, V9)
    with pytest.raises(IndexError, match="shape mismatch"):
        jit(lambda x: x[four, three], opt_level)(X)
    with pytest.raises(IndexError, match="integer"):
        jit(lambda x, r: x[r * 0.5], opt_level)(X, ROWS)
    with pytest.raises(IndexError, match="integer"):
        jit(_at(np.add, lambda r, c: r / 2), opt_level)(X, ROWS, COLS, V9)
    with pytest.raises(IndexError, match="out of bounds"):  # numpy's AxisError is one too
        jit(lambda x: x.argmax(axis=2), opt_level)(X)


def test_assignment_errors_as_numpy(opt_level):
    with pytest.raises(ValueError, match="shape mismatch"):
        jit(_assign(lambda r, c: (r, c), lambda x, v: v[:4]), opt_level)(X, ROWS, COLS, V9)
    with pytest.raises(TraceError, match="input"):
        jit(lambda x, r: x.__setitem__(r, 0.0), opt_level)(X, ROWS)
    with pytest.raises(UnsupportedError, match="boolean mask"):
        jit(_assign(lambda r, c: (r > 0, c), lambda x, v: 0.0), opt_level)(X, ROWS, COLS, V9)


# -- ufunc.at -----------------------------------------------------------------------------
def _at(ufunc, key_of=lambda r, c: r, make=lambda x: x * 1, value_of=lambda x, v: v[:, None]):
    def f(x, rows, cols, v):
        y = make(x)
        if value_of is None:
            ufunc.at(y, key_of(rows, cols))
        else:
            ufunc.at(y, key_of(rows, cols), value_of(x, v))
        return y
    return f


AT = {
    "add-rows": _at(np.add),
    "add-two-axes": _at(np.add, lambda r, c: (r, c), value_of=lambda x, v: v),
    "subtract-scalar": _at(np.subtract, lambda r, c: (r, c), value_of=lambda x, v: 0.25),
    "multiply": _at(np.multiply, lambda r, c: (r, c), value_of=lambda x, v: v),
    "maximum-nan": _at(np.maximum, lambda r, c: (r, c),
                       value_of=lambda x, v: np.where(v > 1, np.nan, v)),
    "fmin-nan": _at(np.fmin, lambda r, c: (r, c),
                    value_of=lambda x, v: np.where(v > 1, np.nan, v)),
    "negative-unary": _at(np.negative, lambda r, c: (r, c), value_of=None),
    "slice-in-key": _at(np.add, lambda r, c: (slice(None), c), value_of=lambda x, v: 1.0),
    "int8-wraps-int64-values": _at(np.add, lambda r, c: (r, c), lambda x: (x * 30).astype(np.int8),
                                   lambda x, v: (v * 1000).astype(np.int64)),
    "float32-float64-values": _at(np.add, lambda r, c: (r, c),
                                  value_of=lambda x, v: v.astype(np.float64) / 3),
    "float16": _at(np.add, lambda r, c: (r, c), lambda x: x.astype(np.float16),
                   lambda x, v: v.astype(np.float16)),
    "bool-or": _at(np.logical_or, lambda r, c: (r, c), lambda x: x > 1, lambda x, v: v > 0),
    "uint8-bitwise": _at(np.bitwise_xor, lambda r, c: (r, c),
                         lambda x: (np.abs(x) * 50).astype(np.uint8), lambda x, v: 0x5A),
    "0-d-key": _at(np.add, lambda r, c: (2, 3), value_of=lambda x, v: 5.0),
    # numpy's ufunc.at casts back unsafely, and makes a Python scalar an array first
    "float-into-int64": _at(np.add, lambda r, c: (r, c), lambda x: (x * 10).astype(np.int64),
                            lambda x, v: v * 3),
    "300-into-uint8-wraps": _at(np.add, lambda r, c: (r, c),
                                lambda x: (np.abs(x) * 9).astype(np.uint8), lambda x, v: 300),
    "sqrt-into-int32": _at(np.sqrt, lambda r, c: (r, c), lambda x: (np.abs(x) * 50).astype(np.int32),
                           None),
}


@pytest.mark.parametrize("name", AT)
def test_ufunc_at(name, opt_level):
    assert_matches_numpy(AT[name], (X, ROWS, COLS, V9), opt_level)


def test_add_at_counts_into_zeros_like(opt_level):
    def f(ids, w):
        h = np.zeros_like(w, shape=(50,))
        np.add.at(h, ids, w)
        counts = np.zeros_like(ids, shape=(50,))
        np.add.at(counts, ids, 1)
        return h, counts

    ids = RNG.integers(0, 50, 10_000)
    w = RNG.random(10_000).astype(np.float32)
    assert_matches_numpy(f, (ids, w), opt_level)


def test_ufunc_at_errors(opt_level):
    with pytest.raises(UnsupportedError, match="np.power.at on integers"):
        jit(_at(np.power, make=lambda x: (x * 10).astype(np.int32),
                value_of=lambda x, v: 2), opt_level)(X, ROWS, COLS, V9)
    with pytest.raises(DTypeError):  # no bitwise loop for floats, as numpy's TypeError
        jit(_at(np.bitwise_or, value_of=lambda x, v: 1.5), opt_level)(X, ROWS, COLS, V9)
    with pytest.raises(UnsupportedError, match="np.zeros_like"):
        jit(lambda r, v: np.add.at(np.zeros(6), r, v), opt_level)(ROWS, V9)
    with pytest.raises(TraceError, match="input"):
        jit(lambda x, r: np.add.at(x, r, 1.0), opt_level)(X, ROWS)
    with pytest.raises(UnsupportedError, match="np.bincount"):
        jit(lambda r: np.bincount(r + 6), opt_level)(ROWS)


# -- np.histogram -------------------------------------------------------------------------
IMG = RNG.integers(0, 256, (96, 80), dtype=np.uint8)
VALS = RNG.standard_normal(70_001).astype(np.float32)  # two of numpy's 65536-value blocks
VALS[[3, 99]] = [np.nan, np.inf]
W = RNG.random(70_001).astype(np.float32)
F16 = RNG.standard_normal(3000).astype(np.float16)
I16 = RNG.integers(-300, 300, (30, 40)).astype(np.int16)

HIST = {
    "uint8-auto": (lambda a: np.histogram(a, bins=16), (IMG,)),
    "uint8-range": (lambda a: np.histogram(a, bins=256, range=(0, 256)), (IMG,)),
    "float32-range": (lambda a: np.histogram(a, bins=50, range=(-3, 3.5)), (VALS,)),
    "float32-auto": (lambda a: np.histogram(np.nan_to_num(a, posinf=0), bins=37), (VALS,)),
    "weights-blocks": (lambda a, w: np.histogram(a, 20, range=(-2, 2), weights=w), (VALS, W)),
    "weights-float64": (lambda a, w: np.histogram(a, 7, (-1, 1), weights=w.astype(np.float64)),
                        (VALS, W)),
    "weights-int": (lambda a, w: np.histogram(a[:500], 5, (-1, 1), weights=(w[:500] * 9)
                                              .astype(np.int32)), (VALS, W)),
    "edges": (lambda a: np.histogram(a, bins=[-3, -1, 0, 0.5, 0.5, 3]), (VALS,)),
    "edges-traced": (lambda a, w: np.histogram(a, bins=np.sort(w[:6]) * 2 - 1), (VALS, W)),
    "int16-auto": (lambda a: np.histogram(a, bins=7), (I16,)),
    "int16-range": (lambda a: np.histogram(a, bins=9, range=(-100, 100)), (I16,)),
    "constant-data": (lambda a: np.histogram(a * 0 + 3, bins=5), (I16,)),
    "float16-auto": (lambda a: np.histogram(a, bins=9), (F16,)),
    "float16-range": (lambda a: np.histogram(a, bins=9, range=(-1, 1)), (F16,)),
    "empty": (lambda a: np.histogram(a[:0], bins=4), (VALS,)),
    "non-contiguous": (lambda a: np.histogram(a.T[::2], bins=6), (IMG,)),
    "one-edge": (lambda a: np.histogram(a, bins=np.array([1.0])), (VALS,)),
    "no-edges-density": (lambda a: np.histogram(a, bins=np.array([]), density=True), (VALS,)),
    "range-as-array": (lambda a: np.histogram(a, 3, range=np.array([0, 4.0])), (I16,)),
}


@pytest.mark.parametrize("name", HIST)
def test_histogram(name, opt_level):
    fn, args = HIST[name]
    assert_matches_numpy(fn, args, opt_level)


@pytest.mark.parametrize("weighted", [False, True])
def test_histogram_density(weighted, opt_level):
    def f(a, w):
        return np.histogram(a, bins=12, range=(-2, 2), density=True,
                            weights=w if weighted else None)
    # float32 weights: n.sum() is a float32 sum, whose rounding follows its order
    assert_matches_numpy(f, (VALS, W), opt_level, rtol=1e-6 if weighted else 1e-12)


def test_histogram_of_bool_warns_as_numpy(opt_level):
    b = IMG > 100
    with pytest.warns(RuntimeWarning, match="Converting input from bool"):
        got = jit(lambda b: np.histogram(b, bins=3), opt_level)(b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.histogram(b, bins=3)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w, strict=True)


def test_histogram_errors_as_numpy(opt_level):
    with pytest.raises(ValueError, match="positive"):
        jit(lambda a: np.histogram(a, bins=0), opt_level)(VALS)
    with pytest.raises(ValueError, match="max must be larger"):
        jit(lambda a: np.histogram(a, bins=3, range=(2, 1)), opt_level)(VALS)
    with pytest.raises(ValueError, match="monotonically"):
        jit(lambda a: np.histogram(a, bins=[0, 2, 1]), opt_level)(VALS)
    with pytest.raises(ValueError, match="same shape"):
        jit(lambda a: np.histogram(a, bins=3, weights=a[:5]), opt_level)(VALS)
    with pytest.raises(UnsupportedError, match="bins='auto'"):
        jit(lambda a: np.histogram(a, bins="auto"), opt_level)(VALS)
    # the autodetected range is the data's: not finite -> numpy's error at every call
    f = jit(lambda a: np.histogram(a, bins=4), opt_level)
    f(np.nan_to_num(VALS, posinf=0))
    for _ in range(2):
        with pytest.raises(ValueError, match=r"autodetected range of \[.*\] is not finite"):
            f(VALS)



# -- np.histogramdd and np.histogram2d ----------------------------------------------------
PX = RNG.standard_normal(3000).astype(np.float32)
PX[[5, 17]] = [np.nan, 2.0]
PY = RNG.standard_normal(3000)
PZ = RNG.integers(0, 10, 3000)
PW = RNG.random(3000).astype(np.float32)
PF = np.nan_to_num(PX)

HISTDD = {
    "2d-range": (lambda x, y: np.histogram2d(x, y, bins=5, range=[[-2, 2], [-3, 3]]), (PX, PY)),
    "2d-auto": (lambda x, y: np.histogram2d(x, y), (PF, PY)),
    "2d-weights": (lambda x, y, w: np.histogram2d(x, y, bins=(4, 6), range=[[-2, 2], [-3, 3]],
                                                  weights=w), (PX, PY, PW)),
    "2d-edges-density": (lambda x, y: np.histogram2d(x, y, bins=[np.array([-1., 0, .5, 2]), 3],
                                                     range=[None, [-1, 1]], density=True),
                         (PX, PY)),
    "2d-one-edge-array": (lambda x, y: np.histogram2d(x, y, bins=np.array([-1., 0, 1, 2])),
                          (PX, PY)),
    "2d-same-values": (lambda y: np.histogram2d(y * 0 + 1, y, bins=3), (PY,)),
    "2d-float32-auto": (lambda x: np.histogram2d(x, x[::-1] * 2, bins=64), (PF,)),
    "2d-float16-auto": (lambda x: np.histogram2d(x, x, bins=7), (PF.astype(np.float16),)),
    "dd-3-columns": (lambda y, z: np.histogramdd(np.stack([y, z, y * 2], axis=1), bins=(3, 4, 2)),
                     (PY, PZ)),
    "dd-tuple-density": (lambda y, z: np.histogramdd((y, z), bins=4, range=[(-1, 1), (0, 9)],
                                                     density=True), (PY, PZ)),
    "dd-1d-ints": (lambda z: np.histogramdd(z, bins=10), (PZ,)),
    "dd-view-weights": (lambda y, w: np.histogramdd(np.stack([y, y], 1)[::3], bins=5,
                                                    weights=w[::3]), (PY, PW)),
    "dd-empty": (lambda y: np.histogramdd(np.stack([y, y], 1)[:0], bins=2), (PY,)),
}


@pytest.mark.parametrize("name", HISTDD)
def test_histogramdd(name, opt_level):
    fn, args = HISTDD[name]
    assert_matches_numpy(fn, args, opt_level)


def test_histogramdd_errors_as_numpy(opt_level):
    with pytest.raises(ValueError, match="dimension of bins"):
        jit(lambda x, y: np.histogramdd((x, y), bins=[2, 3, 4]), opt_level)(PX, PY)
    with pytest.raises(ValueError, match="positive"):
        jit(lambda x, y: np.histogram2d(x, y, bins=0), opt_level)(PX, PY)
    with pytest.raises(ValueError, match="max must be larger"):
        jit(lambda x, y: np.histogram2d(x, y, range=[[2, 1], [0, 1]]), opt_level)(PX, PY)
    with pytest.raises(ValueError, match="same length"):
        jit(lambda x, y: np.histogram2d(x, y[:5]), opt_level)(PX, PY)
    with pytest.raises(ValueError, match="monotonically"):
        jit(lambda x, y: np.histogram2d(x, y, bins=[[0, 2, 1], 3]), opt_level)(PX, PY)
    f = jit(lambda x, y: np.histogram2d(x, y), opt_level)  # NaN in x: a range of NaN
    for _ in range(2):
        with pytest.raises(ValueError, match=r"autodetected range of \[.*\] is not finite"):
            f(PX, PY)

def test_scatter_groups_take_the_scatter_template():
    img = RNG.integers(0, 256, (256, 256), dtype=np.uint8)  # large enough for parallel kernels
    f = halojit.trace(lambda a: np.histogram(a, bins=16))
    for got, want in zip(f(img), np.histogram(img, bins=16)):
        np.testing.assert_array_equal(got, want, strict=True)
    groups = [str(g) for g in f.lower(img).groups]
    # min and max in one FullReduce kernel (fusion._merge_sibling_extrema),
    # the bin formula and the counts in one Scatter kernel
    full = [g for g in groups if "FullReduce" in g]
    assert len(full) == 1 and "min," in full[0] and "max," in full[0], groups
    (scatter,) = [g for g in groups if "scatter" in g]
    assert "Scatter;" in scatter and "take" in scatter, groups

