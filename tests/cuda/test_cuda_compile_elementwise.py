"""Compile-only: every elementwise op of the registry becomes a CUDA kernel
(GPU-scheduled PTX for the requested sm_NN that ptxas accepts), for the
dtypes numpy has a loop for. Runs without a GPU.

One traced function per (arity, dtype) chains every op into one output, so
fusion keeps them in one kernel (~0.3 s each instead of ~0.2 s per op); when
a batch fails, each op is lowered alone and the failure names the culprits.
"""

from __future__ import annotations

import numpy as np
import pytest

from cuda_helpers import check_lowered, lower
from halojit.graph.ops.elementwise import BINARY, UFUNCS, UNARY

DTYPES = ["float32", "float64", "float16", "int32", "uint8", "bool"]
SHAPE = (4, 96)


def numpy_accepts(name, dtypes) -> bool:
    """Whether numpy has a loop of ``name`` for ``dtypes`` (as tests/ops)."""
    try:
        UFUNCS[name].resolve_dtypes(tuple(np.dtype(d) for d in dtypes) + (None,))
        return True
    except (TypeError, np.exceptions.DTypePromotionError):
        return False


def chained(parts):
    """fn(*xs) -> the float64 sum of every ``part(*xs)``: one output that
    depends on each part, so nothing is dead and fusion makes one group."""
    def fn(*xs):
        acc = None
        for part in parts:
            r = part(*xs).astype(np.float64)
            acc = r if acc is None else acc + r
        return acc
    return fn


def inputs(dtype, n, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(SHAPE) * 10).astype(dtype) for _ in range(n)]


def check_batch(named_parts, args, what):
    """Lower the chain of every part; on failure lower each part alone and
    fail naming those that fail alone (or the batch, when none does)."""
    try:
        lo = lower(chained([p for _, p in named_parts]), *args)
        check_lowered(lo, what)
        return lo
    except Exception as batch_error:  # noqa: BLE001 - any failure is diagnosed per op
        culprits = []
        for name, part in named_parts:
            try:
                check_lowered(lower(part, *args), f"{what} {name}")
            except Exception as e:  # noqa: BLE001
                culprits.append(f"{name}: {type(e).__name__}: {str(e)[:400]}")
        if culprits:
            pytest.fail(f"{what}: {len(culprits)} op(s) fail to compile for CUDA:\n"
                        + "\n".join(culprits), pytrace=False)
        raise AssertionError(f"{what}: every op compiles alone, their fused chain does not: "
                             f"{type(batch_error).__name__}: {batch_error}") from batch_error


def assert_in_kernels(parts, lo):
    """Each op reached a CUDA kernel (none was folded into another or dropped)."""
    ops = {op for g in lo.groups for op in g.ops}
    missing = [name for name, _ in parts if name not in ops]
    assert not missing, f"ops in no CUDA kernel: {missing}\n{lo.graph}"


def ufunc_parts(table, arity, dtype):
    return [(name, (lambda u: lambda *xs: u(*xs))(UFUNCS[name])) for name in table
            if numpy_accepts(name, [dtype] * arity)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_ops_compile_for_cuda(dtype):
    parts = ufunc_parts(UNARY, 1, dtype)
    lo = check_batch(parts, inputs(dtype, 1), f"unary ops on {dtype}")
    assert_in_kernels(parts, lo)


@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_ops_compile_for_cuda(dtype):
    parts = ufunc_parts(BINARY, 2, dtype)
    lo = check_batch(parts, inputs(dtype, 2), f"binary ops on {dtype}")
    assert_in_kernels(parts, lo)


def test_every_registry_op_is_covered():
    """The batches above cover each op of the registry for at least one dtype."""
    covered = {n for d in DTYPES for n, _ in ufunc_parts(UNARY, 1, d) + ufunc_parts(BINARY, 2, d)}
    assert covered == set(UNARY) | set(BINARY)


@pytest.mark.parametrize("dtype", DTYPES)
def test_astype_where_clip_compile_for_cuda(dtype):
    """Casts from ``dtype`` to every other dtype, where and clip."""
    parts = [(f"astype({to})", (lambda t: lambda x, y: x.astype(t))(to)) for to in DTYPES]
    parts.append(("where", lambda x, y: np.where(x > y, x, y)))
    if dtype != "bool":
        parts.append(("clip", lambda x, y: np.clip(x, 0, 5)))
    check_batch(parts, inputs(dtype, 2), f"astype/where/clip on {dtype}")
