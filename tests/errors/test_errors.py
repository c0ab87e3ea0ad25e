"""Every documented error: its class and its message (what was expected, what
was given, the user's file:line, what to do)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import halojit
from halojit import DTypeError, HalojitError, ShapeError, TraceError, UnsupportedError
from helpers import jit

X = np.arange(12, dtype=np.float32).reshape(3, 4)
HERE = r"test_errors\.py:\d+"


def line_of(fn, marker):
    """The line number in this file of the line of ``fn`` containing ``marker``."""
    import inspect
    lines, start = inspect.getsourcelines(fn)
    for k, line in enumerate(lines):
        if marker in line:
            return start + k
    raise AssertionError(marker)


def test_the_error_family():
    assert issubclass(TraceError, HalojitError)
    assert issubclass(ShapeError, HalojitError) and issubclass(ShapeError, ValueError)
    assert issubclass(DTypeError, HalojitError) and issubclass(DTypeError, TypeError)
    assert issubclass(UnsupportedError, HalojitError)
    assert issubclass(UnsupportedError, NotImplementedError)
    assert issubclass(halojit.CompileError, RuntimeError)
    assert issubclass(halojit.ArtifactError, ValueError)
    assert issubclass(halojit.TraceWarning, UserWarning)
    assert halojit.errors.TraceError is TraceError


# -- value-dependent Python (symbolic=True) ---------------------------------------------------
def branch_if(x):
    if x.sum() > 0:  # MARK
        return x
    return -x


def branch_bool(x):
    return x * 2 if bool(x[0, 0]) else x  # MARK


def branch_int(x):
    return x[: int(x[0, 0])]  # MARK


def branch_float(x):
    return x * float(x.max())  # MARK


def branch_while(x):
    while (x > 100).any():  # MARK
        x = x / 2
    return x


def branch_item(x):
    return x + x.sum().item()  # MARK


def branch_index(x):
    return x[: x.argmax()]  # MARK (a slice bound: the shape would depend on the value)


@pytest.mark.parametrize("fn,what", [
    (branch_if, "a Python branch or bool()"), (branch_bool, "a Python branch or bool()"),
    (branch_int, "int()"), (branch_float, "float()"), (branch_while, "a Python branch or bool()"),
    (branch_item, ".item()"), (branch_index, "using a traced array as a Python index"),
])
def test_value_dependent_python_is_a_trace_error(fn, what, opt_level):
    f = jit(fn, opt_level)
    line = line_of(fn, "# MARK")
    with pytest.raises(TraceError) as info:
        f(X)
    msg = str(info.value)
    assert msg.startswith(f"{what} needs the value of a traced array")
    assert f"(at test_errors.py:{line})" in msg  # the user's file and line
    assert "symbolic=False" in msg and "static keyword argument" in msg and "np.where" in msg
    if what in ("int()", "using a traced array as a Python index"):
        assert "size or slice bound" in msg and "x.shape[0]" in msg
    # a failed trace caches nothing: the next call traces again and fails again
    with pytest.raises(TraceError):
        f(X)
    assert f.stats()["entries"] == 0


def test_value_dependent_python_works_with_a_static_keyword(opt_level):
    f = jit(lambda x, *, positive: x if positive else -x, opt_level)
    np.testing.assert_array_equal(f(X, positive=False), -X)


@pytest.mark.parametrize("fn", [
    lambda x: np.sum([x, x], axis=0),  # numpy converts the list in C
    lambda x: np.mean([x[0], x[1]]),
], ids=["sum-of-list", "mean-of-list"])
def test_numpy_converting_a_traced_value_is_a_trace_error(fn, opt_level):
    # np.asarray(x) itself works (tests/ops/test_array_constructors.py); what
    # numpy converts in C needs values the trace does not have
    with pytest.raises(TraceError, match=r"numpy converted a traced array to a numpy array here "
                                         rf"\(at {HERE}\).*np\.stack"):
        jit(fn, opt_level)(X)


def test_a_traced_fill_or_size_names_the_call(opt_level):
    with pytest.raises(TraceError, match=r"np\.full converted a traced value .*graph input.*"
                                         r"np\.broadcast_to\(v, shape\)"):
        jit(lambda x, v: np.full((2, 3), v) + x, opt_level)(X[:2, :3], 1.5)
    with pytest.raises(TraceError, match=r"a traced value used as a size or fill value "
                                         r"\(np\.arange\(n\).*keyword argument"):
        jit(lambda x, n: np.arange(n) + x, opt_level)(X[0, :3], 3)


def test_reading_a_numpy_array_at_traced_indices_points_at_arguments_and_one_hot():
    labels = np.array([1, 3, 0])
    with pytest.raises(TraceError, match=r"np\.eye\(n\)\[labels\].*as an argument.*"
                                         r"labels\[:, None\] == np\.arange\(n\)"):
        jit(lambda lab: np.eye(4)[lab], 3)(labels)
    # both ways it points at work
    one_hot = lambda lab: (lab[:, None] == np.arange(4)).astype(np.float64)  # noqa: E731
    np.testing.assert_array_equal(jit(one_hot, 3)(labels), np.eye(4)[labels])
    np.testing.assert_array_equal(jit(lambda t, lab: t[lab], 3)(np.eye(4), labels),
                                  np.eye(4)[labels])


def test_writing_traced_values_into_a_numpy_array_points_at_zeros_like(opt_level):
    def f(x):
        h = np.zeros(4)
        h[x[:, 0].astype(np.int64) % 4] = 1.0  # numpy's setitem converts the traced index
        return h
    with pytest.raises(TraceError, match=rf"\(at {HERE}\).*a\[idx\] = v.*np\.zeros_like"):
        jit(f, opt_level)(X)


def test_accumulating_into_a_numpy_array_points_at_zeros_like(opt_level):
    """`y = np.zeros(x.shape); y += x` is numpy's np.add(y, x, out=y) into an
    array the trace does not follow: the error names the idiom and its fix."""
    def f(x):
        y = np.zeros(x.shape, np.float32)
        y += x
        return y
    with pytest.raises(UnsupportedError, match=rf"\(at {HERE}\).*y \+= x.*np\.zeros_like\(x\)"):
        jit(f, opt_level)(X)


# -- unsupported numpy ---------------------------------------------------------------------
@pytest.mark.parametrize("fn,name", [
    (lambda x: np.linalg.svd(x), "np.linalg.svd"),
    (lambda x: np.linalg.inv(np.ones((5, 5)) * x[0, 0]), "np.linalg.inv of 5x5"),
    (lambda x: np.linalg.eigh(x[:3, :3]), "np.linalg.eigh"),
    (lambda x: np.bincount(x.astype(np.int64).ravel()), "np.bincount"),
    (lambda x: np.nanpercentile(x, 50), "np.nanpercentile"),
    (lambda x: np.unique(x), "np.unique"),
    (lambda x: np.subtract.accumulate(x), "np.subtract.accumulate"),
    (lambda x: np.add.reduceat(x, [0, 2]), "np.add.reduceat"),
    (lambda x: x.searchsorted(0.5), "ndarray.searchsorted"),
    (lambda x: x.partition(2), "ndarray.partition"),
    (lambda x: np.where(x > 0), "np.where(cond) with one argument"),
    (lambda x: x[x > 0], "boolean mask indexing"),
    (lambda x: x[[0, 2], None], "indexing with both integer arrays and None"),
    (lambda x: np.pad(x, 1, mode=lambda v, w, i, kw: None), "np.pad: a function as mode"),
    (lambda x: x.reshape((4, 3), order="A"), "reshape: order='A'"),
    (lambda x: np.add.reduce(x, where=x > 0), "np.add.reduce: argument where="),
    (lambda x: np.einsum("ij->j", x, optimize="greedy", order="F"), "np.einsum"),
], ids=["svd", "inv5", "eigh", "bincount", "nanpercentile", "unique", "accumulate", "reduceat", "m.searchsorted",
        "m.partition", "where1", "bool-index", "list-none-index", "pad-mode", "order-A", "where=",
        "einsum-order"])
def test_unsupported_numpy_is_named(fn, name, opt_level):
    with pytest.raises(UnsupportedError) as info:
        jit(fn, opt_level)(X)
    msg = str(info.value)
    assert name in msg
    assert re.search(HERE, msg), msg


def test_unsupported_suggests_exclude_from_trace(opt_level):
    with pytest.raises(UnsupportedError, match=r"exclude_from_trace"):
        jit(lambda x: np.unique(x), opt_level)(X)


def test_item_assignment_through_a_traced_boolean_array_key_is_unsupported(opt_level):
    def f(x):
        y = x + 1
        y[x[:, 0] > 0, 1] = 0  # a boolean array beside an int: the size depends on the values
        return y
    with pytest.raises(UnsupportedError, match=rf"boolean mask indexing .*\(at {HERE}\)"):
        jit(f, opt_level)(X)


# -- shapes -----------------------------------------------------------------------------------
@pytest.mark.parametrize("fn,message", [
    (lambda x, y: x + y, r"add: shapes \(3, 4\) and \(5,\) do not broadcast \(at {here}\); "
                         r"trailing dimensions must match or be 1\."),
    (lambda x, y: np.maximum(x, y[:2]),
     r"maximum: shapes \(3, 4\) and \(2,\) do not broadcast \(at {here}\)"),
    (lambda x, y: np.where(x > 0, x, y), r"where: shapes .* do not broadcast \(at {here}\)"),
    (lambda x, y: x.sum(axis=2), r"sum: axis 2 is out of bounds for an array of 2 dimensions "
                                 r"\(at {here}\); expected an axis in \[-2, 2\)\."),
    (lambda x, y: np.mean(x, axis=-3), r"mean: axis -3 is out of bounds .*expected an axis in "
                                       r"\[-2, 2\)"),
    (lambda x, y: x.argmax(axis=5), r"argmax: axis 5 is out of bounds"),
    (lambda x, y: x.reshape(5, 3), r"reshape: cannot reshape an array of shape \(3, 4\) \(12 "
                                   r"elements\) into shape \(5, 3\) \(at {here}\); the element "
                                   r"counts must match\."),
    (lambda x, y: x.reshape(-1, 5), r"reshape: cannot reshape an array of size 12 into shape "
                                    r"\(-1, 5\) \(at {here}\)"),
    (lambda x, y: x.reshape(-1, -1), r"can only specify one unknown dimension"),
    (lambda x, y: x @ y, r"matmul: shapes \(3, 4\) and \(5, 1\) are not aligned \(at {here}\); "
                         r"expected a\.shape\[-1\] \(4\) == b\.shape\[-2\] \(5\)"),
    (lambda x, y: np.concatenate([x, y]), r"concatenate: all inputs must have the same number "
                                          r"of dimensions; got \(3, 4\) and \(5,\)"),
    (lambda x, y: np.concatenate([x, x.T]), r"concatenate: all input shapes must match except "
                                            r"along axis 0; got \(3, 4\) and \(4, 3\)"),
    (lambda x, y: np.broadcast_to(x, (2, 4)), r"broadcast_to: cannot broadcast shape \(3, 4\) "
                                              r"to \(2, 4\)"),
    (lambda x, y: x[:, 7], r"index 7 is out of bounds for axis 1 with size 4 \(at {here}\)"),
    (lambda x, y: np.squeeze(x, 0), r"squeeze: cannot select an axis to squeeze out"),
    (lambda x, y: x.max(axis=0) + x[:0].max(axis=0),
     r"max: zero-size array to a reduction with no identity: shape \(0, 4\)"),
], ids=["bcast", "bcast-ufunc", "where", "axis", "axis-mean", "argmax-axis", "reshape",
        "reshape-1", "reshape-two-unknown", "matmul", "concat-ndim", "concat-shape",
        "broadcast_to", "index", "squeeze", "zero-size-max"])
def test_shape_errors_say_expected_given_and_where(fn, message, opt_level):
    y = np.ones((5, 1) if "matmul" in message else (5,), np.float32)
    with pytest.raises(ShapeError, match=message.format(here=HERE)):
        jit(fn, opt_level)(X, y)


def test_shape_error_is_a_value_error_like_numpy(opt_level):
    with pytest.raises(ValueError):
        jit(lambda x: x.reshape(7), opt_level)(X)


@pytest.mark.parametrize("fn", [lambda x: x.sum(axis=2), lambda x: np.cumsum(x, axis=-3),
                                lambda x: np.expand_dims(x, 5), lambda x: x.argmax(axis=2)],
                         ids=["sum", "cumsum", "expand_dims", "argmax"])
def test_axis_errors_are_numpys_axis_error(fn, opt_level):
    """``except np.exceptions.AxisError`` catches them as with numpy (the fuzz
    found 34 programs where numpy's class did not match), and they stay
    IndexShapeErrors (IndexError and ValueError)."""
    with pytest.raises(np.exceptions.AxisError) as info:
        jit(fn, opt_level)(X)
    assert isinstance(info.value, halojit.AxisError)
    assert isinstance(info.value, halojit.IndexShapeError)
    assert isinstance(info.value, IndexError) and isinstance(info.value, ValueError)
    assert "out of bounds" in str(info.value)


# -- dtypes and argument types ------------------------------------------------------------
@pytest.mark.parametrize("arg,message", [
    ("abc", r"argument 0 \(x\): expected a numpy array, a list of numbers or a real scalar, "
            r"got str\. Pass static values as keyword arguments\."),
    ({"a": 1}, r"argument 0 \(x\): expected a numpy array.*got dict"),
    (None, r"argument 0 \(x\): expected a numpy array.*got NoneType"),
    (1 + 2j, r"argument 0 \(x\): expected a numpy array.*got complex"),
    (np.array([object()]), r"argument 0 \(x\): dtype object is not supported; expected bool, "
                           r"int8\.\.int64, uint8\.\.uint64, float16, float32 or float64\."),
    (np.ones(3, np.complex64), r"dtype complex64 is not supported"),
    (np.ones(3, np.complex128), r"dtype complex128 is not supported"),
    (np.array(["a", "b"]), r"dtype <U1 is not supported"),
    (np.ones(3, np.longdouble), r"dtype float128 is not supported"),
    (np.array(["2024-01-01"], "datetime64[D]"), r"dtype datetime64\[D\] is not supported"),
], ids=["str", "dict", "None", "complex-scalar", "object", "c64", "c128", "unicode",
        "longdouble", "datetime"])
def test_bad_inputs_are_dtype_errors(arg, message, opt_level):
    if isinstance(arg, np.ndarray) and arg.dtype == np.longdouble and \
            np.dtype(np.longdouble).itemsize == 8:
        pytest.skip("longdouble is float64 on this platform")
    f = jit(lambda x: x + 1, opt_level)
    with pytest.raises(DTypeError, match=message):
        f(arg)
    assert isinstance(DTypeError("x"), TypeError)


def test_second_argument_is_named(opt_level):
    def f(x, weights):
        return x * weights
    with pytest.raises(DTypeError, match=r"argument 1 \(weights\): .*got str"):
        jit(f, opt_level)(X, "w")


@pytest.mark.parametrize("fn,message", [
    (lambda x: x * 1j, r"multiply: complex numbers are not supported \(at {here}\)"),
    (lambda x: np.multiply(x, 1j), r"expected an array or a real scalar as operand, got complex"
                                   r" \(at {here}\)"),
    (lambda x: x + np.ones(3, np.complex64)[0], r"dtype complex64 is not supported"),
    (lambda x: x.astype(np.complex128), r"astype: dtype complex128 is not supported "
                                        r"\(at {here}\)"),
    (lambda x: np.invert(x), r"np\.invert: no numpy loop for dtypes \(float32\) \(at {here}\)"),
    (lambda x: x & x, r"np\.bitwise_and: no numpy loop for dtypes \(float32, float32\)"),
    (lambda x: (x > 0) - (x > 1), r"np\.subtract: no numpy loop for dtypes \(bool, bool\)"),
], ids=["complex-literal", "complex-ufunc", "complex-const", "astype", "invert", "and",
        "bool-sub"])
def test_dtype_errors_inside_the_function(fn, message, opt_level):
    with pytest.raises(DTypeError, match=message.format(here=HERE)):
        jit(fn, opt_level)(X)


# -- the user's own exceptions ---------------------------------------------------------------
class MyError(Exception):
    pass


def test_user_exception_propagates_unchanged_and_the_next_call_works(opt_level):
    calls = []

    def f(x, *, fail):
        calls.append(fail)
        if fail:
            raise MyError("boom: custom message 42")
        return x * 2

    g = jit(f, opt_level)
    with pytest.raises(MyError) as info:
        g(X, fail=True)
    assert type(info.value) is MyError and str(info.value) == "boom: custom message 42"
    np.testing.assert_array_equal(g(X, fail=False), X * 2)
    with pytest.raises(MyError, match="boom: custom message 42"):
        g(X, fail=True)  # nothing was cached for the failing key
    np.testing.assert_array_equal(g(X, fail=False), X * 2)
    assert g.stats()["entries"] == 1


@pytest.mark.parametrize("exc", [ValueError("bad value"), KeyError("k"), TypeError("t"),
                                 ZeroDivisionError("z")])
def test_builtin_exceptions_are_not_wrapped(exc, opt_level):
    def f(x):
        raise exc
    with pytest.raises(type(exc)) as info:
        jit(f, opt_level)(X)
    assert info.value is exc


def test_user_exception_after_some_tracing(opt_level):
    def f(x):
        y = np.exp(x)
        if y.shape[0] == 3:
            raise RuntimeError(f"shape {y.shape}")
        return y
    with pytest.raises(RuntimeError, match=r"^shape \(3, 4\)$"):
        jit(f, opt_level)(X)
    np.testing.assert_allclose(jit(f, opt_level)(X[:2]), np.exp(X[:2]))


# -- writing into inputs ----------------------------------------------------------------------
def write_item(x):
    x[0] = 1  # MARK
    return x


def write_iadd(x):
    x += 1  # MARK
    return x


def write_imul_scalar(x, s):
    x *= s  # MARK
    return x


def write_out(x):
    np.add(x, 1, out=x)  # MARK
    return x


def write_out_tuple(x):
    return np.exp(x, out=(x,))  # MARK


def write_slice(x):
    x[:, 1:] = 0.0  # MARK
    return x


def write_imatmul(x):
    x @= x.T  # MARK
    return x


def write_view_slice(x):
    y = x[1:, ::-1]
    y += 1  # MARK
    return y


def write_view_transpose(x):
    y = x.T.reshape(-1)
    y *= 2  # MARK
    return y


def write_view_item(x):
    row = x[0]
    row[1] = 5.0  # MARK
    return x


def write_clip_out(x):
    np.clip(x, 0, 1, out=x)  # MARK
    return x


def write_sum_out(x):
    x[0].sum(axis=0, out=x[0, 0])  # MARK
    return x


def write_fill(x):
    x.fill(0.5)  # MARK
    return x


def write_copyto(x):
    np.copyto(x, x[::-1])  # MARK
    return x


@pytest.mark.parametrize("fn,what", [
    (write_clip_out, r"np.clip(..., out=...)"), (write_sum_out, r"np.sum(..., out=...)"),
    (write_fill, "`x.fill()`"), (write_copyto, "np.copyto"),
    (write_item, "item assignment"), (write_iadd, "an in-place `add`"),
    (write_imul_scalar, "an in-place `multiply`"), (write_out, r"np.add(..., out=...)"),
    (write_out_tuple, r"np.exp(..., out=...)"), (write_slice, "item assignment"),
    (write_imatmul, "an in-place `@=`"), (write_view_slice, "an in-place `add`"),
    (write_view_transpose, "an in-place `multiply`"), (write_view_item, "item assignment"),
])
def test_writing_into_an_input_is_a_trace_error(fn, what, opt_level):
    args = (X.copy(), 2.0) if fn is write_imul_scalar else (X.copy(),)
    before = [np.copy(a) for a in args]
    with pytest.raises(TraceError) as info:
        jit(fn, opt_level)(*args)
    msg = str(info.value)
    assert msg.startswith(f"{what} writes into an input argument or a view of one "
                          f"(at test_errors.py:{line_of(fn, '# MARK')})")
    assert "must not modify their inputs" in msg
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)  # nothing was written


def test_in_place_on_a_temporary_follows_numpy_casting(opt_level):
    def f(x):
        y = (x > 0).astype(np.int8)
        y += x  # float32 result into int8: numpy refuses (same_kind)
        return y
    with pytest.raises(DTypeError, match=r"an in-place `add`: cannot cast the result from "
                                         rf"float32 to int8 with casting rule 'same_kind' "
                                         rf"\(at {HERE}\)"):
        jit(f, opt_level)(X)

    def g(x):
        y = x[0] * 1
        y += x  # (4,) += (3, 4): numpy cannot broadcast an output
        return y
    with pytest.raises(ShapeError, match=r"the result has shape \(3, 4\), but is written "
                                         r"into an array of shape \(4,\)"):
        jit(g, opt_level)(X)


# -- options and keyword arguments --------------------------------------------------------------
def test_unhashable_keyword_argument_names_it(opt_level):
    def scale(x, *, factors):
        return x * factors[0]
    f = jit(scale, opt_level)
    with pytest.raises(TypeError, match=r"scale: keyword argument 'factors' is static \(part "
                                        r"of the cache key\) and must be hashable; got list\. "
                                        r"Pass arrays positionally, or use a tuple"):
        f(X, factors=[2.0])
    with pytest.raises(TypeError, match=r"'factors'.*got ndarray"):
        f(X, factors=np.ones(2))
    np.testing.assert_array_equal(f(X, factors=(2.0,)), X * 2)


@pytest.mark.parametrize("level", [-1, 4, "3", None, 1.5])
def test_bad_opt_level(level):
    with pytest.raises(ValueError, match=rf"trace: opt_level must be one of \(0, 1, 2, 3\), "
                                         rf"got {re.escape(repr(level))}\."):
        halojit.trace(lambda x: x, opt_level=level)


@pytest.mark.parametrize("value", ["tvm", "cuda", "", "halide2"])
def test_unknown_halojit_backend_lists_the_valid_values(value, clean_env):
    clean_env.setenv("HALOJIT_BACKEND", value)
    with pytest.raises(HalojitError, match=rf"HALOJIT_BACKEND={re.escape(repr(value))} is not a "
                                           r"backend; expected one of HALIDE, NUMPY "
                                           r"\(case-insensitive\)\."):
        halojit.trace(lambda x: x, opt_level=3)


@pytest.mark.parametrize("value,backend", [("NUMPY", "numpy"), ("numpy", "numpy"),
                                           (" Halide ", "halide"), ("HALIDE", "halide")])
def test_halojit_backend_is_case_insensitive(value, backend, clean_env):
    clean_env.setenv("HALOJIT_BACKEND", value)
    assert halojit.trace(lambda x: x, opt_level=3).backend == backend


def test_unknown_backend_argument_lists_the_valid_values():
    with pytest.raises(HalojitError, match=r"'cuda'.*expected one of HALIDE, NUMPY"):
        halojit.trace(lambda x: x, opt_level=1, backend="cuda")
    with pytest.raises(ValueError, match=r"trace: backend must be one of"):
        halojit.trace(lambda x: x, opt_level=1, backend=3)


# -- out= ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("out,exc,message", [
    (np.empty((3, 3), np.float32), ShapeError,
     r"f: out\[0\] has shape \(3, 3\), expected \(3, 4\)\."),
    (np.empty((3, 4), np.float64), DTypeError,
     r"f: out\[0\] has dtype float64, expected float32\."),
    ((np.empty((3, 4), np.float32),) * 2, ShapeError, r"f: out= has 2 arrays, the function "
                                                       r"returns 1\."),
    ([1.0], DTypeError, r"f: out\[0\] must be a numpy array, got float\."),
], ids=["shape", "dtype", "count", "not-array"])
def test_out_with_the_wrong_shape_or_dtype(out, exc, message, opt_level):
    def f(x):
        return x + 1
    with pytest.raises(exc, match=message):
        jit(f, opt_level)(X, out=out)
    if isinstance(out, np.ndarray):
        assert not np.array_equal(out, X + 1)  # nothing half-written


def test_copies_of_inputs_are_writable(opt_level):
    def f(x):
        a, b, c = x.copy(), np.copy(x), x.flatten()
        a += 1
        b *= 2
        c -= 1
        return a, b, c

    a, b, c = jit(f, opt_level)(X)
    np.testing.assert_array_equal(a, X + 1)
    np.testing.assert_array_equal(b, X * 2)
    np.testing.assert_array_equal(c, X.reshape(-1) - 1)


def test_unknown_target_is_refused_at_trace_time_at_every_level():
    for level in (0, 1, 3):
        with pytest.raises(ValueError, match=r"'x86-nonsense' is not a Halide target; expected 'host'"):
            halojit.trace(lambda x: x, opt_level=level, target="x86-nonsense")
