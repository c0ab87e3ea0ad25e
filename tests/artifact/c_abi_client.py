"""A C ABI client in a process of its own (no halojit._rt loaded): drives
libhalojit.so through ctypes as a C program would. Run by test_cpp.py:

    python c_abi_client.py LIBHALOJIT ARTIFACT
"""

import ctypes as C
import sys

import numpy as np

HJ_FLOAT32 = 10


class HjArray(C.Structure):
    _fields_ = [("data", C.c_void_p), ("dtype", C.c_int), ("ndim", C.c_int32),
                ("shape", C.POINTER(C.c_int64)), ("strides", C.POINTER(C.c_int64))]


def array(a: np.ndarray, strides=True) -> HjArray:
    shape = (C.c_int64 * a.ndim)(*a.shape)
    st = (C.c_int64 * a.ndim)(*a.strides) if strides else None
    arr = HjArray(a.ctypes.data, HJ_FLOAT32, a.ndim, shape, st)
    arr._keep = (shape, st, a)
    return arr


def main(lib_path, artifact):
    lib = C.CDLL(lib_path)
    lib.hj_last_error.restype = C.c_char_p
    lib.hj_dtype_name.restype = C.c_char_p
    lib.hj_version.restype = C.c_char_p
    lib.hj_artifact_function.restype = C.c_char_p
    lib.hj_artifact_level.restype = C.c_char_p
    lib.hj_artifact_input_name.restype = C.c_char_p
    lib.hj_artifact_num_inputs.restype = C.c_size_t
    lib.hj_artifact_find_specialization.restype = C.c_int64
    assert lib.hj_abi_version() == 1
    assert lib.hj_dtype_name(HJ_FLOAT32) == b"float32" and lib.hj_dtype_name(77) == b"?"

    handle = C.c_void_p()
    assert lib.hj_artifact_open(None, None, C.byref(handle)) == 1  # HJ_ERROR_VALUE
    assert b"must not be NULL" in lib.hj_last_error()
    assert lib.hj_artifact_open(b"/nonexistent.hjm", None, C.byref(handle)) == 4  # HJ_ERROR_ARTIFACT
    assert b"cannot be opened" in lib.hj_last_error(), lib.hj_last_error()
    assert not handle.value

    assert lib.hj_artifact_open(artifact.encode(), None, C.byref(handle)) == 0, lib.hj_last_error()
    assert lib.hj_last_error() == b""
    assert lib.hj_artifact_function(handle) == b"softmax"
    assert lib.hj_artifact_num_inputs(handle) == 1
    assert lib.hj_artifact_input_name(handle, 0) == b"x"
    assert lib.hj_artifact_input_name(handle, 5) is None

    x = np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)
    want = np.exp(x - x.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    y = np.zeros_like(x)
    xs, ys = array(x, strides=False), array(y)
    assert lib.hj_artifact_find_specialization(handle, C.byref(xs), 1) == 0
    assert lib.hj_artifact_run(handle, C.byref(xs), 1, C.byref(ys), 1) == 0, lib.hj_last_error()
    assert np.allclose(y, want, rtol=1e-5, atol=1e-7)

    # Runtime-allocated output.
    out = C.c_void_p()
    assert lib.hj_artifact_run_alloc(handle, C.byref(xs), 1, C.byref(out), 1) == 0, lib.hj_last_error()
    lib.hj_tensor_array.restype = HjArray
    got = lib.hj_tensor_array(out)
    assert got.ndim == 2 and got.shape[0] == 8 and got.shape[1] == 64
    vals = np.ctypeslib.as_array(C.cast(got.data, C.POINTER(C.c_float)), shape=(8, 64)).copy()
    lib.hj_tensor_free(out)
    assert np.allclose(vals, want, rtol=1e-5, atol=1e-7)

    # Errors name what was expected and what was given; nothing is written.
    y[:] = 7
    assert lib.hj_artifact_run(handle, C.byref(xs), 0, C.byref(ys), 1) == 1
    assert b"expected 1 inputs (x), got 0" in lib.hj_last_error(), lib.hj_last_error()
    small = array(np.zeros((4, 64), np.float32))
    assert lib.hj_artifact_run(handle, C.byref(small), 1, C.byref(ys), 1) == 1
    assert b"no specialization" in lib.hj_last_error() and b"float32(4, 64)" in lib.hj_last_error()
    bad_out = array(np.zeros((8, 32), np.float32))
    assert lib.hj_artifact_run(handle, C.byref(xs), 1, C.byref(bad_out), 1) == 1
    assert b"output output0 must be" in lib.hj_last_error(), lib.hj_last_error()
    assert (y == 7).all()

    lib.hj_artifact_close(handle)
    lib.hj_artifact_close(None)
    print("c abi ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
