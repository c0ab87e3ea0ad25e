"""Plans over hand-built Halide kernels: results, views, 0-d, dtypes, timings."""

from __future__ import annotations

import numpy as np
import pytest

from halojit import _rt

AXPB_SHAPE = (48, 64)  # the shape the axpb fixture was autoscheduled for

F32 = "float32"


def axpb_plan(kernel, shape=AXPB_SHAPE):
    return _rt.Plan([kernel], [(0, [0, 1, 2])], [(shape, F32)] * 3, 2, 1)


def rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_module_info():
    assert _rt.version() == "0.1.0"
    assert _rt.halide_runtime_header().endswith("HalideRuntime.h")


def test_kernel_metadata(axpb, mixed_kernel):
    assert axpb.name == "t_axpb"
    args = [(a[0].split("$")[0], *a[1:]) for a in axpb.arguments]
    assert args == [("a", 1, 2, 2, 32), ("b", 1, 2, 2, 32), ("out", 2, 2, 2, 32)]
    # argv order: inputs in declaration order, then outputs in pipeline order.
    # Halide names output buffers after their Func plus a "$N" suffix.
    assert [a[0].split("$")[0] for a in mixed_kernel.arguments] == ["mask", "h", "i", "o1", "o2"]
    assert [a[3:] for a in mixed_kernel.arguments] == [(1, 8), (2, 16), (0, 64), (2, 16), (0, 64)]
    assert "no_runtime" in axpb.target


def test_autoscheduled_kernel_matches_numpy(axpb):
    a, b = rand(AXPB_SHAPE, seed=1), rand(AXPB_SHAPE, seed=2)
    out = np.empty(AXPB_SHAPE, np.float32)
    axpb_plan(axpb).run([a, b], [out])
    np.testing.assert_allclose(out, a * 2 + b, rtol=1e-6)


def test_two_step_plan_with_intermediate(exp_kernel, axpb):
    # t = exp(a) (intermediate 3); out = t * 2 + b
    plan = _rt.Plan(
        [exp_kernel, axpb],
        [(0, [0, 3]), (1, [3, 1, 2])],
        [(AXPB_SHAPE, F32)] * 4,
        2,
        1,
    )
    assert plan.n_steps == 2 and plan.workspace_bytes >= 48 * 64 * 4
    a, b = rand(AXPB_SHAPE, seed=3), rand(AXPB_SHAPE, seed=4)
    for _ in range(3):  # the workspace is reused across calls
        out = np.empty(AXPB_SHAPE, np.float32)
        plan.run([a, b], [out], profile=True)
        np.testing.assert_allclose(out, np.exp(a) * 2 + b, rtol=1e-5, atol=1e-5)
    timings = plan.last_timings()
    assert len(timings) == 2 and all(t >= 0 for t in timings)


def test_buffer_spec_forms(exp_kernel):
    # dtype as a name, a numpy type or a dtype; shape entries may be numpy ints.
    n = np.int64(4)
    for dt in ("float32", np.float32, np.dtype("<f4")):
        plan = _rt.Plan([exp_kernel], [(0, [0, 2]), (0, [2, 1])], [None, None, ((n, 3), dt)], 1, 1)
        out = np.empty((4, 3), np.float32)
        plan.run([np.zeros((4, 3), np.float32)], [out])
        np.testing.assert_allclose(out, np.e, rtol=1e-6)
    with pytest.raises(ValueError, match="expected float32 with 2 dims, buffer 2 is bfloat16 with 2 dims"):
        _rt.Plan([exp_kernel], [(0, [0, 2])], [None, None, ((4, 3), "bfloat16")], 1, 1)


def test_unknown_io_specs_are_not_checked(axpb):
    plan = _rt.Plan([axpb], [(0, [0, 1, 2])], [None, None, None], 2, 1)
    a, b = rand(AXPB_SHAPE), rand(AXPB_SHAPE, seed=5)
    out = np.empty(AXPB_SHAPE, np.float32)
    plan.run([a, b], [out])
    np.testing.assert_allclose(out, a * 2 + b, rtol=1e-6)


def test_row_strided_and_negative_stride_views_zero_copy(axpb):
    big = rand((2 * AXPB_SHAPE[0], AXPB_SHAPE[1]), seed=6)
    a = big[::2]  # row stride 128 elements
    b = rand(AXPB_SHAPE, seed=7)[::-1]  # negative row stride
    assert not a.flags.c_contiguous and b.strides[0] < 0
    out_big = np.zeros((AXPB_SHAPE[0], 2 * AXPB_SHAPE[1]), np.float32)
    out = out_big[:, ::1][:, : AXPB_SHAPE[1]]  # strided output rows
    axpb_plan(axpb).run([a, b], [out])
    np.testing.assert_allclose(out, a * 2 + b, rtol=1e-6)
    assert np.all(out_big[:, AXPB_SHAPE[1] :] == 0)


def test_broadcast_view_with_zero_stride(axpb):
    a = rand(AXPB_SHAPE, seed=8)
    b = np.broadcast_to(rand((1, AXPB_SHAPE[1]), seed=9), AXPB_SHAPE)
    assert b.strides[0] == 0
    out = np.empty(AXPB_SHAPE, np.float32)
    axpb_plan(axpb).run([a, b], [out])
    np.testing.assert_allclose(out, a * 2 + b, rtol=1e-6)


def test_transposed_view_is_refused(axpb):
    a = rand(AXPB_SHAPE[::-1], seed=10).T  # last axis stride 48 elements
    out = np.empty(AXPB_SHAPE, np.float32)
    with pytest.raises(ValueError, match="plan input 0: the last axis has a stride of 48 elements"):
        axpb_plan(axpb).run([a, rand(AXPB_SHAPE)], [out])
    # Unit-extent last axis: any stride is fine (Python need not copy).
    col = np.zeros((5, 3), np.float32)[:, :1]
    assert col.strides[1] == 4 and col.shape[1] == 1


def test_contiguous_copies_a_strided_last_axis(axpb):
    a = rand(AXPB_SHAPE[::-1], seed=10).T  # last axis stride 48 elements
    b = np.broadcast_to(rand(AXPB_SHAPE[1:], seed=11), AXPB_SHAPE)
    out = np.empty(AXPB_SHAPE, np.float32)
    axpb_plan(axpb).run((a, b[::-1, ::-1]), [out], contiguous=True)
    np.testing.assert_allclose(out, a * 2 + b[::-1, ::-1], rtol=1e-6)
    with pytest.raises(ValueError, match="plan output 0: the last axis has a stride"):
        axpb_plan(axpb).run((a, b), [np.empty(AXPB_SHAPE[::-1], np.float32).T], contiguous=True)


def test_zero_dim_buffers(scalar_kernel):
    plan = _rt.Plan([scalar_kernel], [(0, [0, 1])], [((), "float64")] * 2, 1, 1)
    a = np.array(2.5)
    out = np.empty(())
    plan.run([a], [out])
    assert out == 2.5 * 3 + 1


def test_bool_float16_int64(mixed_kernel):
    n = 37
    mask = np.random.default_rng(0).random(n) > 0.5
    h = rand(n, np.float16, seed=11)
    i = np.arange(n, dtype=np.int64) * (2**40)
    o1, o2 = np.empty(n, np.float16), np.empty(n, np.int64)
    plan = _rt.Plan(
        [mixed_kernel],
        [(0, [0, 1, 2, 3, 4])],
        [((n,), "bool"), ((n,), "float16"), ((n,), "int64"), ((n,), "float16"), ((n,), "int64")],
        3,
        2,
    )
    plan.run([mask, h, i], [o1, o2])  # numpy bool accepted for a uint8 kernel argument
    np.testing.assert_array_equal(o1, np.where(mask, h * np.float16(2), h))
    np.testing.assert_array_equal(o2, np.where(mask, i * 3, i - 1))
    plan.run([mask.view(np.uint8), h, i], [o1, o2])  # and its uint8 view
    np.testing.assert_array_equal(o2, np.where(mask, i * 3, i - 1))


def test_halide_bool_buffers(not_kernel):
    a = np.array([True, False, False, True, True])
    out = np.empty(5, bool)
    plan = _rt.Plan([not_kernel], [(0, [0, 1])], [((5,), "bool")] * 2, 1, 1)
    plan.run([a], [out])
    np.testing.assert_array_equal(out, ~a)
    out_u8 = np.full(5, 7, np.uint8)
    plan.run([a.view(np.uint8)], [out_u8])
    np.testing.assert_array_equal(out_u8, (~a).astype(np.uint8))


def test_intermediate_bool_buffer(not_kernel):
    # not(not(a)) through a plan-owned bool intermediate.
    plan = _rt.Plan([not_kernel], [(0, [0, 2]), (0, [2, 1])], [((4,), "bool")] * 3, 1, 1)
    a = np.array([True, False, True, False])
    out = np.zeros(4, bool)
    plan.run([a], [out])
    np.testing.assert_array_equal(out, a)


def test_empty_and_unit_extent_arrays(shift_kernel, exp_kernel):
    plan = _rt.Plan([shift_kernel], [(0, [0, 1])], [None, None], 1, 1)
    out = np.empty(0, np.float32)  # numpy 2 gives it stride 0
    plan.run([np.ones(1, np.float32)], [out])
    with pytest.raises(ValueError, match="the last axis has a stride of 0 elements"):
        plan.run([np.broadcast_to(np.float32(3), (2,))], [np.empty(1, np.float32)])
    # A broadcast last axis of extent 1 has stride 0 in numpy: accepted.
    col = np.broadcast_to(np.arange(5, dtype=np.float32)[:, None], (5, 1))
    assert col.strides == (4, 0)
    out = np.empty((5, 1), np.float32)
    _rt.Plan([exp_kernel], [(0, [0, 1])], [None, None], 1, 1).run([col], [out])
    np.testing.assert_allclose(out, np.exp(col), rtol=1e-6)
    a = np.arange(10, dtype=np.float32)
    out = np.empty(9, np.float32)
    plan.run([a], [out])
    np.testing.assert_array_equal(out, a[1:])


def test_set_num_threads(axpb):
    old = _rt.set_num_threads(1)
    try:
        a, b = rand(AXPB_SHAPE), rand(AXPB_SHAPE, seed=12)
        out = np.empty(AXPB_SHAPE, np.float32)
        axpb_plan(axpb).run([a, b], [out])
        np.testing.assert_allclose(out, a * 2 + b, rtol=1e-6)
        assert _rt.set_num_threads(old) == 1
    finally:
        _rt.set_num_threads(old)
