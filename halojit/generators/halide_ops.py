"""Halide lowering of each elementwise op: a table keyed by op name, parallel
to the registry records in ``halojit/graph/ops/elementwise.py``.

Every function takes the operands as Halide Exprs already in the numpy
loop's compute type (bool for bool, float32 for float16) and returns the
result in the output's compute type, with numpy's exact semantics:
integer wrap-around, floor-division signs, NaN-propagating max/min.
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

from . import halide_fastmath as FM
from . import halide_math as M
from . import halide_math64 as M64

_HL_SCALAR = {
    "i": {8: hl.Int(8), 16: hl.Int(16), 32: hl.Int(32), 64: hl.Int(64)},
    "u": {8: hl.UInt(8), 16: hl.UInt(16), 32: hl.UInt(32), 64: hl.UInt(64)},
    "f": {16: hl.Float(16), 32: hl.Float(32), 64: hl.Float(64)},
}


def storage_type(dt: np.dtype) -> hl.Type:
    """Type of a buffer holding ``dt`` (bool is one byte: uint8)."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return hl.UInt(8)
    return _HL_SCALAR[dt.kind][dt.itemsize * 8]


def compute_type(dt: np.dtype) -> hl.Type:
    """Type of an Expr for ``dt``: float16 computes in float32 (rounded per op)."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return hl.Bool()
    if dt == np.float16:
        return hl.Float(32)
    return _HL_SCALAR[dt.kind][dt.itemsize * 8]


def literal(value, dt: np.dtype) -> hl.Expr:
    """A constant Expr; never pass numpy scalars to hl.Expr (they become bool)."""
    dt = np.dtype(dt)
    v = np.asarray(value).astype(dt).item()
    if dt.kind == "b":
        return hl.cast(hl.Bool(), hl.u8(1 if v else 0))
    if dt.kind == "f":
        if v == 0 and math.copysign(1.0, v) < 0:
            # -0.0 by its bits: Halide folds the constant -0.0 to +0.0
            t = compute_type(dt)
            u = hl.UInt(t.bits())
            return hl.reinterpret(t, hl.cast(u, 1) << hl.cast(u, t.bits() - 1))
        return hl.cast(compute_type(dt), hl.f64(float(v)))
    if dt.kind == "u":
        return hl.cast(compute_type(dt), hl.u64(int(v)))
    return hl.cast(compute_type(dt), hl.i64(int(v)))


def round_f16(e: hl.Expr) -> hl.Expr:
    """Round a float32 Expr to float16 precision, as numpy's half loops do."""
    return hl.cast(hl.Float(32), hl.cast(hl.Float(16), e))


def from_storage(e: hl.Expr, dt: np.dtype) -> hl.Expr:
    dt = np.dtype(dt)
    if dt.kind == "b":
        return e != hl.u8(0)
    if dt == np.float16:
        return hl.cast(hl.Float(32), e)
    return e


def to_storage(e: hl.Expr, dt: np.dtype) -> hl.Expr:
    return hl.cast(storage_type(dt), e)


def cast(e: hl.Expr, src: np.dtype, dst: np.dtype) -> hl.Expr:
    src, dst = np.dtype(src), np.dtype(dst)
    if dst.kind == "b":
        return e if src.kind == "b" else e != literal(0, src)
    if src.kind == "b":
        return hl.select(e, literal(1, dst), literal(0, dst))
    if src.kind == "f" and dst.kind in "iu" and dst.itemsize < 4:
        # numpy (C's cast on x86) truncates to int32 first, out of range and
        # NaN to INT_MIN, then wraps: -1.0 -> 255 as uint8, 300.0 -> 44,
        # 1e10 -> 0. Halide's direct cast is undefined there, and vectors
        # saturated (-1.0 -> 0) where scalars wrapped: the answer depended
        # on the array's length. The select also keeps Halide from folding
        # the two casts into one.
        f = e.type()
        i32 = hl.select((e >= hl.cast(f, -2.0 ** 31)) & (e < hl.cast(f, 2.0 ** 31)),
                        hl.cast(hl.Int(32), e), hl.Int(32).min())
        return hl.cast(compute_type(dst), i32)
    r = hl.cast(compute_type(dst), e)
    if src.kind == "f" and dst.kind in "iu":
        # Halide 21's simplifier turns reinterpret(uint, cast(int, float))
        # (the wrapping add of halojit's signed ints, an astype to unsigned)
        # into cast(uint, float), which LLVM makes poison for negative
        # values: (v * 10).astype(np.int32) + 1 was wrong wherever v < 0. A
        # select is no cast, so the fold stops here; it also gives NaN
        # numpy's value on x86 (0 below 32 bits, else the top bit alone)
        t = compute_type(dst)
        return hl.select(hl.is_nan(e), _nan_as_int(t), r)
    return round_f16(r) if dst == np.float16 else r


def _nan_as_int(t: hl.Type) -> hl.Expr:
    if t.bits() < 32:
        return hl.cast(t, 0)
    return t.min() if t.is_int() else hl.cast(t, 1) << hl.cast(t, t.bits() - 1)


# -- integer helpers --------------------------------------------------------------
def _wrapping(op):
    """Apply ``op`` in unsigned arithmetic so signed ints wrap like numpy."""
    def fn(a, b):
        t = a.type()
        if t.is_int():
            u = hl.UInt(t.bits())
            return hl.reinterpret(t, op(hl.reinterpret(u, a), hl.reinterpret(u, b)))
        return op(a, b)
    return fn


_wadd = _wrapping(lambda a, b: a + b)
_wsub = _wrapping(lambda a, b: a - b)
_wmul = _wrapping(lambda a, b: a * b)


def _zero(e):
    return hl.cast(e.type(), 0)


def _one(e):
    return hl.cast(e.type(), 1)


def _floor_divide(a, b):
    t = a.type()
    if t.is_float():
        return _float_divmod(a, b)[0]
    if t.is_uint():
        return a / b  # Halide: x / 0 == 0, like numpy
    q = a / b  # Euclidean; INT_MIN / -1 wraps
    r = a % b
    return hl.select((b < _zero(b)) & (r != _zero(r)), q - _one(q), q)


def _remainder(a, b):
    t = a.type()
    if t.is_float():
        return _float_divmod(a, b)[1]
    r = a % b  # Euclidean: 0 <= r < |b|; x % 0 == 0
    if t.is_uint():
        return r
    return hl.select((b < _zero(b)) & (r != _zero(r)), r + b, r)


def _fmod(a, b):
    t = a.type()
    if t.is_float():
        return _float_fmod(a, b)
    if t.is_uint():
        return a % b
    r = _remainder(a, b)  # numpy sign (of b) -> C sign (of a)
    return hl.select((r != _zero(r)) & ((r < _zero(r)) != (a < _zero(a))), r - b, r)


def opaque(e):
    """``e`` unchanged, as a float value whose range Halide cannot bound.

    Halide's loop trimming (TrimNoOps) deletes an update whose stored value
    it proves equal to the value loaded, and its interval arithmetic knows
    no NaN: a float load is unbounded but ``load * 0`` (or ``0 / load``) is
    exactly [0, 0]. So ``sum(y * 0)`` over a two-level loop nest lost its
    whole update and returned 0 where numpy gives NaN for a NaN or inf in
    ``y`` (strict_float does not help: the bounds ignore it). A bit pattern
    XOR 0 hides the value from the interval analysis and costs nothing:
    LLVM folds it away."""
    t = e.type()
    if not t.is_float():
        return e
    u = hl.UInt(t.bits())
    return hl.reinterpret(t, hl.reinterpret(u, e) ^ hl.cast(u, 0))


def _fdiv(a, b):
    """IEEE float division that Halide accepts: its simplifier rejects a
    divisor that folds to constant zero ("Division by constant zero", e.g.
    y * 0 without strict_float), where numpy gives inf or nan. The divisor is
    hidden from it (``opaque``) and the hardware divides: a / +-0 is +-inf or
    NaN as numpy has it. The form before tested b == 0 and selected
    a * copysign(inf, b), a multiply, a blend and the copysign's two bit
    operations per element beside the vdivps (under strict_float Halide
    folds no float comparison, so even x / 3 paid for them)."""
    return a / opaque(b)


def divide_by_constant(c):
    """Division by the nonzero constant ``c``, known while lowering. A power
    of two whose reciprocal is a normal float divides as a multiply by that
    reciprocal (a vmulps for a vdivps): both round the same exact value, so
    the bits are the same. Any other ``c`` is a plain division.

    Tried and dropped: a float32 a / c as float32(float64(a) * (1/c)_64),
    the same bits wherever c is not an even integer (no quotient is then
    within 2**-25 ulp of a rounding midpoint, and the product is within
    2**-28) and for most even ones (c = 98 and 150 rounded some subnormal
    ties the other way). The conversions cost more than the vdivps: the
    4096x4096 blur (two x / 3) on one thread took 13.0 ms against 9.7-10.9
    (2-core AVX2 VM, interleaved with a copy)."""
    def fn(a, b):
        t = a.type()
        dt = np.float32 if t.bits() <= 32 else np.float64
        with np.errstate(all="ignore"):
            inv = dt(1) / dt(c)  # inf for a subnormal c
        if np.frexp(dt(c))[0] in (0.5, -0.5) and np.finfo(dt).tiny <= abs(inv) < np.inf:
            return a * hl.cast(t, hl.f64(float(inv)))
        return a / b
    return fn


# Exact C fmod without libm. Each reduction step replaces x by x - q*B for a
# B = |b| * 2**k chosen so that the integer quotient q has at most
# _FMOD_QBITS bits; k is 0 once |x/b| < 2**_FMOD_QBITS. A float32 (or
# float16) pair runs in float64, where q*B (28 + 24 bits) and x - q*B are
# exact. float64 has no wider type: q*B is split Dekker-style into an exact
# sum of two doubles. The steps make a serial chain: each one more cost about
# 0.8 ns per element on the 2-core dev VM (float32, 4M elements: 1 or 2 steps
# 12 ms, 4 steps 16, 10 steps 36; numpy's remainder 97, the old inexact form
# a - b*trunc(a/b) 5.9), so the steps cover the quotients that occur: float32
# 4 steps, exact while |a/b| < 2**112 (all of float16); float64 1 step, while
# |a/b| < 2**51. Beyond, the result is 0 (README: known differences). The old
# form gave 0 for float64 [1., 2.] % 0.1 (numpy 0.09999...): a/b rounds up
# to an integer there.
_FMOD_QBITS = {32: 28, 64: 51}
_FMOD_STEPS = {32: 4, 64: 1}
_F64_EXP = 0x7FF0000000000000


def _split(v):
    """Veltkamp split of a float64: v == hi + lo exactly, each 26 bits or fewer."""
    c = v * hl.f64(134217729.0)  # 2**27 + 1
    hi = c - (c - v)
    return hi, v - hi


def _exact_residual(x, q, qh, ql, B, bh, bl):
    """x - q*B in float64 for q = qh + ql and B = bh + bl (splits), exact
    whenever that value is a double (x >= 0, q integral): Dekker's product
    q*B == p + err exactly, and x - p is exact (p is within 2x of x)."""
    p = q * B
    err = ((qh * bh - p) + qh * bl + ql * bh) + ql * bl
    return (x - p) - err


def _fmod_step(x, y, inv_y, ysplit, bits: int):
    """One reduction of 0 <= x by a multiple B of y > 0 (see _FMOD_QBITS).
    q = trunc(x/B) from the reciprocal is off by at most one: a residual
    below 0 or at least B says which way, and q is corrected."""
    f64, u64 = hl.Float(64), hl.UInt(64)
    zero = hl.f64(0.0)
    est = hl.min(x * inv_y, hl.f64(2.0 ** 1000))  # about x / y, kept finite
    top = hl.reinterpret(u64, est) & hl.u64(_F64_EXP)  # 2**e <= est
    inv_top = hl.reinterpret(f64, hl.u64(0x7FE0000000000000) - top)  # 2**-e, no division
    scale = hl.max(hl.reinterpret(f64, top) * hl.f64(2.0 ** -bits), hl.f64(1.0))
    B = y * scale  # y * 2**max(0, e - bits): a power-of-two multiple of y
    q = hl.trunc(est * hl.min(inv_top * hl.f64(2.0 ** bits), hl.f64(1.0)))
    if ysplit is None:  # every value has a 24-bit mantissa: plain float64 is exact
        r = x - q * B
        return hl.select(r < zero, r + B, hl.select(r >= B, r - B, r))
    bh, bl = ysplit[0] * scale, ysplit[1] * scale  # the split scales exactly
    qh, ql = _split(q)
    r = _exact_residual(x, q, qh, ql, B, bh, bl)
    fix = hl.select(r < zero, hl.f64(-1.0), hl.select(r >= B, hl.f64(1.0), zero))
    return _exact_residual(x, q + fix, qh, ql + fix, B, bh, bl)


def _float_fmod(a, b):
    """C fmod (numpy's np.fmod): the remainder of a / b with a's sign."""
    t = a.type()
    f64 = hl.Float(64)
    wide = t.bits() == 64
    a64, b64 = hl.cast(f64, a), hl.cast(f64, b)
    ax, ay = _sign_bits(a64, clear=True), _sign_bits(b64, clear=True)
    ok = hl.is_finite(ax) & hl.is_finite(ay) & (ay != hl.f64(0.0))
    one = hl.f64(1.0)
    x, y = hl.select(ok, ax, one), hl.select(ok, ay, one)
    xs, ys, up = x, y, None
    if wide:  # keep Dekker's split products clear of overflow and underflow
        big, tiny = x >= hl.f64(2.0 ** 960), y < hl.f64(2.0 ** -900)
        up = hl.select(big, hl.f64(2.0 ** -128), hl.select(tiny, hl.f64(2.0 ** 128), one))
        xs, ys = x * up, y * up
    inv_y = one / ys
    ysplit = _split(ys) if wide else None
    key = 64 if wide else 32
    r = xs
    for _ in range(_FMOD_STEPS[key]):
        r = _fmod_step(r, ys, inv_y, ysplit, _FMOD_QBITS[key])
    r = hl.select((r >= hl.f64(0.0)) & (r < ys), r, hl.f64(0.0))  # |a/b| beyond the steps
    # |x| < |y| is x itself: the steps would split a y near float64's max, which overflows
    r = hl.select(x < y, x, r if up is None else r / up)
    # NaN as C's fmod, (x * y) / (x * y), gives it on x86: a NaN operand's
    # own (a's first), else the default NaN, sign set (inf % inf, x % 0):
    # numpy's signbit of it is True, where a NaN of a's sign (+inf % inf) was not
    default = hl.reinterpret(f64, hl.u64(0xFFF8000000000000))
    nan = hl.select(hl.is_nan(a64), a64, hl.select(hl.is_nan(b64), b64, default))
    r = hl.select(ok, _copysign(r, a64),  # fmod keeps the sign of a
                  hl.select(hl.is_inf(ay) & hl.is_finite(ax), a64, nan))
    return hl.cast(t, r)


def _float_divmod(a, b):
    """numpy's npy_divmod: (floor quotient, remainder with the sign of b)."""
    zero = _zero(a)
    mod = _float_fmod(a, b)
    div = _fdiv(a - mod, b)
    adjust = (mod != zero) & ((b < zero) != (mod < zero))
    mod2 = hl.select(adjust, mod + b, hl.select(mod != zero, mod, _copysign(zero, b)))
    div = hl.select(adjust, div - _one(a), div)
    fl = hl.floor(div)
    fl = hl.select(div - fl > hl.cast(a.type(), 0.5), fl + _one(a), fl)
    fl = hl.select(div != zero, fl, _copysign(zero, _fdiv(a, b)))
    bz = b == zero
    return hl.select(bz, _fdiv(a, b), fl), hl.select(bz, mod, mod2)


def _signbit(a):
    t = a.type()
    if t.is_float():
        u = hl.UInt(t.bits())
        return (hl.reinterpret(u, a) >> hl.cast(u, t.bits() - 1)) != hl.cast(u, 0)
    if t.is_int():
        return a < _zero(a)
    return hl.cast(hl.Bool(), hl.u8(0)) if t.is_bool() else a != a


def _copysign(a, b):
    """|a| with b's sign bit, by bit operations: Halide folds the constant
    -0.0 to 0.0, so select(..., -a, a) loses signed zeros."""
    t = a.type()
    u = hl.UInt(t.bits())
    sign = hl.cast(u, 1) << hl.cast(u, t.bits() - 1)
    bits = (hl.reinterpret(u, a) & ~sign) | (hl.reinterpret(u, b) & sign)
    return hl.reinterpret(t, bits)


def _power(a, b):
    t = a.type()
    if t.is_bool():
        return a | ~b
    if not t.is_float():
        raise AssertionError("integer power is lowered as a loop (lowering.lower_int_power)")
    if t.bits() < 64:  # Halide's float32 pow is off by tens of ulp: go through float64
        return hl.cast(t, hl.pow(hl.cast(hl.Float(64), a), hl.cast(hl.Float(64), b)))
    return hl.pow(a, b)


def _nan_max(pick):
    def fn(a, b):
        t = a.type()
        if not t.is_float():
            return (a | b) if t.is_bool() and pick is hl.max else \
                (a & b) if t.is_bool() else pick(a, b)
        return hl.select(hl.is_nan(a), a, hl.select(hl.is_nan(b), b, pick(a, b)))
    return fn


def _fmax(pick):
    def fn(a, b):
        if not a.type().is_float():
            return _nan_max(pick)(a, b)
        return hl.select(hl.is_nan(a), b, hl.select(hl.is_nan(b), a, pick(a, b)))
    return fn


def _shift(left):
    def fn(a, b):
        t = a.type()
        bits = t.bits()
        big = (b >= hl.cast(b.type(), bits))
        if t.is_int():
            big = big | (b < _zero(b))
        u = hl.UInt(bits)
        bu = hl.cast(u, hl.select(big, _zero(b), b))
        if left:
            r = hl.reinterpret(t, hl.reinterpret(u, a) << bu) if t.is_int() else a << bu
            return hl.select(big, _zero(a), r)
        r = a >> bu
        overflow = hl.select(a < _zero(a), -_one(a), _zero(a)) if t.is_int() else _zero(a)
        return hl.select(big, overflow, r)
    return fn


def _f64(fn):
    """Evaluate a float function in float64 (for float32 accuracy) and cast back."""
    def wrapped(a):
        t = a.type()
        if t.bits() < 64:
            return hl.cast(t, fn(hl.cast(hl.Float(64), a)))
        return fn(a)
    return wrapped


# float32 exp without Halide's hl.exp, whose 2**k comes from clamped exponent
# bits: it flushes results below FLT_MIN (x < -87.34) to 0 and returns 0 for
# NaN and +inf (measured, strict_float too); float64 hl.exp is IEEE-faithful.
# Here x is clamped to [-104, 89] (exp(-104) rounds to 0, exp(89) overflows;
# NaN passes the select clamps), reduced as x = k ln2 + r with k = round(x /
# ln2), |r| <= ln2/2 + tiny, and exp(x) = (p s1) s2 with s1 = 2**(k >> 1),
# s2 = 2**(k - (k >> 1)): both normal for k in [-150, 128], the first product
# is exact and the second rounds once, into the subnormals or to inf as numpy.
# p = 1 + (r + r**2 h(r)), h a degree-4 fit of (expm1(r) - r) / r**2 on
# [-0.35, 0.35] (Lawson, relative error of expm1 1.4e-8).
# Within 1 ulp of the correctly rounded exp and 3 ulp of numpy's on every
# 61st float32 in [-120, 100] (tests/ops/test_tanh_exp_sweep.py).
# 2-core AVX-512 VM, (4096, 1024) float32, Halide JIT, two threads, medians:
# exp 0.88 ms with hl.exp and its subnormal/NaN/inf selects -> 0.64 ms (a
# copy: 0.58 ms); the chain exp(a*b+1)*c - a/(1+abs(b)) 1.25 -> 1.16 ms, at
# (16384, 1024) 8.4 -> 7.7 ms (the same chain with a multiply in place of the
# exp took 7.7 ms in that run, 6.8-7.2 ms in others: its division and memory
# bound it now). Traced chain with out= (medians of 21 calls, three alternating
# runs) against 26ec0c8: (16384, 1024) 8.96 -> 8.22 ms, (4096, 1024) 1.36 ->
# 1.22 ms. Tried: the 2**k split as a select of (magic, 2**-32 or 2) on the
# sign of x instead of k >> 1 - same 28 instructions, same time.
# Also tried, on the 2-core AVX2 VM (AMD EPYC): the polynomial in a plain
# Func of its own outside strict_float, every other value of the kernel
# wrapped in hl.strict_float and the target without it (as the Matmul
# template does), so that LLVM contracts the Horner steps to FMA. Five FMAs
# per vector replace ten multiplies and adds, but AVX2 has no broadcast
# memory operands, and the chain's loop needed 53 more vbroadcastss per 64
# lanes (458 instructions against 451); putting NaN back after a NaN-free
# polynomial (LLVM's no-NaN flags) cost more. Min of 11 calls over three
# alternating processes, (16384, 1024) with out=: softmax 9.2 -> 8.8 ms,
# chain 8.7 -> 8.9, GELU 6.0 -> 6.6. Not kept.
# Tried again at the LLVM IR level (same VM, commit 7158743): llvmlite
# rewrote only our own steps into llvm.fma (Horner steps found by their
# registered coefficients, r + r*r*h, the Cody-Waite x - k*ln2_hi -
# k*ln2_lo and x/ln2 + magic: 18 per 32 lanes of tanh, its loop 144 -> ~115
# instructions), so the user's arithmetic stayed unfused. Min of 15-31
# interleaved calls, several processes, with out=: (16384, 1024) tanh
# 0.98-1.03x, exp 0.91-1.0x, softmax 0.91-0.96x, GELU 0.99x, chain
# 0.94-1.16x; in cache (1024, 1024) tanh 0.83-0.94x, exp 0.79-1.02x,
# softmax 0.95-1.05x, GELU 0.8-1.07x. On large arrays the change was within
# this VM's noise. Small kernels would also have needed llvmlite's object
# path, whose code for exp alone ran 0.93-1.2x Halide's there. Not kept.
_EXP_H = (0.4999999804299962, 0.1666653873998742, 0.04166722107922923,
          0.00836717327698749, 0.0013882392035285613)
_LN2_HI = 0.693145751953125  # 15 bits: k * _LN2_HI is exact for |k| < 2**9
_LN2_LO = math.log(2.0) - _LN2_HI
# x + _ROUND_MAGIC rounds x to an integer k held in the low mantissa bits
# (the float's ulp is 1 in [2**23, 2**24)).
_ROUND_MAGIC = 1.5 * 2.0 ** 23


def _exp2_int(k):
    """2**k as float32 for int32 k in [-126, 127], from the exponent bits."""
    u32 = hl.UInt(32)
    return hl.reinterpret(hl.Float(32), hl.cast(u32, k + hl.i32(127)) << hl.u32(23))


def _exp_reduce(x):
    """(q, k) with x = k ln2 + r and q = expm1(r) = r + r**2 h(r), for a
    float32 x already clamped (or NaN): the reduction above."""
    f32 = hl.f32
    kt = x * f32(1 / LN2) + f32(_ROUND_MAGIC)
    kf = kt - f32(_ROUND_MAGIC)
    r = (x - kf * f32(_LN2_HI)) - kf * f32(_LN2_LO)
    q = r + (r * r) * M._poly32(r, _EXP_H)
    k = hl.reinterpret(hl.Int(32), kt) - hl.i32(int(np.float32(_ROUND_MAGIC).view(np.int32)))
    return q, k


def _exp_core(x, shift: int = 0):
    """e**x / 2**shift for a float32 x already clamped to [-104, 90] (or
    NaN); shift moves the scale 2**k, not the rounding."""
    q, k = _exp_reduce(x)
    k = k - hl.i32(shift)
    k1 = k >> hl.i32(1)
    return ((hl.f32(1) + q) * _exp2_int(k1)) * _exp2_int(k - k1)


def _exp(a):
    if a.type() != hl.Float(32):
        return hl.exp(a)
    f32 = hl.f32
    a = opaque(a)  # see _vectorized: exp(float32(abs(int32 -2**31))) gave 1.77e25
    x = hl.select(a > f32(89), f32(89), a)
    x = hl.select(x < f32(-104), f32(-104), x)
    # strict even when the kernel is not (HALOJIT_STRICT_FLOAT=0): fast-math
    # would fold (t + _ROUND_MAGIC) - _ROUND_MAGIC to t (measured: exp(3.1)
    # came out 32) and reassociate the Cody-Waite steps
    return hl.strict_float(_exp_core(x))


# float32 sinh and cosh from h = e**|x| / 2 (_exp_core with the scale halved,
# so h stays finite to |x| = 89.4 where e**|x| overflows): cosh = h + 1/(4h),
# sinh = h - 1/(4h) for |x| >= 2, where the subtraction loses under 1/10 of
# an ulp; below, sinh(x) = x + x z P(z), z = x*x, P a degree-4 fit of
# (sinh(x) - x) / (x z) on [0, 4] (3.4e-10). These replaced float64 versions
# (0.4x and 0.7x numpy's loops).
_SINH32_P = (0.1666666670051169, 0.008333329111483762, 0.0001984211158312272,
             2.749870266753525e-06, 2.6709522579306703e-08)


def _half_exp(ax):
    """(h, 1/(4h)) with h = e**ax / 2, for float32 ax >= 0 or NaN."""
    f32 = hl.f32
    h = _exp_core(hl.select(ax > f32(90), f32(90), ax), shift=1)
    return h, f32(0.25) / h


def _sinh(a):
    f32 = hl.f32
    a = opaque(a)  # see _vectorized
    ax = M._abs(a)
    h, q = _half_exp(ax)
    r = hl.select(ax < f32(2), M._odd_poly32(ax, _SINH32_P), h - q)
    return hl.strict_float(M._flip(M._signbit(a), r))


def _cosh(a):
    h, q = _half_exp(M._abs(opaque(a)))
    return hl.strict_float(h + q)


def _log(a):
    # Halide's float32 log returns ~89 for NaN and +inf and flushes
    # subnormal inputs; scale subnormals up by 2**24 and patch the specials.
    if a.type() != hl.Float(32):
        return hl.log(a)
    tiny = (a > hl.f32(0)) & (a < hl.f32(1.17549435e-38))
    r = hl.log(hl.select(tiny, a * hl.f32(16777216.0), a)) - \
        hl.select(tiny, hl.f32(24 * LN2), hl.f32(0))
    nan, inf = hl.f32(float("nan")), hl.f32(float("inf"))
    r = hl.select(a == hl.f32(0), -inf, hl.select(a < hl.f32(0), nan, r))
    return hl.select(hl.is_nan(a) | (a == inf), a, r)


# float32 tanh(x) = sign(x) * m / (m + 2), m = expm1(2|x|) (tanh(9.02) rounds
# to 1.0f, so 2|x| is clamped to 18.04 and needs no overflow checks). expm1
# reduces z = 2|x| = k ln2 + r as _exp does (k = round(z / ln2), the same
# polynomial q = expm1(r) = r + r**2 h(r)) and m = 2**k q + (2**k - 1): the
# cancellation for k >= 1 and r < 0 costs at most ~1 ulp (measured). One
# formula for every |x|: no separate small-x polynomial.
# With 127 more than _ROUND_MAGIC, the low 9 bits of the sum's bit pattern
# are k + 127: shifted left by 23 they are the float 2**k (k in [0, 26] here).
_ROUND_MAGIC_127 = _ROUND_MAGIC + 127


def _tanh(a):
    """float32 tanh without libm: Halide's own float32 tanh is a scalar libm
    call (32 ms vs numpy's 0.65 ms on 2M elements, measured).
    Exhaustively over every float32 in [0, 12) (beyond, it returns +-1 as
    numpy; tanh(-x) = -tanh(x) by the sign bit): at most 3 ulp from numpy's
    (3206 inputs) and 3 ulp from the correctly rounded tanh (35 inputs);
    NaN, +-inf, -0.0 and subnormals as numpy (tests/ops/test_tanh_exp_sweep.py).
    Timed on the 2-core AVX-512 VM, (4096, 1024) float32, Halide JIT micro-
    benchmark, two threads, medians:
      - previous version (a polynomial for |x| < 0.5, else 1 - 2/(exp(2|x|)
        + 1) with Halide's exp, 55 vector instructions per 16 lanes): tanh
        1.29 ms, GELU 1.43 ms;
      - this formula with k = round(z/ln2 - 0.4999) (r in [0, ln2], a
        degree-5 h, max 2 ulp from the correctly rounded, 31 instructions):
        tanh 0.83 ms, GELU 1.10 ms;
      - this one (28 instructions): tanh 0.76 ms, GELU 1.02 ms. A copy is
        0.58 ms. The vdivps costs ~0.13 ms (a multiply in its place).
    Traced tanh-GELU with out= (halojit.trace, medians of 21 calls, three
    alternating runs), against 26ec0c8: (16384, 1024) 6.18 -> 4.55 ms,
    (4096, 1024) 1.50 -> 1.03 ms."""
    if a.type() != hl.Float(32):
        return hl.tanh(a)
    f32 = hl.f32
    a = opaque(a)  # see _vectorized
    u32 = hl.UInt(32)
    ax = M._abs(a)
    # clamp as a select: NaN compares false and flows through to the result
    z = hl.select(ax > f32(9.02), f32(9.02), ax) * f32(2)
    kt = z * f32(1 / LN2) + f32(_ROUND_MAGIC_127)
    kf = kt - f32(_ROUND_MAGIC_127)
    r = (z - kf * f32(_LN2_HI)) - kf * f32(_LN2_LO)
    q = r + (r * r) * M._poly32(r, _EXP_H)
    scale = hl.reinterpret(hl.Float(32), hl.reinterpret(u32, kt) << hl.u32(23))
    m = scale * q + (scale - f32(1))
    t = m / (m + f32(2))
    # the sign by its bit (t >= +0): -t would be 0 - t, +0.0 for x = -0.0
    sign = hl.reinterpret(u32, a) & hl.u32(0x80000000)
    # strict in fast-math kernels too (HALOJIT_FAST_MATH=1 has no tanh of its
    # own): without it the rounding trick folds away (tanh(0.17) gave 0.0)
    return hl.strict_float(hl.reinterpret(hl.Float(32), hl.reinterpret(u32, t) | sign))


def _expm1_32(a):
    """float32 expm1 in float32 (the float64 version ran 0.55x numpy's loop):
    _exp's reduction x = k ln2 + r with q = expm1(r) = r + r**2 h(r), then
    2**k q + (2**k - 1) as _tanh does (exact q for k = 0, so small x keep
    their precision), or (1 + q) 2**k with the scale split as _exp's where
    2**k may overflow (x > 40). x is clamped to [-30, 89]: expm1(-30)
    rounds to -1. -0.0 and |x| < 2**-25 return x."""
    f32 = hl.f32
    a = opaque(a)  # see _vectorized
    x = hl.select(a > f32(89), f32(89), a)
    x = hl.select(x < f32(-30), f32(-30), x)
    q, k = _exp_reduce(x)
    k1 = k >> hl.i32(1)
    s1, s2 = _exp2_int(k1), _exp2_int(k - k1)
    scale = s1 * s2
    small = scale * q + (scale - f32(1))
    big = ((f32(1) + q) * s1) * s2
    m = hl.select(x > f32(40), big, small)
    return hl.strict_float(hl.select(M._abs(a) < f32(2.0 ** -25), a, m))


def _expm1(a):
    u = hl.exp(a)
    one = _one(a)
    r = hl.select(u == one, a, hl.select(u - one == -one, -one, (u - one) * a / hl.log(u)))
    return hl.select(hl.is_inf(a) & (a > _zero(a)), a, r)


def _log1p(a):
    one = _one(a)
    u = a + one
    r = hl.select(u == one, a, hl.log(u) * a / (u - one))
    return hl.select(hl.is_inf(a) & (a > _zero(a)), a, r)


def _cbrt(a):
    """float64 cbrt (float32 has halide_math.cbrt): fdlibm's bit-trick start
    (5 bits), three Halley steps and a Newton step, on |a| scaled by 2**54
    below the normals and by 2**-999 above 2**1000 (whole cubes, undone on
    the root), so that y**3 + 2|a| neither loses the subnormal's bits nor
    overflows. hl.pow and one Newton step were off by 847 ulp at 2**63 and
    by 371091 at 1e-300; this is within 1 ulp of numpy on 200000 random
    float64 bit patterns and the edges (tests/ops/test_transcendentals.py)."""
    f64, u64 = hl.Float(64), hl.UInt(64)
    ad = hl.abs(a)
    tiny, huge = ad < hl.f64(2.0 ** -1022), ad > hl.f64(2.0 ** 1000)
    x = hl.select(tiny, ad * hl.f64(2.0 ** 54), hl.select(huge, ad * hl.f64(2.0 ** -999), ad))
    hi = hl.reinterpret(u64, x) >> hl.u64(32)
    y = hl.reinterpret(f64, (hi / hl.u64(3) + hl.u64(715094163)) << hl.u64(32))
    for _ in range(3):
        y3 = y * y * y
        y = y * ((y3 + hl.f64(2) * x) / (hl.f64(2) * y3 + x))  # the ratio first: no overflow
    y = y - (y * y * y - x) / (hl.f64(3) * y * y)  # a Newton step: 3 ulp -> 1
    y = hl.select(tiny, y * hl.f64(2.0 ** -18), hl.select(huge, y * hl.f64(2.0 ** 333), y))
    r = hl.select((a == _zero(a)) | hl.is_inf(a) | hl.is_nan(a), ad, y)
    return _copysign(r, a)  # by the bits: -0.0 stays -0.0


def _sign(a):
    t = a.type()
    if t.is_bool():
        return a
    zero, one = _zero(a), _one(a)
    if t.is_uint():
        return hl.select(a > zero, one, zero)
    if t.is_float():
        # numpy's sign(-0.0) is +0.0
        return hl.select(hl.is_nan(a), a, hl.select(a > zero, one, hl.select(a < zero, -one, zero)))
    return hl.select(a > zero, one, hl.select(a < zero, -one, zero))


def _absolute(a):
    t = a.type()
    if t.is_bool() or t.is_uint():
        return a
    if t.is_int():
        # abs(INT_MIN) wraps to INT_MIN, as numpy: a negation in unsigned
        # arithmetic (defined wrap-around). hl.abs became LLVM's abs, whose
        # INT_MIN LLVM took as never seen: in scalar code float64(abs(int64
        # -2**63)) came out +2**63 (np.log(np.abs(x)) 1463.2, numpy NaN)
        u = hl.UInt(t.bits())
        bits = hl.reinterpret(u, a)
        return hl.reinterpret(t, hl.select(a < hl.cast(t, 0), hl.cast(u, 0) - bits, bits))
    return _sign_bits(a, clear=True)


def _sign_bits(a, clear: bool):
    """Float ``a`` with its sign bit cleared (abs) or flipped (negative), as
    numpy does, so signed zeros come out right: Halide lowers -x as 0 - x
    (-(+0.0) came out +0.0) and its float64 abs kept -0.0's sign."""
    bits = a.type().bits()
    u = hl.UInt(bits)
    sign = hl.cast(u, 1) << hl.cast(u, bits - 1)
    raw = hl.reinterpret(u, a)
    return hl.reinterpret(a.type(), (raw & ~sign) if clear else (raw ^ sign))


def self_difference(a, b):
    """``a - a`` for a float ``a`` (b is a) from a's bits, which no float
    simplification sees through (lowering.lower_elementwise says why): +0.0;
    where a is NaN, a quieted; where a is inf, x86's default NaN (sign set),
    as the subtraction gives."""
    t = a.type()
    bits = t.bits()
    u = hl.UInt(bits)
    man = bits - 1 - (8 if bits == 32 else 11)  # mantissa bits
    one = hl.cast(u, 1)
    exp = hl.cast(u, (1 << (bits - 1 - man)) - 1) << hl.cast(u, man)
    quiet = one << hl.cast(u, man - 1)
    raw = hl.reinterpret(u, a)
    nan_in = raw | quiet
    inf_in = (one << hl.cast(u, bits - 1)) | exp | quiet
    out = hl.select((raw & exp) != exp, hl.cast(u, 0), hl.select((raw & ~exp) << one != hl.cast(u, 0),
                                                                 nan_in, inf_in))
    return hl.reinterpret(t, out)


def _negative(a):
    t = a.type()
    if t.is_float():
        return _sign_bits(a, clear=False)
    return _wsub(_zero(a), a)


def _reciprocal(a):
    t = a.type()
    if t.is_float():
        return _fdiv(_one(a), a)
    return _one(a) / a if t.is_uint() else hl.select(a == _zero(a), _zero(a), _one(a) / a)


def _compare(op, nan_result, strict_op=None):
    """An IEEE comparison: Halide's simplifier rewrites a >= b as !(a < b),
    which is true for NaN operands, so NaN cases are decided explicitly.
    ``strict_op``, for floats in strict_float kernels, takes no NaN test
    (is_nan would walk the operands' Exprs as trees): there Halide keeps
    <, >, == and != as strict_lt and kin, but a <= b still became !(b < a),
    true for NaN, so <= is (a < b) | (a == b)."""
    def fn(a, b):
        ta, tb = a.type(), b.type()
        if (ta.is_int() and tb.is_uint()) or (ta.is_uint() and tb.is_int()):
            return _mixed_sign_compare(op, a, b)
        if strict_op is not None and ta.is_float():
            return strict_op(a, b)
        r = op(a, b)
        if not ta.is_float():
            return r
        either_nan = hl.is_nan(a) | hl.is_nan(b)
        return (r | either_nan) if nan_result else (r & ~either_nan)
    return fn


def _mixed_sign_compare(op, a, b):
    """numpy compares int64 with uint64 by their values (its loop takes the
    pair as is): a negative signed value is below every unsigned one, the
    rest compare as unsigned. Halide would compare the bits of one type."""
    bits = max(a.type().bits(), b.type().bits())
    u = hl.UInt(bits)
    if a.type().is_int():
        neg, below = a < hl.cast(a.type(), 0), op(hl.i64(-1), hl.i64(0))
    else:
        neg, below = b < hl.cast(b.type(), 0), op(hl.i64(0), hl.i64(-1))
    return hl.select(neg, below, op(hl.cast(u, a), hl.cast(u, b)))


def _hypot(a, b):
    # IEEE: hypot(inf, nan) is inf; Halide's gives nan.
    r = hl.cast(a.type(), hl.hypot(hl.cast(hl.Float(64), a), hl.cast(hl.Float(64), b)))
    inf = hl.cast(a.type(), float("inf"))
    return hl.select(hl.is_inf(a) | hl.is_inf(b), inf, r)


def _bool_or_int(bool_op, int_op):
    return lambda a, b: bool_op(a, b) if a.type().is_bool() else int_op(a, b)


def _truthy(e):
    return e if e.type().is_bool() else e != _zero(e)


def _float_only(fn, other=None):
    def wrapped(a):
        if a.type().is_float():
            return fn(a)
        return other(a) if other else a != a
    return wrapped


LN2 = math.log(2.0)
LN10 = math.log(10.0)


def _vectorized_f32(name, other):
    """float32 from halide_math (vectorized polynomials); other types ``other``."""
    return _vectorized(hl.Float(32), (M.UNARY if name in M.UNARY else M.BINARY)[name], other)


def _vectorized(t, fast, other):
    """``fast`` (a polynomial of ours) for operands of type ``t``, their values
    hidden from Halide's interval analysis (``opaque``): it bounds
    reinterpret<int32>(abs(x)) as non-negative, so the NaN of log(-2**31.0)
    (np.log(np.abs(x)) of int32 -2**31, which numpy wraps) folded away and
    the polynomial returned 1441.05. ``other`` for the rest."""
    def fn(*args):
        if args[0].type() == t:
            return fast(*[opaque(a) for a in args])
        return other(*args)
    return fn


UNARY = {
    "negative": _negative,
    "positive": lambda a: a,
    "absolute": _absolute,
    "sign": _sign,
    "sqrt": hl.sqrt,
    "square": lambda a: _wmul(a, a) if not a.type().is_float() else a * a,
    "reciprocal": _reciprocal,
    "exp": _exp,
    "exp2": _f64(lambda a: hl.pow(hl.f64(2.0), a)),
    "expm1": _f64(_expm1),
    "log": _log,
    "log2": _f64(lambda a: hl.log(a) / hl.f64(LN2)),
    "log10": _f64(lambda a: hl.log(a) / hl.f64(LN10)),
    "log1p": _f64(_log1p),
    "sin": hl.sin, "cos": hl.cos, "tan": hl.tan,
    "arcsin": hl.asin, "arccos": hl.acos, "arctan": hl.atan,
    "sinh": _f64(hl.sinh), "cosh": _f64(hl.cosh), "tanh": _tanh,
    "arcsinh": _f64(hl.asinh), "arccosh": _f64(hl.acosh), "arctanh": _f64(hl.atanh),
    "floor": lambda a: hl.floor(a) if a.type().is_float() else a,
    "ceil": lambda a: hl.ceil(a) if a.type().is_float() else a,
    "trunc": lambda a: hl.trunc(a) if a.type().is_float() else a,
    "rint": lambda a: hl.round(a) if a.type().is_float() else a,
    "logical_not": lambda a: ~_truthy(a),
    "invert": lambda a: ~a,
    # the 1 bits of |a| (numpy's definition), as uint8
    "bitwise_count": lambda a: hl.cast(hl.UInt(8), hl.popcount(hl.abs(a) if a.type().is_int() else a)),
    "isnan": _float_only(hl.is_nan),
    "isinf": _float_only(hl.is_inf),
    "isfinite": _float_only(hl.is_finite, lambda a: a == a),
    "signbit": _signbit,
    "cbrt": _f64(_cbrt),
    "deg2rad": lambda a: _angle_scale(a, math.pi, 180.0),
    "rad2deg": lambda a: _angle_scale(a, 180.0, math.pi),
}

def _angle_scale(a, num: float, den: float):
    """numpy's deg2rad / rad2deg: ``a`` times num / den, a quotient numpy's
    float32 loops take in float32 (180.0f / pi_f), which differs from the
    rounded float64 one for rad2deg (1 ulp on 80% of values). Through
    hl.f64: Halide reads a Python float as float32 (float64 deg2rad was 1e-8
    off)."""
    scale = num / den if a.type().bits() == 64 else float(np.float32(num) / np.float32(den))
    return a * hl.cast(a.type(), hl.f64(scale))


BINARY = {
    "add": _bool_or_int(lambda a, b: a | b, _wadd),
    "subtract": _wsub,
    "multiply": _bool_or_int(lambda a, b: a & b, _wmul),
    "divide": _fdiv,
    "floor_divide": _floor_divide,
    "remainder": _remainder,
    "fmod": _fmod,
    "power": _power,
    "maximum": _nan_max(hl.max),
    "minimum": _nan_max(hl.min),
    "fmax": _fmax(hl.max),
    "fmin": _fmax(hl.min),
    "logical_and": lambda a, b: _truthy(a) & _truthy(b),
    "logical_or": lambda a, b: _truthy(a) | _truthy(b),
    "logical_xor": lambda a, b: _truthy(a) != _truthy(b),
    "bitwise_and": lambda a, b: a & b,
    "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b,
    "left_shift": _shift(True),
    "right_shift": _shift(False),
    "arctan2": hl.atan2,
    "hypot": _hypot,
    "copysign": _copysign,
}

_COMPARISONS = {"equal": (lambda a, b: a == b, False), "not_equal": (lambda a, b: a != b, True),
                "less": (lambda a, b: a < b, False), "less_equal": (lambda a, b: a <= b, False),
                "greater": (lambda a, b: a > b, False),
                "greater_equal": (lambda a, b: a >= b, False)}
BINARY.update({k: _compare(op, nan) for k, (op, nan) in _COMPARISONS.items()})
# comparisons in strict_float CPU kernels (Lowerer.plain_compare)
_STRICT = {"less_equal": lambda a, b: (a < b) | (a == b),
           "greater_equal": lambda a, b: (a > b) | (a == b)}
STRICT_COMPARE = {k: _compare(op, nan, _STRICT.get(k, op)) for k, (op, nan) in _COMPARISONS.items()}

# float32 transcendentals that Halide would lower to scalar libm calls
for _name in M.UNARY:
    UNARY[_name] = _vectorized_f32(_name, UNARY[_name])
for _name in M.BINARY:
    BINARY[_name] = _vectorized_f32(_name, BINARY[_name])
for _name, _fn in (("sinh", _sinh), ("cosh", _cosh), ("expm1", _expm1_32)):
    UNARY[_name] = _vectorized(hl.Float(32), _fn, UNARY[_name])


# float64 exp and log families, inverse trigonometric and hyperbolic
# functions and power (halide_math64), where Halide calls libm per element
for _name, _fn in M64.UNARY.items():
    UNARY[_name] = _vectorized(hl.Float(64), _fn, UNARY[_name])
for _name, _fn in M64.BINARY.items():
    BINARY[_name] = _vectorized(hl.Float(64), _fn, BINARY[_name])


def _fast_f32(fast, other):
    def fn(*args):
        return fast(*args) if args[0].type() == hl.Float(32) else other(*args)
    return fn


# HALOJIT_FAST_MATH=1: float32 polynomials (halide_fastmath), others as above
FAST_UNARY = dict(UNARY, **{k: _fast_f32(f, UNARY[k]) for k, f in FM.UNARY.items()})
FAST_BINARY = dict(BINARY, **{k: _fast_f32(f, BINARY[k]) for k, f in FM.BINARY.items()})
