"""Shared test helpers: the opt levels under test, ``jit`` (trace at a level),
``assert_same`` (dtype, shape and values against numpy) and input data.
"""

from __future__ import annotations

import importlib.util
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest

import halojit

@dataclass
class Case:
    """One row of an op table: a function, its arguments, whether numpy
    itself raises, and tolerance overrides for ``assert_matches_numpy``."""

    id: str
    fn: object
    args: tuple
    expect_error: bool = False
    tol: dict = field(default_factory=dict)


# The one list of opt levels every parametrized test runs at. Level 3 joins
# once the Halide backend (halojit.generators.build) exists.
HAS_HALIDE_BACKEND = importlib.util.find_spec("halojit.generators.build") is not None
OPT_LEVELS = [0, 1] + ([3] if HAS_HALIDE_BACKEND else [])

# At opt_level 3 every distinct shape/dtype compiles a kernel (~0.3 s): the
# table-driven tests run only every LEVEL3_SAMPLE-th case there (see
# ``level_params``); ``pytest --level3-sample=1`` runs them all.
LEVEL3_SAMPLE = 40

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]
INT_DTYPES = [d for d in DTYPES if d[0] in "iu"]
FLOAT_DTYPES = ["float16", "float32", "float64"]

# (rtol, atol) per float dtype. atol only matters next to zero (sin(pi)).
TOLERANCES = {
    np.dtype(np.float16): (1e-2, 1e-3),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float64): (1e-6, 1e-12),
}


def jit(fn=None, opt_level=0, **options):
    """``halojit.trace`` at ``opt_level``; level 3 uses the Halide backend."""
    if opt_level >= 3:
        options.setdefault("backend", "halide")
    else:
        options.setdefault("backend", "numpy")
    return halojit.trace(fn, opt_level=opt_level, **options)


def level_params(cases, ids=None, levels=None):
    """pytest.params of (case, opt_level) for each case at each level; at
    level 3 only every LEVEL3_SAMPLE-th case (compiles are costly)."""
    levels = OPT_LEVELS if levels is None else levels
    stride = max(1, LEVEL3_SAMPLE)
    params = []
    for i, case in enumerate(cases):
        cid = ids[i] if ids is not None else getattr(case, "id", str(i))
        for level in levels:
            if level >= 3 and i % stride:
                continue
            params.append(pytest.param(case, level, id=f"{cid}-O{level}"))
    return params


def numpy_eager(fn, *args, **kwargs):
    """``fn(*args)`` in plain numpy with warnings silenced (the reference)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def assert_same(got, want, rtol=None, atol=None, what=""):
    """Same dtype (exactly), same shape, same values: exact for ints and
    bools, NaN at the same places, infs equal, finite floats within the
    dtype's tolerance."""
    got_a, want_a = np.asarray(got), np.asarray(want)
    where = f" {what}" if what else ""
    assert got_a.dtype == want_a.dtype, f"dtype{where}: got {got_a.dtype}, want {want_a.dtype}"
    assert got_a.shape == want_a.shape, f"shape{where}: got {got_a.shape}, want {want_a.shape}"
    if want_a.dtype.kind != "f":
        np.testing.assert_array_equal(got_a, want_a, err_msg=f"values{where}", strict=True)
        return
    nan_got, nan_want = np.isnan(got_a), np.isnan(want_a)
    np.testing.assert_array_equal(nan_got, nan_want, err_msg=f"NaN positions{where}")
    inf_want = np.isinf(want_a)
    np.testing.assert_array_equal(np.isinf(got_a), inf_want, err_msg=f"inf positions{where}")
    np.testing.assert_array_equal(got_a[inf_want], want_a[inf_want], err_msg=f"inf signs{where}")
    finite = ~(nan_want | inf_want)
    r, a = TOLERANCES[want_a.dtype]
    np.testing.assert_allclose(
        got_a[finite].astype(np.float64), want_a[finite].astype(np.float64),
        rtol=r if rtol is None else rtol, atol=a if atol is None else atol,
        err_msg=f"values{where}")


def assert_matches_numpy(fn, args, opt_level, kwargs=None, expect_error=False, **tol):
    """Trace ``fn`` at ``opt_level``, call it twice (miss, then hit) and
    compare both results with numpy eager; also checks that the inputs were
    not written to. With ``expect_error``, numpy must raise and halojit must
    raise the same kind of error (OverflowError, TypeError or ValueError)."""
    kwargs = kwargs or {}
    copies = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
    if expect_error:
        with pytest.raises((OverflowError, TypeError, ValueError)) as info:
            numpy_eager(fn, *args, **kwargs)
        kind = next(c for c in (OverflowError, TypeError, ValueError) if isinstance(info.value, c))
        with pytest.raises(kind):
            jit(fn, opt_level)(*args, **kwargs)
        return None
    want = numpy_eager(fn, *args, **kwargs)
    f = jit(fn, opt_level)
    for call in ("miss", "hit"):
        got = f(*args, **kwargs)
        assert_tree_same(got, want, what=call, **tol)
    for a, c in zip(args, copies):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, c, err_msg="an input was written to", strict=True)
    check_graphs(f, args)
    return want


def check_graphs(f, args):
    """Every cached graph of ``f`` verifies, and each reference's result has
    exactly its node's aval (interpret with check=True)."""
    from halojit.graph.interpret import interpret
    from halojit.graph.verify import verify
    for spec in getattr(f, "_cache", {}).values():
        verify(spec.graph)
        inputs = [np.asarray(a) for a in args] + [b.read() for b in spec.bindings]
        interpret(spec.graph, inputs, check=True)


def assert_tree_same(got, want, what="", **tol):
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), f"structure {what}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_tree_same(g, w, what=f"{what}[{i}]", **tol)
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"structure {what}"
        for k in want:
            assert_tree_same(got[k], want[k], what=f"{what}[{k!r}]", **tol)
    else:
        assert_same(got, want, what=what, **tol)


# -- data ------------------------------------------------------------------------
SPECIALS = (np.nan, np.inf, -np.inf, 0.0, -0.0)


def random_array(rng, shape, dtype, low=None, high=None, specials=False):
    """Random data of ``dtype``: ints in [low, high] (default the full
    range), floats normal(0, 3) or uniform(low, high), bools fair coins;
    ``specials`` plants NaN, +-inf and +-0.0 in float arrays."""
    dt = np.dtype(dtype)
    shape = tuple(shape)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo = info.min if low is None else max(int(low), int(info.min))
        hi = info.max if high is None else min(int(high), int(info.max))
        return rng.integers(lo, hi, size=shape, dtype=dt, endpoint=True)
    if low is None:
        a = rng.normal(0.0, 3.0, size=shape)
    else:
        a = rng.uniform(low, high, size=shape)
    a = a.astype(dt)
    if specials and a.size:
        flat = a.reshape(-1)
        k = min(len(SPECIALS), flat.size)
        pos = rng.choice(flat.size, size=k, replace=False)
        flat[pos] = np.array(SPECIALS[:k], dtype=dt)
    return a


def with_values(a, values):
    """``a`` (1-D or more) with its first elements replaced by ``values``."""
    a = np.array(a, copy=True)
    flat = a.reshape(-1)
    k = min(len(values), flat.size)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        flat[:k] = np.array(values[:k]).astype(a.dtype)
    return a


def run_in_threads(work, n=4):
    """``work(k)`` for k in range(n), each in its own thread, all joined."""
    import threading
    threads = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def check_plain_matmul(m, k, n, dtype, seed):
    """``a @ b`` traced on random (m, k) and (k, n) arrays of ``dtype``:
    numpy's dtype and values (``assert_matmul_close``). Returns f, a, b."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    f = halojit.trace(lambda a, b: a @ b)
    got = f(a, b)
    assert got.dtype == np.dtype(dtype)
    assert_matmul_close(got, a @ b, k)
    return f, a, b


def assert_matmul_close(got, want, k):
    """A matmul result against numpy's: float sums in another order than
    BLAS, so the error grows like sqrt(k) * eps of the largest value."""
    scale = np.abs(want).max() if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=max(scale, 1.0) * 1e-6 * (4 + np.sqrt(k)))


def same_bits(got, want):
    """Elementwise: equal with the same sign (-0.0 is not +0.0), or both NaN."""
    got, want = np.asarray(got), np.asarray(want)
    return ((got == want) & (np.signbit(got) == np.signbit(want))) | \
        (np.isnan(got) & np.isnan(want))


def assert_same_bits(got, want):
    """Same dtype and shape and ``same_bits`` everywhere (integers: equal)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    same = same_bits(got, want)
    assert same.all(), f"{(~same).sum()} differ: got {got[~same][:6]}, want {want[~same][:6]}"


def ulp_distance(got, want):
    """|got - want| in float32 ulps, counting subnormals (0 where both are
    NaN, 2**40 where only one is)."""
    g = got.view(np.int32).astype(np.int64)
    w = want.view(np.int32).astype(np.int64)
    g = np.where(g < 0, -(g & 0x7FFFFFFF), g)
    w = np.where(w < 0, -(w & 0x7FFFFFFF), w)
    d = np.abs(g - w)
    d[np.isnan(got) & np.isnan(want)] = 0
    d[np.isnan(got) != np.isnan(want)] = 1 << 40
    return d


def softmax_ref(x):
    """numpy softmax over the last axis: the reference for row-reduction tests."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm_ref(x, g, b):
    """numpy layernorm over the last axis with gamma and beta."""
    m = x.mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5) * g + b


def local_graphs(fn, *args):
    """The fusion groups' graphs of ``fn`` at ``args``, as the compiler sees
    them (optimized, partitioned), without compiling anything."""
    from halojit.graph.fusion import group_graph, partition
    from halojit.graph.ir import make_graph
    from halojit.graph.passes import optimize
    f = halojit.trace(fn)
    conv = f._convert(args)
    ctx, nodes, _ = f._trace([v for v, _ in conv], [a for _, a in conv], {}, False)
    graph = optimize(make_graph(ctx.inputs, nodes), 3)
    return [group_graph(g) for g in partition(graph)]


def seeded_array(shape, dtype=np.float32, seed=0):
    """Standard normal floats, fair-coin bools or full-range ints of ``dtype``
    from ``seed`` (the template tests' inputs)."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def one_group(fn, *args, autoscheduler=None):
    """(traced fn, its one fusion group at these arguments)."""
    f = halojit.trace(fn, autoscheduler=autoscheduler)
    (g,) = f.lower(*args).groups
    return f, g
