"""np.searchsorted, np.digitize, np.interp, np.correlate and np.convolve
inside traces: numpy's values and dtypes (NaN sorting last, values on bin
edges and sample points, +-inf, decreasing bins, sorter, integer
wrap-around in convolutions, every mode, the shorter operand first),
0-d and zero-size operands, and numpy's errors; halojit's own refusals
(sizes past its limits, traced digitize bins, interp's period); the
binary search at every length where its steps change and on large
tables."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.graph.numpy_search import MAX_TAPS
from halojit.errors import UnsupportedError

from helpers import assert_same


def _check(fn, *args):
    """``fn`` traced against numpy: every result's dtype, shape and values,
    and the inputs left as they were."""
    copies = [np.copy(a) for a in args]
    with np.errstate(all="ignore"):
        want = fn(*args)
        got = halojit.trace(fn)(*args)
    if not isinstance(want, tuple):
        want, got = (want,), (got,)
    assert isinstance(got, tuple) and len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(np.asarray(g), np.asarray(w), what=f"result {i}")
    for a, c in zip(args, copies):
        assert np.array_equal(a, c, equal_nan=True), "an input was modified"


def _data():
    rng = np.random.default_rng(0)
    # sorted, with repeats, +-inf, and NaN last (numpy's order)
    a = np.sort(np.concatenate([rng.standard_normal(12), [0.5, 0.5, 0.5, -np.inf, np.inf,
                                                          np.nan, np.nan]]))
    v = rng.standard_normal((4, 6)) * 1.5
    v.flat[:8] = [np.nan, np.inf, -np.inf, 0.5, a[3], a[9], a[1], -7.0]  # on edges and off
    shuffled = rng.permutation(a)
    xp = np.sort(rng.uniform(-2, 2, 9))
    xp[4] = xp[3]  # a vertical step
    fp = rng.standard_normal(9)
    fp[6] = fp[7] = np.inf  # inf - inf: numpy's NaN fallbacks
    fp[1], fp[2] = np.inf, -np.inf  # x at xp[1] is fp[1], not inf * 0
    x = rng.uniform(-3, 3, (5, 7))
    x.flat[:14] = [np.nan, np.inf, -np.inf, xp[0], xp[-1], xp[3], xp[6], xp[7], xp[1],
                   (xp[6] + xp[7]) / 2, (xp[5] + xp[6]) / 2, (xp[1] + xp[2]) / 2, -2.5, 2.5]
    return dict(a=a, v=v, shuffled=shuffled, sorter=np.argsort(shuffled, kind="stable"),
                xp=xp, fp=fp, x=x, rng=rng)


D = _data()

# -- searchsorted ----------------------------------------------------------------------
A32 = np.array([0.0, 0.1, 0.1, 0.25, 1.0], np.float32)
AINT = np.array([-5, -1, 0, 0, 2, 7, 7, 100], np.int32)
VFRAC = np.array([[-5.5, -5, -1, 0], [0.5, 7, 7.5, np.nan], [100, 101, -np.inf, np.inf]])

SEARCH = {
    "left": (lambda a, v: np.searchsorted(a, v), (D["a"], D["v"])),
    "right": (lambda a, v: np.searchsorted(a, v, side="right"), (D["a"], D["v"])),
    "sorter-traced": (lambda a, s, v: (np.searchsorted(a, v, sorter=s),
                                        np.searchsorted(a, v, "right", s)),
                      (D["shuffled"], D["sorter"], D["v"])),
    "sorter-argsort": (lambda a, v: np.searchsorted(a, v, sorter=np.argsort(a)),
                       (D["shuffled"], D["v"])),
    "sorter-list": (lambda a, v: np.searchsorted(a, v, sorter=D["sorter"].tolist()),
                    (D["shuffled"], D["v"])),
    "scalar-v": (lambda a: (np.searchsorted(a, 0.5), np.searchsorted(a, 0.5, side="right"),
                            np.searchsorted(a, np.nan), np.searchsorted(a, np.nan, "right")),
                 (D["a"],)),
    # numpy compares a Python float as float64, even beside a float32 array
    "float32-python-float": (lambda a: (np.searchsorted(a, 0.1), np.searchsorted(a, 0.1, "right"),
                                        np.searchsorted(a, np.float32(0.1), "right")), (A32,)),
    "int32-a-float-v": (lambda a, v: (np.searchsorted(a, v), np.searchsorted(a, v, "right")),
                        (AINT, VFRAC)),
    "int8-a-python-int": (lambda a: (np.searchsorted(a, 1000), np.searchsorted(a, -1000)),
                          (AINT.astype(np.int8),)),
    "zero-size-v": (lambda a, v: np.searchsorted(a, v), (D["a"], np.zeros((0, 3)))),
    "empty-a": (lambda a, v: np.searchsorted(a, v, "right"), (np.zeros(0), D["v"])),
    "list-a": (lambda v: np.searchsorted([0, 1, 2.5], v), (VFRAC.astype(np.float32),)),
}


@pytest.mark.parametrize("case", sorted(SEARCH))
def test_searchsorted(case):
    _check(*SEARCH[case][:1], *SEARCH[case][1])


def _probe(a):
    """Every element of the sorted ``a``, a value between each neighbouring
    pair, values below and above all, +-inf and NaN."""
    finite = a[np.isfinite(a)] if a.dtype.kind == "f" else a
    mids = (finite[:-1] + (finite[1:] - finite[:-1]) / 2).astype(a.dtype)
    lo, hi = (finite.min() - 1, finite.max() + 1) if finite.size else (0, 0)
    extra = [lo, hi] + ([np.inf, -np.inf, np.nan] if a.dtype.kind == "f" else [])
    return np.concatenate([a, mids, np.array(extra, a.dtype)])


# lengths where the search's steps change: the powers of two and their
# neighbours (the first step, and whether pos + step may pass the end)
@pytest.mark.parametrize("n, dtype", [(n, (np.float64, np.int16)[k % 2]) for k, n in
                                      enumerate([1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33])])
def test_searchsorted_every_step_count(n, dtype):
    rng = np.random.default_rng(n)
    a = np.sort(rng.integers(-4 * n, 4 * n, n).astype(dtype))  # repeats, too
    if dtype == np.float64 and n > 2:
        a[-1] = np.nan  # NaN last, numpy's order
        a[0] = -np.inf
    _check(lambda a, v: (np.searchsorted(a, v), np.searchsorted(a, v, side="right")),
           a, _probe(a))


def test_large_tables():
    # far past what comparing with every element would allow: 2**16 + 3
    # sorted values with repeats (a binary search in numpy too)
    rng = np.random.default_rng(7)
    n = (1 << 16) + 3
    a = np.sort(rng.standard_normal(n).astype(np.float32).round(2))
    v = np.concatenate([_probe(a[::97]), rng.standard_normal(5000).astype(np.float32)])
    fp = rng.standard_normal(n)
    xp = np.unique(a).astype(np.float64)
    # one trace each: a kernel of several searches goes to Adams2019 (slow to
    # compile), one search fits the Elementwise template
    _check(lambda a, v: np.searchsorted(a, v), a, v)
    _check(lambda a, v: np.searchsorted(a, v, "right"), a, v)
    _check(lambda v: np.digitize(v, EDGES), v)
    _check(lambda v, xp, fp: np.interp(v, xp, fp[:xp.size]), v, xp, fp)


EDGES = np.linspace(-3, 3, 2001)


# -- digitize ----------------------------------------------------------------------------
INC = np.array([-1.0, 0.0, 0.5, 0.5, 2.0, np.inf])
DEC = INC[::-1].copy()

XINT = np.array([[-3, -2, -1, 0], [1, 2, 3, 4]], np.int32)

DIGITIZE = {
    "increasing": (lambda x: (np.digitize(x, INC), np.digitize(x, INC, right=True)), D["v"]),
    "decreasing": (lambda x: (np.digitize(x, DEC), np.digitize(x, DEC, right=True)), D["v"]),
    "list-bins-scalar-x": (lambda x: (np.digitize(x[0, 3], [0.0, 0.5, 1.0]),
                                      np.digitize(x, [3, 3, 3]), np.digitize(x, [])), D["v"]),
    "int-x": (lambda x: (np.digitize(x, [-1.5, 0, 0, 1, 2.5], right=True),
                         np.digitize(x, [2, 1, 1, -2])), XINT),
}


@pytest.mark.parametrize("case", sorted(DIGITIZE))
def test_digitize(case):
    _check(*DIGITIZE[case])


# -- interp ------------------------------------------------------------------------------
INTERP = {
    "default": (lambda x, xp, fp: np.interp(x, xp, fp), (D["x"], D["xp"], D["fp"])),
    "left-right": (lambda x, xp, fp: np.interp(x, xp, fp, left=-1.5, right=np.float32(7)),
                   (D["x"], D["xp"], D["fp"])),
    "left-traced": (lambda x, xp, fp: np.interp(x, xp, fp, left=fp[1], right=np.nan),
                    (D["x"], D["xp"], D["fp"])),
    "one-point": (lambda x: np.interp(x, [0.5], [3]), (D["x"],)),  # a NaN x gives fp[0]
    "one-point-left-right": (lambda x: np.interp(x, [0.5], [3], left=1, right=2), (D["x"],)),
    "two-points-int": (lambda x, xp, fp: np.interp(x, xp, fp),
                       (D["x"].astype(np.float32), np.array([0, 1], np.int32), np.array([1, 3]))),
    # numpy tests x > xp[-1] before x < xp[0]; which only tells on a decreasing xp
    "decreasing-two-points": (lambda x: np.interp(x, [1, -1], [5, 6], left=-8, right=9),
                              (D["x"],)),
    "scalar-x": (lambda xp, fp: (np.interp(0.3, xp, fp), np.interp(np.nan, xp, fp)),
                 (D["xp"], D["fp"])),
    "zero-size-x": (lambda x, xp, fp: np.interp(x, xp, fp), (np.zeros((2, 0)), D["xp"], D["fp"])),
    "constant-xp-fp": (lambda x: np.interp(x, [-1, 0, 0, 2], [10, 0, 5, 5]), (D["x"],)),
}


@pytest.mark.parametrize("case", sorted(INTERP))
def test_interp(case):
    _check(INTERP[case][0], *INTERP[case][1])


def test_interp_matches_numpy_bit_for_bit():
    xp, fp, x = D["xp"], D["fp"], D["x"]
    f = lambda x, xp, fp: np.interp(x, xp, fp)  # noqa: E731
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(halojit.trace(f)(x, xp, fp), f(x, xp, fp))


# -- correlate / convolve ------------------------------------------------------------------
def _pair(dtype, n1, n2, lo=-3, hi=3):
    rng = D["rng"]
    if np.dtype(dtype).kind == "f":
        return (rng.uniform(lo, hi, n1).astype(dtype), rng.uniform(lo, hi, n2).astype(dtype))
    if np.dtype(dtype).kind == "b":
        return rng.random(n1) > 0.5, rng.random(n2) > 0.5
    info = np.iinfo(dtype)
    return (rng.integers(info.min, info.max, n1, endpoint=True).astype(dtype),
            rng.integers(info.min, info.max, n2, endpoint=True).astype(dtype))


def _specials():
    a, v = _pair(np.float64, 7, 3)
    a[2], v[0], v[2] = np.inf, -np.inf, np.nan  # numpy's dot skips the padding: no 0 * inf
    return a, v


PAIRS = {
    "float64-9-4": _pair(np.float64, 9, 4),
    "float64-4-9": _pair(np.float64, 4, 9),
    "float64-3-9": _pair(np.float64, 3, 9),
    "float64-inf-nan": _specials(),
    "float64-inf-nan-swapped": _specials()[::-1],
    "float32-8-5": _pair(np.float32, 8, 5),
    "int8-4-10-wraps": _pair(np.int8, 4, 10),
    "int32-12-5-wraps": _pair(np.int32, 12, 5),
    "int8-uint8": (_pair(np.int8, 6, 1)[0], _pair(np.uint8, 1, 3)[1]),
    "bool": _pair(np.bool_, 5, 2),
    "equal-even": _pair(np.float64, 6, 6),
    "one-one": _pair(np.int64, 1, 1, -10, 10),
}


# int8 and bool kernels compile several times slower: one mode each
ONE_MODE = {"int8-4-10-wraps": ("full",), "bool": ("full",), "int8-uint8": ("same",)}


@pytest.mark.parametrize("case", sorted(PAIRS))
def test_correlate_convolve(case):
    modes = ONE_MODE.get(case, ("valid", "same", "full"))
    _check(lambda a, v: tuple(f(a, v, m) for f in (np.correlate, np.convolve) for m in modes),
           *PAIRS[case])


def test_float16_sums_in_float32_as_numpy():
    a, v = _pair(np.float16, 40, 31)
    f = lambda a, v: np.convolve(a, v, "same")  # noqa: E731
    np.testing.assert_array_equal(halojit.trace(f)(a, v), f(a, v), strict=True)


def test_correlate_convolve_constants_int_modes_and_scalars():
    a = np.array([3, -1, 4, 1, -5, 9, 2], np.int16)
    _check(lambda a: (np.convolve(a, [1, -2, 1]), np.correlate([0.5, 2], a, "same"),
                      np.convolve(a, np.array([2, 1], np.int8), 0), np.correlate(a, a[:2], 1),
                      np.convolve(a, 3), np.convolve(a[2], a[:3], 2)), a)


# -- errors ----------------------------------------------------------------------------------
A = D["a"]
BAD = {  # numpy raises these too
    "side-name": (lambda a: np.searchsorted(a, 0.5, side="middle"), ValueError),
    "side-type": (lambda a: np.searchsorted(a, 0.5, side=None), TypeError),
    "searchsorted-2d": (lambda a: np.searchsorted(a.reshape(1, -1), 0.5), ValueError),
    "searchsorted-0d": (lambda a: np.searchsorted(a[0], 0.5), ValueError),
    "sorter-length": (lambda a: np.searchsorted(a, 0.5, sorter=[0, 1]), ValueError),
    "sorter-float": (lambda a: np.searchsorted(a, 0.5, sorter=np.zeros(a.size)), TypeError),
    "sorter-range": (lambda a: np.searchsorted(a, 0.5, sorter=np.full(a.size, a.size)),
                     ValueError),
    "digitize-not-monotonic": (lambda a: np.digitize(a, [0, 2, 1]), ValueError),
    "digitize-nan-bins": (lambda a: np.digitize(a, [np.nan, 1, 2]), ValueError),
    "digitize-2d-bins": (lambda a: np.digitize(a, [[0, 1]]), ValueError),
    "interp-empty": (lambda a: np.interp(a, [], []), ValueError),
    "interp-lengths": (lambda a: np.interp(a, [0, 1, 2], [0, 1]), ValueError),
    "interp-2d-xp": (lambda a: np.interp(a, [[0, 1]], [0, 1]), ValueError),
    "interp-left-list": (lambda a: np.interp(a, [0, 1], [0, 1], left=[1, 2]), TypeError),
    "correlate-empty-a": (lambda a: np.correlate(a[:0], a), ValueError),
    "correlate-empty-v": (lambda a: np.correlate(a, a[:0], "full"), ValueError),
    "convolve-empty": (lambda a: np.convolve(a[:0], a[:1]), ValueError),
    "correlate-0d": (lambda a: np.correlate(a[0], a), ValueError),
    "convolve-2d": (lambda a: np.convolve(a.reshape(1, -1), a), ValueError),
    "mode-name": (lambda a: np.correlate(a, a[:2], "middle"), ValueError),
    "mode-int": (lambda a: np.convolve(a, a[:2], 3), ValueError),
    "mode-bool": (lambda a: np.convolve(a, a[:2], True), TypeError),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_numpy_errors(case):
    fn, error = BAD[case]
    with pytest.raises(error):
        fn(A)
    with pytest.raises(error):
        halojit.trace(fn)(A)


def test_traced_sorter_out_of_range_at_call():
    f = halojit.trace(lambda a, s: np.searchsorted(a, 0.5, sorter=s))
    good = D["sorter"]
    assert_same(f(D["shuffled"], good), np.searchsorted(D["shuffled"], 0.5, sorter=good))
    bad = good + A.size  # every entry out of range: numpy's search meets one
    with pytest.raises(ValueError, match="Sorter index out of range"):
        np.searchsorted(D["shuffled"], 0.5, sorter=bad)
    with pytest.raises(ValueError, match="Sorter index out of range"):
        f(D["shuffled"], bad)


def test_every_sorter_entry_is_checked():
    # numpy checks only the entries its binary search visits (here it
    # meets none of the bad ones and answers); halojit checks them all
    bad = np.arange(A.size) - 1
    with pytest.raises(ValueError, match="Sorter index out of range"):
        halojit.trace(lambda a: np.searchsorted(a, 0.5, sorter=bad))(A)


T = MAX_TAPS + 1
REFUSED = {
    "interp-period": (lambda a: np.interp(a, [0, 1], [0, 1], period=2.0), 19, "period"),
    "digitize-traced-bins": (lambda a: np.digitize(a, a), 19, "known while tracing"),
    "correlate-taps": (lambda a: np.correlate(np.zeros(T + 40), a), T, f"{T}.*{T - 1}"),
    "convolve-taps": (lambda a: np.convolve(a, np.zeros(T + 1)), T, f"{T}.*{T - 1}"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused(case):
    fn, n, message = REFUSED[case]
    with pytest.raises(UnsupportedError, match=message) as info:
        halojit.trace(fn)(np.linspace(-1, 2, n))
    assert "test_search_convolve.py" in str(info.value)  # the user's line
