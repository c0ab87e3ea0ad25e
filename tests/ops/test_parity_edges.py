"""numpy-parity edge cases found by differential fuzzing (fuzz27a/b): each
case is a function and its arguments; halojit must give numpy's value,
dtype and shape, or raise an exception of the builtin class numpy raises
(TypeError for numpy's UFuncTypeError, ValueError for AxisError, ...)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import assert_matches_numpy, jit, numpy_eager

from halojit.graph import numpy_api

F32_NAN = np.array([1.5, np.nan, 2.5], np.float32)
BOOLS = np.array([True, False])
F16_INF = np.array([1, np.inf, -np.inf, 60000], np.float16)
U16 = np.arange(3, dtype=np.uint16)
I32 = np.arange(3, dtype=np.int32)
ONES22 = np.ones((2, 2))
I16_32 = np.arange(6, dtype=np.int16).reshape(3, 2)

CASES = {
    # nan-reductions of a float array refuse an integer dtype= (numpy TypeError)
    "nanmean-int-dtype": (lambda a: np.nanmean(a, dtype=np.int32), [F32_NAN]),
    "nanvar-int-dtype": (lambda a: np.nanvar(a, axis=0, dtype=np.int64), [F32_NAN]),
    "nanstd-int-dtype": (lambda a: np.nanstd(a, dtype=np.int32), [F32_NAN]),
    "nanmean-float-dtype": (lambda a: np.nanmean(a, dtype=np.float64), [F32_NAN]),
    "nanstd-int-input": (lambda a: np.nanstd(a, axis=0, dtype=np.int64), [I16_32]),
    "nanstd-int-input-0d": (lambda a: np.nanstd(a, dtype=np.int64), [I16_32]),
    # std/var with an integer dtype=: the variance is an integer; numpy's sqrt
    # is in place, so an array std raises and a 0-d one is cast back
    "var-int-dtype-axis": (lambda a: np.var(a, axis=0, dtype=np.int64), [I16_32]),
    "var-int-dtype": (lambda a: np.var(a, dtype=np.int8), [I16_32]),
    "std-int-dtype-axis": (lambda a: np.std(a, axis=0, dtype=np.int64), [I16_32]),
    "std-int-dtype-keepdims": (lambda a: np.std(a, dtype=np.int64, keepdims=True), [I16_32]),
    "std-int-dtype-full": (lambda a: np.std(a, dtype=np.int64), [I16_32]),
    "std-0d-int-dtype": (lambda a: np.std(a, dtype=np.int32), [np.array(5, np.int64)]),
    "std-float-to-int-dtype": (lambda a: np.std(a.astype(np.float32) * 7, dtype=np.int32),
                               [I16_32]),
    "std-where-int-dtype": (lambda a: np.std(a, axis=1, dtype=np.int32, where=a > 0),
                            [I16_32]),
    "std-bool-dtype": (lambda a: np.std(a, axis=0, dtype=bool), [I16_32]),
    # np.where of Python scalars only: promoted by kind (int64), 2**63 wraps
    "where-2**63": (lambda c: np.where(c, 2**63, 0), [BOOLS]),
    "where-2**63-both": (lambda c: np.where(c, 2**63, 2**63), [BOOLS]),
    "where-2**64-1": (lambda c: np.where(c, 2**64 - 1, -1), [BOOLS]),
    "where-2**63-float": (lambda c: np.where(c, 2**63, 1.5), [BOOLS]),
    "where-2**63-arg": (lambda c, s: np.where(c, s, 0), [BOOLS, 2**63]),
    # np.isclose: y a Python int is compared as a weak float, and abs(y) stays weak
    "isclose-f16-big-int": (lambda a: np.isclose(a, 2**40), [F16_INF]),
    "isclose-f16-big-float": (lambda a: np.isclose(a, 1e12), [F16_INF]),
    "isclose-f16-big-int-arg": (lambda a, s: np.isclose(a, s), [F16_INF, 2**40]),
    "isclose-f16-float-arg": (lambda a, s: np.isclose(a, s), [F16_INF, 1e12]),
    "isclose-f32-int-arg": (lambda a, s: np.isclose(a, s), [F16_INF.astype(np.float32), 1]),
    "allclose-f16-big-int": (lambda a: np.allclose(a[1:], 2**40), [F16_INF]),
    # values stored as numpy stores them: out of range or NaN raises, as numpy
    "insert-u16-neg-float": (lambda a: np.insert(a, 0, -1.5), [U16]),
    "insert-u16-list": (lambda a: np.insert(a, [0, 1], [1, -1.5]), [U16]),
    "insert-i8-300": (lambda a: np.insert(a, 1, 300), [U16.astype(np.int8)]),
    "insert-i32-nan": (lambda a: np.insert(a, 1, np.nan), [I32]),
    "insert-i32-float": (lambda a: np.insert(a, 1, 2.7), [I32]),
    "pad-i32-nan": (lambda a: np.pad(a, 1, constant_values=np.nan), [I32]),
    "pad-i32-inf": (lambda a: np.pad(a, 1, constant_values=np.inf), [I32]),
    "pad-i32-f64-nan": (lambda a: np.pad(a, 1, constant_values=np.float64("nan")), [I32]),
    "pad-i8-300": (lambda a: np.pad(a, 1, constant_values=300), [I32.astype(np.int8)]),
    "pad-u8-300": (lambda a: np.pad(a, 1, constant_values=300), [U16.astype(np.uint8)]),
    "pad-u8-neg-float": (lambda a: np.pad(a, 1, constant_values=-1.5), [U16.astype(np.uint8)]),
    "pad-i32-float": (lambda a: np.pad(a, (1, 2), constant_values=-2.5), [I32]),
    "pad-f16-big": (lambda a: np.pad(a, 1, constant_values=70000.0), [F16_INF]),
    # pad_width: a dict (numpy >= 2.3), and only integers
    "pad-dict": (lambda a: np.pad(a, {0: (1, 2)}), [ONES22]),
    "pad-dict-int-neg-axis": (lambda a: np.pad(a, {-1: 1}, constant_values=3), [ONES22]),
    "pad-dict-two": (lambda a: np.pad(a, {1: (0, 2), 0: 1}), [ONES22]),
    "pad-dict-bad-axis": (lambda a: np.pad(a, {5: 1}), [ONES22]),
    "pad-float-width": (lambda a: np.pad(a, 1.5), [ONES22]),
    "pad-float-width-list": (lambda a: np.pad(a, [1, 2.0]), [ONES22]),
    # np.einsum: dtype= under casting='safe' (or the casting= given)
    "einsum-dtype-unsafe": (lambda a: np.einsum("ij->", a, dtype=np.float32), [ONES22]),
    "einsum-dtype-i64-f32": (lambda a: np.einsum("ij->", a.astype(np.int64), dtype=np.float32),
                             [ONES22]),
    "einsum-dtype-u32-f32": (lambda a: np.einsum("ij->", a.astype(np.uint32), dtype=np.float32),
                             [ONES22]),
    "einsum-dtype-second": (lambda a: np.einsum("ij,ij->", a.astype(np.int8), a,
                                                dtype=np.float32), [ONES22]),
    "einsum-dtype-safe": (lambda a: np.einsum("ij->i", a.astype(np.int8), dtype=np.float16),
                          [ONES22]),
    "einsum-dtype-same-kind": (lambda a: np.einsum("ij->", a, dtype=np.float32,
                                                   casting="same_kind"), [ONES22]),
    "einsum-casting-no": (lambda a: np.einsum("ij,ij->", a.astype(np.float32), a, casting="no"),
                          [ONES22]),
    "einsum-casting-no-same": (lambda a: np.einsum("ij,jk->", a, a, casting="no"), [ONES22]),
    "einsum-casting-bad": (lambda a: np.einsum("ij->", a, casting="bogus"), [ONES22]),
    # np.einsum: a letter's size-1 dimension broadcasts across operands
    "einsum-bcast-1": (lambda a, b: np.einsum("i,i->i", a, b), [np.ones(1), np.arange(3.0)]),
    "einsum-bcast-1-second": (lambda a, b: np.einsum("i,i", a, b), [np.arange(3.0), np.ones(1)]),
    "einsum-bcast-contract": (lambda a, b: np.einsum("ij,jk", a, b),
                              [np.arange(2.0).reshape(2, 1), np.arange(12.0).reshape(4, 3)]),
    "einsum-bcast-matvec": (lambda a, b: np.einsum("ij,j->i", a, b),
                            [np.arange(6.0).reshape(2, 3), np.full(1, 2.0)]),
    "einsum-bcast-to-0": (lambda a, b: np.einsum("i,i", a, b), [np.ones(1), np.ones(0)]),
    "einsum-bcast-diag": (lambda a, b: np.einsum("i,ii->i", a, b),
                          [np.full(1, 2.0), np.arange(9.0).reshape(3, 3)]),
    "einsum-diag-1-3": (lambda a: np.einsum("ii->i", a), [np.ones((1, 3))]),
    "einsum-sizes-2-3": (lambda a, b: np.einsum("i,i", a, b), [np.ones(2), np.arange(3.0)]),
    # np.average without weights of an empty result: numpy's a.size / avg.size
    "average-empty-result": (lambda a: np.average(a, axis=0), [np.zeros((1, 0), np.int64)]),
    "average-empty-result-last": (lambda a: np.average(a, axis=-1), [np.zeros((0, 0))]),
    "average-empty-keepdims": (lambda a: np.average(a, axis=1, keepdims=True), [np.zeros((0, 2))]),
    "average-empty-input": (lambda a: np.average(a, axis=0), [np.zeros((0, 3))]),
    "average-empty-weights": (lambda a, w: np.average(a, axis=0, weights=w),
                              [np.zeros((1, 0)), np.ones(1)]),
    # vector norm ord=inf is numpy's max with initial=0: 0 over an empty axis
    "norm-inf-empty": (lambda a: np.linalg.norm(a, ord=np.inf), [np.zeros(0, np.float32)]),
    "vector_norm-inf-empty-axis": (lambda a: np.linalg.vector_norm(a, ord=np.inf, axis=1),
                                   [np.zeros((2, 0))]),
    "vector_norm-inf-empty-keep": (lambda a: np.linalg.vector_norm(a, ord=np.inf, axis=1,
                                                                   keepdims=True),
                                   [np.zeros((2, 0), np.int8)]),
    "norm-ninf-empty": (lambda a: np.linalg.norm(a, ord=-np.inf), [np.zeros(0)]),
    "matrix-norm-inf-empty": (lambda a: np.linalg.norm(a, ord=np.inf), [np.zeros((0, 3))]),
    "matrix-norm-inf-empty-cols": (lambda a: np.linalg.norm(a, ord=np.inf), [np.zeros((3, 0))]),
    "matrix-norm-1-empty": (lambda a: np.linalg.norm(a, ord=1, axis=(1, 0)), [np.zeros((3, 0))]),
    "matrix-norm-minus1-empty": (lambda a: np.linalg.norm(a, ord=-1), [np.zeros((0, 3))]),
    "matrix-norm-inf-batch": (lambda a: np.linalg.matrix_norm(a, ord=np.inf),
                              [np.zeros((2, 0, 3), np.float32)]),
    # percentile / quantile of a q with 2 or more dimensions: q's shape leads
    "percentile-2d-q": (lambda a: np.percentile(a, [[10, 20], [30, 40]]), [np.arange(5.0)]),
    "quantile-2d-q-axis": (lambda a: np.quantile(a, [[0.1], [0.9]], axis=0),
                           [np.arange(12.0).reshape(4, 3)]),
    "quantile-2d-q-keep": (lambda a: np.quantile(a, [[0.1, 0.5]], axis=1, keepdims=True),
                           [np.arange(12.0).reshape(4, 3)]),
    "quantile-2d-q-nearest": (lambda a: np.quantile(a, np.full((2, 3), 0.3), method="nearest"),
                              [np.arange(5, dtype=np.int16)]),
    "quantile-3d-q": (lambda a: np.quantile(a, np.full((2, 1, 2), 0.3)), [np.arange(5.0)]),
    # diff with n=0 returns the input, whatever its shape, axis or prepend
    "diff-0d-n0": (lambda a: np.diff(a, n=0), [np.array(3.0)]),
    "diff-n0-prepend": (lambda a: np.diff(a, n=0, prepend=5), [np.arange(3.0)]),
    "diff-n0-bad-axis": (lambda a: np.diff(a, n=0, axis=7), [np.arange(3.0)]),
    "diff-0d-n1": (lambda a: np.diff(a), [np.array(3.0)]),
    # partition of an empty array: numpy checks no kth
    "partition-empty-axis": (lambda a: np.partition(a, 0, axis=-1), [np.zeros((2, 0))]),
    "partition-empty-kth5": (lambda a: np.partition(a, 5), [np.zeros((0, 3))]),
    "argpartition-empty": (lambda a: np.argpartition(a, [0, 3]), [np.zeros((2, 0))]),
    "partition-kth-out": (lambda a: np.partition(a, 3), [np.zeros(3)]),
    # repeat of a 0-d array along axis 0 or -1: numpy takes it as 1-d
    "repeat-0d-axis0": (lambda a: np.repeat(a, 3, axis=0), [np.array(7)]),
    "repeat-0d-axis-1": (lambda a: np.repeat(a, [3], axis=-1), [np.array(7.5)]),
    "repeat-0d-axis1": (lambda a: np.repeat(a, 3, axis=1), [np.array(7)]),
    # round of integers by a negative decimals: in float64 by 10.0 ** -decimals
    "round-i64-minus20": (lambda a: np.round(a, -20), [np.array([1, 2], np.int64)]),
    "round-i64-minus2": (lambda a: np.round(a, -2), [np.array([1250, -1351, 49], np.int64)]),
    "round-u8-wraps": (lambda a: np.round(a, -1), [np.array([255, 254, 5, 15], np.uint8)]),
    "round-i8-wraps": (lambda a: np.round(a, -1), [np.array([127, -128, 15, -15], np.int8)]),
    "round-u16-wraps": (lambda a: np.round(a, -5), [np.array([65535, 40000], np.uint16)]),
    # tril / triu of a 0-d array: numpy's TypeError
    "tril-0d": (lambda a: np.tril(a), [np.array(1.0)]),
    "triu-0d": (lambda a: np.triu(a, 1), [np.array(1.0)]),
    # np.take casts bool indices to intp (0 and 1); take_along_axis refuses them
    "take-bool": (lambda a: np.take(a, np.array([True, False, True])), [np.arange(5.0)]),
    "take-bool-axis": (lambda a: np.take(a, [True, False], axis=1), [np.ones((2, 3))]),
    "take-bool-arg": (lambda a, i: np.take(a, i), [np.arange(5.0), np.array([True, False])]),
    "take_along_axis-bool": (lambda a: np.take_along_axis(a, np.array([True]), 0),
                             [np.arange(5.0)]),
    # np.choose casts its indices to intp under 'safe': uint64 is not
    "choose-u64": (lambda i, a: np.choose(i, [a, a + 1]),
                   [np.array([0, 1, 0], np.uint64), np.arange(3.0)]),
    "choose-u32": (lambda i, a: np.choose(i, [a, a + 1]),
                   [np.array([0, 1, 0], np.uint32), np.arange(3.0)]),
    "choose-bool": (lambda i, a: np.choose(i, [a, -a]), [BOOLS, np.arange(2.0)]),
    "choose-float": (lambda i, a: np.choose(i, [a, a + 1]), [np.zeros(3), np.arange(3.0)]),
    # error classes: numpy's IndexError
    "take_along_axis-no-bcast": (lambda a, i: np.take_along_axis(a, i, axis=1),
                                 [np.ones((3, 4)), np.zeros((2, 2), np.intp)]),
    "array_split-0d": (lambda a: np.array_split(a, 2), [np.array(3.0)]),
    "split-0d": (lambda a: np.split(a, [1]), [np.array(3.0)]),
    "vsplit-1d": (lambda a: np.vsplit(a, 1), [np.ones(3)]),
    "too-many-indices-none": (lambda a: a[None, np.array([0]), :, np.array([0])], [ONES22]),
    "reshape-F-wrong-size": (lambda a: a.reshape((4,), order="F"), [np.ones((2, 3))]),
    "np.reshape-F-wrong-size": (lambda a: np.reshape(a, (4,), order="F"), [np.ones((2, 3))]),
    # scans and argsorts take a 0-d value with axis 0 or -1 as one element;
    # sort and partition refuse it, and every one refuses axis 1
    "cumsum-0d-axis0": (lambda a: np.cumsum(a.sum(), axis=0), [F32_NAN]),
    "cumprod-0d-axis-1": (lambda a: np.cumprod(a[0], axis=-1), [I32]),
    "nancumsum-0d-axis0": (lambda a: np.nancumsum(a[1], axis=0), [F32_NAN]),
    "nancumprod-0d-axis0": (lambda a: np.nancumprod(a[1], axis=0), [F32_NAN]),
    "cumsum-method-0d": (lambda a: a[2].cumsum(axis=0), [U16]),
    "cumsum-0d-axis1": (lambda a: np.cumsum(a[0], axis=1), [I32]),
    "argsort-0d-axis0": (lambda a: np.argsort(a.max(), axis=0), [F32_NAN]),
    "argsort-0d-axis-1": (lambda a: np.argsort(a[1]), [I32]),
    "argpartition-0d": (lambda a: np.argpartition(a[1], 0, axis=0), [I32]),
    "sort-0d-axis0": (lambda a: np.sort(a[1], axis=0), [I32]),
    "partition-0d": (lambda a: np.partition(a[1], 0), [I32]),
}

LEVELS = [0, 3]


def _builtin_class(exc):
    """The first builtin class of numpy's exception (TypeError for UFuncTypeError)."""
    return next(c for c in type(exc).__mro__ if c.__module__ == "builtins")


@pytest.mark.parametrize("opt_level", LEVELS)
@pytest.mark.parametrize("name", list(CASES))
def test_matches_numpy(name, opt_level):
    fn, args = CASES[name]
    try:
        numpy_eager(fn, *args)
    except Exception as ex:  # noqa: BLE001 - numpy's class is the expectation
        with pytest.raises(_builtin_class(ex)):
            jit(fn, opt_level)(*args)
        return
    assert_matches_numpy(fn, args, opt_level)


WHERE_BIG_INTS = ["where-2**63", "where-2**63-both", "where-2**64-1", "where-2**63-arg"]


@pytest.mark.parametrize("name", WHERE_BIG_INTS)
def test_where_of_big_python_ints_under_numpy_2_5(monkeypatch, name):
    # numpy 2.5 raises OverflowError where earlier versions wrap (the case
    # above follows the installed numpy); the 2.5 rule, whatever is installed
    monkeypatch.setattr(numpy_api, "_WHERE_CHECKS_INT_RANGE", True)
    fn, args = CASES[name]
    with pytest.raises(OverflowError, match="does not fit its result dtype int64"):
        jit(fn, 0)(*args)
    assert_matches_numpy(lambda c: np.where(c, 2**62, -1), [BOOLS], 0)  # in range: as before
