"""np.linalg.det, slogdet, inv, solve and cholesky of stacks of matrices up to 4x4
(graph/numpy_linalg.py) and np.linalg.multi_dot, against numpy: dtypes,
stack shapes, zero sizes, views, broadcasting, pivoting, singular and NaN
matrices, errors."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.graph.numpy_linalg import MAX_N
from helpers import HAS_HALIDE_BACKEND, assert_matches_numpy, jit

RNG = np.random.default_rng(7)
LEVELS = [0] + ([3] if HAS_HALIDE_BACKEND else [])
TOL = {"rtol": 2e-4, "atol": 2e-5}  # float32 LU in another order than LAPACK's


def mats(shape, n, dt="float32"):
    """Well-conditioned random matrices (diagonally weighted), or small ints."""
    if np.dtype(dt).kind in "iub":
        def draw():
            if dt == "bool":
                return RNG.random(shape + (n, n)) > 0.4
            return RNG.integers(0 if dt[0] == "u" else -4, 5, shape + (n, n)).astype(dt)
        a = draw()
        while a.size and (np.abs(np.linalg.det(a.astype(np.float64))) < 0.5).any():
            a = draw()  # integer matrices can be singular, where numpy's inv raises
        return a
    return (RNG.standard_normal(shape + (n, n)) + n * np.eye(n)).astype(dt)


def det(a):
    return np.linalg.det(a)


def slogdet(a):
    sign, logabs = np.linalg.slogdet(a)
    return sign, logabs


def inv(a):
    return np.linalg.inv(a)


def solve(a, b):
    return np.linalg.solve(a, b)


FUNCS = {"det": det, "slogdet": slogdet, "inv": inv}


def _check(fn, args, level):
    assert_matches_numpy(fn, args, level, **TOL)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_float32_stacks(name, n, level):
    _check(FUNCS[name], (mats((6,), n),), level)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("dt,shape", [("float64", ()), ("float64", (2, 3)), ("int32", (5,)),
                                      ("uint8", (4,)), ("bool", (3,)), ("float32", (0,))])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_dtypes_and_stack_shapes(name, dt, shape, level):
    _check(FUNCS[name], (mats(shape, 3, dt),), level)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("a_shape,b_shape", [
    ((3, 3), (3,)),            # one vector
    ((5, 3, 3), (3,)),         # a stack, one vector for all
    ((5, 2, 2), (5, 2, 3)),    # a stack, three right-hand columns each
    ((2, 1, 4, 4), (3, 4, 1)),  # stacks broadcast together: (2, 3)
    ((4, 3, 3), (4, 3, 9)),    # 27 columns: B's rows kept whole
    ((1, 1), (1, 5)),
])
def test_solve(a_shape, b_shape, level):
    a = mats(a_shape[:-2], a_shape[-1])
    b = RNG.standard_normal(b_shape).astype(np.float32)
    _check(solve, (a, b), level)


@pytest.mark.parametrize("level", LEVELS)
def test_solve_mixed_dtypes_promote_as_numpy(level):
    a = mats((3,), 2, "int32")
    _check(solve, (a, RNG.standard_normal(2).astype(np.float32)), level)  # float64
    b = RNG.integers(-3, 4, (3, 2, 1)).astype(np.int8)
    _check(solve, (mats((3,), 2), b), level)  # float32 beside int8: float64 too


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_views_are_read_through_their_strides(name, level):
    base = mats((8,), 3)
    view = base[::2].swapaxes(-1, -2)  # strided stack, transposed matrices
    assert not view.flags.c_contiguous
    _check(FUNCS[name], (view,), level)


@pytest.mark.parametrize("level", LEVELS)
def test_pivoting_swaps_rows_as_lapack(level):
    # zeros on the diagonal, ties in magnitude, a swap of every row
    a2 = np.array([[[0, 1], [1, 0]], [[0, 1], [2, 5]], [[1, 2], [-1, 3]]], np.float64)
    a3 = np.array([[0, 2, 1], [3, 0, 0], [0, 1, 1]], np.float64)
    p4 = np.eye(4)[[2, 0, 3, 1]] * np.array([1, -2, 3, 0.5])
    for fn in (det, slogdet, inv):
        for a in (a2, a3, p4[None]):
            _check(fn, (a,), level)


@pytest.mark.parametrize("level", LEVELS)
def test_empty_matrices_and_stacks(level):
    for shape in [(0, 0), (3, 0, 0), (0, 2, 2)]:
        a = np.zeros(shape, np.float32)
        for fn in (det, slogdet, inv):
            assert_matches_numpy(fn, (a,), level)
    assert_matches_numpy(solve, (np.zeros((0, 3, 3)), np.zeros((0, 3, 2))), level)
    assert_matches_numpy(solve, (np.zeros((2, 0, 0)), np.zeros((0,))), level)


@pytest.mark.parametrize("level", LEVELS)
def test_singular_matrices(level):
    """det and slogdet as numpy (0, and sign 0 with -inf); inv and solve
    cannot raise LinAlgError inside a trace: their results are not finite."""
    a = np.array([[[1.0, 2.0], [2.0, 4.0]], [[3.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]])
    assert_matches_numpy(det, (a,), level)
    assert_matches_numpy(slogdet, (a,), level)
    got = jit(inv, level)(a)
    assert not np.isfinite(got[0]).all() and not np.isfinite(got[1]).all()
    np.testing.assert_array_equal(got[2], np.eye(2))
    x = jit(solve, level)(a, np.ones(2))
    assert not np.isfinite(x[:2]).all()
    np.testing.assert_array_equal(x[2], [1.0, 1.0])


@pytest.mark.parametrize("level", LEVELS)
def test_nan_and_inf_propagate(level):
    a = mats((3,), 3, "float64")
    a[0, 1, 1] = np.nan
    a[1, 0, 0] = np.inf
    got = jit(det, level)(a)
    assert np.isnan(got[0]) and not np.isfinite(got[1])
    np.testing.assert_allclose(got[2], np.linalg.det(a[2]), rtol=1e-12)
    assert np.isnan(jit(inv, level)(a)[0]).any()


def test_errors_as_numpy():
    f = jit(det)
    with pytest.raises(np.linalg.LinAlgError, match="at least two-dimensional"):
        f(np.ones(3))
    with pytest.raises(np.linalg.LinAlgError, match="must be square"):
        f(np.ones((2, 3)))
    with pytest.raises(TypeError, match="float16"):
        f(np.ones((2, 2), np.float16))
    with pytest.raises(halojit.UnsupportedError, match=rf"5x5.*up to {MAX_N}x{MAX_N}"):
        f(np.ones((5, 5)))
    g = jit(solve)
    with pytest.raises(ValueError, match="mismatch in its core dimension"):
        g(np.eye(3), np.ones(2))
    with pytest.raises(ValueError, match="mismatch in its core dimension"):
        g(np.eye(3), np.ones((2, 1)))
    with pytest.raises(ValueError, match="do not broadcast"):
        g(np.ones((2, 3, 3)), np.ones((4, 3, 1)))
    for fn, args in [(det, (np.ones(3),)), (det, (np.ones((5, 5)),)), (solve, (np.eye(3), np.ones(2)))]:
        with pytest.raises((ValueError, TypeError, NotImplementedError)):
            jit(fn)(*args)


@pytest.mark.level3
@pytest.mark.skipif(not HAS_HALIDE_BACKEND, reason="needs the Halide backend")
def test_stacks_compile_to_one_elementwise_kernel():
    """The whole factorization is one kernel over the stack, scheduled by the
    Elementwise template (not Adams2019: 2-9 s to compile a 3x3 or 4x4 det)."""
    for fn, a in [(det, mats((1000,), 3)), (inv, mats((1000,), 4))]:
        lowered = jit(fn, 3).lower(a)
        assert lowered.kernel_count == 1
        assert lowered.groups[0].scheduler.startswith("Elementwise"), lowered.groups[0].scheduler


def spd(shape, n, dt="float64"):
    """Symmetric positive definite matrices."""
    m = RNG.standard_normal(shape + (n, n))
    return (m @ np.swapaxes(m, -1, -2) + n * np.eye(n)).astype(dt)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("n,shape,dt", [(1, (), "float64"), (2, (5,), "float32"),
                                        (3, (2, 3), "float64"), (4, (7,), "float32"),
                                        (0, (2,), "float32")])
def test_cholesky(n, shape, dt, upper, level):
    a = spd(shape, n, dt)
    if n > 1:  # the other triangle is not read
        i, j = (-1, 0) if upper else (0, -1)
        a[..., i, j] += 100
    assert_matches_numpy(lambda a: np.linalg.cholesky(a, upper=upper), (a,), level, **TOL)


@pytest.mark.parametrize("level", LEVELS)
def test_cholesky_of_integers_and_of_an_indefinite_matrix(level):
    a = np.array([[4, 2], [2, 3]], np.int32)
    assert_matches_numpy(np.linalg.cholesky, (a,), level, **TOL)  # float64
    got = jit(np.linalg.cholesky, level)(np.array([[1.0, 2.0], [2.0, 1.0]]))
    np.testing.assert_array_equal(got[0], [1.0, 0.0])
    assert np.isnan(got[1, 1])  # numpy raises LinAlgError: "Matrix is not positive definite"


@pytest.mark.parametrize("level", LEVELS)
def test_multi_dot(level):
    a, b = RNG.standard_normal((4, 30)), RNG.standard_normal((30, 5))
    c, d = RNG.standard_normal((5, 60)), RNG.standard_normal((60, 2))
    v, w = RNG.standard_normal(30), RNG.standard_normal(2)
    for fn, args in [(lambda a, b, c, d: np.linalg.multi_dot([a, b, c, d]), (a, b, c, d)),
                     (lambda v, b, c: np.linalg.multi_dot([v, b, c]), (v, b, c)),
                     (lambda a, b, c, d, w: np.linalg.multi_dot([a, b, c, d, w]), (a, b, c, d, w)),
                     (lambda v, b, c, d, w: np.linalg.multi_dot([v, b, c, d, w]), (v, b, c, d, w)),
                     (lambda a, b: np.linalg.multi_dot([a, b]), (a, b))]:
        assert_matches_numpy(fn, args, level, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="at least two"):
        jit(lambda a: np.linalg.multi_dot([a]), level)(a)
