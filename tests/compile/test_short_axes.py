"""Axes shorter than a vector: Adams2019 may split them by the full vector
width with ShiftInwards, which starts the one iteration before 0. Inputs are
read through a clamp on such axes (lowering._clamp_short); these shapes
failed at run time with "Input buffer in0 is accessed at -8" before."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import halojit

pytestmark = pytest.mark.level3


def softmax(a):
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("shape", [(4, 8), (3, 5), (8, 3), (2, 17)])
def test_softmax_of_short_rows(shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = halojit.trace(softmax)(x)
    np.testing.assert_allclose(got, softmax(x), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("shape", [(5, 40), (40, 5)])
def test_byte_arrays_with_short_axes(shape):
    # one-byte lanes: the natural vector is 64 wide on AVX-512
    rng = np.random.default_rng(1)
    a = rng.integers(0, 255, shape, dtype=np.uint8)
    b = rng.integers(0, 255, shape[-1], dtype=np.uint8)
    f = halojit.trace(lambda x, y: (x // 3 + y, (x > y).sum(axis=0)))
    got, count = f(a, b)
    np.testing.assert_array_equal(got, a // 3 + b)
    np.testing.assert_array_equal(count, (a > b).sum(axis=0))


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("m,k,n", [(1, 64, 1), (1, 1, 1), (5, 30, 1), (1, 30, 7)])
def test_matmul_with_one_column_or_row_and_an_epilogue(m, k, n, dtype, tol):
    # the Matmul template's column vectors shifted before 0 on a one-column B:
    # "Input buffer in1 is accessed at -15" (float32), -7 (float64)
    rng = np.random.default_rng(m * 100 + k + n)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(dtype)
    for fn in (lambda a, b: np.maximum(a @ b + b[0], 0), lambda a, b: (a @ b) * 0.5 - 1):
        got = halojit.trace(fn)(a, b)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, fn(a, b), rtol=tol, atol=tol)


def _norm(x, m, s):
    return (x.astype(np.float32) / 255.0 - m) / s


def _views(a):
    """``a`` (H, W, C) and views of it a kernel must read right: a crop (rows
    not dense), flips of the pixel and channel axes, a Fortran copy."""
    h, w = a.shape[0] // 2, a.shape[1] // 2
    return {"dense": a[:h, :w].copy(), "crop": a[1:h + 1, 2:w + 2], "flip-w": a[:h, w - 1::-1],
            "flip-c": a[:h, :w][..., ::-1], "fortran": np.asfortranarray(a[:h, :w])}


@pytest.mark.parametrize("shape", [(32, 32, 3), (400, 300, 3), (64, 60, 2), (12, 100, 7, 3)])
def test_short_last_axis_elementwise_takes_the_elementwise_template(shape):
    """An HWC image's 3 channels: the Elementwise template loops over the
    last axes fused (a vector a multiple of 3 wide, vector loads where the
    arrays are dense); Adams2019 took 15.5 ms for (512, 512, 3), numpy 2.4."""
    rng = np.random.default_rng(len(shape) * 7 + shape[-1])
    big = rng.integers(0, 256, tuple(2 * d for d in shape[:2]) + shape[2:], dtype=np.uint8)
    m = rng.random(shape[-1], dtype=np.float32)
    s = rng.random(shape[-1], dtype=np.float32) + 0.5
    f = halojit.trace(_norm)
    for name, x in _views(big).items():
        assert x.shape == shape
        before = x.copy()
        got = f(x, m, s)
        np.testing.assert_allclose(got, _norm(x, m, s), rtol=1e-6, atol=1e-7, err_msg=name)
        np.testing.assert_array_equal(x, before)
    (group,) = f.lower(_views(big)["dense"], m, s).groups
    assert group.scheduler.startswith("Elementwise"), group.scheduler
    # into a caller's array that is not dense (a column crop)
    out = np.full(shape[:1] + (shape[1] + 5,) + shape[2:], -1, np.float32)
    x = _views(big)["crop"]
    assert f(x, m, s, out=out[:, :shape[1]]) is not None
    np.testing.assert_allclose(out[:, :shape[1]], _norm(x, m, s), rtol=1e-6, atol=1e-7)
    assert (out[:, shape[1]:] == -1).all()


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.float64])
def test_short_last_axis_broadcasts(dtype):
    rng = np.random.default_rng(5)
    f = halojit.trace(lambda a, b: a * b + a)
    for ashape, bshape in [((128, 96, 3), (128, 1, 3)), ((128, 96, 3), (128, 96, 1)),
                           ((128, 96, 3), (96, 3)), ((3000, 2), (3000, 2)), ((9, 8, 3), (3,))]:
        a = (rng.standard_normal(ashape) * 50).astype(dtype)
        b = (rng.standard_normal(bshape) * 3).astype(dtype)
        with np.errstate(all="ignore"):
            want = a * b + a
        np.testing.assert_array_equal(f(a, b), want, strict=True)


REDUCE_FNS = {
    "sum": lambda x: x.sum(), "max": lambda x: x.max(),
    "min-keepdims": lambda x: x.min(keepdims=True),
    "mean": lambda x: x.mean(), "std": lambda x: x.std(), "nanmax": lambda x: np.nanmax(x),
    "any": lambda x: (x > 0.999).any(), "all": lambda x: (x > -1).all(),
    "prod": lambda x: (1 + x * 1e-4).prod(),
}


@pytest.mark.parametrize("name", sorted(REDUCE_FNS))
@pytest.mark.parametrize("shape", [(256, 128, 3), (4096, 2), (40, 40, 5, 3), (30, 30, 3)])
def test_full_reductions_of_a_short_last_axis(name, shape):
    """Every element of a (..., 3) array reduced: the reduction reads it as
    (rows, width) and the FullReduce template takes it (Adams2019 took 0.64
    ms for a (512, 512, 3) float32 sum, numpy 0.13; a uint8 max 0.64 against
    0.01)."""
    fn = REDUCE_FNS[name]
    rng = np.random.default_rng(len(name) + shape[-1])
    big = rng.random(tuple(2 * d for d in shape[:2]) + shape[2:]).astype(np.float32)
    if name == "nanmax":
        big[1, 3] = np.nan
    f = halojit.trace(fn)
    for view, x in _views(big).items():
        got, want = f(x), fn(x)
        assert np.shape(got) == np.shape(want) and got.dtype == want.dtype, view
        # a float32 product of 10**5 terms rounds differently in another order
        np.testing.assert_allclose(got, want, rtol=1e-4 if name == "prod" else 2e-6,
                                   err_msg=view)
    x = _views(big)["dense"]
    if x.size >= 1 << 15 and name not in ("std",):
        assert all(g.scheduler.startswith("FullReduce") for g in f.lower(x).groups), \
            [g.scheduler for g in f.lower(x).groups]


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float16])
def test_full_reductions_of_a_short_last_axis_integers(dtype):
    rng = np.random.default_rng(9)
    x = rng.integers(0, 100, (300, 200, 3)).astype(dtype)
    for fn in (lambda x: x.sum(), lambda x: x.max(), lambda x: x.min(axis=(0, 1, 2)),
               lambda x: (x > 98).sum()):
        got, want = halojit.trace(fn)(x), fn(x)
        np.testing.assert_allclose(got, want, rtol=1e-3 if dtype == np.float16 else 0)
        assert np.asarray(got).dtype == np.asarray(want).dtype


COL_FNS = {
    "sum": lambda x: x.sum(axis=0), "mean-hw": lambda x: x.mean(axis=(0, 1)),
    "max-keepdims": lambda x: x.max(axis=(0, 1), keepdims=True),
    "min": lambda x: x.min(axis=0), "std": lambda x: x.std(axis=(0, 1)),
    "nanmin": lambda x: np.nanmin(x, axis=0), "any": lambda x: (x > 0.999).any(axis=0),
    "all": lambda x: (x > 0.001).all(axis=(0, 1)), "prod": lambda x: (1 + x * 1e-4).prod(axis=0),
    "centered": lambda x: x - x.mean(axis=(0, 1)),
}


@pytest.mark.parametrize("name", sorted(COL_FNS))
@pytest.mark.parametrize("shape", [(300, 128, 3), (2048, 5, 2), (700, 33, 3), (130, 97, 2, 2)])
def test_column_reductions_keeping_a_short_axis(name, shape):
    """Per-channel statistics: k rows of the few kept elements reduce as one
    row of 96 (passes/flatten.py, ColReduce), the k partials per element
    after that, and rows past a multiple of k apart. (700, 33, 3)'s 33 rows
    per image row leave one over; (2048, 5, 2) has fewer than k (left
    alone). Adams2019 took 5.4 ms on a (1080, 1920, 3) float32 mean over
    (0, 1), numpy 30."""
    fn = COL_FNS[name]
    rng = np.random.default_rng(len(name) + shape[1])
    big = rng.random(tuple(2 * d for d in shape[:2]) + shape[2:]).astype(np.float32)
    if name == "nanmin":
        big[3, 1] = np.nan
        big[:, 4, 0] = np.nan  # a whole kept column of the dense view
    f = halojit.trace(fn)
    for view, x in _views(big).items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # nanmin of an all-NaN column
            got, want = f(x), fn(x)
        assert got.shape == want.shape and got.dtype == want.dtype, view
        if name in ("sum", "mean-hw", "std", "centered"):
            # numpy's float32 sums over these axes are not pairwise: 3e-6
            # off the float64 mean of (300, 128, 3), halojit 2e-8
            want = fn(x.astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=1e-4 if name == "prod" else 1e-5,
                                   atol=1e-6, err_msg=view)
    x = _views(big)["dense"]
    if shape[1] > 32 and name not in ("std", "centered"):
        assert f.lower(x).groups[0].scheduler.startswith("ColReduce"), \
            [g.scheduler for g in f.lower(x).groups]


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float16, np.bool_])
def test_column_reductions_keeping_a_short_axis_other_dtypes(dtype):
    rng = np.random.default_rng(11)
    x = rng.integers(0, 2 if dtype == np.bool_ else 100, (997, 3)).astype(dtype)
    fns = [lambda x: x.sum(axis=0), lambda x: x.max(axis=0), lambda x: x.min(axis=0),
           lambda x: x.mean(axis=0), lambda x: x.any(axis=0), lambda x: x.all(axis=0)]
    for fn in fns:
        got, want = halojit.trace(fn)(x), fn(x)
        assert got.dtype == want.dtype
        if dtype == np.float16:  # numpy's float16 sums round more: 49024 for 49172
            np.testing.assert_allclose(got, fn(x.astype(np.float64)), rtol=1e-3)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12)
    # integer sums wrap as numpy's do (int16's accumulate in int64)
    big = np.full((4096, 3), 200, np.uint8)
    np.testing.assert_array_equal(halojit.trace(lambda x: x.sum(axis=0, dtype=np.uint8))(big),
                                  big.sum(axis=0, dtype=np.uint8))


VIEW_FNS = {
    "flip-w": lambda x, a: x[:, ::-1].astype(np.float32),
    "bgr": lambda x, a: x[..., ::-1] * np.float32(0.5),
    "crop": lambda x, a: x[2:-3, 1:] - x[2:-3, 1:].astype(np.int16) // 2,
    "flip-h": lambda x, a: np.flip(x, axis=0) + 1,
    "blend": lambda x, a: (x * a[..., None] + x[::-1] * (1 - a[..., None])).astype(np.uint8),
    "where": lambda x, a: np.where((a * 2 > 0.9)[..., None], x, x[:, ::-1]),
    "stack": lambda x, a: np.stack([a, a * 2, (a + 1)[::-1]], axis=-1)[..., :x.shape[-1]],
}


@pytest.mark.parametrize("shape", [(20, 30, 3), (300, 200, 3), (1000, 2)])
@pytest.mark.parametrize("name", sorted(VIEW_FNS))
def test_short_last_axis_views_inline(name, shape):
    """A flip, crop, channel swap, ``alpha[..., None]`` or a stack of
    channels is index arithmetic that the Elementwise template inlines:
    Adams2019 took 96 ms for a (1080, 1920, 3) horizontal flip and 352 ms
    for an alpha blend, numpy 8-14 and 23."""
    fn = VIEW_FNS[name]
    rng = np.random.default_rng(11)
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    a = rng.random(shape[:-1], dtype=np.float32)
    f = halojit.trace(fn)
    for view in (x, x[::-1], np.asfortranarray(x)):
        got, want = f(view, a), fn(view, a)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1 if name == "blend" else 0)
        assert got.dtype == want.dtype and got.shape == want.shape
    (group,) = f.lower(x, a).groups
    assert group.scheduler.startswith("Elementwise"), group.scheduler


# -- a value read in full and in part: tiles sized from the full extent ------------------
PART_READS = {
    "column beside the whole": lambda x: (lambda t: t + t[:, :1])(np.transpose(x[..., None],
                                                                               (1, 0, 2))),
    "one row beside the whole": lambda x: x.T[7][:, None] + x.T[..., None],
    "short slice, size-1 axis": lambda x: x.T[:, :, None] - x.T[:, :1, None],
}


@pytest.mark.parametrize("shape", [(64, 64), (130, 70), (33, 70)])
@pytest.mark.parametrize("name", sorted(PART_READS))
def test_autoscheduled_partial_reads_stay_in_bounds(name, shape):
    # Adams2019 sized the transposed value's ShiftInwards split from its
    # region at a middle iteration; at the first one the region is shorter
    # and the split read the input at -15 (lowering._guard_all)
    fn = PART_READS[name]
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    f = halojit.trace(fn)
    assert [g.scheduler.split(";")[0] for g in f.lower(x).groups] == ["Adams2019"]
    np.testing.assert_array_equal(f(x), fn(x))


SORT_PARTS = {
    "row of a row sort": lambda x: np.sort(x, axis=1)[12],
    "rows of a row sort": lambda x: np.sort(x, axis=1)[:2],
    "column of a column sort": lambda x: np.sort(x, axis=0)[:, 5],
    "columns of a column argsort": lambda x: np.argsort(x, axis=0, kind="stable")[:, :3],
}


@pytest.mark.parametrize("shape", [(64, 64), (64, 16, 1), (16, 64, 1)])
@pytest.mark.parametrize("name", sorted(SORT_PARTS))
def test_part_of_a_sort(name, shape):
    # the Sort template's tile of lanes is sized from the whole axis; asked
    # for one row it started before lane 0 ("accessed at -51")
    fn = SORT_PARTS[name]
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    f = halojit.trace(fn)
    assert f.lower(x).groups[0].scheduler.startswith("Sort")
    np.testing.assert_array_equal(f(x), fn(x))
