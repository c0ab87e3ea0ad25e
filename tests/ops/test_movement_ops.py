"""Table-driven tests of the movement ops (reshape transpose .T expand_dims
squeeze broadcast_to, basic indexing, concatenate stack pad) and linear
algebra (matmul dot einsum outer) x dtypes, against numpy eager.
"""

from __future__ import annotations


import numpy as np
import pytest

import halojit

from helpers import (Case, DTYPES, assert_matches_numpy, jit, level_params, random_array)


# name -> function of one (3, 4, 5) array
MOVEMENT_3D = {
    "reshape": lambda x: x.reshape(12, 5),
    "reshape-minus1": lambda x: np.reshape(x, (-1, 10)),
    "reshape-tuple-method": lambda x: x.reshape((5, -1)),
    "reshape-flat": lambda x: x.reshape(-1),
    "ravel": lambda x: np.ravel(x),
    "flatten": lambda x: x.flatten(),
    "transpose": lambda x: np.transpose(x),
    "transpose-axes": lambda x: np.transpose(x, (1, 0, 2)),
    "transpose-neg-axes": lambda x: x.transpose(-1, 0, 1),
    "T": lambda x: x.T,
    "swapaxes": lambda x: np.swapaxes(x, 0, 2),
    "moveaxis": lambda x: np.moveaxis(x, 0, -1),
    "expand_dims-0": lambda x: np.expand_dims(x, 0),
    "expand_dims-neg": lambda x: np.expand_dims(x, -1),
    "expand_dims-tuple": lambda x: np.expand_dims(x, (0, 3)),
    "squeeze-none": lambda x: np.squeeze(x[:, :1, :1]),
    "squeeze-axis": lambda x: x[:1].squeeze(axis=0),
    "squeeze-neg": lambda x: np.squeeze(x[:, :, :1], axis=-1),
    "broadcast_to": lambda x: np.broadcast_to(x[:, :1, :], (2, 3, 4, 5)),
    "broadcast_to-int": lambda x: np.broadcast_to(x[0, 0, 0], 6),
    "broadcast_arrays": lambda x: np.broadcast_arrays(x, x[0]),
    "flip": lambda x: np.flip(x, 1),
    "flip-all": lambda x: np.flip(x),
    "copy": lambda x: np.copy(x) + x.copy(),
    # basic indexing
    "index-int": lambda x: x[1],
    "index-neg": lambda x: x[-1, -2],
    "index-scalar": lambda x: x[0, 1, 2],
    "index-neg-scalar": lambda x: x[-3, -4, -5],
    "slice": lambda x: x[1:3],
    "slice-step": lambda x: x[::2, 1::2],
    "slice-neg-step": lambda x: x[::-1],
    "slice-neg-step2": lambda x: x[2:0:-1, ::-2, -1:-4:-2],
    "slice-neg-bounds": lambda x: x[-2:, :-1],
    "slice-out-of-range": lambda x: x[1:100, -100:2],
    "slice-empty": lambda x: x[2:1],
    "slice-empty-step": lambda x: x[:, 3:0:2],
    "newaxis": lambda x: x[None],
    "newaxis-mid": lambda x: x[:, None, 1:],
    "newaxis-end": lambda x: x[..., None],
    "ellipsis": lambda x: x[..., 1],
    "ellipsis-mid": lambda x: x[0, ..., ::-1],
    "ellipsis-only": lambda x: x[...],
    "mixed": lambda x: x[1, None, ::-2, ..., None],
    "chained": lambda x: x[1:][::-1][0],
    # join and pad
    "concatenate": lambda x: np.concatenate([x, x[:1]], axis=0),
    "concatenate-neg-axis": lambda x: np.concatenate((x, x[..., :2], x), axis=-1),
    "concatenate-none": lambda x: np.concatenate([x, x[0]], axis=None),
    "concatenate-one": lambda x: np.concatenate([x], axis=1),
    "stack": lambda x: np.stack([x, x]),
    "stack-axis1": lambda x: np.stack([x[0], x[1], x[2]], axis=1),
    "stack-neg": lambda x: np.stack((x, x), axis=-1),
    "hstack": lambda x: np.hstack([x[0], x[1]]),
    "vstack": lambda x: np.vstack([x[0, 0], x[1, 1]]),
    "pad-constant": lambda x: np.pad(x, 1),
    "pad-constant-value": lambda x: np.pad(x, ((0, 0), (1, 2), (2, 0)), constant_values=1),
    "pad-edge": lambda x: np.pad(x, (1, 2), mode="edge"),
    "pad-reflect": lambda x: np.pad(x, ((1, 2), (0, 3), (2, 2)), mode="reflect"),
    "pad-symmetric": lambda x: np.pad(x, 2, mode="symmetric"),
    "pad-wrap": lambda x: np.pad(x, ((1, 1), (0, 0), (3, 0)), mode="wrap"),
    # *_like and helpers
    "zeros_like": lambda x: np.zeros_like(x),
    "ones_like": lambda x: np.ones_like(x, dtype=np.float32),
    "full_like": lambda x: np.full_like(x, 1),
    "shape-attrs": lambda x: x.reshape(x.shape[0] * x.shape[1], x.size // 12 * x.ndim // 3),
}


def movement_cases():
    cases = []
    for name, fn in MOVEMENT_3D.items():
        for i, dtype in enumerate(DTYPES):
            rng = np.random.default_rng([i, len(name)])
            x = random_array(rng, (3, 4, 5), dtype, -100, 100)
            cases.append(Case(f"{name}-{dtype}", fn, (x,)))
        # non-contiguous and negative-stride inputs
        base = random_array(np.random.default_rng(1), (6, 8, 5), "float32")
        cases.append(Case(f"{name}-view", fn, (base[::2, 1::2],)))
        cases.append(Case(f"{name}-negview", fn, (base[4::-2, ::-2, ::-1],)))
    return cases


MOVEMENT_CASES = movement_cases()


@pytest.mark.parametrize("case,opt_level", level_params(MOVEMENT_CASES))
def test_movement(case, opt_level):
    assert_matches_numpy(case.fn, case.args, opt_level)


def edge_cases():
    rng = np.random.default_rng(5)
    f = random_array(rng, (3, 4), "float32", specials=True)
    i8 = random_array(rng, (3, 4), "int8")
    u8 = random_array(rng, (3, 4), "uint8")
    z = np.zeros((0, 4), np.float64)
    s = np.float64(2.5)
    return [
        Case("0d-reshape", lambda x: x.reshape(1, 1), (np.asarray(s),)),
        Case("0d-index", lambda x: x[()], (np.asarray(s),)),
        Case("0d-newaxis", lambda x: x[None, ...], (np.asarray(s),)),
        Case("0d-expand", lambda x: np.expand_dims(x, 0), (np.asarray(s),)),
        Case("0d-broadcast", lambda x: np.broadcast_to(x, (2, 3)), (np.asarray(s),)),
        Case("empty-reshape", lambda x: x.reshape(4, 0), (z,)),
        Case("empty-transpose", lambda x: x.T, (z,)),
        Case("empty-concat", lambda x, y: np.concatenate([x, y]), (z, np.ones((2, 4)))),
        Case("empty-pad", lambda x: np.pad(x, 1), (z,)),
        Case("empty-slice", lambda x: x[::-1, 1:], (z,)),
        Case("concat-promote", lambda x, y: np.concatenate([x, y]), (i8, u8)),
        Case("concat-promote-float", lambda x, y: np.concatenate([x, y], axis=1), (i8, f)),
        Case("concat-dtype", lambda x, y: np.concatenate([x, y], dtype=np.float64), (i8, u8)),
        Case("stack-promote", lambda x, y: np.stack([x, y], axis=2), (u8, f)),
        Case("pad-nan", lambda x: np.pad(x, 2, mode="reflect"), (f,)),
        Case("pad-float-value-int", lambda x: np.pad(x, 1, constant_values=3.7), (i8,)),
        Case("pad-edge-1d", lambda x: np.pad(x[0], (3, 1), mode="edge"), (f,)),
        Case("index-then-ufunc", lambda x: x[:, ::-1] * x[::-1, :], (f,)),
        Case("bad-reshape", lambda x: x.reshape(5, -1), (f,), True),
        Case("bad-broadcast", lambda x: np.broadcast_to(x, (3, 5)), (f,), True),
        Case("bad-concat", lambda x: np.concatenate([x, x.T]), (f,), True),
        Case("bad-stack", lambda x: np.stack([x, x[:1]]), (f,), True),
        Case("bad-squeeze", lambda x: np.squeeze(x, 0), (f,), True),
        Case("bad-transpose", lambda x: np.transpose(x, (0, 0)), (f,), True),
        Case("bad-expand", lambda x: np.expand_dims(x, 3), (f,), True),
        Case("bad-reflect-empty", lambda x: np.pad(x, 1, mode="reflect"), (z,), True),
    ]


EDGE_CASES = edge_cases()


@pytest.mark.parametrize("case,opt_level", level_params(EDGE_CASES))
def test_movement_edges(case, opt_level):
    assert_matches_numpy(case.fn, case.args, opt_level, expect_error=case.expect_error)


# -- linear algebra ----------------------------------------------------------------------------
LINALG_DTYPES = ("float32", "float64", "float16", "int32", "int64", "int8", "uint8", "bool")

LINALG = {
    "matmul-2d": (lambda a, b: a @ b, (3, 4), (4, 5)),
    "matmul-np": (lambda a, b: np.matmul(a, b), (3, 4), (4, 2)),
    "matmul-1d-2d": (lambda a, b: a @ b, (4,), (4, 5)),
    "matmul-2d-1d": (lambda a, b: a @ b, (3, 4), (4,)),
    "matmul-1d-1d": (lambda a, b: a @ b, (4,), (4,)),
    "matmul-batched": (lambda a, b: a @ b, (2, 3, 4), (4, 5)),
    "matmul-batched-both": (lambda a, b: a @ b, (2, 3, 4), (2, 4, 5)),
    "matmul-bcast-batch": (lambda a, b: np.matmul(a, b), (2, 1, 3, 4), (3, 4, 2)),
    "matmul-batched-1d": (lambda a, b: a @ b, (2, 3, 4), (4,)),
    "matmul-1d-batched": (lambda a, b: a @ b, (4,), (2, 4, 3)),
    "matmul-transposed": (lambda a, b: a.T @ b.T, (4, 3), (5, 4)),
    "matmul-empty-k": (lambda a, b: a @ b, (3, 0), (0, 2)),
    "matmul-empty-m": (lambda a, b: a @ b, (0, 4), (4, 2)),
    "rmatmul-const": (lambda a, b: np.ones((2, 3), a.dtype) @ a, (3, 4), (1,)),
    "dot-2d": (lambda a, b: np.dot(a, b), (3, 4), (4, 5)),
    "dot-1d": (lambda a, b: np.dot(a, b), (4,), (4,)),
    "dot-2d-1d": (lambda a, b: a.dot(b), (3, 4), (4,)),
    "dot-scalar": (lambda a, b: np.dot(a, b[0]), (3, 4), (4,)),
    "inner-1d": (lambda a, b: np.inner(a, b), (4,), (4,)),
    "outer": (lambda a, b: np.outer(a, b), (3,), (4,)),
    "outer-2d": (lambda a, b: np.outer(a, b), (2, 2), (3,)),
    "einsum-ij,jk": (lambda a, b: np.einsum("ij,jk->ik", a, b), (3, 4), (4, 5)),
    "einsum-implicit": (lambda a, b: np.einsum("ij,jk", a, b), (3, 4), (4, 5)),
    "einsum-transpose": (lambda a, b: np.einsum("ij->ji", a), (3, 4), (1,)),
    "einsum-sum": (lambda a, b: np.einsum("ij->", a), (3, 4), (1,)),
    "einsum-rowsum": (lambda a, b: np.einsum("ij->i", a), (3, 4), (1,)),
    "einsum-dot": (lambda a, b: np.einsum("i,i->", a, b), (4,), (4,)),
    "einsum-outer": (lambda a, b: np.einsum("i,j->ij", a, b), (3,), (4,)),
    "einsum-bmm": (lambda a, b: np.einsum("bij,bjk->bik", a, b), (2, 3, 4), (2, 4, 5)),
    "einsum-hadamard": (lambda a, b: np.einsum("ij,ij->ij", a, b), (3, 4), (3, 4)),
    "einsum-mv": (lambda a, b: np.einsum("ij,j->i", a, b), (3, 4), (4,)),
    "einsum-permute3": (lambda a, b: np.einsum("ijk->kji", a), (2, 3, 4), (1,)),
    "einsum-contract-out-t": (lambda a, b: np.einsum("ij,jk->ki", a, b), (3, 4), (4, 5)),
    "einsum-bilinear": (lambda a, b: np.einsum("ij,kj->ik", a, b), (3, 4), (5, 4)),
    # a dot per batch element, or no contraction: a product (and a sum), no matmul
    "einsum-rowdot": (lambda a, b: np.einsum("ij,ij->i", a, b), (5, 4), (5, 4)),
    "einsum-batchdot3": (lambda a, b: np.einsum("bij,bij->b", a, b), (2, 3, 4), (2, 3, 4)),
    "einsum-traceprod": (lambda a, b: np.einsum("ij,ji->", a, b), (3, 4), (4, 3)),
    "einsum-batch-outer": (lambda a, b: np.einsum("bi,bj->bij", a, b), (3, 4), (3, 5)),
    "einsum-outer4": (lambda a, b: np.einsum("ij,kl->ijkl", a, b), (2, 3), (4, 5)),
    # repeated letters (diagonals) and ellipses (broadcast batch dimensions)
    "einsum-trace": (lambda a, b: np.einsum("ii->", a), (4, 4), (1,)),
    "einsum-diagonal": (lambda a, b: np.einsum("ii->i", a), (4, 4), (1,)),
    "einsum-diag-times": (lambda a, b: np.einsum("ij,jj->i", a, b), (3, 4), (4, 4)),
    "einsum-3d-diag": (lambda a, b: np.einsum("iji->j", a), (3, 2, 3), (1,)),
    "einsum-ellipsis-bmm": (lambda a, b: np.einsum("...ij,...jk->...ik", a, b), (2, 3, 4),
                            (1, 4, 5)),
    "einsum-ellipsis-implicit": (lambda a, b: np.einsum("...ij,...jk", a, b), (2, 3, 4), (4, 5)),
    "einsum-ellipsis-reduce": (lambda a, b: np.einsum("i...->...", a), (3, 2, 4), (1,)),
}


def linalg_cases():
    cases = []
    for name, (fn, sa, sb) in LINALG.items():
        for i, dtype in enumerate(LINALG_DTYPES):
            rng = np.random.default_rng([i, len(name), 11])
            a = random_array(rng, sa, dtype, -3, 3)
            b = random_array(rng, sb, dtype, -3, 3)
            cases.append(Case(f"{name}-{dtype}", fn, (a, b)))
    rng = np.random.default_rng(2)
    a32 = random_array(rng, (3, 4), "float32")
    b64 = random_array(rng, (4, 2), "float64")
    i8 = random_array(rng, (4, 2), "int8", -3, 3)
    cases += [
        Case("matmul-f32-f64", lambda a, b: a @ b, (a32, b64)),
        Case("matmul-f32-int8", lambda a, b: a @ b, (a32, i8)),
        Case("matmul-nan", lambda a, b: a @ b,
             (random_array(rng, (3, 4), "float64", specials=True), b64)),
        Case("matmul-views", lambda a, b: a @ b,
             (random_array(rng, (6, 8), "float32")[::2, ::-2], b64[::-1])),
        Case("matmul-scalar-raises", lambda a, b: a @ b[0, 0], (a32, b64), True),
        Case("matmul-misaligned-raises", lambda a, b: a @ b, (a32, a32), True),
        Case("einsum-mismatch-raises", lambda a, b: np.einsum("ij,jk->ik", a, b), (a32, a32),
             True),
    ]
    return cases


LINALG_CASES = linalg_cases()


@pytest.mark.parametrize("case,opt_level", level_params(LINALG_CASES))
def test_linalg(case, opt_level):
    assert_matches_numpy(case.fn, case.args, opt_level, expect_error=case.expect_error)


@pytest.mark.parametrize("index,message", [
    ((3,), "index 3 is out of bounds for axis 0 with size 3"),
    ((slice(None), -5), "index -5 is out of bounds for axis 1 with size 4"),
    ((0, 0, 0), "too many indices: array is 2-dimensional, but 3 were indexed"),
    ((Ellipsis, 0, Ellipsis), r"an index can only have a single ellipsis \('\.\.\.'\)"),
])
def test_bad_index_is_a_shape_error(index, message, opt_level):
    """numpy raises IndexError here; halojit raises a ShapeError found while
    tracing that is also an IndexError (errors.IndexShapeError), with
    numpy's wording and the user's line."""
    from halojit import ShapeError
    f = jit(lambda x: x[index], opt_level)
    with pytest.raises(ShapeError, match=message + r".*test_movement_ops\.py:\d+") as e:
        f(np.ones((3, 4), np.float32))
    assert isinstance(e.value, IndexError)


ROLL_ARRAYS = [np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32),
               np.random.default_rng(1).integers(0, 9, (3, 4, 6)).astype(np.int16),
               np.full((), 2.5), np.zeros((0, 3), np.float32)]


@pytest.mark.parametrize("a", ROLL_ARRAYS, ids=lambda a: f"{a.dtype}{a.shape}")
@pytest.mark.parametrize("shift,axis", [(2, None), (-3, None), (1, 0), (-1, -1), (10, 1),
                                        ((1, 2), (0, 1)), (3, (0, 1)), ((1, -2), 0), (0, 0)])
def test_roll_matches_numpy(a, shift, axis):
    try:
        want = np.roll(a, shift, axis=axis)
    except Exception as e:  # an axis the array lacks: the same kind of error
        with pytest.raises(type(e) if not isinstance(e, np.exceptions.AxisError) else ValueError):
            halojit.trace(lambda x: np.roll(x, shift, axis=axis) * 1)(a)
        return
    got = halojit.trace(lambda x: np.roll(x, shift, axis=axis) * 1)(a)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("a", ROLL_ARRAYS, ids=lambda a: f"{a.dtype}{a.shape}")
@pytest.mark.parametrize("reps", [2, (2, 1), (1, 3), (2, 2, 2), (0, 2), (1, 1)])
def test_tile_matches_numpy(a, reps):
    want = np.tile(a, reps)
    got = halojit.trace(lambda x: np.tile(x, reps) + 0)(a)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_roll_and_tile_refuse_traced_amounts():
    x = np.arange(4.0)
    with pytest.raises(halojit.UnsupportedError, match="shift must be integers known while tracing"):
        halojit.trace(lambda x, s: np.roll(x, s))(x, np.int64(1))
    with pytest.raises(halojit.ShapeError, match="reps .* must be >= 0"):
        halojit.trace(lambda x: np.tile(x, -1))(x)


SPLITS = [
    (lambda x: np.split(x, [1, 3], axis=1), "split at indices"),
    (lambda x: np.split(x, 5, axis=-1), "split in equal sections"),
    (lambda x: np.split(x, [-2, 10]), "negative and past-the-end indices: empty pieces"),
    (lambda x: np.split(x, np.array([2])), "indices as an array"),
    (lambda x: np.array_split(x, 3, axis=1), "4 into 3: sizes 2, 1, 1"),
    (lambda x: np.array_split(x, 7, axis=0), "more sections than elements"),
    (lambda x: np.hsplit(x, 2), "hsplit: axis 1"),
    (lambda x: np.vsplit(x, [1]), "vsplit: axis 0"),
    (lambda x: np.dsplit(x, [2, 4]), "dsplit: axis 2"),
]


@pytest.mark.parametrize("fn,what", SPLITS, ids=[w for _, w in SPLITS])
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.bool_])
def test_split_matches_numpy(fn, what, dtype):
    x = random_array(np.random.default_rng(11), (3, 4, 5), dtype)
    keep = x.copy()
    want = fn(x)
    got = halojit.trace(lambda a: [p * 1 if p.dtype != np.bool_ else p | False for p in fn(a)])(x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(x, keep)


def test_split_of_a_1d_hsplit_and_a_strided_view():
    x = np.arange(12.0)[::2]                       # non-contiguous: 0, 2, ..., 10
    got = halojit.trace(lambda a: [p + 0 for p in np.hsplit(a, 3)])(x)
    for g, w in zip(got, np.hsplit(x, 3)):
        np.testing.assert_array_equal(g, w)


def test_split_errors_name_what_was_expected():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(halojit.ShapeError, match="length 4 does not split into 3 equal"):
        halojit.trace(lambda a: np.split(a, 3, axis=1))(x)
    with pytest.raises(ValueError, match="sections must be larger than 0"):
        halojit.trace(lambda a: np.array_split(a, 0))(x)
    with pytest.raises(halojit.ShapeError, match="at least 3 dimensions"):
        halojit.trace(lambda a: np.dsplit(a, 2))(x)
    with pytest.raises(halojit.UnsupportedError, match="sections must be integers known"):
        halojit.trace(lambda a, n: np.split(a, n))(x, np.int64(3))


@pytest.mark.parametrize("mode, dtype", [
    *((m, d) for m in ("maximum", "minimum", "mean", "median") for d in (np.float32, np.int32)),
    ("mean", np.bool_), ("mean", np.uint8), ("median", np.float64)])
def test_pad_statistic_modes(mode, dtype):
    """np.pad's statistic modes as numpy computes them: axis by axis over the
    array padded so far (so corners take statistics of pads), the first and
    last stat_length values per side, rounded for integer arrays, NaN kept."""
    rng = np.random.default_rng(len(mode))
    x = (rng.standard_normal((4, 6, 9)) * 40).astype(dtype)
    if dtype in (np.float32, np.float64):
        x[1, 2, 3] = np.nan
    keep = x.copy()
    for kw, width in (({}, ((1, 2), (0, 1), (3, 0))),
                      ({"stat_length": ((1, 3), (2, 9), (1, 1))}, 2)):
        fn = lambda a: np.pad(a, width, mode=mode, **kw)  # noqa: E731
        got, want = jit(fn, 3)(x), fn(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        if mode == "mean" and dtype in (np.float32, np.float64):
            # halojit's mean sums float32 in float64, numpy pairwise in float32:
            # an ulp of the summands apart (more where they cancel)
            scale = np.finfo(dtype).eps * np.nanmax(np.abs(x)) * 4
            np.testing.assert_allclose(got, want, rtol=0, atol=scale, equal_nan=True)
        else:
            np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(x, keep)


def test_pad_statistic_mode_errors():
    x = np.arange(12.0).reshape(3, 4)
    with pytest.raises(ValueError, match="stat_length of 0 yields no value"):
        jit(lambda a: np.pad(a, 1, mode="maximum", stat_length=0), 3)(x)
    with pytest.raises(ValueError, match="negative"):
        jit(lambda a: np.pad(a, 1, mode="mean", stat_length=-1), 3)(x)
    with pytest.raises(ValueError, match="can't extend empty axis 0"):
        jit(lambda a: np.pad(a, 1, mode="median"), 3)(np.zeros((0, 3)))
    with pytest.raises(halojit.UnsupportedError, match="a function as mode"):
        jit(lambda a: np.pad(a, 1, mode=lambda v, w, i, kw: None), 3)(x)
    with pytest.raises(halojit.UnsupportedError, match="'lineal'.*linear_ramp"):
        jit(lambda a: np.pad(a, 1, mode="lineal"), 3)(x)


def _ramp_cases(dtype):
    neg = -1 if np.dtype(dtype).kind != "u" else 1  # numpy wraps -3.0 into uint8: undefined
    cases = [(((2, 0), (1, 3)), [(1, 2), (neg * 3, 0.1)]),
             (((1, 3), (4, 1)), (3, neg * 2.5))]
    if dtype in (np.float32, np.int32):  # every way to give end values, one dtype of each kind
        cases += [(2, 0), ((1, 2), np.float32(1.5))]
    if dtype in (np.float32, np.float64):  # y / width * delta and y * step round apart
        cases += [(((0, 0), (5, 6)), 0)]
    return cases


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.uint8,
                                   np.bool_])
def test_pad_linear_ramp(dtype):
    """np.pad's linear_ramp as numpy computes it, bit for bit: axis by axis
    over the array padded so far, np.linspace from the end value to the edge
    in numpy's dtype for it (a lone end value is a numpy scalar and widens
    it, a per-axis table does not), floored for integers, the after side
    reversed; NaN and inf edges too. Also mode='empty' (numpy leaves those
    pads undefined)."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((5, 4)) * 40).astype(dtype)
    if dtype in (np.float32, np.float64):
        x[0, 0], x[4, 3], x[1, 0] = np.nan, np.inf, -np.inf
    x[2, 0] = 0  # a step of 0 beside an end value of 0: numpy then takes y / width * delta
    keep = x.copy()
    for width, ends in _ramp_cases(dtype):
        fn = lambda a: np.pad(a, width, mode="linear_ramp", end_values=ends)  # noqa: E731
        with np.errstate(invalid="ignore"):  # inf - inf
            want = fn(x)
            got = jit(fn, 3)(x)
        assert got.dtype == want.dtype and got.shape == want.shape, (width, ends)
        np.testing.assert_array_equal(got, want, err_msg=f"{width} {ends}")
    if dtype == np.float32:
        got = jit(lambda a: np.pad(a, ((1, 0), (0, 2)), mode="empty"), 3)(x)
        assert got.dtype == x.dtype and got.shape == (6, 6)
        np.testing.assert_array_equal(got[1:, :4], x)
    np.testing.assert_array_equal(x, keep)


def test_pad_linear_ramp_errors():
    x = np.arange(12.0).reshape(3, 4)
    with pytest.raises(ValueError, match="can't extend empty axis 0"):
        jit(lambda a: np.pad(a, 1, mode="linear_ramp"), 3)(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="end_values"):
        jit(lambda a: np.pad(a, 1, mode="linear_ramp", end_values=[1, 2, 3]), 3)(x)
    with pytest.raises(halojit.UnsupportedError, match="end_values"):
        jit(lambda a: np.pad(a, 1, mode="linear_ramp", end_values=1j), 3)(x)
    with pytest.raises(halojit.UnsupportedError, match="stat_length"):
        jit(lambda a: np.pad(a, 1, mode="linear_ramp", stat_length=2), 3)(x)


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int16, np.float64])
def test_pad_per_axis_constant_values(dtype, opt_level):
    """constant_values per axis, as numpy pads: axis after axis over the
    whole extent padded so far (corners take the later axis' values); one or
    two values are numpy scalars (cast, as numpy does), a table Python
    numbers (out of range: numpy's OverflowError)."""
    x = (np.arange(24).reshape(2, 3, 4) * 7 - 30).astype(dtype)
    cases = [(2, ((1, 2), (3, 4), (5, 6))), (((1, 0), (0, 2), (3, 1)), (5, -1)),
             (1, ((7,), (8,), (9,))), ((1, 2), [[1, 1], [1, 1], [1, 1]]),
             (((0, 0), (1, 1), (2, 0)), ((9, 9), (1, 2), (3, 4)))]
    for width, values in cases:
        fn = lambda a: np.pad(a, width, constant_values=values)  # noqa: E731
        want = fn(x)
        got = jit(fn, opt_level)(x)
        assert got.dtype == want.dtype and got.shape == want.shape, (width, values)
        np.testing.assert_array_equal(got, want, err_msg=f"{width} {values}")
    if dtype == np.uint8:
        with pytest.raises(OverflowError):
            np.pad(x, 1, constant_values=((300, 2), (3, 4), (5, 6)))
        with pytest.raises(OverflowError, match="constant_values 300"):
            jit(lambda a: np.pad(a, 1, constant_values=((300, 2), (3, 4), (5, 6))), opt_level)(x)
        fn = lambda a: np.pad(a, 1, constant_values=(300, -1))  # noqa: E731  (numpy scalars: cast)
        np.testing.assert_array_equal(jit(fn, opt_level)(x), fn(x))
    with pytest.raises(ValueError, match="constant_values of shape"):
        jit(lambda a: np.pad(a, 1, constant_values=((1, 2, 3),) * 3), opt_level)(x)


@pytest.mark.parametrize("fn", [
    lambda a: a.reshape(4, 6, order="F"),
    lambda a: np.reshape(a, (6, 2, 2), order="F") * 2,
    lambda a: np.ravel(a, order="F"),
    lambda a: a.flatten("F") + 1,
    lambda a: a[0].reshape(12, order="F"),
    lambda a: a[:, ::-1, 1:3].ravel("F"),
    lambda a: a[0, 0].reshape((2, 2), order="F"),
], ids=["method", "function", "ravel", "flatten", "to-1d", "strided-view", "from-1d"])
def test_fortran_order_reshapes(fn, opt_level):
    """order='F' reads and writes the elements first axis fastest: the
    reshape between two reversals of the axes."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 1.5 - 7
    want = fn(x)
    got = jit(fn, opt_level)(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
