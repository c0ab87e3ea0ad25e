"""np.cumsum / np.cumprod (functions and methods) traced: along every axis
and of the flattened array, numpy's accumulation dtypes (bool and small ints
to 64 bits, dtype=), bit-identical float32 results (the same sequential
order as numpy's accumulate loops), NaN/inf, zero-size and one-element axes,
non-contiguous views, fused neighbours, large parallel groups, and errors."""

from __future__ import annotations

import numpy as np
import pytest

import halojit
from halojit.errors import ShapeError, UnsupportedError
from halojit.generators.build import SERIAL_MAX_ELEMENTS
from halojit.schedules.templates import row_reduce_fits, stencil_fits

from helpers import assert_same, local_graphs, random_array


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.int64,
                                   np.bool_, np.float16])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_scans_match_numpy_exactly(name, dtype, axis):
    rng = np.random.default_rng(abs(hash((name, axis))) % 1000)
    if np.dtype(dtype).kind == "f":  # cumprod of values near 1 stays finite
        x = random_array(rng, (9, 33), dtype, 0.5, 1.5) if name == "cumprod" \
            else random_array(rng, (9, 33), dtype, -3.0, 3.0)
    elif np.dtype(dtype).kind in "iu":
        x = random_array(rng, (9, 33), dtype, 0, 4)  # int8 products wrap in int64 as numpy's
    else:
        x = random_array(rng, (9, 33), dtype)
    fn = lambda x: getattr(np, name)(x, axis=axis)  # noqa: E731
    got = halojit.trace(fn)(x)
    want = fn(x)
    assert_same(got, want, rtol=0, atol=0)
    assert_same(halojit.trace(lambda x: getattr(x, name)(axis))(x), want, rtol=0, atol=0)


def test_dtype_argument_and_3d_axes():
    x = np.random.default_rng(1).integers(-100, 100, (4, 5, 6)).astype(np.int16)
    for axis in (0, 1, 2, -2):
        fn = lambda x: np.cumsum(x, axis=axis, dtype=np.float32)  # noqa: E731
        assert_same(halojit.trace(fn)(x), fn(x), rtol=0, atol=0)


def test_nan_inf_and_a_strided_view():
    base = np.random.default_rng(2).standard_normal((40, 60)).astype(np.float32)
    base[3, 7], base[10, 2], base[20, 30] = np.nan, np.inf, -np.inf
    x = base[::2, ::-3]
    before = base.copy()
    for axis in (0, 1):
        fn = lambda x: np.cumsum(x, axis=axis)  # noqa: E731
        with np.errstate(invalid="ignore"):
            want = fn(x)
        assert_same(halojit.trace(fn)(x), want, rtol=0, atol=0)
    np.testing.assert_array_equal(base, before)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (1, 7), (7, 1), (1,), ()])
def test_zero_size_one_element_and_0d(shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 1
    fns = [lambda x: np.cumsum(x), lambda x: np.cumprod(x)]
    if len(shape) == 2:
        fns += [lambda x: np.cumsum(x, axis=0), lambda x: np.cumprod(x, axis=1)]
    for fn in fns:
        assert_same(halojit.trace(fn)(x), fn(x), rtol=0, atol=0)


def test_fused_moving_average_and_normalised_cumsum():
    """A scan joins its producers' and consumers' groups: one kernel each."""
    x = np.random.default_rng(3).standard_normal((500, 64)).astype(np.float32)
    moving = lambda x: (np.cumsum(x * 2, axis=0)[8:] - np.cumsum(x * 2, axis=0)[:-8]) / 8  # noqa: E731
    norm = lambda x: np.cumsum(x, axis=1) / x.sum(axis=1, keepdims=True)  # noqa: E731
    for fn in (moving, norm):
        (graph,) = local_graphs(fn, x)
        assert any(n.op == "cumsum" for n in graph.nodes)
        # a template's strips or row blocks would rescan the axis per block
        assert not stencil_fits(graph) and not row_reduce_fits(graph)
        got = halojit.trace(fn)(x)
        assert_same(got, fn(x), rtol=1e-5, atol=1e-5)


def test_a_scan_never_joins_a_matmul_group():
    a = np.random.default_rng(4).standard_normal((64, 32)).astype(np.float32)
    fn = lambda a: np.cumsum(a, axis=0) @ a.T  # noqa: E731
    graphs = local_graphs(fn, a)
    assert not any(any(n.op == "matmul" for n in g.nodes) and any(n.op == "cumsum" for n in g.nodes)
                   for g in graphs)
    assert_same(halojit.trace(fn)(a), fn(a), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("axis", [0, 1])
def test_large_scans_run_parallel_and_match(axis):
    rows = SERIAL_MAX_ELEMENTS // 256 + 17
    x = np.random.default_rng(5).standard_normal((rows, 256)).astype(np.float32)
    fn = lambda x: np.cumsum(x, axis=axis)  # noqa: E731
    f = halojit.trace(fn)
    (g,) = f.lower(x).groups
    assert g.scheduler.startswith("Adams2019") and g.scheduler != "Adams2019;parallelism=1"
    out = np.empty_like(x)
    f(x, out=out)
    assert_same(out, fn(x), rtol=0, atol=0)


def test_bad_scans_raise_before_compiling():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ShapeError, match="axis 2 is out of bounds"):
        halojit.trace(lambda x: np.cumsum(x, axis=2))(x)
    with pytest.raises(halojit.TraceError, match="out=.*writes into an input"):
        halojit.trace(lambda x: np.cumsum(x, out=x))(x)
    with pytest.raises(TypeError, match="axis must be an int"):
        halojit.trace(lambda x: np.cumprod(x, axis=(0,)))(x)


@pytest.mark.parametrize("ufunc", [np.maximum, np.minimum, np.fmax, np.fmin])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.uint16,
                                   np.bool_])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_max_min_accumulate(ufunc, dtype, axis):
    """np.maximum.accumulate and kin (a running max or min): numpy's dtype,
    NaN propagated by maximum/minimum and skipped by fmax/fmin, -0.0."""
    rng = np.random.default_rng(abs(hash((ufunc.__name__, axis))) % 1000)
    x = random_array(rng, (9, 70), dtype, specials=True)
    if np.dtype(dtype).kind == "f":
        x[2, 5:9] = [np.nan, -0.0, 0.0, np.nan]
        x[5, :] = np.nan
    fn = lambda x: ufunc.accumulate(x, axis=axis)  # noqa: E731
    x0 = x.copy()
    assert_same(halojit.trace(fn)(x), fn(x), rtol=0, atol=0)
    np.testing.assert_array_equal(x, x0)


def test_running_max_in_a_computation_and_dtype():
    x = np.random.default_rng(7).standard_normal((5, 300)).astype(np.float32)
    # a drawdown: the running peak minus the value, fused with its neighbours
    fn = lambda x: np.maximum.accumulate(np.cumsum(x, axis=1), axis=1) - np.cumsum(x, axis=1)  # noqa: E731
    assert_same(halojit.trace(fn)(x), fn(x), rtol=0, atol=0)
    g = lambda x: np.minimum.accumulate((x * 10).astype(np.int16), dtype=np.float64)  # noqa: E731
    assert_same(halojit.trace(g)(x), g(x), rtol=0, atol=0)
