"""Vectorizable float64 exp and log families, inverse trigonometric and
hyperbolic functions and power as Halide Exprs (float64 in, float64 out).

Halide lowers every float64 math function to a scalar libm call, so numpy's
float64 ``exp``, ``log`` and ``tanh`` loops (AVX-512 and AVX2 SIMD) ran
1.3-3.3x faster on one core than halojit's kernels on two (2-core AVX-512
VM, 4M elements), and its arctan, arcsin, arccos, arctanh and arcsinh 2-4x
faster. Here each function is a range reduction and a polynomial in float64
vectors, every step an IEEE operation (strict_float, no FMA), with numpy's
NaN, inf, -0.0 and subnormal behaviour. Accuracy against numpy and against
80-bit long double references is in tests/ops/test_transcendentals64.py;
power goes through double-double logarithms (see ``power``). sin, cos and
tan have a path for arguments within TRIG_FAST_MAX (2**20), which kernels
take after checking all of theirs; any other argument sends the call to
libm, whose exact reduction 1e300 needs.
"""

from __future__ import annotations

import math
from fractions import Fraction

import halide as hl

from .halide_math import (_abs, _c, _clear_low_bits, _flip, _log_specials, _poly, _signbit,
                          log_base_sum)

F64 = hl.Float(64)
I64, U64 = hl.Int(64), hl.UInt(64)
LN2 = math.log(2.0)
LOG2E = 1.0 / LN2
# ln 2 = _LN2_HI + _LN2_LO, _LN2_HI with its low 17 bits zero: k * _LN2_HI is
# exact for every |k| < 2**17 (exp's k stays within +-1080, log's e within
# +-1100)
_LN2_HI = float.fromhex("0x1.62e42fefa0000p-1")
_LN2_LO = float.fromhex("0x1.cf79abc9e3b3ap-40")
# x + _MAGIC rounds x (|x| < 2**51) to an integer held in the low mantissa bits
_MAGIC = 1.5 * 2.0 ** 52
_MAGIC_BITS = 0x4338000000000000
_MANTISSA = (1 << 52) - 1
_ONE_BITS = 1023 << 52
_SQRT_HALF_BITS = 0x3FE6A09E667F3BCD  # sqrt(1/2)

# e**r = 1 + r + r**2 Q(r), Q the Taylor series to r**11 / 13!: on |r| <=
# 0.35 the next term changes e**r by under 4e-18 (Chebyshev fits in float64
# stall near 2e-15 relative error in Q, 0.6 ulp of e**r: the exact series
# costs two more steps and no error).
_EXP_Q = [1.0 / math.factorial(k + 2) for k in range(12)]
# log(1 + f) = 2s + s R(s**2), s = f / (2 + f), |s| <= 0.1716:
# R(z) = z P(z), P = 2/3 + 2z/5 + ... (a Chebyshev fit of degree 6 on
# [0, 0.0297], relative error 1.3e-15: P is a 2% correction, so under 2e-17
# of log(1 + f)).
_LOG_P = [0.6666666666666664, 0.39999999999941116, 0.28571428621920086, 0.22222211086374888,
          0.18182907869015505, 0.1533097459089331, 0.14625751943513887]
# sinh(x) = x + x z S(z), z = x*x, |x| < 1: S the Taylor series to z**8 / 19!
_SINH_S = [1.0 / math.factorial(2 * k + 3) for k in range(9)]


def _pow2(k):
    """2**k as float64 for k in [-1022, 1023], held as uint64 (two's
    complement): Halide's bounds inference refuses int64 arithmetic whose
    range could overflow ("Signed integer overflow occurred during
    constant-folding"), and every scheduler then failed; uint64 wraps."""
    return hl.reinterpret(F64, (k + hl.u64(1023)) << hl.u64(52))


def _halves(k):
    """(floor(k / 2), ceil(k / 2)) of a uint64-held k in [-1100, 1100], each
    from k alone: k - floor(k / 2) became a uint64 widen_right_sub that ran
    expm1 at half speed."""
    return (((k + hl.u64(2048)) >> hl.u64(1)) - hl.u64(1024),
            ((k + hl.u64(2049)) >> hl.u64(1)) - hl.u64(1024))


def _with_sign(v, of):
    """|v| with the sign bit of ``of``."""
    sign = hl.reinterpret(U64, of) & hl.u64(1 << 63)
    return hl.reinterpret(F64, hl.reinterpret(U64, v) | sign)


def _reduce(x, extra=None):
    """(k, r, q) with x (+ extra) = k ln2 + r, k = round(x / ln2) as uint64
    (_pow2), |r| <= 0.35 and q = e**r - 1 = r + r**2 Q(r), for finite
    |x| < 2**40; ``extra``, a small float64 Expr, is the low part of a
    double-double argument (power)."""
    kt = x * _c(LOG2E) + _c(_MAGIC)
    kf = kt - _c(_MAGIC)
    r = (x - kf * _c(_LN2_HI)) - kf * _c(_LN2_LO)  # the first step exact (Sterbenz)
    if extra is not None:
        r = r + extra
    k = hl.reinterpret(U64, kt) - hl.u64(_MAGIC_BITS)
    return k, r, r + (r * r) * _poly(r, _EXP_Q)


def _exp_shifted(x, shift: int = 0, extra=None):
    """e**x * 2**shift (shift in [-2, 0]) for float64 x: x is clamped to
    [-746, 712] (e**-746 rounds to 0, e**712 / 4 overflows; NaN passes the
    selects), and the scaling by 2**k is split in two factors, both normal,
    so that the first product is exact and the second rounds once, into the
    subnormals or to inf."""
    xc = hl.select(x > _c(712), _c(712), x)
    xc = hl.select(xc < _c(-746), _c(-746), xc)
    if extra is not None:  # dropped where x is clamped: its low part can be large there
        extra = hl.select(xc == x, extra, _c(0))
    k, _, q = _reduce(xc, extra)
    k1, k2 = _halves(k)
    return ((q + _c(1)) * _pow2(k1)) * _pow2(k2 - hl.u64(-shift))


def exp(x):
    return _exp_shifted(x)


def expm1(x):
    """e**x - 1 = 2**k q + (2**k - 1): exact 2**k q, one rounding. Below -40
    the result rounds to -1; above 709, where 2**k may overflow, it is
    e**x as in _exp_shifted, from the same reduction."""
    xc = hl.select(x > _c(712), _c(712), x)
    xc = hl.select(xc < _c(-40), _c(-40), xc)
    k, _, q = _reduce(xc)
    big = x > _c(709)
    s = _pow2(hl.select(big, hl.u64(0), k))
    k1, k2 = _halves(k)
    m = hl.select(big, ((q + _c(1)) * _pow2(k1)) * _pow2(k2), s * q + (s - _c(1)))
    return hl.select(x == _c(0), x, m)  # -0.0 stays -0.0


def tanh(x):
    """sign(x) m / (m + 2), m = expm1(2|x|), 2|x| clamped to 40 (tanh rounds
    to 1 from |x| = 19.1); NaN flows through the clamp's select."""
    ax = _abs(x)
    z = hl.select(ax > _c(20), _c(20), ax) * _c(2)
    k, _, q = _reduce(z)
    s = _pow2(k)
    m = s * q + (s - _c(1))
    return _with_sign(m / (m + _c(2)), x)


def sinh(x):
    ax = _abs(x)
    z = x * x
    small = x + (x * z) * _poly(z, _SINH_S)
    e = _exp_shifted(ax, -1)  # e**|x| / 2: finite up to |x| = 710.47, as sinh
    big = _with_sign(e - _c(0.25) / e, x)
    return hl.select(ax < _c(1), small, big)


def cosh(x):
    e = _exp_shifted(_abs(x), -1)
    return e + _c(0.25) / e


def _reduce_log(x):
    """(e, f) for a positive finite float64 x: x = 2**e (1 + f) with 1 + f in
    [sqrt(1/2), sqrt(2)), e as float64 and f exact; subnormal x is scaled
    by 2**54 first."""
    tiny = x < _c(2.0 ** -1022)
    xs = hl.select(tiny, x * _c(2.0 ** 54), x)
    bits = hl.reinterpret(U64, xs)
    # 1.M in [sqrt(2), 2) becomes 0.5 * 1.M with e + 1 (musl's trick): adding
    # 1.0's bits less sqrt(1/2)'s carries into the exponent exactly when
    # M >= sqrt(2) - 1; adding sqrt(1/2)'s bits back to the low 52 bits
    # rebuilds the mantissa under exponent 0 or -1
    shifted = bits + hl.u64(_ONE_BITS - _SQRT_HALF_BITS)
    e = hl.cast(I64, shifted >> hl.u64(52)) - hl.i64(1023)
    m = hl.reinterpret(F64, (shifted & hl.u64(_MANTISSA)) + hl.u64(_SQRT_HALF_BITS))
    return hl.cast(F64, e) - hl.select(tiny, _c(54), _c(0)), m - _c(1)


def _log_core(x):
    """(e, f, hfsq, t) for a positive finite float64 x (_reduce_log), with
    s = f / (2 + f), hfsq = f*f/2 and t = log(1 + f) - f + hfsq =
    s (hfsq + R(s*s)) (see _LOG_P)."""
    ef, f = _reduce_log(x)
    s = f / (f + _c(2))
    z = s * s
    hfsq = _c(0.5) * f * f
    t = s * (hfsq + z * _poly(z, _LOG_P))
    return ef, f, hfsq, t


def _ln_sum(ef, f, hfsq, t, extra=None):
    """e ln2 + log(1 + f) from _log_core's parts (+ ``extra``, a small
    correction): e ln2_hi exact, the small terms summed first."""
    small = ef * _c(_LN2_LO) if extra is None else ef * _c(_LN2_LO) + extra
    return ef * _c(_LN2_HI) + (f - (hfsq - (t + small)))


def log(x):
    return _log_specials(x, _ln_sum(*_log_core(x)))


# 1 / ln 10, 1 / ln 2 and log10(2) as a high part with its low 32 (20) bits
# zero and the rest: products with the 21-bit high part of log(1 + f) (and
# with e) are exact
_IVLN10 = (float.fromhex("0x1.bcb7b00000000p-2"), float.fromhex("0x1.526e50e32a000p-26"))
_IVLN2 = (float.fromhex("0x1.7154700000000p+0"), float.fromhex("0x1.94ae0bf85e000p-22"))
_LOG10_2 = (float.fromhex("0x1.3441350900000p-2"), float.fromhex("0x1.ef3fde6400000p-35"))


def _log_base(x, inv, two):
    """log_b(x) = e log_b(2) + log(1 + f) / ln b, with inv = 1 / ln b and
    two = log_b(2) as high and low parts, in about 70 bits until the last
    addition:
    log(1 + f) = hi + lo, hi = f - f*f/2 with its low 32 bits cleared, so
    that hi * inv[0] and e * two[0] are exact and only the final sum
    rounds. log10 of a power of ten and log2 of a power of two come out
    exact, as numpy's libm gives them."""
    ef, f, hfsq, t = _log_core(x)
    hi = _clear_low_bits(f - hfsq, 32)
    return _log_specials(x, log_base_sum(ef, f, hfsq, t, hi, inv, two, _c))


def log2(x):
    return _log_base(x, _IVLN2, (1.0, 0.0))


def log10(x):
    return _log_base(x, _IVLN10, _LOG10_2)


def log1p(x):
    """log(u) + (x - (u - 1)) / u for u = 1 + x rounded: the second term is
    the rounding error of u, exact for x > -1."""
    u = x + _c(1)
    r = _ln_sum(*_log_core(u), (x - (u - _c(1))) / u)
    return hl.select(x == _c(0), x, _log_specials(u, r))  # -0.0 stays -0.0


# -- inverse hyperbolic functions: log1p of a double-double argument ---------------------
def _log1p_dd(u, ul, twice=None):
    """log(1 + u + ul) for u >= 0 and a small ul (the argument's low part):
    w = 1 + u rounded, and what w lost plus ul enters _ln_sum as a
    correction divided by w. ``twice`` (a bool Expr): log(2 w) instead,
    exactly one more in the exponent (for the large-argument branches,
    which pass u = x - 1 and ul = 0 so that w = x)."""
    w = u + _c(1)
    extra = ((u - (w - _c(1))) + ul) / w
    ef, f, hfsq, t = _log_core(w)
    if twice is not None:
        ef = ef + hl.select(twice, _c(1), _c(0))
        extra = hl.select(twice, _c(0), extra)
    return _ln_sum(ef, f, hfsq, t, extra)


def _odd_result(x, r, small):
    """r with the sign of x; x itself where ``small`` (|x| < 2**-28, where
    these functions round to x) and where x is NaN."""
    return hl.select(small | hl.is_nan(x), x, _with_sign(r, x))


def arctanh(x):
    """atanh|x| = log1p(u) / 2, u = 2|x| / (1 - |x|) as a double-double: 1 -
    |x| by TwoSum and the quotient's remainder by Dekker's product (one
    division, by 1 - |x|: two took 8.4 ms for 4M values, one 7.1), so that only
    log1p's own error is left; +-inf at +-1, NaN beyond."""
    ax = _abs(x)
    d, dl = _two_sum(_c(1), -ax)
    n = ax + ax
    rd = _c(1) / d
    q = n * rd  # need not be the rounded quotient: ql holds the rest
    p, pe = _two_prod(q, d)
    ql = (((n - p) - pe) - q * dl) * rd
    r = _c(0.5) * _log1p_dd(q, ql)
    r = hl.select(ax == _c(1), _c(float("inf")), hl.select(ax > _c(1), _c(float("nan")), r))
    return _odd_result(x, r, ax < _c(2.0 ** -28))


def arcsinh(x):
    """asinh|x| = log1p(|x| + x*x / (1 + sqrt(1 + x*x))), the sum by TwoSum;
    log(2|x|) beyond 2**28 (where the rest is below 2**-57 of it)."""
    ax = _abs(x)
    big = ax > _c(2.0 ** 28)
    z = ax * ax
    u, ul = _two_sum(ax, z / (_c(1) + hl.sqrt(_c(1) + z)))
    u = hl.select(big, ax - _c(1), u)
    r = _log1p_dd(u, hl.select(big, _c(0), ul), big)
    return _odd_result(x, hl.select(hl.is_inf(x), ax, r), ax < _c(2.0 ** -28))


def arccosh(x):
    """acosh x = log1p(t + sqrt(2t + t*t)), t = x - 1 (exact up to 2), with
    2t + t*t as a double-double (Dekker's t*t, TwoSum), its square root
    corrected by the remainder of the root's square, and the sum with t by
    TwoSum: one rounded sqrt left 2 ulp; log(2x) beyond 2**28; +0 at 1, NaN
    below 1, inf at inf."""
    big = x > _c(2.0 ** 28)
    t = x - _c(1)
    tt, tte = _two_prod(t, t)
    ah, al = _two_sum(t + t, tt)
    root = hl.sqrt(ah)
    sq, sqe = _two_prod(root, root)
    rootl = (((ah - sq) - sqe) + (al + tte)) / (root + root)
    u, ul = _two_sum(t, root)
    ul = ul + rootl
    r = _log1p_dd(hl.select(big, t, u), hl.select(big, _c(0), ul), big)
    r = hl.select(x < _c(1), _c(float("nan")), hl.select(x == _c(1), _c(0), r))
    return hl.select(hl.is_nan(x) | (x == _c(float("inf"))), x, r)


# -- inverse trigonometric functions ----------------------------------------------------
# (t - atan t) / t**3 as a polynomial in z = t*t on |t| <= 7/16, degree 10,
# and (asin x - x) / x**3 in z = x*x on |x| <= 1/2, degree 11: 7.7e-18 and
# 1.7e-17 relative to t and x with these float64 coefficients (weighted
# least squares in 50-digit arithmetic, iteratively reweighted to the
# minimax).
_ATAN_P = [0.3333333333333293, -0.1999999999987615, 0.14285714272479674, -0.11111110404571577,
           0.09090887113587448, -0.0769187592492228, 0.06661070567494418,
           -0.058335548447303945, 0.04976821092144984, -0.0365303687943466,
           0.016284714760658354]
_ASIN_R = [0.16666666666665383, 0.07500000000343053, 0.044642856823479064, 0.03038195933125436,
           0.022371753526039737, 0.017359771033175358, 0.013884599426755238,
           0.012173272061996941, 0.0065108873390821945, 0.019573808447208303,
           -0.016293915485865614, 0.0319588551198812]
# atan(c) for c = 1/2, 1, 3/2, inf as high and low parts
_ATAN_HI = [0.0, 0.4636476090008061, 0.7853981633974483, 0.982793723247329, 1.5707963267948966]
_ATAN_LO = [0.0, 2.2698777452961687e-17, 3.061616997868383e-17, 1.3903311031230998e-17,
            6.123233995736766e-17]
_PIO2 = (1.5707963267948966, 6.123233995736766e-17)
_PI = (3.141592653589793, 1.2246467991473532e-16)


def _atan_parts(ax):
    """(i, rest) with atan(ax) = _ATAN_HI[i] + (_ATAN_LO[i] + rest), for a
    non-negative float64 (NaN through): |x| in [0, 7/16) as it is, else
    t = (x - c) / (1 + c x) for c = 1/2, 1 or 3/2, or -1/x beyond 39/16
    (fdlibm's ranges), so |t| <= 7/16 and rest = t - t**3 P(t*t); one
    division in all."""
    i = hl.select(ax < _c(7 / 16), 0, hl.select(ax < _c(11 / 16), 1, hl.select(
        ax < _c(19 / 16), 2, hl.select(ax < _c(39 / 16), 3, 4))))
    num = hl.mux(i, [ax, (ax + ax) - _c(1), ax - _c(1), ax - _c(1.5), _c(-1)])
    den = hl.mux(i, [_c(1), ax + _c(2), ax + _c(1), _c(1) + _c(1.5) * ax, ax])
    t = num / den
    z = t * t
    return i, t - t * z * _poly(z, _ATAN_P)


def _atan_pos(ax):
    """atan of a non-negative float64: atan(c)'s low part and the rest are
    summed before its high part."""
    i, rest = _atan_parts(ax)
    return hl.mux(i, [_c(v) for v in _ATAN_HI]) + (hl.mux(i, [_c(v) for v in _ATAN_LO]) + rest)


def arctan(x):
    return hl.select(hl.is_nan(x), x, _with_sign(_atan_pos(_abs(x)), x))


# atan(c) for c = 0, 1/2, 1, then pi/2 - atan(c), pi - atan(c) and pi/2 +
# atan(c), as high and low parts: arctan2's four cases of one atan(t) for t
# = min(|x|, |y|) / max(|x|, |y|) in [0, 1]
_ATAN2_HI = [0.0, 0.4636476090008061, 0.7853981633974483, 1.5707963267948966,
             1.1071487177940904, 0.7853981633974483, 3.141592653589793, 2.677945044588987,
             2.356194490192345, 1.5707963267948966, 2.0344439357957027, 2.356194490192345]
_ATAN2_LO = [0.0, 2.2698777452961687e-17, 3.061616997868383e-17, 6.123233995736766e-17,
             9.40447137356638e-17, 3.061616997868383e-17, 1.2246467991473532e-16,
             1.5527705369303147e-16, 9.184850993605148e-17, 6.123233995736766e-17,
             2.841996617907152e-17, 9.184850993605148e-17]


def arctan2(y, x):
    """C99 atan2: t = min(|x|, |y|) / max(|x|, |y|) with the quotient's
    remainder (Dekker's product, where no operand is near the range's ends)
    entering as remainder / (max (1 + t*t)); atan(t) = atan(c) + rest
    (_atan_parts, c <= 1); pi/2 - it where |y| > |x|, pi - it where x is
    negative (its sign bit), both folded into one constant per case; the
    constant's high part and the rest summed by TwoSum (adding its low part
    to the rest first rounded twice: atan2(3, -1) came out 1 ulp off).
    Zeros, infinities and NaN as C99 and numpy."""
    ax, ay = _abs(x), _abs(y)
    big, small = hl.max(ax, ay), hl.min(ax, ay)
    both_inf = hl.is_inf(ax) & hl.is_inf(ay)
    t = hl.select(both_inf, _c(1), hl.select(big == _c(0), _c(0), small / big))
    p, pe = _two_prod(t, big)
    normal = (big < _c(2.0 ** 960)) & (small > _c(2.0 ** -960))
    corr = hl.select(normal & ~both_inf, ((small - p) - pe) / (big + small * t), _c(0))
    i, rest = _atan_parts(t)  # i in 0..2 for t <= 1
    swap, neg = ay > ax, _signbit(x)
    k = i + hl.select(swap, 3, 0) + hl.select(neg, 6, 0)
    sgn = swap != neg  # pi/2 - atan and pi - atan subtract it
    rest = hl.select(sgn, -(rest + corr), rest + corr)
    hi, err = _two_sum(hl.mux(k, [_c(v) for v in _ATAN2_HI]), rest)
    r = hi + (err + hl.mux(k, [_c(v) for v in _ATAN2_LO]))
    r = _flip(_signbit(y), r)
    return hl.select(hl.is_nan(x) | hl.is_nan(y), _c(float("nan")), r)


def _asin_small(v, z):
    """asin(v) - v for |v| <= 1/2, z = v*v."""
    return v * z * _poly(z, _ASIN_R)


def _half_root(ax):
    """(z, s): z = (1 - ax) / 2, exact for ax in [1/2, 1], and s = sqrt(z)
    rounded."""
    z = (_c(1) - ax) * _c(0.5)
    return z, hl.sqrt(z)


def _asin_half(ax):
    """(s, w) with asin(sqrt((1 - ax) / 2)) = s + w for ax in [1/2, 1]
    (_half_root): s's remainder (z - s*s, exact by Dekker) / 2s goes into
    the small part w."""
    z, s = _half_root(ax)
    sq, sqe = _two_prod(s, s)
    sl = hl.select(z == _c(0), _c(0), ((z - sq) - sqe) / (s + s))  # |x| = 1: 0 / 0
    return s, _asin_small(s, z) + sl


def arcsin(x):
    """|x| <= 1/2: x + x**3 R(x*x); above, pi/2 - 2 asin(sqrt((1 - |x|) /
    2)) with the root split as fdlibm does, s = df + c with df its high 21
    bits, so that pi/4 - 2 df is exact: pi/4 - ((2 small + 2c - pi/2's low
    part) - (pi/4 - 2 df)) rounds twice, the first time below the result's
    binade (subtracting 2s from pi/2 directly was 2 ulp off). NaN beyond
    +-1."""
    ax = _abs(x)
    z, s = _half_root(ax)
    df = _clear_low_bits(s, 32)
    c = (z - df * df) / (s + df)  # df * df and the difference exact; 0 / 0 at |x| = 1
    c = hl.select(z == _c(0), _c(0), c)
    small = _asin_small(s, z)
    pio4 = _c(_PIO2[0] / 2)
    big = pio4 - (((small + small) - (_c(_PIO2[1]) - (c + c))) - (pio4 - (df + df)))
    r = hl.select(ax <= _c(0.5), ax + _asin_small(ax, ax * ax), big)
    r = hl.select(ax > _c(1), _c(float("nan")), _with_sign(r, x))
    return hl.select(hl.is_nan(x), x, r)


def arccos(x):
    """|x| <= 1/2: pi/2 - asin x; x > 1/2: 2 asin(sqrt((1 - x) / 2)); x <
    -1/2: pi - 2 asin(sqrt((1 + x) / 2)); the constants' low parts joined
    with the small terms first. NaN beyond +-1."""
    ax = _abs(x)
    s, w = _asin_half(ax)
    mid = _c(_PIO2[0]) - (x + (_asin_small(x, x * x) - _c(_PIO2[1])))
    pos = (s + s) + (w + w)
    neg = (_c(_PI[0]) - (s + s)) - ((w + w) - _c(_PI[1]))
    r = hl.select(ax <= _c(0.5), mid, hl.select(x > _c(0), pos, neg))
    r = hl.select(ax > _c(1), _c(float("nan")), r)
    return hl.select(hl.is_nan(x), x, r)


# -- sin, cos, tan of |x| <= TRIG_FAST_MAX, for kernels that check ---------------------
# Halide calls libm per element for float64 sin, cos and tan (numpy's own
# float64 sin and cos are slow too: 70 ms for 4M values on this VM, its tan
# 10 ms). Arguments within TRIG_FAST_MAX take this path once the kernel has
# checked them all (lowering.Lowerer.trig_ok), any other the libm call.
# Reduction: q = round(|x| 2/pi) < 2**20, and pi/2 in three parts of 33
# bits (fdlibm's first two) and a fourth of 53, so that q p1, q p2 and q p3
# are exact and |x| - q p1 is too; the difference with q p2 by Fast2Sum
# (exact where it is smaller than q p2), with q p3 by TwoSum, and q p4 into
# the low part: r = rh + rl to about 2**-130 absolute, well inside the
# closest float64 approach to a multiple of pi/2 below 2**20 (three parts,
# 2**-100, left 2 ulp in tan(413441.44719405076), 2.3e-16 from a pole).
# (sin r - r) / r**3 and (cos r - 1 + r*r/2) / r**4 as polynomials in z =
# r*r on [0, (pi/4)**2], degree 5: 5.8e-18 relative to r and 8.8e-19 to
# cos r with these float64 coefficients (the 50-digit fits above).
TRIG_FAST_MAX = 2.0 ** 20
_PIO2_1 = float.fromhex("0x1.921fb54400000p+0")
_PIO2_2 = float.fromhex("0x1.0b4611a600000p-34")
_PIO2_3 = float.fromhex("0x1.3198a2e000000p-69")
_PIO2_4 = 8.4784276603689e-32
_SIN_S = [-0.16666666666666632, 0.008333333333322418, -0.00019841269829812134,
          2.7557313693498647e-06, -2.5050758374070313e-08, 1.5896811257570974e-10]
_COS_C = [0.0416666666666666, -0.0013888888888874131, 2.4801587289486535e-05,
          -2.755731435366391e-07, 2.087572346339807e-09, -1.1359658092732271e-11]


def _sin_cos_parts(x):
    """(r, s_lo, w, c_lo, q) with |x| = q pi/2 + r (+ rl), sin r = r + s_lo
    and cos r = w + c_lo, w = 1 - r*r/2 (fdlibm's split: (1 - w) - r*r/2 is
    exact), q & 3 as int32."""
    ax = _abs(x)
    q = hl.round(ax * _c(2 / math.pi))
    t = ax - q * _c(_PIO2_1)
    w2 = q * _c(_PIO2_2)
    rh = t - w2
    rl = (t - rh) - w2
    rh, e = _two_sum(rh, -(q * _c(_PIO2_3)))
    rl = (rl + e) - q * _c(_PIO2_4)
    r, rl = _two_sum_fast(rh, rl)
    z = r * r
    s_lo = r * z * _poly(z, _SIN_S) + rl * (_c(1) - _c(0.5) * z)
    hz = _c(0.5) * z
    w = _c(1) - hz
    c_lo = ((_c(1) - w) - hz) + (z * z * _poly(z, _COS_C) - r * rl)
    return r, s_lo, w, c_lo, hl.cast(hl.Int(32), q) & hl.i32(3)


def sin_fast(x):
    r, s_lo, w, c_lo, q = _sin_cos_parts(x)
    v = hl.select((q & hl.i32(1)) == hl.i32(0), r + s_lo, w + c_lo)
    return _flip(_signbit(x) != (q >= hl.i32(2)), v)


def cos_fast(x):
    r, s_lo, w, c_lo, q = _sin_cos_parts(x)
    v = hl.select((q & hl.i32(1)) == hl.i32(0), w + c_lo, r + s_lo)
    return _flip((q == hl.i32(1)) | (q == hl.i32(2)), v)


def tan_fast(x):
    """sin / cos (or -cos / sin in odd quadrants) of the parts: N = nh + nl
    and D = dh + dl renormalized (Fast2Sum), q0 = N * (1 / D) to about an
    ulp, then N / D = q0 + (N - q0 D) / D with the remainder's large term
    exact (Dekker's product) and divided by multiplying with the same 1 / D:
    one division (two, q0 = nh / dh then the remainder / D, took 8.3-8.4 ms
    for 4M values)."""
    r, s_lo, w, c_lo, q = _sin_cos_parts(x)
    odd = (q & hl.i32(1)) == hl.i32(1)
    nh, nl = _two_sum_fast(hl.select(odd, w, r), hl.select(odd, c_lo, s_lo))
    dh, dl = _two_sum_fast(hl.select(odd, r, w), hl.select(odd, s_lo, c_lo))
    inv = _c(1) / dh
    q0 = nh * inv
    p, pe = _two_prod(q0, dh)
    v = q0 + ((((nh - p) - pe) + nl) - q0 * dl) * inv
    return _flip(_signbit(x) != odd, v)


# -- power: exp(y log x) through double-doubles ------------------------------------------
# y log x must be right to about 2**-64 relative where it reaches +-745 (an
# absolute error d there is a relative error d of the result), so log x is
# a double-double: s = f / (2 + f) = s + sl, log(1 + f) = 2 atanh(s) =
# 2s + 2s**3/3 + s**3 z T(z), z = s*s, with 2/3 as a double-double and T the
# Taylor series (the Chebyshev fit _LOG_P, good to 1e-15, left 30 ulp in
# the result), plus 2 sl (1 + z) for the slope of atanh at s. Products are
# exact by Veltkamp's split (no FMA under strict_float). Measured against
# 80-bit long double pow: at most 2 ulp, for |x| near 1 with |y| near 2000.
_SPLIT = 134217729.0  # 2**27 + 1
_LOG_T = [2.0 / (2 * k + 5) for k in range(11)]  # 2/5 + 2z/7 + ...; next term < 1e-18
_TWO_THIRDS = (2.0 / 3.0, float(Fraction(2, 3) - Fraction(2.0 / 3.0)))


def _two_sum(a, b):
    """(s, err) with s + err = a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_sum_fast(a, b):
    """(s, err) with s + err = a + b exactly, for |a| >= |b| (Fast2Sum)."""
    s = a + b
    return s, b - (s - a)


def _split(a):
    c = a * _c(_SPLIT)
    hi = c - (c - a)
    return hi, a - hi


def _two_prod(a, b):
    """(p, err) with p + err = a * b exactly (Dekker), for |a|, |b| < 2**996."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _log_dd(x):
    """log(x) as (hi, lo) for a positive finite float64 x (see above)."""
    ef, f = _reduce_log(x)
    d, dl = _two_sum(_c(2), f)
    s = f / d
    p, pe = _two_prod(s, d)
    sl = (((f - p) - pe) - s * dl) / d
    z, ze = _two_prod(s, s)
    t3, t3e = _two_prod(s, z)
    t3e = t3e + s * ze
    lead, leade = _two_prod(t3, _c(_TWO_THIRDS[0]))
    leade = leade + (t3e * _c(_TWO_THIRDS[0]) + t3 * _c(_TWO_THIRDS[1]))
    rest = (t3 * z) * _poly(z, _LOG_T)
    hi, lo = _two_sum(ef * _c(_LN2_HI), _c(2) * s)
    hi, lo2 = _two_sum(hi, lead)
    lo = (lo + lo2) + (((leade + rest) + ef * _c(_LN2_LO)) + (_c(2) * sl) * (_c(1) + z))
    return _two_sum(hi, lo)


def power(x, y):
    """numpy's float64 power (C99 pow): |x|**y = exp(y log|x|) in
    double-doubles, then pow's special cases: x**0 = 1 and 1**y = 1 even for
    NaN, NaN otherwise propagates; zeros and infinities of x by the sign of
    y; y = +-inf by |x| against 1; a negative x takes the sign of an odd
    integer y and gives NaN for a non-integer one."""
    inf = _c(float("inf"))
    ax = _abs(x)
    regular = (ax > _c(0)) & (ax < inf)  # false for NaN
    lh, ll = _log_dd(hl.select(regular, ax, _c(1)))
    # beyond 2**64, y log|x| overflows exp's range anyway for |x| != 1
    yc = hl.select(y > _c(2.0 ** 64), _c(2.0 ** 64), hl.select(y < _c(-2.0 ** 64), _c(-2.0 ** 64), y))
    zh, ze = _two_prod(yc, lh)
    zh, zl = _two_sum(zh, ze + yc * ll)
    mag = _exp_shifted(zh, 0, zl)
    big = (ax == inf) != (y < _c(0))  # 0 or inf for |x| of 0 or inf
    mag = hl.select(regular, mag, hl.select(big, inf, _c(0)))
    yinf = hl.is_inf(y)
    mag = hl.select(yinf & regular,
                    hl.select(ax == _c(1), _c(1), hl.select((ax > _c(1)) == (y > _c(0)), inf, _c(0))),
                    mag)
    y_int = (hl.floor(y) == y) & ~yinf
    y_odd = y_int & (y - _c(2) * hl.floor(y * _c(0.5)) == _c(1))
    neg = _signbit(x)
    r = _flip(neg & y_odd, mag)
    r = hl.select(neg & regular & ~y_int & ~yinf, _c(float("nan")), r)
    r = hl.select(hl.is_nan(x) | hl.is_nan(y), _c(float("nan")), r)
    # correctly rounded, as libm's pow is, for the exponents people write
    # (zeros, infinities and NaN come out as pow has them too)
    r = hl.select(y == _c(1), x, hl.select(y == _c(2), x * x, hl.select(y == _c(-1), _c(1) / x, r)))
    r = hl.select((y == _c(0.5)) & regular & ~neg, hl.sqrt(x), r)
    return hl.select((y == _c(0)) | (x == _c(1)), _c(1), r)


def _strict(fn):
    """fn under strict_float even in fast-math kernels (HALOJIT_FAST_MATH=1):
    reassociation would fold the rounding steps (x + _MAGIC) - _MAGIC and
    the Cody-Waite reduction."""
    def wrapped(*args):
        return hl.strict_float(fn(*args))
    wrapped.__name__ = fn.__name__
    return wrapped


# power is not wrapped in hl.strict_float: Halide 21's strict_float lowering
# walks its argument as a tree, and this DAG of double-double steps never
# finished compiling wrapped (unwrapped: 0.05 s). It relies on the kernel's
# strict_float target instead; lowering.py calls libm's pow in kernels
# compiled without it.
BINARY = {"power": power, "arctan2": _strict(arctan2)}
UNARY = {fn.__name__: _strict(fn) for fn in (exp, expm1, tanh, sinh, cosh, log, log2, log10,
                                                log1p, arctanh, arcsinh, arccosh, arctan, arcsin,
                                                arccos)}
# unwrapped, as halide_math.FAST_TRIG and power: strict_float kernels only
FAST_TRIG = {fn.__name__[:3]: fn for fn in (sin_fast, cos_fast, tan_fast)}
