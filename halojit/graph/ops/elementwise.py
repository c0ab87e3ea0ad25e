"""Elementwise ops: numpy ufuncs, ``astype`` and ``where``.

The tracer casts every ufunc operand to the dtype of the numpy loop that
numpy itself would pick (``ufunc.resolve_dtypes``, NEP 50 weak scalars), so
an elementwise node's inputs already have the loop dtypes and its lowering
never guesses a promotion.
"""

from __future__ import annotations

import numpy as np

from ...errors import DTypeError, format_loc
from ..ir import AbstractArray
from . import ELEMENTWISE, OpDef, broadcast_shapes, register

UNARY = (
    "negative", "positive", "absolute", "sign", "sqrt", "square", "reciprocal",
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "sin", "cos", "tan", "arcsin", "arccos", "arctan",
    "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
    "floor", "ceil", "trunc", "rint", "logical_not", "invert",
    "isnan", "isinf", "isfinite", "signbit", "cbrt", "deg2rad", "rad2deg", "bitwise_count",
)
BINARY = (
    "add", "subtract", "multiply", "divide", "floor_divide", "remainder", "fmod",
    "power", "maximum", "minimum", "fmax", "fmin",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
    "arctan2", "hypot", "copysign",
)
UFUNCS = {name: getattr(np, name) for name in UNARY + BINARY}

_WEAK_PY = {"f": float, "i": int, "u": int, "b": np.dtype(bool)}


def resolve_ufunc(name: str, avals, loc=None):
    """(loop input dtypes, output dtype, weak) of numpy's loop for ``avals``."""
    ufunc = UFUNCS[name] if name in UFUNCS else getattr(np, name)  # or a composite's
    all_weak = all(a.weak for a in avals)
    if all_weak:
        dts = tuple(a.dtype for a in avals)
    else:
        dts = tuple(_WEAK_PY[a.dtype.kind] if a.weak else a.dtype for a in avals)
    try:
        loop = ufunc.resolve_dtypes(dts + (None,))
    except (TypeError, np.exceptions.DTypePromotionError) as e:
        given = ", ".join(str(a.dtype) + (" (Python scalar)" if a.weak else "") for a in avals)
        raise DTypeError(
            f"np.{name}: no numpy loop for dtypes ({given}){format_loc(loc)}: {e}"
        ) from None
    return loop[:-1], loop[-1], all_weak


def _ufunc_infer(name):
    def infer(avals, params, loc=None):
        shape = broadcast_shapes([a.shape for a in avals], name, loc)
        _, out, weak = resolve_ufunc(name, avals, loc)
        return AbstractArray(shape, out, weak)
    return infer


def _ufunc_reference(name):
    ufunc = UFUNCS[name]

    def reference(arrays, params):
        return np.asarray(ufunc(*arrays))
    return reference


for _name in UNARY + BINARY:
    register(OpDef(_name, ELEMENTWISE, _ufunc_infer(_name), _ufunc_reference(_name),
                   extra={"arity": 1 if _name in UNARY else 2}))


def _astype_infer(avals, params, loc=None):
    (a,) = avals
    return AbstractArray(a.shape, params["dtype"])


def _astype_reference(arrays, params):
    return np.asarray(arrays[0]).astype(params["dtype"])


register(OpDef("astype", ELEMENTWISE, _astype_infer, _astype_reference))


def _bitcast_reference(arrays, params):
    # a C-ordered copy: numpy refuses to view some strided arrays, and
    # ascontiguousarray would make a 0-d array 1-d
    return np.array(arrays[0], order="C").view(params["dtype"])


# ndarray.view(dtype) between dtypes of one itemsize (numpy_api.view): the
# same bits read as another type
register(OpDef("bitcast", ELEMENTWISE, _astype_infer, _bitcast_reference))


def _same_infer(avals, params, loc=None):
    (a,) = avals
    return AbstractArray(a.shape, a.dtype, a.weak)


def _copy_reference(arrays, params):
    return np.array(arrays[0], order="C", copy=True)


# np.ascontiguousarray(y), y.copy(): the value itself, promised C-contiguous
# where it is returned. The graph knows no layouts, but the Halide backend
# hands back some outputs as views (a transpose of a kernel's output, see
# passes/views.py); a returned copy keeps its value in the kernel's C order.
# Only returned copies of computed values survive the passes
# (views.strip_copies); the lowering is the identity.
register(OpDef("copy", ELEMENTWISE, _same_infer, _copy_reference))


def _where_infer(avals, params, loc=None):
    cond, a, b = avals
    shape = broadcast_shapes([cond.shape, a.shape, b.shape], "where", loc)
    return AbstractArray(shape, a.dtype, a.weak and b.weak)


def _where_reference(arrays, params):
    return np.asarray(np.where(*arrays))


register(OpDef("where", ELEMENTWISE, _where_infer, _where_reference))
