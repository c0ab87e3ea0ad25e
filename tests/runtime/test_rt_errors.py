"""Bad plans and bad arguments fail with clear errors before any kernel runs;
kernel failures carry Halide's message; nothing crashes."""

from __future__ import annotations

import numpy as np
import pytest

from halojit import _rt

SHAPE = (48, 64)  # the shape the axpb fixture was autoscheduled for


def test_dtype_mismatch_before_any_kernel_runs(exp_kernel, axpb):
    # step 0 writes output 0 (exp), step 1 reads input 1, which has the wrong dtype.
    plan = _rt.Plan([exp_kernel, axpb], [(0, [0, 2]), (1, [0, 1, 3])], [None] * 4, 2, 2)
    a = np.ones(SHAPE, np.float32)
    out0, out1 = np.full(SHAPE, -7, np.float32), np.full(SHAPE, -7, np.float32)
    with pytest.raises(ValueError, match=r"kernel 1 argument 'b': expected float32 with 2 dims, got int64 with 2 dims"):
        plan.run([a, np.ones(SHAPE, np.int64)], [out0, out1])
    with pytest.raises(ValueError, match=r"kernel 1 argument 'b': expected float32 with 2 dims, got float32 with 3 dims"):
        plan.run([a, np.ones((1, *SHAPE), np.float32)], [out0, out1])
    assert np.all(out0 == -7) and np.all(out1 == -7)


def test_spec_shape_mismatch(axpb):
    plan = _rt.Plan([axpb], [(0, [0, 1, 2])], [(SHAPE, "float32")] * 3, 2, 1)
    a = np.ones((40, 64), np.float32)
    with pytest.raises(ValueError, match=r"plan input 0: expected shape \(48, 64\) float32, got shape \(40, 64\) float32"):
        plan.run([a, np.ones(SHAPE, np.float32)], [np.empty(SHAPE, np.float32)])


def test_bad_run_arguments(axpb):
    plan = _rt.Plan([axpb], [(0, [0, 1, 2])], [None] * 3, 2, 1)
    a = np.ones(SHAPE, np.float32)
    with pytest.raises(ValueError, match="plan takes 2 inputs and 1 outputs, got 1 and 1"):
        plan.run([a], [a.copy()])
    with pytest.raises(TypeError, match="plan input 1: expected a numpy array, got list"):
        plan.run([a, [1.0]], [a.copy()])
    ro = np.empty(SHAPE, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="plan output 0 is read-only"):
        plan.run([a, a], [ro])
    with pytest.raises(ValueError, match="big-endian"):
        plan.run([a, a.astype(">f4")], [a.copy()])
    with pytest.raises(ValueError, match="complex64 is not supported"):
        plan.run([a, a.astype(np.complex64)], [a.copy()])


def test_bad_plans(axpb, exp_kernel, shift_kernel):
    with pytest.raises(ValueError, match="takes 3 buffers, the step binds 2"):
        _rt.Plan([axpb], [(0, [0, 1])], [None] * 3, 2, 1)
    with pytest.raises(ValueError, match="bound to buffer 5 of 3"):
        _rt.Plan([axpb], [(0, [0, 1, 5])], [None] * 3, 2, 1)
    with pytest.raises(ValueError, match="names kernel 1 of 1"):
        _rt.Plan([axpb], [(1, [0, 1, 2])], [None] * 3, 2, 1)
    with pytest.raises(ValueError, match="intermediate buffer 2 needs a shape and dtype"):
        _rt.Plan([exp_kernel], [(0, [0, 2]), (0, [2, 1])], [None] * 3, 1, 1)
    with pytest.raises(ValueError, match="is an output bound to plan input 0"):
        _rt.Plan([exp_kernel], [(0, [0, 0])], [None] * 2, 1, 1)
    with pytest.raises(ValueError, match="expected float32 with 1 dim, buffer 2 is int32 with 1 dim"):
        _rt.Plan([shift_kernel], [(0, [0, 2]), (0, [2, 1])], [None, None, ((4,), "int32")], 1, 1)
    with pytest.raises(ValueError, match="unknown dtype 'complex64'"):
        _rt.Plan([shift_kernel], [(0, [0, 2])], [None, None, ((4,), "complex64")], 1, 1)
    with pytest.raises(ValueError, match="do not fit in 2 buffers"):
        _rt.Plan([shift_kernel], [], [None, None], 2, 1)


def test_halide_assertion_raises_runtime_error(shift_kernel):
    plan = _rt.Plan([shift_kernel], [(0, [0, 1])], [None, None], 1, 1)
    a = np.arange(10, dtype=np.float32)
    out = np.empty(10, np.float32)  # needs a[10]: one past the end
    with pytest.raises(RuntimeError, match=r"kernel 't_shift' \(step 0\) failed with Halide error -?\d+: .*Input buffer a is accessed at 10"):
        plan.run([a], [out])
    # The process is fine and the next call works.
    out = np.empty(9, np.float32)
    plan.run([a], [out])
    np.testing.assert_array_equal(out, a[1:])


def test_kernel_load_errors(tmp_path, axpb):
    with pytest.raises(RuntimeError, match="does not exist"):
        _rt.Kernel(str(tmp_path / "missing.so"), "f")
    garbage = tmp_path / "garbage.so"
    garbage.write_bytes(b"\x7fELF" + b"\x00" * 100)
    with pytest.raises(RuntimeError, match="cannot load kernel"):
        _rt.Kernel(garbage, "f")
    with pytest.raises(RuntimeError, match="no symbols nope_argv/nope_metadata"):
        _rt.Kernel(axpb.path, "nope")


def test_load_runtime_errors(tmp_path):
    with pytest.raises(RuntimeError, match="does not exist"):
        _rt.load_runtime(str(tmp_path / "nothing.so"))
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"not an elf")
    with pytest.raises(RuntimeError, match="cannot load Halide runtime"):
        _rt.load_runtime(bad)


def test_error_raised_inside_parallel_loop(target, kdir):
    # hl.require fails inside a parallel loop, i.e. on a Halide worker thread:
    # the message still reaches the calling thread.
    import halide as hl
    from halojit.generators.compile import compile_pipeline, load_kernel

    a = hl.ImageParam(hl.Float(32), 2, "a")
    x, y = hl.Var("x"), hl.Var("y")
    out = hl.Func("out")
    out[x, y] = hl.require(a[x, y] >= 0, a[x, y], hl.Expr(4242), y)  # strings do not bind in v21
    out.parallel(y)
    compiled = compile_pipeline(hl.Pipeline(out), [a], "t_require", target, kdir)
    plan = _rt.Plan([load_kernel(compiled.so_path, "t_require")], [(0, [0, 1])], [None, None], 1, 1)
    arr = np.ones((16, 8), np.float32)
    out_arr = np.empty_like(arr)
    plan.run([arr], [out_arr])
    arr[11, 3] = -1
    with pytest.raises(RuntimeError, match=r"Requirement Failed: .*4242 ?11"):
        plan.run([arr], [out_arr])
