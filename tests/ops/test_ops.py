"""Table-driven tests of the elementwise ops (every ufunc of the registry,
astype, where, clip) x dtypes x shapes against numpy eager, at each opt level.

Each row is a ``Case``: a function of positional arrays and the arguments;
``assert_matches_numpy`` traces it, calls it twice (miss and hit) and
compares with numpy. Combos numpy rejects are checked to raise in both.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest

from halojit.errors import DTypeError
from helpers import (Case, DTYPES, FLOAT_DTYPES, assert_matches_numpy, assert_same, jit, level_params,
                     numpy_eager, random_array, with_values)
from halojit.graph.ops.elementwise import BINARY, UNARY


def numpy_accepts(ufunc, dtypes) -> bool:
    try:
        ufunc.resolve_dtypes(tuple(np.dtype(d) for d in dtypes) + (None,))
        return True
    except (TypeError, np.exceptions.DTypePromotionError):
        return False


def _seed(*parts) -> int:
    return sum((i + 1) * sum(map(ord, str(p))) for i, p in enumerate(parts))


# -- input domains -------------------------------------------------------------------
# Domain-restricted ufuncs get in-domain data plus a few out-of-domain values
# (numpy gives NaN or inf there).
FLOAT_DOMAIN = {
    "sqrt": ((0.0, 10.0), (-1.0, -0.0, 0.0, np.inf, np.nan)),
    "log": ((0.0, 10.0), (-1.0, 0.0, -0.0, np.inf, np.nan)),
    "log2": ((0.0, 10.0), (-1.0, 0.0, np.inf, np.nan)),
    "log10": ((0.0, 10.0), (-1.0, 0.0, np.inf, np.nan)),
    "log1p": ((-1.0, 10.0), (-2.0, -1.0, -0.0, np.inf, np.nan)),
    "arcsin": ((-1.0, 1.0), (1.5, -1.0, 1.0, -0.0, np.nan)),
    "arccos": ((-1.0, 1.0), (1.5, -1.0, 1.0, -2.0, np.nan)),
    "arctanh": ((-1.0, 1.0), (1.5, -1.0, 1.0, -0.0, np.nan)),
    "arccosh": ((1.0, 10.0), (0.5, 1.0, np.inf, -1.0, np.nan)),
}
# Integer ops whose wrap-around is the point get the full range; the others
# (converted to float) get small values, where numpy and C libm agree.
FULL_RANGE_INT = {"negative", "positive", "absolute", "sign", "square", "invert",
                  "add", "subtract", "multiply", "bitwise_and", "bitwise_or", "bitwise_xor",
                  "maximum", "minimum", "fmax", "fmin", "equal", "not_equal", "less",
                  "less_equal", "greater", "greater_equal", "floor_divide", "remainder",
                  "fmod", "logical_and", "logical_or", "logical_xor", "logical_not",
                  "floor", "ceil", "trunc", "rint", "isnan", "isinf", "isfinite", "signbit",
                  "bitwise_count"}


def unary_data(name, dtype, shape, rng):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        if name in FLOAT_DOMAIN:
            (lo, hi), odd = FLOAT_DOMAIN[name]
            return with_values(random_array(rng, shape, dt, lo, hi), odd)
        return random_array(rng, shape, dt, specials=True)
    if dt.kind in "iu" and name not in FULL_RANGE_INT:
        a = random_array(rng, shape, dt, -50, 50)
        if name == "reciprocal":  # 1 // 0 is INT_MIN on x86 only (C UB): skip zeros
            a = np.where(a == 0, 1, a).astype(dt)
        return a
    return random_array(rng, shape, dt)


def binary_data(name, dtype, shape_a, shape_b, rng):
    dt = np.dtype(dtype)
    info = np.iinfo(dt) if dt.kind in "iu" else None
    if dt.kind == "f":
        a = random_array(rng, shape_a, dt, specials=True)
        b = random_array(rng, shape_b, dt, specials=True)
        if name == "power":
            a = np.abs(random_array(rng, shape_a, dt, specials=True))
            a = with_values(a, (-2.0, 0.0, -0.0, 1.0, np.nan))
            b = random_array(rng, shape_b, dt, -3.0, 3.0)
            b = with_values(b, (2.0, -1.0, 0.5, np.inf, 0.0))
        return a, b
    if dt.kind == "b":
        return random_array(rng, shape_a, dt), random_array(rng, shape_b, dt)
    if name in ("floor_divide", "remainder", "fmod", "divide"):
        a = with_values(random_array(rng, shape_a, dt), (info.min, info.min, 7, -7, info.max))
        b = with_values(random_array(rng, shape_b, dt, -4, 4), (-1, 0, 0, -3, 3))
        return a, b  # INT_MIN // -1 wraps, x // 0 is 0: numpy's results, no error
    if name == "power":
        return random_array(rng, shape_a, dt, -4, 4), random_array(rng, shape_b, dt, 0, 5)
    if name in ("left_shift", "right_shift"):
        bits = dt.itemsize * 8
        b = with_values(random_array(rng, shape_b, dt, 0, bits - 1), (bits, bits + 2, 0))
        return random_array(rng, shape_a, dt), b
    if name in FULL_RANGE_INT:
        return random_array(rng, shape_a, dt), random_array(rng, shape_b, dt)
    return random_array(rng, shape_a, dt, -50, 50), random_array(rng, shape_b, dt, -50, 50)


# -- unary ufuncs --------------------------------------------------------------------
def _views(make, shape_kind):
    """A base array maker ``make(shape)`` -> the view of ``shape_kind``."""
    if shape_kind == "strided":
        return make((4, 6))[:, ::2]
    if shape_kind == "negstride":
        return make((7,))[::-2]
    if shape_kind == "transposed":
        return make((3, 4)).T
    return make({"2d": (3, 5), "0d": (), "empty": (0, 3)}[shape_kind])


UNARY_SHAPES = ("2d", "0d", "empty", "strided", "negstride", "transposed")


def _unary_fn(name):
    ufunc = getattr(np, name)
    return lambda x: ufunc(x)


def unary_cases():
    cases, rejected = [], []
    for name in UNARY:
        fn = _unary_fn(name)
        for dtype in DTYPES:
            if not numpy_accepts(getattr(np, name), [dtype]):
                rejected.append(Case(f"{name}-{dtype}", fn, (np.ones(3, dtype),), True))
                continue
            for kind in UNARY_SHAPES:
                rng = np.random.default_rng(_seed(name, dtype, kind))
                x = _views(lambda s: unary_data(name, dtype, s, rng), kind)
                cases.append(Case(f"{name}-{dtype}-{kind}", fn, (x,)))
    return cases, rejected


UNARY_CASES, UNARY_REJECTED = unary_cases()


@pytest.mark.parametrize("case,opt_level", level_params(UNARY_CASES))
def test_unary_ufunc(case, opt_level):
    assert_matches_numpy(case.fn, case.args, opt_level, expect_error=case.expect_error, **case.tol)


# -- binary ufuncs -------------------------------------------------------------------
BINARY_SHAPES = {
    "same": ((3, 4), (3, 4)),
    "bcast": ((3, 1), (4,)),
    "bcast0d": ((2, 3), ()),
    "0d": ((), ()),
    "empty": ((0, 4), (4,)),
    "views": (None, None),
}


def _binary_fn(name):
    ufunc = getattr(np, name)
    return lambda x, y: ufunc(x, y)


def binary_cases():
    cases, rejected = [], []
    for name in BINARY:
        fn = _binary_fn(name)
        for dtype in DTYPES:
            if not numpy_accepts(getattr(np, name), [dtype, dtype]):
                x = np.ones(3, dtype)
                rejected.append(Case(f"{name}-{dtype}", fn, (x, x), True))
                continue
            for kind, (sa, sb) in BINARY_SHAPES.items():
                rng = np.random.default_rng(_seed(name, dtype, kind))
                if kind == "views":  # non-contiguous and negative strides on both sides
                    a, b = binary_data(name, dtype, (4, 6), (3, 2), rng)
                    a, b = a[::2, ::-2], b.T
                else:
                    a, b = binary_data(name, dtype, sa, sb, rng)
                cases.append(Case(f"{name}-{dtype}-{kind}", fn, (a, b)))
    return cases, rejected


BINARY_CASES, BINARY_REJECTED = binary_cases()


@pytest.mark.parametrize("case,opt_level", level_params(BINARY_CASES))
def test_binary_ufunc(case, opt_level):
    assert_matches_numpy(case.fn, case.args, opt_level, expect_error=case.expect_error, **case.tol)


@pytest.mark.parametrize("case,opt_level", level_params(UNARY_REJECTED + BINARY_REJECTED))
def test_ufunc_dtype_numpy_rejects(case, opt_level):
    """Where numpy has no loop (np.invert of floats), halojit raises a TypeError too."""
    assert_matches_numpy(case.fn, case.args, opt_level, expect_error=True)


# -- operators (dunder methods, reflected and in-place on temporaries) ---------------------
OPERATORS = {
    "add": lambda x, y: x + y, "radd": lambda x, y: y + x,
    "sub": lambda x, y: x - y, "rsub": lambda x, y: y - x,
    "mul": lambda x, y: x * y, "truediv": lambda x, y: x / y, "rtruediv": lambda x, y: y / x,
    "floordiv": lambda x, y: x // y, "rfloordiv": lambda x, y: y // x,
    "mod": lambda x, y: x % y, "rmod": lambda x, y: y % x,
    "pow": lambda x, y: x ** 2, "rpow": lambda x, y: 2 ** (x % 4 if x.dtype.kind in "iu" else x),
    "divmod": lambda x, y: divmod(x, y),
    "and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y,
    "lshift": lambda x, y: x << 1, "rshift": lambda x, y: x >> 1,
    "eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
    "neg": lambda x, y: -x, "pos": lambda x, y: +x, "abs": lambda x, y: abs(x),
    "invert": lambda x, y: ~x,
    "iadd": lambda x, y: _iadd(x, y), "imul": lambda x, y: _imul(x, y),
    "matmul_t": lambda x, y: x @ y.T,
}


def _iadd(x, y):
    z = x * 1
    z += y
    return z


def _imul(x, y):
    z = x + 0
    z *= y
    return z


def operator_cases():
    cases = []
    for op, fn in OPERATORS.items():
        for dtype in ("bool", "int8", "int32", "uint16", "uint64", "float16", "float32", "float64"):
            rng = np.random.default_rng(_seed(op, dtype))
            a = random_array(rng, (3, 4), dtype, -20, 20)
            b = random_array(rng, (3, 4), dtype, 1, 5) if dtype != "bool" else a
            try:
                numpy_eager(fn, a, b)
                err = False
            except (TypeError, ValueError):
                err = True
            cases.append(Case(f"{op}-{dtype}", fn, (a, b), err))
    return cases


OPERATOR_CASES = operator_cases()


@pytest.mark.parametrize("case,opt_level", level_params(OPERATOR_CASES))
def test_operators(case, opt_level):
    assert_matches_numpy(case.fn, case.args, opt_level, expect_error=case.expect_error)


# -- promotion between dtypes (NEP 50) -----------------------------------------------------
PROMOTION_UFUNCS = ("add", "divide", "maximum", "less", "floor_divide", "arctan2")


def promotion_cases():
    cases = []
    for name in PROMOTION_UFUNCS:
        fn = _binary_fn(name)
        for da in DTYPES:
            for db in DTYPES:
                if da == db:
                    continue
                rng = np.random.default_rng(_seed(name, da, db))
                a = random_array(rng, (2, 3), da, -20, 20)
                b = random_array(rng, (3,), db, 1, 20)
                ok = numpy_accepts(getattr(np, name), [da, db])
                cases.append(Case(f"{name}-{da}-{db}", fn, (a, b), not ok))
    return cases


PROMOTION_CASES = promotion_cases()


@pytest.mark.parametrize("case,opt_level", level_params(PROMOTION_CASES))
def test_promotion(case, opt_level):
    assert_matches_numpy(case.fn, case.args, opt_level, expect_error=case.expect_error)


# -- weak Python scalars ------------------------------------------------------------------
WEAK_OPS = ("add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum",
            "less")
WEAK_SCALARS = (3, -1, 1000, 2.5, True)


PY_OPERATORS = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
                "divide": operator.truediv, "floor_divide": operator.floordiv,
                "power": operator.pow, "less": operator.lt}


def _scalar_fns(name, s):
    ufunc = getattr(np, name)
    fns = {
        "arg": (lambda x, y: ufunc(x, y)),          # f(x, 3): a weak scalar input
        "rarg": (lambda x, y: ufunc(y, x)),         # f(x, 3) with the scalar first
        "inline": (lambda x, y: ufunc(x, s)),       # a literal in the function body
    }
    if name in PY_OPERATORS:
        pyop = PY_OPERATORS[name]
        fns["op"] = lambda x, y: pyop(x, y)         # x + 3 (ndarray.__add__)
        fns["rop"] = lambda x, y: pyop(y, x)        # 3 + x (ndarray.__radd__)
        fns["op-inline"] = lambda x, y: pyop(x, s)
    return fns


def weak_cases():
    cases = []
    for name in WEAK_OPS:
        for s in WEAK_SCALARS:
            for mode, fn in _scalar_fns(name, s).items():
                if mode in ("rarg", "rop") and name in ("add", "multiply", "maximum"):
                    continue  # commutative: same loop as "arg"
                for dtype in DTYPES:
                    rng = np.random.default_rng(_seed(name, s, mode, dtype))
                    x = random_array(rng, (2, 3), dtype, 1, 5)
                    if name == "power" and dtype[0] in "iub" and (s == -1 or mode[0] == "r"):
                        continue  # int ** negative int raises ValueError by value in numpy
                    try:
                        numpy_eager(fn, x, s)
                        err = False
                    except (TypeError, ValueError, OverflowError):
                        err = True
                    cases.append(Case(f"{name}-{mode}-{s!r}-{dtype}", fn, (x, s), err))
    return cases


WEAK_CASES = weak_cases()


@pytest.mark.parametrize("case,opt_level", level_params(WEAK_CASES))
def test_weak_python_scalars(case, opt_level):
    """f(x_f32, 2.0) stays float32, f(x_uint8, 3) stays uint8, f(x_int8, 1000)
    raises OverflowError: exactly numpy 2's (NEP 50) behaviour."""
    assert_matches_numpy(case.fn, case.args, opt_level, expect_error=case.expect_error)


def test_weak_scalar_examples_from_the_contract(opt_level):
    f = jit(lambda x, s: x * s, opt_level)
    assert f(np.ones(3, np.float32), 2.0).dtype == np.float32
    assert f(np.ones(3, np.uint8), 3).dtype == np.uint8
    assert f(np.ones(3, np.int16), 2.0).dtype == np.float64
    with pytest.raises(OverflowError, match="1000"):
        f(np.ones(3, np.int8), 1000)
    with pytest.raises(OverflowError):
        f(np.ones(3, np.uint8), -1)
    # numpy scalars are strong: int8 array * int64 scalar is int64.
    assert f(np.ones(3, np.int8), np.int64(3)).dtype == np.int64
    assert f(np.ones(3, np.float32), np.float64(2.0)).dtype == np.float64
    # both weak: Python semantics
    assert np.asarray(f(2, 3.5)).dtype == np.float64


U64 = np.array([1, 2**63, 2**64 - 1], np.uint64)
I64 = np.array([-5, 0, 2**62], np.int64)
I8 = np.array([1, -2, 127], np.int8)


@pytest.mark.parametrize("fn,x", [
    (lambda a: a + 2**63, U64), (lambda a: a == 2**64 - 1, U64), (lambda a: a // 2**63, U64),
    (lambda a: a > 2**63, U64), (lambda a: a < 2**63, I64), (lambda a: 2**63 > a, I8),
    (lambda a: a != 2**64 - 1, I64), (lambda a: a.astype(np.float32) + 2**63, I8),
], ids=["u64-add", "u64-eq", "u64-floordiv", "u64-gt", "i64-lt", "i8-gt-reflected", "i64-ne",
        "f32-add"])
def test_python_ints_beyond_int64_inside_the_trace(fn, x, opt_level):
    # numpy 2 takes a Python int up to 2**64 - 1: uint64 arithmetic, and exact
    # comparisons against any integer dtype (found by the differential fuzz)
    assert_matches_numpy(fn, (x,), opt_level)


def test_python_ints_beyond_int64_still_overflow_where_numpy_does(opt_level):
    with pytest.raises(OverflowError):
        jit(lambda a: a + 2**63, opt_level)(I64)
    with pytest.raises(OverflowError, match="does not fit in int64 or uint64"):
        jit(lambda a: a + 2**64, opt_level)(U64)


@pytest.mark.parametrize("s", [2**63, 2**64 - 1])
def test_python_ints_beyond_int64_as_arguments(s, opt_level):
    f = jit(lambda a, s: (a * s, a == s, a.astype(np.float32) + s), opt_level)
    for _ in range(2):
        for got, want in zip(f(U64, s), (U64 * s, U64 == s, U64.astype(np.float32) + s)):
            assert_same(got, want)
    with pytest.raises(OverflowError):  # as numpy: int64 and 2**63 have no common type
        f(I64, s)
    with pytest.raises(OverflowError, match="out of bounds for int64 and uint64"):
        f(U64, 2**64)


@pytest.mark.parametrize("s", [2**63, 2**64 - 1])
def test_python_ints_beyond_int64_compare_as_arguments(s, opt_level):
    """numpy compares any integer array with a Python int exactly: an
    argument of 2**63 or more is above every int64 or narrower value (it
    raised OverflowError from the argument's range check)."""
    f = jit(lambda a, s: (a < s, a == s, s >= a, a != s), opt_level)
    for x in (I64, I8, U64, np.uint8(7), np.array([], np.int16)):
        for _ in range(2):
            for got, want in zip(f(x, s), (x < s, x == s, s >= x, x != s)):
                assert_same(got, want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int64, np.uint64])
def test_clip_with_python_int_arguments_beyond_the_dtype(dtype, opt_level):
    """numpy 2 drops a Python int bound beyond the array's range (np.clip of
    int8 with -1000, 1000) and raises OverflowError for one beyond the other
    end; as arguments the bounds raised in both cases (found by a fuzz helper)."""
    x = np.array([1, 2, 3, 100, 120], dtype)
    f = jit(lambda x, lo, hi: np.clip(x, lo, hi), opt_level)
    for lo, hi in [(-1000, 1000), (0, 1000), (-1000, 2), (-5, 2), (3, 1), (-2**63, 2**63 - 1),
                   (1000, 2000), (-2000, -1000)]:
        try:
            want = np.clip(x, lo, hi)
        except OverflowError:
            with pytest.raises(OverflowError):
                f(x, lo, hi)
            continue
        assert_same(f(x, lo, hi), want)
    if dtype == np.uint64:  # numpy raises for a negative bound; it was a float64 result
        with pytest.raises(OverflowError):
            f(x, -1, -5)


def test_python_scalar_arguments_where_numpy_takes_asarray(opt_level):
    """np.dot, np.kron and ufunc.outer take np.asarray of a Python scalar (a
    strong float64/int64), so do they of one passed as an argument; an
    initial= argument that does not fit the dtype raises as numpy's does
    (it wrapped). Found by a fuzz helper."""
    f32 = np.array([1.0, 2.0, 3.0], np.float32)
    i8 = np.array([1, 5, 100], np.int8)
    f16 = f32.astype(np.float16)
    for fn, args in [(lambda a, s: np.dot(a, s), (f32, 1.5)), (lambda a, s: np.kron(a, s), (i8, 2)),
                     (lambda a, s: np.multiply.outer(a, s), (f16, 0.5)),
                     (lambda a, s: np.max(a, initial=s), (i8, 7)),
                     (lambda a, s: np.sum(a, initial=s), (i8, -3))]:
        assert_same(jit(fn, opt_level)(*args), fn(*args))
    with pytest.raises(OverflowError):
        jit(lambda a, s: np.max(a, initial=s), opt_level)(i8, 300)


def test_weak_scalar_expression_is_range_checked_at_every_call(opt_level):
    f = jit(lambda x, s: x + (s + 1), opt_level)
    x = np.zeros(2, np.int8)
    np.testing.assert_array_equal(f(x, 100), np.full(2, 101, np.int8))
    with pytest.raises(OverflowError):  # numpy: x + 1000 raises
        f(x, 999)


# -- astype ----------------------------------------------------------------------------------
def astype_data(src, dst, rng):
    """Values representable in both dtypes where float -> int casts are C UB."""
    s, d = np.dtype(src), np.dtype(dst)
    if s.kind == "f" and d.kind in "iu":
        info = np.iinfo(d)
        hi = min(float(info.max), float(np.finfo(s).max), 6e4) / 2
        lo = 0.0 if d.kind == "u" else -hi
        return random_array(rng, (3, 4), s, lo, hi)
    if s.kind == "f":
        return random_array(rng, (3, 4), s, specials=True) * np.array(100, s)
    return random_array(rng, (3, 4), s)


def astype_cases():
    cases = []
    for src in DTYPES:
        for dst in DTYPES:
            rng = np.random.default_rng(_seed("astype", src, dst))
            x = astype_data(src, dst, rng)
            cases.append(Case(f"{src}-{dst}", (lambda d: lambda x: x.astype(d))(dst), (x,)))
            if src == "float64":
                cases.append(Case(f"np.astype-{src}-{dst}-view",
                                  (lambda d: lambda x: np.astype(x, d))(dst), (x[::-1, ::2],)))
    return cases


ASTYPE_CASES = astype_cases()


@pytest.mark.parametrize("case,opt_level", level_params(ASTYPE_CASES))
def test_astype(case, opt_level):
    with np.errstate(all="ignore"):
        assert_matches_numpy(case.fn, case.args, opt_level)


# -- where and clip ----------------------------------------------------------------------------
def where_clip_cases():
    cases = []
    rng = np.random.default_rng(7)
    for dtype in DTYPES:
        x = random_array(rng, (3, 4), dtype, -10, 10)
        y = random_array(rng, (4,), dtype, -10, 10)
        c = rng.random((3, 4)) < 0.5
        cases += [
            Case(f"where-{dtype}", lambda c, x, y: np.where(c, x, y), (c, x, y)),
            Case(f"where-scalar-{dtype}", lambda c, x: np.where(c, x, 0), (c, x)),
            Case(f"where-intcond-{dtype}", lambda x, y: np.where(x, y, x), (x, y)),
            Case(f"where-cmp-{dtype}", lambda x, y: np.where(x > y, x, y), (x, y)),
            Case(f"where-0d-{dtype}", lambda c, x, y: np.where(c, x, y),
                 (np.bool_(True), x[0, 0], y)),
            Case(f"clip-method-{dtype}", lambda x: x.clip(2, 7), (x,)),
            Case(f"clip-arrays-{dtype}", lambda x, lo, hi: np.clip(x, lo, hi),
                 (x, y, y + np.array(3, y.dtype))),
            Case(f"clip-min-{dtype}", lambda x: np.clip(x, 1, None), (x,)),
            Case(f"clip-max-kw-{dtype}", lambda x: np.clip(x, max=3), (x,)),
            Case(f"clip-float-bounds-{dtype}", lambda x: np.clip(x, 0.5, 3.5), (x,)),
            Case(f"clip-wide-int-bounds-{dtype}", lambda x: np.clip(x, -1, 300), (x,)),
            Case(f"clip-wide-lo-{dtype}", lambda x: np.clip(x, -2**40, 5), (x,)),
            Case(f"clip-none-none-{dtype}", lambda x: np.clip(x, None, None), (x,)),
            Case(f"clip-view-{dtype}", lambda x: np.clip(x, 2, 7), (x[::-1, 1::2],)),
        ]
    for dtype in FLOAT_DTYPES:
        x = random_array(rng, (3, 4), dtype, specials=True)
        cases.append(Case(f"clip-nan-{dtype}", lambda x: np.clip(x, -1, 1), (x,)))
        cases.append(Case(f"where-isnan-{dtype}", lambda x: np.where(np.isnan(x), 0, x), (x,)))
    cases.append(Case("where-mixed", lambda c, x, y: np.where(c, x, y),
                      (c, np.arange(12, dtype=np.int8).reshape(3, 4),
                       np.arange(4, dtype=np.uint8))))
    cases.append(Case("where-mixed-float", lambda c, x, y: np.where(c, x, y),
                      (c, np.arange(12, dtype=np.int32).reshape(3, 4), np.ones(4, np.float32))))
    cases.append(Case("where-weak-float", lambda c, x: np.where(c, x, 0.5),
                      (c, np.arange(12, dtype=np.float16).reshape(3, 4))))
    for value in (-3, 1000, -129, 2.5, 1e6):
        for dtype in ("uint8", "int8", "float16", "int64"):
            cases.append(Case(f"where-python-{value}-{dtype}",
                              (lambda v: lambda c, x: np.where(c, x, v))(value),
                              (c, np.arange(12, dtype=dtype).reshape(3, 4))))
            cases.append(Case(f"where-python-arg-{value}-{dtype}",
                              lambda c, x, v: np.where(c, v, x),
                              (c, np.arange(12, dtype=dtype).reshape(3, 4), value)))
    for dtype in ("float16", "float32", "float64", "int32", "uint16", "int64", "bool"):
        x = random_array(rng, (3, 4), dtype, -2000, 2000) * np.array(1, dtype)
        if dtype[0] == "f":
            x = with_values(x, (1.25, 2.675, -0.5, 0.5, 1.5, -1250.0, np.nan, -0.0))
        else:
            x = with_values(x, (1250, 1350, 15, 25, 0))
        for d in (0, 2, -1, -2):
            cases.append(Case(f"round-{dtype}-{d}", (lambda d: lambda x: np.round(x, d))(d), (x,),
                              dtype == "bool" and d != 0))  # numpy: cannot cast back to bool
        cases.append(Case(f"around-method-{dtype}", lambda x: x.round(1), (x,)))
    cases.append(Case("clip-overflow-lo", lambda x: np.clip(x, 300, None),
                      (np.arange(4, dtype=np.uint8),), True))
    cases.append(Case("clip-overflow-hi", lambda x: np.clip(x, None, -1),
                      (np.arange(4, dtype=np.uint8),), True))
    # a Python scalar clipped: numpy takes asarray(3), a strong int64 (float64 here)
    lo32 = rng.standard_normal((3, 4)).astype(np.float32)
    cases.append(Case("clip-python-int", lambda lo: np.clip(3, lo, lo + 1), (lo32,)))
    cases.append(Case("clip-python-float", lambda lo: np.clip(0.5, lo, 2), (lo32,)))
    cases.append(Case("clip-python-int-int8", lambda lo: np.clip(3, lo, 100), (np.arange(6, dtype=np.int8),)))
    return [cz for cz in cases if cz.expect_error or not _numpy_errors(cz)]


def _numpy_errors(case):
    try:
        numpy_eager(case.fn, *case.args)
        return False
    except (TypeError, ValueError, OverflowError):  # numpy 2.5: out-of-range Python ints
        return True


WHERE_CLIP_CASES = where_clip_cases()


@pytest.mark.parametrize("case,opt_level", level_params(WHERE_CLIP_CASES))
def test_where_clip(case, opt_level):
    assert_matches_numpy(case.fn, case.args, opt_level, expect_error=case.expect_error)


def test_table_sizes():
    """Guards the table against silently shrinking."""
    assert len(UNARY_CASES) >= len(UNARY) * 10 * len(UNARY_SHAPES)
    assert len(BINARY_CASES) >= len(BINARY) * 9 * len(BINARY_SHAPES)
    assert len(ASTYPE_CASES) >= len(DTYPES) ** 2


# -- pinned edge values (numpy 2, written out) ---------------------------------------------------
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_integer_division_by_zero_and_int_min_by_minus_one(dtype, opt_level):
    lo = np.iinfo(dtype).min
    a = np.array([lo, 5, -7, 7, -7, 0], dtype)
    b = np.array([-1, 0, 2, -2, -2, 0], dtype)
    f = jit(lambda a, b: (a // b, a % b, np.fmod(a, b), divmod(a, b)), opt_level)
    fd, md, fm, (dq, dr) = f(a, b)
    np.testing.assert_array_equal(fd, np.array([lo, 0, -4, -4, 3, 0], dtype), strict=True)
    np.testing.assert_array_equal(md, np.array([0, 0, 1, -1, -1, 0], dtype), strict=True)
    np.testing.assert_array_equal(fm, np.array([0, 0, -1, 1, -1, 0], dtype), strict=True)
    np.testing.assert_array_equal(dq, fd, strict=True)
    np.testing.assert_array_equal(dr, md, strict=True)


@pytest.mark.parametrize("dtype", ["uint8", "uint64"])
def test_unsigned_division_by_zero(dtype, opt_level):
    a = np.array([5, 0, np.iinfo(dtype).max], dtype)
    b = np.array([0, 0, 2], dtype)
    q, r = jit(lambda a, b: (a // b, a % b), opt_level)(a, b)
    np.testing.assert_array_equal(q, np.array([0, 0, np.iinfo(dtype).max // 2], dtype), strict=True)
    np.testing.assert_array_equal(r, np.array([0, 0, 1], dtype), strict=True)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_float_floor_division_and_modulo_follow_divmod(dtype, opt_level):
    a = np.array([-7.0, 7.5, -7.5, 1.0, 0.0, -1.0, np.inf, 3.0, -0.0], dtype)
    b = np.array([2.0, -2.0, 2.0, 0.0, 0.0, 0.0, 2.0, np.inf, 5.0], dtype)
    q, r = jit(lambda a, b: (a // b, a % b), opt_level)(a, b)
    nan, inf = np.nan, np.inf
    assert_same(q, np.array([-4.0, -4.0, -4.0, inf, nan, -inf, nan, 0.0, -0.0], dtype))
    assert_same(r, np.array([1.0, -0.5, 0.5, nan, nan, nan, nan, 3.0, 0.0], dtype))
    assert np.signbit(q[-1]) and not np.signbit(r[-1])  # -0.0 // 5 is -0.0, -0.0 % 5 is +0.0


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_nan_propagation_of_maximum_minimum_fmax_fmin(dtype, opt_level):
    a = np.array([np.nan, 1.0, np.nan, -0.0, np.inf], dtype)
    b = np.array([1.0, np.nan, np.nan, 0.0, np.nan], dtype)
    mx, mn, fx, fn = jit(lambda a, b: (np.maximum(a, b), np.minimum(a, b), np.fmax(a, b),
                                       np.fmin(a, b)), opt_level)(a, b)
    nan, inf = np.nan, np.inf
    assert_same(mx, np.array([nan, nan, nan, 0.0, nan], dtype))
    assert_same(mn, np.array([nan, nan, nan, -0.0, nan], dtype))
    assert_same(fx, np.array([1.0, 1.0, nan, 0.0, inf], dtype))
    assert_same(fn, np.array([1.0, 1.0, nan, -0.0, inf], dtype))


def test_integer_wraparound(opt_level):
    i8 = np.array([127, -128, 100], np.int8)
    u8 = np.array([255, 0, 200], np.uint8)
    a, b, c, d, e = jit(lambda i, u: (i + 1, -i, abs(i), u + 1, u * 2), opt_level)(i8, u8)
    np.testing.assert_array_equal(a, np.array([-128, -127, 101], np.int8), strict=True)
    np.testing.assert_array_equal(b, np.array([-127, -128, -100], np.int8), strict=True)
    np.testing.assert_array_equal(c, np.array([127, -128, 100], np.int8), strict=True)
    np.testing.assert_array_equal(d, np.array([0, 1, 201], np.uint8), strict=True)
    np.testing.assert_array_equal(e, np.array([254, 0, 144], np.uint8), strict=True)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_hypot_of_inf_and_nan_is_inf(dtype, opt_level):
    a = np.array([np.inf, np.nan, -np.inf, np.nan, 3.0], dtype)
    b = np.array([np.nan, -np.inf, 1.0, 2.0, 4.0], dtype)
    got = jit(lambda a, b: np.hypot(a, b), opt_level)(a, b)
    assert_same(got, np.array([np.inf, np.inf, np.inf, np.nan, 5.0], dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_sign_of_signed_zeros_is_positive_zero(dtype, opt_level):
    x = np.array([-0.0, 0.0, -2.5, np.nan, -np.inf], dtype)
    got = jit(np.sign, opt_level)(x)
    assert_same(got, np.array([0.0, 0.0, -1.0, np.nan, -1.0], dtype))
    assert not np.signbit(got[:2]).any()  # numpy: sign(-0.0) is +0.0


# y * 0 and 0 / y are NaN where y is NaN or inf (and 0 / 0); Halide's
# interval arithmetic bounds them to exactly 0, which dropped the select of
# where(isnan(y * 0), ...) in vector code (lowering.lower_elementwise)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_values_that_look_constant_keep_nan_in_selects(dtype, opt_level):
    x = np.tile(np.array([1.5, -0.0, 0.0, np.nan, np.inf, -np.inf, 3.0, -4.0], dtype), (3, 5))
    fns = [lambda y: np.where(np.isnan(y * 0), 1.0, y * 0),  # one output each: a
           lambda y: np.where(np.isfinite(0 / y), y, 5),      # group of several kept
           lambda y: np.where(y * 0 == 0, 2.0, -1.0),         # y * 0 in a Func of its own
           lambda y: np.nansum(y * 0, axis=1)]
    got = [jit(fn, opt_level)(x) for fn in fns]
    for fn, g in zip(fns, got):
        assert_same(g, numpy_eager(fn, x))
    assert got[0][0, 3] == 1.0 and got[1][0, 2] == 5 and got[2][0, 4] == -1.0
    assert (got[3] == 0).all()
