"""Stacking helpers, ediff1d, fix, resize, delete/insert, isin, choose, the
real-array spellings (real, imag, conj) and the array-API linalg spellings
(numpy_more), against numpy over dtypes, special values included."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import halojit
from helpers import jit

RNG = np.random.default_rng(1)


def arr(shape, dt):
    if dt == "bool":
        return RNG.random(shape) > 0.5
    if dt[0] in "iu":
        return RNG.integers(0 if dt[0] == "u" else -9, 9, shape).astype(dt)
    a = RNG.standard_normal(shape).astype(dt)
    if a.size > 3:
        a.flat[1], a.flat[2] = np.nan, -0.0
    return a


CASES = {
    "dstack": (lambda a, b: np.dstack([a, b]), [(3, 4), (3, 4)]),
    "dstack1d": (lambda a, b: np.dstack((a[0], b[0])), [(3, 4), (3, 4)]),
    "dstack3": (lambda a: np.dstack([a]), [(2, 3, 4)]),
    "column_stack": (lambda a, b: np.column_stack([a[0], b, a[1]]), [(3, 4), (4, 2)]),
    "column_stack0": (lambda a: np.column_stack([a.sum(), a[:1, :1]]), [(3, 4)]),
    "block2d": (lambda a, b: np.block([[a, b], [b, a]]), [(2, 2), (2, 2)]),
    "block1d": (lambda a, b: np.block([a[0], b[0], 1]), [(2, 3), (2, 2)]),
    "block3": (lambda a, b: np.block([[[a]], [[b]]]), [(2, 2), (2, 2)]),
    "block-mixed": (lambda a, b: np.block([[a[0], a[1]], [b[0], b[1]]]), [(2, 3), (2, 3)]),
    "append": (lambda a, b: np.append(a, b), [(2, 3), (4,)]),
    "append-ax": (lambda a, b: np.append(a, b, axis=0), [(2, 3), (1, 3)]),
    "append-list": (lambda a: np.append(a, [1, 2]), [(2, 2)]),
    "ediff1d": (lambda a: np.ediff1d(a), [(3, 4)]),
    "ediff1d-ends": (lambda a: np.ediff1d(a, to_end=[9, 8], to_begin=-1), [(5,)]),
    "fix": (lambda a: np.fix(a * 3.3 if a.dtype.kind == "f" else a), [(3, 4)]),
    "resize": (lambda a: np.resize(a, (3, 5)), [(2, 3)]),
    "resize-small": (lambda a: np.resize(a, 4), [(2, 3)]),
    "resize-empty": (lambda a: np.resize(a, (2, 0)), [(2, 3)]),
    "delete": (lambda a: np.delete(a, 1, axis=1), [(3, 4)]),
    "delete-list": (lambda a: np.delete(a, [0, 2, -1]), [(3, 4)]),
    "delete-slice": (lambda a: np.delete(a, slice(None, None, 2), axis=0), [(5, 2)]),
    "delete-none": (lambda a: np.delete(a, [], axis=0), [(3, 2)]),
    "insert": (lambda a: np.insert(a, 2, 7), [(5,)]),
    "insert-ax": (lambda a: np.insert(a, 1, 5, axis=1), [(3, 4)]),
    "insert-vals": (lambda a, b: np.insert(a, 1, b[0], axis=0), [(3, 4), (2, 4)]),
    "insert-seq": (lambda a: np.insert(a, [1, 3, 3], [7, 8, 9]), [(5,)]),
    "insert-one-seq": (lambda a: np.insert(a, [1], [7, 8]), [(5,)]),
    "insert-scalar-many": (lambda a: np.insert(a, 1, [7, 8]), [(5,)]),
    "insert-slice": (lambda a: np.insert(a, slice(0, 4, 2), 6, axis=0), [(4, 2)]),
    "insert-2d-seq": (lambda a: np.insert(a, [0, 2], [[1], [2], [3]], axis=1), [(3, 4)]),
    "isin": (lambda a, b: np.isin(a, b), [(3, 4), (5,)]),
    "isin-invert": (lambda a: np.isin(a, [0, 1, 2], invert=True), [(3, 4)]),
    "isin-empty": (lambda a: np.isin(a, []), [(3, 4)]),
    "choose": (lambda a, b: np.choose(np.abs(a) % 3, [b, -b, b * 2]), [(3, 4), (3, 4)]),
    "choose-wrap": (lambda a, b: np.choose(a, [b, b + 1], mode="wrap"), [(3, 4), (4,)]),
    "choose-clip": (lambda a, b: np.choose(a, [b, b + 1, 0], mode="clip"), [(3, 4), (4,)]),
    "choose-raise": (lambda a, b: np.choose(a, [b, b + 1]), [(3, 4), (4,)]),
    "real": (lambda a: np.real(a) + np.imag(a), [(3, 4)]),
    "attrs": (lambda a: (a.real, a.imag, a.conj(), np.conjugate(a), np.iscomplexobj(a),
                         np.isreal(a), np.iscomplex(a)), [(3, 4)]),
    "matrix_transpose": (lambda a: np.matrix_transpose(a), [(2, 3, 4)]),
    "la.matrix_transpose": (lambda a: np.linalg.matrix_transpose(a), [(3, 4)]),
    "vecdot": (lambda a, b: np.vecdot(a, b), [(3, 4), (4,)]),
    "vecdot-axis": (lambda a, b: np.vecdot(a, b, axis=0), [(3, 4), (3, 1)]),
    "la.vecdot": (lambda a, b: np.linalg.vecdot(a, b), [(2, 3, 4), (3, 4)]),
    "matvec": (lambda a, b: np.matvec(a, b), [(2, 3, 4), (4,)]),
    "vecmat": (lambda a, b: np.vecmat(a, b), [(3,), (2, 3, 4)]),
    "la.matmul": (lambda a, b: np.linalg.matmul(a, b), [(3, 4), (4, 2)]),
    "la.outer": (lambda a, b: np.linalg.outer(a, b), [(3,), (4,)]),
    "la.trace": (lambda a: np.linalg.trace(a, offset=1), [(2, 3, 3)]),
    "la.diagonal": (lambda a: np.linalg.diagonal(a), [(2, 3, 4)]),
    "la.tensordot": (lambda a, b: np.linalg.tensordot(a, b, axes=1), [(3, 4), (4, 2)]),
    "la.cross": (lambda a, b: np.linalg.cross(a, b), [(4, 3), (4, 3)]),
    "matrix_power": (lambda a: np.linalg.matrix_power(a, 5), [(2, 3, 3)]),
    "matrix_power0": (lambda a: np.linalg.matrix_power(a, 0), [(3, 3)]),
    "matrix_power1": (lambda a: np.linalg.matrix_power(a, 1), [(3, 3)]),
    # numpy's own Python code on traced arrays
    "array_equiv": (lambda a, b: (np.array_equiv(a, a[0]), np.array_equiv(a, b),
                                  np.array_equiv(a[:1], a[:1].copy()),
                                  np.array_equiv(a[:1], np.broadcast_to(a[:1], (2, 4))),
                                  np.array_equiv(b[:3], b[1:]), np.array_equiv(a[:, :0], b[:0])),
                    [(3, 4), (4,)]),
    "cumulative_sum": (lambda a: np.cumulative_sum(a, axis=1, include_initial=True), [(3, 4)]),
    "cumulative_prod": (lambda a: np.cumulative_prod(a, axis=0), [(3, 4)]),
    "i0": (lambda a: np.i0(np.nan_to_num(a.astype(np.float64), posinf=3.0)), [(3, 4)]),
    "polyadd": (lambda a, b: (np.polyadd(a, b), np.polysub(b, a)), [(3,), (5,)]),
    "rollaxis": (lambda a: np.rollaxis(a, 2), [(2, 3, 4)]),
    "indices_from": (lambda a: (a[np.tril_indices_from(a)], a[np.triu_indices_from(a, 1)],
                                a[np.diag_indices_from(a)], a[np.ix_([0, 2], [1, 3])]),
                     [(4, 4)]),
    "unstack": (lambda a: np.unstack(a, axis=1), [(3, 4)]),
    "isposinf": (lambda a: (np.isposinf(a / 0.5), np.isneginf(a * np.inf)), [(3, 4)]),
    "bin_edges": (lambda a: np.histogram_bin_edges(a, 5, range=(-1, 2)), [(3, 4)]),
    "result_type": (lambda a, b: (a + b).astype(np.result_type(a, b, 1.5)) *
                    np.can_cast(a, np.float64), [(3, 4), (4,)]),
}

DTYPES = ["float32", "int8", "bool", "float16"]


def _args(name, shapes, dt):
    args = [arr(s, dt) for s in shapes]
    if name.startswith("choose"):
        hi = 2 if name == "choose-raise" else 3
        args[0] = RNG.integers(0 if name == "choose-raise" else -1, hi, shapes[0])
    return args


def _same(got, want, dt):
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        np.testing.assert_allclose(g.astype(float), w.astype(float), equal_nan=True,
                                   rtol=1e-2 if dt == "float16" else 1e-5, atol=1e-5)


PARAMS = [(n, dt) for n in CASES for dt in DTYPES]


@pytest.mark.parametrize("name,dt", PARAMS[::3], ids=lambda v: str(v))
def test_matches_numpy(name, dt, opt_level):
    fn, shapes = CASES[name]
    args = _args(name, shapes, dt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's own warnings (bool bins), raised by both
        try:
            want = fn(*[a.copy() for a in args])
        except Exception as e:  # numpy refuses (bool subtraction, ...): so do we
            with pytest.raises(type(e)):
                jit(fn, opt_level)(*args)
            return
        _same(jit(fn, opt_level)(*args), want, dt)


def test_errors_as_numpy():
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(ValueError, match="invalid entry"):  # checked at every call
        halojit.trace(lambda i, a: np.choose(i, [a, a + 1]))(np.array([0, 2, 1]), x[0])
    with pytest.raises(TypeError, match="tuple"):
        halojit.trace(lambda a: np.block([(a, a)]))(x)
    with pytest.raises(ValueError, match="depths are mismatched"):
        halojit.trace(lambda a: np.block([[a], a]))(x)
    with pytest.raises(halojit.UnsupportedError, match="inverse"):
        halojit.trace(lambda a: np.linalg.matrix_power(a, -1))(x[:2, :2])
    with pytest.raises(halojit.UnsupportedError, match="positions computed"):
        halojit.trace(lambda a: np.delete(a, a.argmax()))(x)
    with pytest.raises(ValueError, match="3-dimensional vectors"):
        halojit.trace(lambda a: np.linalg.cross(a[:, :2], a[:, :2]))(x)
