"""Float bits inside a trace: ``ndarray.view`` between dtypes of one itemsize
(the ``bitcast`` op) and the ufuncs built on it, ``np.frexp``,
``np.nextafter`` and ``np.spacing`` (halojit.graph.numpy_composite).

Results are compared with numpy bit for bit (the sign of zero included,
NaN as NaN) at opt levels 0 and 3: float16 over every one of its 65536 bit
patterns, float32 and float64 over random bit patterns (every exponent,
subnormals, NaN, inf) and the special values; integer inputs take numpy's
float loops. Also: non-contiguous views and the refused views.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import assert_matches_numpy, assert_same_bits, jit

from halojit.errors import UnsupportedError
from halojit.graph import numpy_composite

FLOATS = [np.float16, np.float32, np.float64]
INT_OF = {np.float16: np.int16, np.float32: np.int32, np.float64: np.int64}


def _specials(dtype):
    fi = np.finfo(dtype)
    return np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, 3.0, -0.1, fi.smallest_subnormal,
                     -fi.smallest_subnormal, fi.tiny, -fi.tiny, fi.max, -fi.max, np.inf,
                     -np.inf, np.nan], dtype)


def _floats(dtype, n=4000):
    """Every float16; for wider floats, random bit patterns (so every exponent,
    subnormals, NaN and inf) after the specials."""
    if dtype == np.float16:
        return np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    it = INT_OF[dtype]
    rng = np.random.default_rng(3)
    bits = rng.integers(np.iinfo(it).min, np.iinfo(it).max, n, dtype=it, endpoint=True)
    return np.concatenate([_specials(dtype), bits.view(dtype)])


def _check(fn, *args, opt_level):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's overflow/invalid warnings at max and inf
        want = fn(*args)
        copies = [a.copy() for a in args]
        got = jit(fn, opt_level)(*args)
    for a, c in zip(args, copies):
        np.testing.assert_array_equal(a, c)  # the inputs were not written to
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_same_bits(g, w)


@pytest.mark.parametrize("opt_level", [0, 3])
@pytest.mark.parametrize("dtype", FLOATS)
def test_frexp_bit_for_bit(dtype, opt_level):
    _check(np.frexp, _floats(dtype), opt_level=opt_level)


@pytest.mark.parametrize("opt_level", [0, 3])
@pytest.mark.parametrize("dtype", FLOATS)
def test_spacing_bit_for_bit(dtype, opt_level):
    # float16 follows numpy's own half loop (positive, and the step towards
    # zero at negative powers of two), float32/64 nextafter(x, +-inf) - x
    _check(np.spacing, _floats(dtype), opt_level=opt_level)


@pytest.mark.parametrize("opt_level", [0, 3])
@pytest.mark.parametrize("dtype", FLOATS)
def test_nextafter_bit_for_bit(dtype, opt_level):
    x = _floats(dtype)
    s = _specials(dtype)
    # every special against every special (x == y, zeros of both signs, NaN),
    # the whole set towards +inf, and against a shuffled copy
    pairs_x = np.concatenate([np.repeat(s, s.size), x, x])
    pairs_y = np.concatenate([np.tile(s, s.size), np.full(x.size, np.inf, dtype),
                              np.random.default_rng(4).permutation(x)])
    _check(np.nextafter, pairs_x, pairs_y, opt_level=opt_level)


@pytest.mark.parametrize("keeps_x", [True, False])
def test_half_nextafter_of_equal_values_both_numpy_rules(monkeypatch, keeps_x):
    # numpy < 2.5's half loop returns x where x == y, 2.5 returns y as C does;
    # the trace follows the installed numpy, and each rule is checked here
    monkeypatch.setattr(numpy_composite, "_HALF_NEXTAFTER_KEEPS_X", keeps_x)
    x = np.array([0.0, -0.0, 1.0, -0.0, np.inf, 0.0], np.float16)
    y = np.array([-0.0, 0.0, 1.0, -0.0, np.inf, 1.0], np.float16)
    got = jit(lambda a, b: np.nextafter(a, b) * np.float16(1), 0)(x, y)
    want = np.where(x == y, x if keeps_x else y, [0, 0, 0, 0, 0, np.float16(6e-8)])
    assert_same_bits(got, want.astype(np.float16))


@pytest.mark.parametrize("opt_level", [0, 3])
def test_float_bits_of_other_inputs(opt_level):
    i8 = np.array([-5, -1, 0, 1, 3, 127], np.int8)
    i32 = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    f = np.random.default_rng(5).standard_normal((6, 8)).astype(np.float32)
    _check(np.frexp, i8, opt_level=opt_level)  # float16, as numpy's loops
    _check(lambda a: np.frexp(a)[1] * 2, i32, opt_level=opt_level)  # float64's int32 exponent
    _check(lambda a: np.nextafter(a, 2), i32, opt_level=opt_level)  # float64
    _check(lambda a: np.nextafter(a, np.float32(0)), f, opt_level=opt_level)
    _check(lambda a: np.spacing(a[::2, 1::3]), f, opt_level=opt_level)  # a strided view
    _check(lambda a: np.spacing(a.T + 1), f, opt_level=opt_level)
    _check(lambda a: np.frexp(a[:0]), f, opt_level=opt_level)  # zero-size


VIEWS = {
    "f32-as-int32": (lambda a: (a.view(np.int32) >> 23) & 0xFF, "f"),
    "f32-flip-sign": (lambda a: (a.view(np.uint32) ^ np.uint32(0x80000000)).view(np.float32),
                      "f"),
    "f16-step": (lambda a: (a.view(np.int16) + np.int16(1)).view(np.float16), "h"),
    "f16-as-uint16": (lambda a: a.view(np.uint16) // 3, "h"),
    "f64-view-of-transpose": (lambda a: a.T.view(np.int64) % 1000, "d"),
    "int-as-uint": (lambda a: a.view(np.uint32) + 1, "i"),
    "uint8-as-int8": (lambda a: a.view(np.int8), "u8"),
    "bool-as-uint8": (lambda a: (a > 0).view(np.uint8) * 3, "f"),
    "same-dtype": (lambda a: a.view(np.float32) + 1, "f"),
    "no-dtype": (lambda a: a.view() * 2, "f"),
    "ndarray-type": (lambda a: a.view(np.ndarray) - 1, "f"),
    "strided": (lambda a: a[::2, ::-3].view(np.int32), "f"),
    "empty": (lambda a: a[:0].view(np.uint32), "f"),
    "zero-d": (lambda a: a[1, 2].view(np.int32) + a[0].view(np.int32), "f"),
    "constant": (lambda a: a.view(np.int32) + np.float32(1.5).view(np.int32), "f"),
}


def _view_data():
    rng = np.random.default_rng(6)
    f = rng.standard_normal((5, 7)).astype(np.float32)
    f[0, :5] = [np.nan, np.inf, -np.inf, -0.0, 1e-45]
    return {"f": f, "h": f.astype(np.float16), "d": rng.standard_normal((4, 3)),
            "i": rng.integers(-2 ** 31, 2 ** 31, (3, 5), dtype=np.int64).astype(np.int32),
            "u8": np.arange(0, 256, 17, dtype=np.uint8)}


@pytest.mark.parametrize("opt_level", [0, 1, 3])
@pytest.mark.parametrize("case", sorted(VIEWS))
def test_view_as_numpy(case, opt_level):
    fn, name = VIEWS[case]
    _check(fn, _view_data()[name], opt_level=opt_level)
    assert_matches_numpy(fn, [_view_data()[name]], opt_level)


@pytest.mark.parametrize("fn,match", [
    (lambda a: a.view(np.float64), "another itemsize"),
    (lambda a: a.view(np.uint8), "another itemsize"),
    (lambda a: a.view(np.int32).view(bool), "another itemsize"),
    (lambda a: a.astype(np.uint8).view(bool), "bool"),
    (lambda a: a.view(np.matrix), "np.ndarray"),
    (lambda a: a.view(np.int32, np.recarray), "np.ndarray"),
])
def test_refused_views_say_why(fn, match):
    with pytest.raises(UnsupportedError, match=match):
        jit(fn, 0)(np.ones((2, 3), np.float32))

