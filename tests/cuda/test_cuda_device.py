"""GPU-only: kernels compiled for ``host-cuda`` run on the device and match
numpy (dtype, shape, values within tests/helpers.py's tolerances):
elementwise ops, reductions, movement and matmul samples, every benchmark
workload, repeated calls, new shapes, views, empty arrays and out=.
Skips with the reason where there is no NVIDIA GPU and driver.
"""

from __future__ import annotations

import numpy as np
import pytest

from cuda_helpers import TARGET, check_lowered, needs_gpu
from helpers import DTYPES, assert_same, numpy_eager, random_array
import halojit
from halojit import cuda
from halojit.bench.workloads import workloads
from halojit.graph.ops.elementwise import BINARY, UFUNCS, UNARY
from ops.test_ops import binary_data, numpy_accepts, unary_data  # the op tables' input domains
from test_cuda_compile_programs import AXES, LINALG, MOVEMENT, REDUCTIONS

pytestmark = needs_gpu

# odd sizes: partial blocks and tails in every dimension
SHAPE = (37, 129)


def assert_device_matches(fn, args, kwargs=None, **tol):
    """``fn`` traced for host-cuda, called twice (compile, then cache hit),
    equals numpy eager both times; the inputs are not written."""
    kwargs = kwargs or {}
    copies = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
    want = numpy_eager(fn, *args, **kwargs)
    f = halojit.trace(fn, target=TARGET)
    for call in ("miss", "hit"):
        got = f(*args, **kwargs)
        if isinstance(want, tuple):
            for k, (g, w) in enumerate(zip(got, want)):
                assert_same(g, w, what=f"{call} output {k}", **tol)
        else:
            assert_same(got, want, what=call, **tol)
    for a, c in zip(args, copies):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, c, strict=True, err_msg="an input was written")
    return f


def _seed(*parts) -> int:
    return sum((i + 1) * sum(map(ord, str(p))) for i, p in enumerate(parts))


# -- elementwise --------------------------------------------------------------------------------
GPU_DTYPES = ["float32", "float64", "float16", "int32", "uint8", "bool"]
UNARY_CASES = [(n, d) for d in GPU_DTYPES for n in UNARY if numpy_accepts(UFUNCS[n], [d])]
BINARY_CASES = [(n, d) for d in GPU_DTYPES for n in BINARY if numpy_accepts(UFUNCS[n], [d, d])]


@pytest.mark.parametrize("name,dtype", UNARY_CASES, ids=[f"{n}-{d}" for n, d in UNARY_CASES])
def test_unary_op_on_device(name, dtype):
    rng = np.random.default_rng(_seed(name, dtype))
    x = unary_data(name, dtype, SHAPE, rng)
    ufunc = UFUNCS[name]
    assert_device_matches(lambda x: ufunc(x), (x,))


@pytest.mark.parametrize("name,dtype", BINARY_CASES, ids=[f"{n}-{d}" for n, d in BINARY_CASES])
def test_binary_op_on_device(name, dtype):
    rng = np.random.default_rng(_seed(name, dtype))
    a, b = binary_data(name, dtype, SHAPE, (SHAPE[1],), rng)  # b broadcasts over rows
    ufunc = UFUNCS[name]
    assert_device_matches(lambda x, y: ufunc(x, y), (a, b))


@pytest.mark.parametrize("src", GPU_DTYPES)
def test_astype_where_clip_on_device(src):
    rng = np.random.default_rng(_seed("astype", src))
    x = random_array(rng, SHAPE, src, -100, 100)
    y = random_array(rng, SHAPE, src, -100, 100)
    # float -> int outside the int's range is C UB (numpy wraps on x86): in range only
    inrange = np.abs(x) if x.dtype.kind == "f" else x
    for to in DTYPES:
        assert_device_matches(lambda x: x.astype(to), (inrange,))
    assert_device_matches(lambda x, y: np.where(x > y, x, y), (x, y))
    if src != "bool":
        assert_device_matches(lambda x: np.clip(x, 0, 50), (x,))


# -- reductions ------------------------------------------------------------------------------------
def _reduce_data(name, dtype, shape, rng):
    if dtype == "bool":  # mostly True: all() is not trivially False
        return rng.random(shape) < (0.999 if name == "all" else 0.001)
    if name == "prod":  # products of 1000 values stay finite
        return rng.uniform(0.97, 1.03, shape).astype(dtype)
    return random_array(rng, shape, dtype, -4.0, 4.0)


@pytest.mark.parametrize("shape", [(37, 1000), (8, 1024), (1, 4099)], ids=str)
@pytest.mark.parametrize("axis", list(AXES), ids=list(AXES))
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_on_device(name, axis, shape):
    dtype = "bool" if name in ("any", "all") else "float32"
    x = _reduce_data(name, dtype, shape, np.random.default_rng(_seed(name, axis, shape)))
    ax = AXES[axis]
    n = x.size if ax is None else x.shape[ax]
    tol = {"atol": 1e-6 * n} if name == "sum" else {}  # blocked sums: error grows with n
    if name in ("argmax", "argmin"):
        fn = lambda x: getattr(np, name)(x, axis=ax)  # noqa: E731
    else:
        fn = lambda x: getattr(np, name)(x, axis=ax, keepdims=axis == "last")  # noqa: E731
    assert_device_matches(fn, (x,), **tol)


@pytest.mark.parametrize("shape", [((1 << 20) + 13,), (1000, 1030), (3, 300, 1024)], ids=str)
@pytest.mark.parametrize("name", ["sum", "max", "nanmin", "prod", "all", "mean"])
def test_full_reduction_in_chunks_on_device(name, shape):
    """Full reductions of at least 1024-element rows: a block of 256 lanes
    per chunk, lanes combined in shared memory, then the chunks (1-D: chunks
    of the axis itself, with a tail; 2-D and 3-D: chunks of rows)."""
    dtype = "bool" if name == "all" else "float32"
    rng = np.random.default_rng(_seed(name, "chunks", shape))
    x = _reduce_data(name, dtype, shape, rng)
    if name == "prod":  # a missed 1024-element block moves the product by about 2%
        x = rng.uniform(0.999, 1.001, shape).astype(np.float32)
    if name == "nanmin":
        x.reshape(-1)[:: 997] = np.nan
    # numpy's float32 product is sequential too: each side's rounding of 1M
    # products is about 1e-4 relative (seen: 1.7e-4 apart)
    tol = ({"atol": 1e-6 * x.size} if name in ("sum", "mean")
           else {"rtol": 1e-3} if name == "prod" else {})
    assert_device_matches(lambda x: getattr(np, name)(x), (x,), **tol)
    if name == "max":  # a NaN anywhere wins, as in numpy
        x.reshape(-1)[x.size // 2] = np.nan
        assert_device_matches(lambda x: np.max(x), (x,))
    if name == "sum":  # two full reductions in one kernel
        assert_device_matches(lambda x: x.sum() - np.nanmin(x), (x,), **tol)


@pytest.mark.parametrize("dtype", ["float64", "float16", "int32", "uint8"])
def test_reduction_dtypes_on_device(dtype):
    rng = np.random.default_rng(_seed("reduce", dtype))
    x = random_array(rng, (19, 300), dtype, -3, 3)
    tol = {"rtol": 1e-2, "atol": 0.5} if dtype == "float16" else {}  # float16 sums of 300
    for name in ("sum", "max", "min", "mean", "argmax"):
        for ax in (-1, 0, None):
            assert_device_matches(lambda x: getattr(np, name)(x, axis=ax), (x,), **tol)


# -- movement and matmul --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(MOVEMENT))
def test_movement_on_device(name):
    x = np.random.default_rng(_seed(name)).standard_normal((6, 40)).astype(np.float32)
    assert_device_matches(MOVEMENT[name], (x,))


@pytest.mark.parametrize("name", list(LINALG))
def test_matmul_einsum_on_device(name):
    fn, shapes = LINALG[name]
    rng = np.random.default_rng(_seed(name))
    args = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    assert_device_matches(fn, args, rtol=1e-4, atol=1e-5)  # 40-term dot products


# -- benchmark workloads ------------------------------------------------------------------------------
WORKLOAD_TOL = {"mlp": {"rtol": 1e-4, "atol": 1e-4}, "row_sum": {"atol": 1e-4},
                "full_sum": {"atol": 1e-3}, "layernorm": {"atol": 1e-5}}


@pytest.mark.parametrize("size", ["small", "tiny"])
@pytest.mark.parametrize("name", [w.name for w in workloads("small")])
def test_workload_on_device(name, size):
    w = {w.name: w for w in workloads(size)}[name]
    f = assert_device_matches(w.fn, w.inputs(), **WORKLOAD_TOL.get(name, {}))
    check_lowered(f.lower(*w.inputs()), name)


# -- calls ---------------------------------------------------------------------------------------------
def test_repeated_calls_and_new_shapes():
    """Seen shapes hit the cache (no recompile); a new shape compiles once;
    results stay right across alternating shapes and fresh data."""
    w = {w.name: w for w in workloads("small")}["softmax"]
    f = halojit.trace(w.fn, target=TARGET)
    rng = np.random.default_rng(1)
    shapes = [(4, 1024), (4, 1024), (9, 77), (4, 1024), (9, 77), (1, 1)]
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        assert_same(f(x), w.fn(x), what=str(shape))
    stats = f.stats()
    assert (stats["misses"], stats["hits"]) == (3, 3), stats


def test_views_empty_and_scalars_on_device():
    """Strided and negative-stride inputs, zero-size arrays (no empty
    kernel launch errors) and 0-d results."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    assert_device_matches(lambda a: np.exp(a) * 2, (x[::3, ::-2],))
    assert_device_matches(lambda a, b: a + b, (x.T, x[::-1].T))
    assert_device_matches(lambda a: np.exp(a) + 1, (np.zeros((0, 5), np.float32),))
    assert_device_matches(lambda a: a.sum(axis=-1), (np.zeros((3, 0), np.float32),))
    assert_device_matches(lambda a: a.max(), (x,))
    assert_device_matches(lambda a: a * 3, (np.float32(2.5),))


def test_out_on_device():
    """out= receives the result (copied back from the device) in place."""
    x = np.random.default_rng(3).standard_normal((16, 256)).astype(np.float32)
    f = halojit.trace(lambda a: np.tanh(a) + 1, target=TARGET)
    out = np.empty_like(x)
    res = f(x, out=out)
    np.testing.assert_allclose(out, np.tanh(x) + 1, rtol=1e-5, atol=1e-6)
    assert res is out or np.shares_memory(res, out)


def test_device_is_reported():
    (dev, *_) = cuda.devices()
    assert cuda.is_available() and cuda.unavailable_reason() == ""
    assert dev.capability >= 30 and dev.multiprocessors > 0 and dev.memory_bytes > 0
    assert cuda.target_capability()[0] == cuda.halide_capability(dev.capability)


def test_bad_device_index_is_a_device_error(monkeypatch):
    monkeypatch.setenv("HL_GPU_DEVICE", "999")
    with pytest.raises(halojit.DeviceError, match="HL_GPU_DEVICE=999"):
        cuda.current_device()
