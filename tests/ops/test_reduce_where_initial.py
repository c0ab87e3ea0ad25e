"""Reductions with numpy's ``initial=`` and ``where=`` (sum, prod, max, min,
mean, var, std, any, all), as functions and methods, with the mask a
constant or a traced input, against numpy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from helpers import assert_same, jit, numpy_eager

RNG = np.random.default_rng(7)
X = RNG.standard_normal((4, 5)).astype(np.float32)
X[0, 1] = np.nan
ARRAYS = {
    "float32": X,
    "float64": RNG.standard_normal((4, 5)),
    "int8": RNG.integers(-5, 5, (4, 5)).astype(np.int8),
    "uint8": RNG.integers(0, 5, (4, 5)).astype(np.uint8),
    "bool": RNG.random((4, 5)) > 0.5,
}
MASKS = {
    "2d": RNG.random((4, 5)) > 0.4,
    "row": np.array([True, False, True, True, False]),  # broadcast over rows
    "none": np.zeros((4, 5), bool),                      # nothing selected
}
NAMES = ["sum", "prod", "max", "min", "mean", "var", "std", "any", "all"]


def _cases():
    for (dt, name, axis, mask, init) in itertools.product(
            ARRAYS, NAMES, [None, 0, 1, (0, 1)], [*MASKS, None], [None, 2]):
        if (mask is None and init is None) or \
                (init is not None and name in ("mean", "var", "std", "any", "all")):
            continue
        yield dt, name, axis, mask, init


CASES = list(_cases())


def _kwargs(mask, init):
    kw = {} if mask is None else {"where": MASKS[mask]}
    return kw if init is None else dict(kw, initial=init)


@pytest.mark.parametrize("case", CASES[::16], ids=lambda c: "-".join(map(str, c)))
def test_where_initial_matches_numpy(case, opt_level):
    dt, name, axis, mask, init = case
    kw = _kwargs(mask, init)
    fn = lambda x: getattr(np, name)(x, axis=axis, **kw)  # noqa: E731
    x = ARRAYS[dt]
    if name in ("max", "min") and mask is not None and init is None:
        with pytest.raises(ValueError, match="initial"):  # numpy: no identity
            jit(fn, opt_level)(x)
        return
    assert_same(jit(fn, opt_level)(x), numpy_eager(fn, x))


@pytest.mark.parametrize("name", ["sum", "mean", "var", "max", "any"])
def test_traced_mask_keepdims_and_method(name, opt_level):
    x, m = ARRAYS["float64"], MASKS["2d"]
    kw = {"initial": -1.0} if name == "max" else {}
    fn = lambda x, m: getattr(x, name)(axis=1, keepdims=True, where=m, **kw)  # noqa: E731
    assert_same(jit(fn, opt_level)(x, m), numpy_eager(fn, x, m))


def test_initial_over_an_empty_axis(opt_level):
    x = np.zeros((0, 3), np.float32)
    fn = lambda x: (np.max(x, axis=0, initial=-1.5), np.sum(x, axis=0, initial=2.0))  # noqa: E731
    for got, want in zip(jit(fn, opt_level)(x), fn(x)):
        assert_same(got, want)


def test_float16_masked_sum_is_close(opt_level):
    # numpy's masked float16 reduce rounds every step to half; ours is no less accurate
    x = RNG.standard_normal((64, 33)).astype(np.float16)
    m = RNG.random((64, 33)) > 0.3
    fn = lambda x: np.sum(x, axis=0, where=m, initial=1.0)  # noqa: E731
    got, exact = jit(fn, opt_level)(x), (x.astype(np.float64) * m).sum(axis=0) + 1
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, exact, atol=0.05)
    np.testing.assert_allclose(fn(x), exact, atol=0.05)  # the reference is no closer


def test_bad_where():
    x = ARRAYS["float32"]
    with pytest.raises(TypeError, match="boolean"):
        jit(lambda x: np.sum(x, where=np.ones((4, 5), np.int32)), 3)(x)
    with pytest.raises(ValueError):
        jit(lambda x: np.sum(x, where=np.ones(3, bool)), 3)(x)
    with pytest.raises(TypeError, match="initial"):
        jit(lambda x: x.mean(initial=1.0), 3)(x)
