"""Compile-only: reductions over the last axis, axis 0 and the whole array,
movement ops, matmul/einsum and every benchmark workload (small size) become
GPU-scheduled CUDA kernels and plans; row and full reductions take the
GpuReduce template, softmax is one kernel launch. Runs without a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

from cuda_helpers import TARGET, check_lowered, entries, lower
import halojit
from halojit.bench.workloads import workloads

REDUCTIONS = ["sum", "prod", "max", "min", "nanmax", "mean", "var", "std", "any", "all", "argmax",
              "argmin"]
AXES = {"last": -1, "axis0": 0, "full": None}


def _data(dtype, shape=(6, 40), seed=0):
    a = np.random.default_rng(seed).standard_normal(shape) * 4
    return a > 0 if dtype == "bool" else a.astype(dtype)


def _reduce(name, axis, keepdims=False):
    if name in ("argmax", "argmin"):  # numpy's argmax has keepdims only with an axis
        return lambda x: getattr(np, name)(x, axis=axis)
    return lambda x: getattr(np, name)(x, axis=axis, keepdims=keepdims)


def _gpu_reduce(lo, what):
    for g in lo.groups:
        assert g.scheduler.startswith("GpuReduce"), f"{what}: {g!r}, want the GpuReduce template"


@pytest.mark.parametrize("axis", list(AXES), ids=list(AXES))
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_compiles_for_cuda(name, axis):
    dtype = "bool" if name in ("any", "all") else "float32"
    lo = lower(_reduce(name, AXES[axis]), _data(dtype))
    check_lowered(lo, f"{name}(axis={AXES[axis]})")
    if axis != "axis0":  # last-axis and full reductions: the hand template
        _gpu_reduce(lo, f"{name}(axis={AXES[axis]})")


# other dtypes and keepdims, sampled (each case is a kernel)
REDUCTION_SAMPLES = [
    ("sum", "int32", -1, False), ("sum", "uint8", None, False), ("max", "int32", 0, True),
    ("mean", "float64", -1, True), ("prod", "float64", None, False),
    ("min", "float16", -1, False), ("argmax", "float64", -1, False),
    ("argmin", "int32", None, False), ("var", "float64", 0, False),
    ("any", "float32", -1, True), ("all", "int32", None, False), ("std", "float32", -1, True),
    ("nanmin", "float64", None, True),
]


@pytest.mark.parametrize("name,dtype,axis,keepdims", REDUCTION_SAMPLES,
                         ids=[f"{n}-{d}-{a}{'-keep' if k else ''}" for n, d, a, k in REDUCTION_SAMPLES])
def test_reduction_dtypes_compile_for_cuda(name, dtype, axis, keepdims):
    check_lowered(lower(_reduce(name, axis, keepdims), _data(dtype)), f"{name}[{dtype}]")


def test_reduction_of_3d_array_compiles_for_cuda():
    """A 3-D row reduction and a middle-axis one (outside GpuReduce's rows)."""
    x = _data("float32", (3, 5, 33))
    check_lowered(lower(lambda x: x.sum(axis=-1) + x.max(axis=1)[:, :1], x), "3-D reductions")


MOVEMENT = {
    "transpose": lambda x: np.transpose(x) * 2,
    "T_3d": lambda x: x.reshape(2, 3, 40).transpose(2, 0, 1) + 1,
    "slice_steps": lambda x: x[::2, 1::3] * 2,
    "negative_steps": lambda x: x[::-1, ::-2] + 1,
    "reshape": lambda x: x.reshape(12, 20) + 1,
    "reshape_alone": lambda x: x.reshape(20, 12),
    "concatenate_axis0": lambda x: np.concatenate([x, x * 2], axis=0),
    "concatenate_axis1": lambda x: np.concatenate([x, -x], axis=1),
    "stack": lambda x: np.stack([x, x + 1]),
    "broadcast": lambda x: x[:, :1] + x[:1, :],
    "broadcast_to": lambda x: np.broadcast_to(x[0], (3, 40)) * 2,
    "flip": lambda x: np.flip(x) + 1,
    "expand_squeeze": lambda x: np.squeeze(np.expand_dims(x, 0), 0) * x,
    "pad": lambda x: np.pad(x, 1) + 1,
    "int_index": lambda x: x[2] + x[-1, ::-1],
    "gather_rows": lambda x: x[[0, 2, 5, -1]] * 2,
    "gather_pairs": lambda x: x[np.arange(6), [3, 1, 0, 39, 2, 2]] + 1,
    "take_wrap": lambda x: np.take(x, [41, -3], axis=1, mode="wrap"),
    "take_along": lambda x: np.take_along_axis(x, np.argmax(x, 1, keepdims=True), 1),
    "repeat": lambda x: np.repeat(x, [1, 0, 2, 1, 1, 3], axis=0),
}


@pytest.mark.parametrize("name", list(MOVEMENT))
def test_movement_compiles_for_cuda(name):
    check_lowered(lower(MOVEMENT[name], _data("float32")), name)


LINALG = {
    "matmul": (lambda a, b: a @ b, [(24, 40), (40, 16)]),
    "matmul_batched": (lambda a, b: np.matmul(a, b), [(3, 8, 40), (3, 40, 16)]),
    "matvec": (lambda a, b: a @ b, [(24, 40), (40,)]),
    "dot": (lambda a, b: np.dot(a, b.T), [(24, 40), (16, 40)]),
    "einsum_ij_jk": (lambda a, b: np.einsum("ij,jk->ik", a, b), [(24, 40), (40, 16)]),
    "einsum_bij_bjk": (lambda a, b: np.einsum("bij,bjk->bik", a, b), [(3, 8, 40), (3, 40, 16)]),
    "matmul_bias_act": (lambda a, b: np.maximum(a @ b + 1, 0), [(24, 40), (40, 16)]),
}


@pytest.mark.parametrize("name", list(LINALG))
def test_matmul_einsum_compile_for_cuda(name):
    fn, shapes = LINALG[name]
    args = [_data("float32", s, seed=i) for i, s in enumerate(shapes)]
    lo = lower(fn, *args)
    check_lowered(lo, name)
    if name == "matvec":  # a product and a row sum: the GpuReduce template
        _gpu_reduce(lo, name)
    else:
        assert any("matmul" in g.ops for g in lo.groups), lo


WORKLOADS = {w.name: w for w in workloads("small")}


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_workload_compiles_for_cuda(name):
    w = WORKLOADS[name]
    f = halojit.trace(w.fn, target=TARGET)
    lo = f.lower(*w.inputs())
    check_lowered(lo, name)
    # the plan the runtime would run: one step per kernel, built without a device
    (spec,) = f._cache.values()
    assert spec.executor.plan.n_steps == lo.kernel_count, (spec.executor.plan.n_steps, lo)


@pytest.mark.parametrize("name", ["softmax", "layernorm", "row_sum", "full_sum"])
def test_row_and_full_reductions_take_gpu_reduce(name):
    w = WORKLOADS[name]
    lo = lower(w.fn, *w.inputs())
    assert lo.kernel_count == 1, lo
    _gpu_reduce(lo, name)


def test_softmax_is_one_kernel_launch():
    """max, exp, sum and divide of a row in one block: one .entry, no
    round trip through global memory between the two row reductions."""
    w = WORKLOADS["softmax"]
    (g,) = lower(w.fn, *w.inputs()).groups
    assert entries(g.ptx) == 1, f"softmax launches {entries(g.ptx)} kernels:\n{g.schedule}"
    assert g.scheduler == "GpuReduce;rows_per_block=8;threads_x=32", g.scheduler


SORTS = {
    "sort rows": lambda x: np.sort(x, axis=1),
    "sort axis0": lambda x: np.sort(x, axis=0),
    "median": lambda x: np.median(x, axis=1),
    "percentile": lambda x: np.percentile(x, [10, 90], axis=0),
}


@pytest.mark.parametrize("name", list(SORTS))
def test_sorts_compile_for_cuda(name):
    """Sorting networks (no GPU template yet: Anderson2021 schedules them)."""
    check_lowered(lower(SORTS[name], _data("float32")), name)


def test_elementwise_groups_take_gpu_elementwise():
    """Elementwise chains (broadcasts, 1-D, 3-D with fused leading axes, two
    outputs, a multiply-used intermediate) take GpuElementwise: threads
    along the last axis. A stencil chain (a slice of a computed value) stays
    with Anderson2021."""
    x3 = _data("float32", (5, 7, 33))
    cases = {
        "bias relu": (lambda x, b: np.maximum(x + b, 0), WORKLOADS["bias_relu"].inputs()),
        "1-D": (lambda x: np.exp(x) * 2, (np.ones(1000, np.float32),)),
        "3-D": (lambda x: np.tanh(x) + x, (x3,)),
        "two outputs": (lambda x: (x * 2, np.sqrt(np.abs(x))), (x3,)),
        "reused": (lambda x: (lambda t: t * t + t)(np.sin(x)), (x3,)),
    }
    for what, (fn, args) in cases.items():
        lo = lower(fn, *args)
        check_lowered(lo, what)
        for g in lo.groups:
            assert g.scheduler == "GpuElementwise;threads=256", f"{what}: {g.scheduler}"
            assert "gpu_tile" in g.schedule, g.schedule
    (g,) = lower(WORKLOADS["blur3x3"].fn, *WORKLOADS["blur3x3"].inputs()).groups
    assert g.scheduler.startswith("Anderson2021"), g.scheduler


def test_full_reduction_combines_chunks_per_block():
    """A full sum of (1000, 1030): 256-lane partials per chunk of rows,
    summed per chunk in shared memory (a block each), then the chunks: no
    thread loops over all partials."""
    lo = lower(lambda x: x.sum(), _data("float32", (1000, 1030)))
    check_lowered(lo, "full sum")
    (g,) = lo.groups
    assert "gpu_blocks(chunk)" in g.schedule and ".gpu_threads(lane)" in g.schedule, g.schedule
    assert entries(g.ptx) == 3, g.schedule  # the chunk sums' init and update, then the total
    # two full reductions of a large array stay in groups of their own (fusion's
    # full_reduction), each a GpuReduce kernel, the add joining the second
    lo = lower(lambda x: x.sum() + np.nanmax(x), _data("float32", (1000, 1030)))
    check_lowered(lo, "sum + nanmax")
    assert len(lo.groups) == 2, lo.groups
    for g in lo.groups:
        assert g.scheduler.startswith("GpuReduce") and "gpu_threads(lane)" in g.schedule, \
            g.schedule


def test_long_medians_select_on_the_host():
    """A median of long rows is a radix selection (schedules/select.py):
    serial counting passes, which run on the host with the CPU template,
    as a scatter does; the NaN check beside it is a GPU kernel."""
    x = _data("float32", (3, 5000))
    lo = lower(lambda x: np.median(x, axis=1), x)
    scheds = {g.ops[0]: g.scheduler.split(";")[0] for g in lo.groups}
    assert scheds.get("select") == "Select", scheds
    others = [g for g in lo.groups if "select" not in g.ops]
    assert others and all(entries(g.ptx) >= 1 for g in others), scheds
