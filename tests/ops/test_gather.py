"""Integer-array indexing inside traces: ``x[idx]`` (one or several index
arrays, beside slices, ints and ...), ``np.take`` (every mode),
``np.take_along_axis`` and ``np.repeat``. Exactly numpy's values, shapes
and dtypes for float, int and bool data and every integer index dtype,
negative indices, strided views, broadcasting, zero-size arrays; numpy's
IndexError for indices out of range, checked before any kernel runs on
every call; the gather fused with its neighbours; a dumped artifact."""

from __future__ import annotations

import numpy as np
import pytest

import halojit

from helpers import assert_same

pytestmark = pytest.mark.level3

RNG = np.random.default_rng(7)
X = RNG.standard_normal((5, 6, 7)).astype(np.float32)
X[1, 2, 3], X[4, 0, 0], X[0, 5, 6] = np.nan, np.inf, -np.inf
I = np.array([[0, 4], [-1, 2]])  # into axis 0 (5)
J = np.array([1, -6, 5])         # into axis 1 (6)
K = np.array([[6], [0]])         # into axis 2 (7), broadcasts against J

INDEXING = {
    "x[i]": lambda x, i, j, k: x[i],
    "x[:, j]": lambda x, i, j, k: x[:, j],
    "x[..., k]": lambda x, i, j, k: x[..., k],
    "x[1, :, k]": lambda x, i, j, k: x[1, :, k],      # not adjacent: result axes first
    "x[i, 2]": lambda x, i, j, k: x[i, 2],
    "x[:, j, k]": lambda x, i, j, k: x[:, j, k],      # broadcast (2, 3)
    "x[j[:2], :, k]": lambda x, i, j, k: x[j[:2] % 5, :, k],
    "x[i, j[:1], 3]": lambda x, i, j, k: x[i, j[:1], 3],
    "x[::-2, j, 1:6:2]": lambda x, i, j, k: x[::-2, j, 1:6:2],
    "x[i][:, :, j]": lambda x, i, j, k: x[i][:, :, j],
    "x.T[k]": lambda x, i, j, k: x.T[k],
    # a ... between them separates them even where it stands for no axis
    "x[:, 1, ..., k]": lambda x, i, j, k: x[:, 1, ..., k],
    "x[i, ..., k]": lambda x, i, j, k: x[i[:1], ..., k],
    "x[..., j, k]": lambda x, i, j, k: x[..., j, k],
    # a 0-d traced index (numpy: like an int; here a gather, checked per call)
    "x[argmax]": lambda x, i, j, k: x[x.sum(axis=(1, 2)).argmax()],
    "x.ravel()[argmax]": lambda x, i, j, k: x.ravel()[(x > 0).argmax()],
    "x[:, argmin, 1:]": lambda x, i, j, k: x[:, x[0, :, 0].argmin(), 1:],
    "x[list]": lambda x, i, j, k: x[[3, -1, 3]],
    "x[const array]": lambda x, i, j, k: x[:, np.array([0, 5])] * 2,
    "take": lambda x, i, j, k: np.take(x, j, axis=1),
    "take axis=None": lambda x, i, j, k: np.take(x, i * 37),
    "take scalar": lambda x, i, j, k: np.take(x, -2, axis=2),
    "take wrap": lambda x, i, j, k: np.take(x, k * 5 - 40, axis=2, mode="wrap"),
    "take clip": lambda x, i, j, k: np.take(x, k * 5 - 20, axis=2, mode="clip"),
    "take_along argmax": lambda x, i, j, k: np.take_along_axis(
        x, np.argmax(x, axis=1, keepdims=True), 1),
    "take_along broadcast": lambda x, i, j, k: np.take_along_axis(x, (j % 7)[None, None], 2),
    "take_along axis=None": lambda x, i, j, k: np.take_along_axis(x, j, None),
    "repeat": lambda x, i, j, k: np.repeat(x, 3, axis=1),
    "repeat counts": lambda x, i, j, k: np.repeat(x, [2, 0, 1, 3, 1], axis=0),
    "repeat flat": lambda x, i, j, k: np.repeat(x, 2),
    "repeat zero": lambda x, i, j, k: np.repeat(x, 0, axis=2),
    "fused": lambda x, i, j, k: (x * 2 + 1)[i].sum(-1) - x[i, :, 3],
}


@pytest.mark.parametrize("func", sorted(INDEXING))
@pytest.mark.parametrize("dtype", ["float32", "int16", "uint8", "bool"])
def test_against_numpy(func, dtype):
    fn = INDEXING[func]
    x = {"float32": X, "bool": X > 0}.get(dtype)
    if x is None:
        x = np.nan_to_num(X * 10, posinf=99, neginf=-99).astype(dtype)
    args = (x, I, J, K)
    before = [a.copy() for a in args]
    with np.errstate(all="ignore"):
        want = np.asarray(fn(*args))
        got = np.asarray(halojit.trace(fn)(*args))
    assert_same(got, want)
    for a, b in zip(args, before):
        assert np.array_equal(a, b, equal_nan=True)


def test_every_opt_level(opt_level):
    def fn(x, i, j):
        return np.take(x[i, j] * 2, [0, -1], axis=-1).sum(0) + np.repeat(x[:2, 0, :2], [2, 0], axis=0)
    f = halojit.trace(fn, opt_level=opt_level)
    i, j = np.array([[0, -1], [2, 3]]), np.array([1, 5])
    assert_same(f(X, i, j), fn(X, i, j))
    with pytest.raises(IndexError, match="out of bounds"):
        f(X, i * 3, j)


@pytest.mark.parametrize("idx_dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32",
                                       "int64", "uint64"])
def test_index_dtypes(idx_dtype):
    x = RNG.standard_normal((300, 4)).astype(np.float32)  # 300: past int8's range
    idx = np.array([0, 1, 127, 2, 126], dtype=idx_dtype)
    if np.dtype(idx_dtype).itemsize > 1:
        idx = np.array([0, 299, 200, 7, 128], dtype=idx_dtype)
    if np.dtype(idx_dtype).kind == "i":
        idx[2] = -3
    for fn in (lambda x, i: x[i], lambda x, i: np.take(x, i, axis=0, mode="wrap"),
               lambda x, i: np.take(x, i, axis=0, mode="clip"),
               lambda x, i: np.take_along_axis(x, i[:, None].repeat(4, 1), 0)):
        assert_same(halojit.trace(fn)(x, idx), fn(x, idx))


def test_wide_unsigned_indices_as_numpy_intp():
    """numpy converts indices to intp: a uint64 2**64 - 1 reads the last
    element, huge uint32 values clip to the end."""
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    big = np.array([2**64 - 1, 3, 2**63 + 5], np.uint64)
    assert_same(halojit.trace(lambda x, i: x[i])(x, big[:2]), x[big[:2]])
    assert_same(halojit.trace(lambda x, i: np.take(x, i, axis=0, mode="clip"))(x, big),
                np.take(x, big, axis=0, mode="clip"))
    wrapped = halojit.trace(lambda x, i: np.take(x, i, axis=0, mode="wrap"))(x, big)
    assert_same(wrapped, x[big.astype(np.int64) % 10])  # np.take's wrap loops ~1e17 times here
    u32 = np.array([2**32 - 1, 2**31, 4], np.uint32)
    for mode in ("clip", "wrap"):
        f = halojit.trace(lambda x, i: np.take(x, i, axis=0, mode=mode))
        assert_same(f(x, u32), np.take(x, u32, axis=0, mode=mode))


def test_views_and_zero_size():
    x = RNG.standard_normal((40, 30)).astype(np.float32)
    idx = RNG.integers(-30, 30, (8, 6))
    f = halojit.trace(lambda x, i: x[:, i])
    for xs, ix in [(x[::2, ::-1], idx[::2, 1::2]), (x.T[:30], idx.T), (x[5:9], idx[:, :0])]:
        assert_same(f(xs, ix), xs[:, ix])
    g = halojit.trace(lambda x, i: x[i] + 1)
    empty = np.zeros((0,), np.int64)
    assert_same(g(x, empty), x[empty] + 1)
    z = np.zeros((0, 3), np.float32)
    assert_same(halojit.trace(lambda z, i: z[:, i])(z, np.array([2, 0])), z[:, [2, 0]])
    assert_same(halojit.trace(lambda z: np.repeat(z, 4, axis=1))(z), np.repeat(z, 4, axis=1))


@pytest.mark.parametrize("fn,bad,axis,size", [
    (lambda x, i: x[i], np.array([0, 5]), 0, 5),
    (lambda x, i: x[i], np.array([[-6]]), 0, 5),
    (lambda x, i: x[:, 2, i], np.array([7]), 2, 7),
    (lambda x, i: x[i, i], np.array([3, 5]), 0, 5),
    (lambda x, i: np.take(x, i, axis=1), np.array([6]), 1, 6),
    (lambda x, i: np.take_along_axis(x, i[:, None, None], 0), np.array([2, -9]), 0, 5),
])
def test_out_of_range_raises_before_any_kernel_every_call(fn, bad, axis, size):
    f = halojit.trace(fn)
    good = np.zeros_like(bad)
    for _ in range(3):  # a warm cache and the fast path do not skip the check
        assert_same(f(X, good), fn(X, good))
    out_buf = np.full_like(fn(X, good), 7.0)
    with pytest.raises(halojit.IndexOutOfBoundsError,
                       match=f"out of bounds for axis {axis} with size {size}"):
        f(X, bad, out=out_buf)
    assert (out_buf == 7.0).all()  # no kernel ran
    with pytest.raises(IndexError):  # numpy's own class, for code that catches it
        f(X, bad)
    assert_same(f(X, good), fn(X, good))


def test_errors_at_trace_time():
    with pytest.raises(halojit.IndexOutOfBoundsError, match="index 9 is out of bounds"):
        halojit.trace(lambda x: x[[1, 9]])(X)
    with pytest.raises(halojit.IndexOutOfBoundsError, match="index -8 is out of bounds"):
        halojit.trace(lambda x, i: x[i, -8])(X, I)
    with pytest.raises(halojit.IndexTypeError, match="must be of integer .* got float64"):
        halojit.trace(lambda x: x[np.array([1.0])])(X)  # a DTypeError and numpy's IndexError
    with pytest.raises(halojit.DTypeError, match="indices must be integers, got float64"):
        halojit.trace(lambda x: np.take(x, np.array([1.0])))(X)
    with pytest.raises(halojit.UnsupportedError, match="boolean mask"):
        halojit.trace(lambda x: x[x > 0])(X)
    with pytest.raises(halojit.UnsupportedError, match="None"):
        halojit.trace(lambda x, i: x[None, i])(X, I)
    with pytest.raises(halojit.UnsupportedError, match="repeats must be known"):
        halojit.trace(lambda x, r: np.repeat(x, r))(X, np.array(2))
    with pytest.raises(halojit.ShapeError, match="repeat"):
        halojit.trace(lambda x: np.repeat(x, [1, 2], axis=0))(X)
    with pytest.raises(halojit.ShapeError, match="negative"):
        halojit.trace(lambda x: np.repeat(x, -1))(X)
    with pytest.raises(halojit.ShapeError, match="3 dimensions"):
        halojit.trace(lambda x, i: np.take_along_axis(x, i, 1))(X, I)
    with pytest.raises(ValueError, match="mode"):
        halojit.trace(lambda x, i: np.take(x, i, mode="nearest"))(X, I)
    with pytest.raises(halojit.IndexOutOfBoundsError, match="empty axis"):
        halojit.trace(lambda z, i: np.take(z, i, axis=0, mode="clip"))(np.zeros((0, 2)), I)


M0 = np.array([True, False, False, True, True])      # axis 0 (5)
M12 = RNG.random((6, 7)) > 0.6                       # axes 1 and 2


@pytest.mark.parametrize("fn", [
    lambda x: x[M0],
    lambda x: x[list(M0)],                     # a list of bools is a mask too
    lambda x: x[:, M12],
    lambda x: x[..., M12[0]],
    lambda x: x[2, M12],
    lambda x: x[M0, 1:5:2, -1],
    lambda x: x[np.zeros(5, bool)],            # nothing selected: zero-size
    lambda x: x.reshape(5, 42)[:, M12.ravel()].sum(axis=1),
], ids=["axis0", "list", "axes12", "ellipsis", "int_then_mask", "mask_slice_int", "none",
        "then_sum"])
def test_masks_known_while_tracing(fn):
    """A boolean array that is not traced (a numpy array or a list made
    outside) selects positions known while tracing: a gather, with numpy's
    result shape and order."""
    x = X.copy()
    assert_same(halojit.trace(fn)(x), fn(x))
    np.testing.assert_array_equal(x, X)


def test_item_assignment_through_a_known_mask():
    def f(x):
        y = x * 2
        y[M0] = -1
        y[:, M12] += 1
        return y
    assert_same(halojit.trace(f)(X), f(X))


def test_known_mask_of_the_wrong_shape():
    for fn, axis, size, n in [(lambda x: x[np.ones(4, bool)], 0, 5, 4),
                              (lambda x: x[:, np.ones((6, 3), bool)], 2, 7, 3)]:
        with pytest.raises(IndexError) as numpy_error:
            fn(X)
        with pytest.raises(halojit.IndexShapeError, match=(
                f"boolean index did not match indexed array along axis {axis}; size of axis "
                f"is {size} but size of corresponding boolean axis is {n}")) as ours:
            halojit.trace(fn)(X)
        assert str(numpy_error.value) in str(ours.value)
        assert isinstance(ours.value, IndexError)


def test_embedding_and_label_pick_fuse():
    """An embedding lookup with its epilogue is one Elementwise kernel; a
    cross-entropy's label pick joins the row reductions."""
    W = RNG.standard_normal((1000, 64)).astype(np.float32)
    ids = RNG.integers(0, 1000, (4, 50))
    b = RNG.standard_normal(64).astype(np.float32)
    f = halojit.trace(lambda W, ids, b: np.maximum(W[ids] + b, 0))
    assert_same(f(W, ids, b), np.maximum(W[ids] + b, 0))
    (group,) = f.lower(W, ids, b).groups
    assert group.scheduler.startswith("Elementwise") and "take" in group.ops

    def xent(z, y):
        m = z.max(1, keepdims=True)
        lse = np.log(np.exp(z - m).sum(1)) + m[:, 0]
        return (lse - z[np.arange(len(y)), y]).mean()
    z = RNG.standard_normal((300, 40)).astype(np.float32)
    y = RNG.integers(0, 40, 300)
    g = halojit.trace(xent)
    np.testing.assert_allclose(g(z, y), xent(z, y), rtol=1e-5)
    assert len(g.lower(z, y).groups) == 1


def test_dumped_artifact_gathers(tmp_path):
    f = halojit.trace(lambda W, ids: W[ids] * 2)
    W = RNG.standard_normal((100, 16)).astype(np.float32)
    ids = RNG.integers(-100, 100, 30)
    path = tmp_path / "gather.hjm"
    f.dump(path, W, ids)
    loaded = halojit.load(path)
    assert_same(loaded(W, ids), W[ids] * 2)
