"""Vectorizable float32 transcendentals as Halide Exprs (float32 in, float32 out).

Halide lowers float32 sin, tan, atan, pow, ... (and every float64 math
function) to scalar libm calls: 10-40x slower than numpy's SIMD loops. Here
each function is a range reduction and a polynomial in vectors, in one of
two ways:

- in float32 arithmetic, with the reductions' constants and corrections
  carried as high and low parts (fdlibm's and Cephes' schemes, our own
  fits): log, log2, log10, log1p, exp2, arctan, arcsin, arccos, arcsinh,
  arccosh, arctanh, cbrt (and exp, expm1, tanh, sinh, cosh in halide_ops,
  which share exp's reduction). Within 2 ulp of the correctly rounded result.
- in float64 (the operand converted exactly, one rounding back to float32):
  sin, cos, tan (whose reduction of huge arguments such as 1e30 is exact,
  Payne-Hanek style, and needs float64 products), arctan2, power.
  Within 1 ulp, but float64 vectors hold half the lanes: sin, cos and tan
  ran at 0.3-0.5x numpy's SVML loops (with two threads to its one). sin,
  cos and tan therefore also have a float32 path for arguments within
  TRIG_FAST_MAX (FAST_TRIG), which kernels take after checking theirs
  (lowering.Lowerer.trig_ok).

Either way within 4 ulp of numpy's (numpy itself is up to 3 ulp off;
tests/ops/test_transcendentals.py). strict_float forbids FMA, which numpy's
loops use; HALOJIT_FAST_MATH=1 selects float32 versions without the
special-value patches. NaN, inf, -0.0 and subnormals follow numpy.
"""

from __future__ import annotations

import math

import halide as hl
import numpy as np

F32, F64 = hl.Float(32), hl.Float(64)
LN2 = math.log(2.0)
LOG2E = 1.0 / LN2
PI = math.pi


def _c(v):
    return hl.f64(float(v))


def _poly(x, coefs):
    """sum coefs[k] * x**k by Horner's rule (float64)."""
    r = _c(coefs[-1])
    for c in reversed(coefs[:-1]):
        r = r * x + _c(c)
    return r


def _nan64():
    return _c(float("nan"))


def _f64(a):
    return hl.cast(F64, a)


def _f32(d):
    return hl.cast(F32, d)


def _flip(cond, v):
    """-v where cond, by the sign bit: Halide lowers -v as 0 - v, which turns
    -0.0 into +0.0."""
    t = v.type()
    u = hl.UInt(t.bits())
    sign = hl.select(cond, hl.cast(u, 1) << hl.cast(u, t.bits() - 1), hl.cast(u, 0))
    return hl.reinterpret(t, hl.reinterpret(u, v) ^ sign)


def _abs(v):
    """|v| by clearing the sign bit: Halide's abs(-0.0) is -0.0."""
    t = v.type()
    u = hl.UInt(t.bits())
    mask = (hl.cast(u, 1) << hl.cast(u, t.bits() - 1)) - hl.cast(u, 1)
    return hl.reinterpret(t, hl.reinterpret(u, v) & mask)


def _clear_low_bits(v, n: int):
    """Float v with the low n bits of its significand cleared: a high part
    whose products with other short parts are exact."""
    t = v.type()
    const = hl.u64 if t.bits() == 64 else hl.u32
    mask = const(~((1 << n) - 1) & ((1 << t.bits()) - 1))
    return hl.reinterpret(t, hl.reinterpret(mask.type(), v) & mask)


def _signbit(a):
    t = a.type()
    u = hl.UInt(t.bits())
    return (hl.reinterpret(u, a) >> hl.cast(u, t.bits() - 1)) != hl.cast(u, 0)


# -- exp2 / log in float64 ----------------------------------------------------------
# Polynomial coefficients below are Chebyshev fits (numpy.polynomial, 600
# nodes) with the relative error given: well under float32's 6e-8.
# 2**f on |f| <= 1/2, degree 7: 6e-11.
_EXP2_POLY = [0.9999999999595481, 0.6931471805459297, 0.24022651213595628, 0.05550410941216611,
              0.009618025602921581, 0.001333345056044933, 0.00015469731987053203,
              1.5310080955665126e-05]


def exp2_f64(t):
    """2**t for a float64 Expr t, vectorized; exact scaling by 2**round(t).
    Saturates outside +-1020 (far outside float32's range); NaN stays NaN."""
    tc = hl.clamp(t, _c(-1020), _c(1020))
    n = hl.round(tc)
    p = _poly(tc - n, _EXP2_POLY)
    scale = hl.reinterpret(F64, hl.cast(hl.Int(64), n + _c(1023)) << hl.i64(52))
    return hl.select(hl.is_nan(t), t, p * scale)


# log(m) = 2 atanh(f) = f * P(f*f), f = (m-1)/(m+1), |f| <= 0.1716 for m in
# [sqrt(1/2), sqrt(2)); degree 4 in f*f: 4e-12.
_LOG_POLY = [2.0000000000084124, 0.6666666524169433, 0.4000038565792666, 0.2853499741439463,
             0.23617270569251625]


def _log_parts(d):
    """(e, log(m)) with d = m * 2**e, m in [sqrt(1/2), sqrt(2)), for a
    positive finite normal float64 d."""
    bits = hl.reinterpret(hl.UInt(64), d)
    e = hl.cast(hl.Int(64), bits >> hl.u64(52)) - hl.i64(1023)
    m = hl.reinterpret(F64, (bits & hl.u64((1 << 52) - 1)) | hl.u64(1023 << 52))
    big = m > _c(math.sqrt(2.0))
    m = hl.select(big, m * _c(0.5), m)
    e = e + hl.select(big, hl.i64(1), hl.i64(0))
    f = (m - _c(1)) / (m + _c(1))
    return _f64(e), f * _poly(f * f, _LOG_POLY)


def _log_specials(d, r):
    """numpy's log family at 0 (-inf), negatives (NaN), +inf and NaN, for a
    float32 or float64 ``d`` (halide_math64 and the float32 log share it)."""
    t = d.type()
    inf = hl.cast(t, float("inf"))
    r = hl.select(d == hl.cast(t, 0), -inf, hl.select(d < hl.cast(t, 0), hl.cast(t, float("nan")), r))
    return hl.select(hl.is_nan(d) | (d == inf), d, r)


# -- the float32 functions ---------------------------------------------------------------
# (2**f - 1)/f on |f| <= 1/2, degree 5: 1.2e-8; 2**f = 1 + f * P(f) keeps the
# rounding of the small term below half an ulp of the sum.
_EXP2M1_POLY = [0.6931471880293427, 0.24022650922342656, 0.055503571042526775,
                0.009618056669900368, 0.0013390867351478347, 0.00015461447458431753]


def _pow2i(k):
    """2**k as float32 for an int32 k in [-126, 127]."""
    return hl.reinterpret(F32, (k + hl.i32(127)) << hl.i32(23))


def exp2(a):
    """In float32 (no float64 needed: f = x - round(x) is exact): 0.37 vs
    0.68 ns/element for the float64 version, 1 ulp from correctly rounded.
    The scaling by 2**n is split so that a subnormal result is rounded once."""
    x = hl.clamp(a, hl.f32(-160), hl.f32(130))
    n = hl.round(x)
    f = x - n
    p = hl.f32(1) + f * _poly32(f, _EXP2M1_POLY)
    ni = hl.cast(hl.Int(32), n)
    k = hl.clamp(ni, hl.i32(-126), hl.i32(127))
    return hl.select(hl.is_nan(a), a, (p * _pow2i(ni - k)) * _pow2i(k))


def _poly32(x, coefs):
    r = hl.f32(coefs[-1])
    for c in reversed(coefs[:-1]):
        r = r * x + hl.f32(c)
    return r


# float32 log in float32, fdlibm's scheme: x = 2**e (1 + f), 1 + f in
# [sqrt(1/2), sqrt(2)), s = f / (2 + f), log(1 + f) = f - f*f/2 + s (f*f/2 +
# z P(z)), z = s*s, P a degree-2 Chebyshev fit of (2 atanh(s) - 2s) / (s z)
# on [0, 0.0297] (its error moves the log by 4e-9 relative).
_LOG32_P = (0.6666668555373716, 0.3998856377950309, 0.29589907792552445)
_LN2_HI32 = 0.693145751953125  # 16 bits: e * _LN2_HI32 is exact for |e| < 2**8
_LN2_LO32 = LN2 - _LN2_HI32
_SQRT_HALF32_BITS = 0x3F3504F3  # sqrt(1/2) as float32


def _log32_core(a):
    """(e, f, hfsq, t) for a positive finite float32 a (see _LOG32_P): e as
    float32, f exact, hfsq = f*f/2, t = s (hfsq + z P(z)); subnormal a is
    scaled by 2**24 first."""
    u32 = hl.UInt(32)
    tiny = a < hl.f32(2.0 ** -126)
    x = hl.select(tiny, a * hl.f32(2.0 ** 24), a)
    # musl's reduction: adding 1.0's bits less sqrt(1/2)'s carries into the
    # exponent exactly where the mantissa is at least sqrt(2)
    shifted = hl.reinterpret(u32, x) + hl.u32(0x3F800000 - _SQRT_HALF32_BITS)
    e = hl.cast(hl.Int(32), shifted >> hl.u32(23)) - hl.i32(127)
    m = hl.reinterpret(F32, (shifted & hl.u32(0x7FFFFF)) + hl.u32(_SQRT_HALF32_BITS))
    f = m - hl.f32(1)
    s = f / (f + hl.f32(2))
    z = s * s
    hfsq = hl.f32(0.5) * f * f
    t = s * (hfsq + z * _poly32(z, _LOG32_P))
    ef = hl.cast(F32, e) - hl.select(tiny, hl.f32(24), hl.f32(0))
    return ef, f, hfsq, t


def log(a):
    """float32 log in float32 arithmetic (Halide's own float32 log ran 0.7x
    numpy's SIMD loop, with patches for its NaN, inf and subnormal results)."""
    ef, f, hfsq, t = _log32_core(a)
    r = ef * hl.f32(_LN2_HI32) - ((hfsq - (t + ef * hl.f32(_LN2_LO32))) - f)
    return hl.strict_float(_log_specials(a, r))


# 1 / ln 2, 1 / ln 10 and log10(2) as float32 high parts with their low 12
# bits zero and the rest: products with the 12-bit high part of log(1 + f)
# and with e are exact
_IVLN2_32 = (1.4423828125, 0.00031222839606925845)
_IVLN10_32 = (0.4342041015625, 9.038033749675378e-05)
_LOG10_2_32 = (0.301025390625, 4.605039066518657e-06)


def _log32_base(a, inv, two):
    """log_b(a) = e log_b(2) + log(1 + f) / ln b in float32, inv = 1 / ln b
    and two = log_b(2) as high and low parts: log(1 + f) = hi + lo with hi
    = f - f*f/2 cut to 12 bits, so that hi * inv[0] and e * two[0] are
    exact and the low parts are added first. Exact at powers of two for
    log2; within 1 ulp of the correctly rounded result. The same parts
    combined in float64 ran log2 at 0.6x numpy's loop (conversions to and
    from half-width float64 vectors)."""
    ef, f, hfsq, t = _log32_core(a)
    hi = _clear_low_bits(f - hfsq, 12)
    return hl.strict_float(_log_specials(a, log_base_sum(ef, f, hfsq, t, hi, inv, two, hl.f32)))


def log_base_sum(ef, f, hfsq, t, hi, inv, two, const):
    """e * two + log(1 + f) * inv, with log(1 + f) = f - hfsq + t and ``hi``
    its high part (f - hfsq with its low bits cleared); ``inv`` and ``two``
    are (high, low) pairs whose high products with hi and e are exact, so
    the low parts are summed first and only the last addition rounds.
    ``const`` makes a constant of the type (float32 here, float64 in
    halide_math64)."""
    lo = ((f - hi) - hfsq) + t
    y2 = ef * const(two[0])
    val_hi = hi * const(inv[0])
    val_lo = ef * const(two[1]) + ((lo + hi) * const(inv[1]) + lo * const(inv[0]))
    w = y2 + val_hi
    return (val_lo + ((y2 - w) + val_hi)) + w


def log2(a):
    return _log32_base(a, _IVLN2_32, (1.0, 0.0))


def log10(a):
    return _log32_base(a, _IVLN10_32, _LOG10_2_32)


def _log1p32(x, two_x=None):
    """log(1 + x) for float32 x, in float32: u = 1 + x rounded, log(u) by
    _log32_core with the rounding's correction c = (x - (u - 1)) / u added
    to its low part (fdlibm's log1pf). ``two_x`` (a bool Expr) adds ln 2
    where true (log(2 (1 + x)), exactly: one more in the exponent). numpy's
    specials: -inf at x = -1, NaN below, inf and NaN through; x itself for
    |x| < 2**-24 (its sign at -0.0)."""
    f32 = hl.f32
    u = x + f32(1)
    c = (x - (u - f32(1))) / u
    ef, f, hfsq, t = _log32_core(u)
    if two_x is not None:
        ef = ef + hl.select(two_x, f32(1), f32(0))
    r = ef * f32(_LN2_HI32) - ((hfsq - (t + (ef * f32(_LN2_LO32) + c))) - f)
    r = _log_specials(u, r)
    return hl.select(_abs(x) < f32(2.0 ** -24), x, r)


def log1p(a):
    """float32 log1p in float32 arithmetic (the float64 version ran 0.7x
    numpy's loop): within 1 ulp of the correctly rounded."""
    return hl.strict_float(_log1p32(a))


# cbrt(m) on m in [1, 2] as a polynomial in m - 1.5, degree 3: 7.3e-5
# relative, the start of one Halley step.
_CBRT32 = (1.1447923183441162, 0.25416383147239685, -0.058997344225645065, 0.023104779422283173)


def _top12(v):
    """float32 v rounded to 12 significant bits (products of two are exact)."""
    u32 = hl.UInt(32)
    return _clear_low_bits(hl.reinterpret(F32, hl.reinterpret(u32, v) + hl.u32(0x800)), 12)


def cbrt(a):
    """|a| = t 2**(3k), t = m 2**j with m in [1, 2) and j in 0..2, in
    integer arithmetic (subnormals scaled by 2**24 first); y0 = cbrt(m)
    2**(j/3) by a float32 polynomial, cut to 12 bits so that y0**3 - t is
    exact in float32 (y0**2 exact, y0**3 = p + err with Dekker's error of
    the product); one Halley step y0 - y0 (y0**3 - t) / (2 y0**3 + t) takes
    its 2**-11 error to 2**-32, rounded once, then times 2**k (exact:
    results are never subnormal). Correctly rounded but at about 1 in 10**5
    values (0.5 ulp plus), exact at perfect cubes."""
    f32, i32, u32 = hl.f32, hl.i32, hl.UInt(32)
    ax = _abs(a)
    tiny = ax < f32(2.0 ** -126)
    bits = hl.reinterpret(u32, hl.select(tiny, ax * f32(2.0 ** 24), ax))
    e = hl.cast(hl.Int(32), bits >> hl.u32(23)) - i32(127)  # -127 only for 0, handled below
    k = (e + i32(129)) / i32(3) - i32(43)  # floor(e / 3): e + 129 >= 2
    j = e - i32(3) * k
    m = hl.reinterpret(F32, (bits & hl.u32(0x7FFFFF)) | hl.u32(0x3F800000))
    t = m * _pow2i(j)  # exact, in [1, 8)
    y0 = _top12(_poly32(m - f32(1.5), _CBRT32)
                * hl.mux(j, [f32(1), f32(2 ** (1 / 3)), f32(4 ** (1 / 3))]))
    y2 = y0 * y0  # exact
    y2h = _clear_low_bits(y2, 12)
    p = y2 * y0
    err = (y2h * y0 - p) + (y2 - y2h) * y0  # y0**3 - p, exactly
    resid = (p - t) + err  # p - t exact (Sterbenz)
    y = y0 - y0 * resid / ((p + p) + t)
    r = y * _pow2i(k - hl.select(tiny, i32(8), i32(0)))
    special = (ax == f32(0)) | hl.is_inf(ax) | hl.is_nan(ax)
    return hl.strict_float(_flip(_signbit(a), hl.select(special, ax, r)))


# -- inverse trigonometric ------------------------------------------------------------------
# atan(t)/t as a polynomial in t*t on [0, tan(pi/8)], degree 5: 6e-10.
_ATAN_POLY = [0.9999999993921002, -0.33333307493429803, 0.19998210797573107,
              -0.14239982918870672, 0.10572814476545786, -0.060332417034747766]


def _atan01(t):
    """atan(t) for float64 t in [0, 1]."""
    mid = t > _c(math.tan(PI / 8))
    u = hl.select(mid, (t - _c(1)) / (t + _c(1)), t)
    r = u * _poly(u * u, _ATAN_POLY)
    return hl.select(mid, r + _c(PI / 4), r)


def _atan2_f64(y, x):
    """IEEE atan2 on float64 Exprs (signed zeros, infinities, NaN)."""
    ax, ay = _abs(x), _abs(y)
    hi, lo = hl.max(ax, ay), hl.min(ax, ay)
    both_inf = hl.is_inf(ax) & hl.is_inf(ay)
    t = hl.select(both_inf, _c(1), hl.select(hi == _c(0), _c(0), lo / hi))
    r = _atan01(t)
    r = hl.select(ay > ax, _c(PI / 2) - r, r)
    r = hl.select(_signbit(x), _c(PI) - r, r)
    r = _flip(_signbit(y), r)
    return hl.select(hl.is_nan(x) | hl.is_nan(y), _nan64(), r)


def arctan2(y, x):
    return _f32(_atan2_f64(_f64(y), _f64(x)))


# -- arctan, arcsin, arccos in float32 arithmetic --------------------------------------------
# The float64 versions above (through _atan2_f64) ran 0.45-0.8x numpy's SIMD
# loops: float64 vectors hold half the lanes, plus the conversions. These
# reduce as Cephes' atanf and asinf do and evaluate our own fits in float32;
# the constants they add (pi/2, pi/4, pi) are carried as float32 high and low
# parts so that the one rounding of the sum is the last.
# (atan(t) - t) / (t z) on z = t*t in [0, tan(pi/8)**2], degree 4: 1.5e-8
# absolute, which moves atan(t) by under 3e-9 relative.
_ATAN32_P = (-0.3333333181344048, 0.19999550081513962, -0.14264232726966522,
             0.107463000749284, -0.06459381041039153)
# (asin(s) - s) / (s z) on z = s*s in [0, 1/4], degree 5: 3.9e-9.
_ASIN32_P = (0.1666666631673521, 0.07500098770092871, 0.04459802964818716,
             0.031116186433365386, 0.01707772031021576, 0.033805971578721415)


def _hi_lo32(v):
    """v as float32 high and low parts (hi + lo = v to 48 bits)."""
    hi = float(np.float32(v))
    return hi, float(np.float32(v - hi))


_PIO2_32 = _hi_lo32(PI / 2)
_PIO4_32 = _hi_lo32(PI / 4)


def _odd_poly32(t, coefs):
    """t + t z P(z) with z = t*t: the small term rounds below t's ulp."""
    z = t * t
    return t + (t * z) * _poly32(z, coefs)


def arctan(a):
    """Cephes' three ranges: |x| > tan(3pi/8) -> pi/2 + atan(-1/|x|),
    > tan(pi/8) -> pi/4 + atan((|x| - 1)/(|x| + 1)), else atan(|x|); the sign
    by its bit (atan(-0.0) = -0.0). NaN passes every select as NaN."""
    f32 = hl.f32
    ax = _abs(a)
    big = ax > f32(2.414213562373095)
    mid = ax > f32(0.41421356237309503)
    t = hl.select(big, f32(-1) / ax, hl.select(mid, (ax - f32(1)) / (ax + f32(1)), ax))
    base_hi = hl.select(big, f32(_PIO2_32[0]), hl.select(mid, f32(_PIO4_32[0]), f32(0)))
    base_lo = hl.select(big, f32(_PIO2_32[1]), hl.select(mid, f32(_PIO4_32[1]), f32(0)))
    r = base_hi + (_odd_poly32(t, _ATAN32_P) + base_lo)
    return hl.strict_float(_flip(_signbit(a), r))


def _asin_parts(a):
    """fdlibm's asin/acos split for float32 a, in float32: (ax, hi, w, s, r,
    df, c) with ax = |a|, hi = ax > 1/2; w = (1 - ax)/2 (exact) where hi,
    else ax*ax; s = sqrt(w) where hi, else ax; r = w P(w), so asin(s) = s + s
    r; df = s cut to 12 bits (df*df exact) and c = (w - df*df)/(s + df), so
    s = df + c to twice float32's precision. NaN for |a| > 1 and inf (the
    sqrt of a negative), and for NaN."""
    f32 = hl.f32
    ax = _abs(a)
    hi = ax > f32(0.5)
    w = hl.select(hi, f32(0.5) * (f32(1) - ax), ax * ax)
    s = hl.select(hi, hl.sqrt(w), ax)
    r = w * _poly32(w, _ASIN32_P)
    df = _clear_low_bits(s, 12)
    c = hl.select(s == f32(0), f32(0), (w - df * df) / (s + df))  # 0/0 at |a| = 1
    return ax, hi, w, s, r, df, c


def arcsin(a):
    """|a| > 1/2: asin = pi/2 - 2 asin(s) = pi/4 - ((2s r - (pio2_lo - 2c)) -
    (pi/4 - 2 df)), fdlibm's order: within 2 ulp of the correctly rounded
    (a single float32 sum there: 2-3 ulp)."""
    f32 = hl.f32
    ax, hi, w, s, r, df, c = _asin_parts(a)
    two = f32(2)
    p = (two * s) * r - (f32(_PIO2_32[1]) - two * c)
    q = f32(_PIO4_32[0]) - two * df
    big = f32(_PIO4_32[0]) - (p - q)
    return hl.strict_float(_flip(_signbit(a), hl.select(hi, big, s + s * r)))


def arccos(a):
    """fdlibm's three ranges: pi/2 - (x - (pio2_lo - x r)) for |x| <= 1/2,
    pi - 2 (s + (r s - pio2_lo)) below, 2 (df + (r s + c)) above."""
    f32 = hl.f32
    ax, hi, w, s, r, df, c = _asin_parts(a)
    two = f32(2)
    pio2_hi, pio2_lo = (f32(v) for v in _PIO2_32)
    mid = pio2_hi - (a - (pio2_lo - a * r))
    below = (pio2_hi + pio2_hi) - two * (s + (r * s - pio2_lo))
    above = two * (df + (r * s + c))
    return hl.strict_float(hl.select(hi, hl.select(_signbit(a), below, above), mid))


# arcsinh, arccosh and arctanh as fdlibm's asinhf, acoshf and atanhf, all
# through _log1p32 in float32 (the float64 versions ran 0.65-1.0x numpy's
# loops). Beyond 2**12, asinh|x| and acosh x are log(2|x|) to well under an
# ulp, and log(2|x|) is log1p(|x| - 1) with one more in the exponent.
_BIG_HYP = 2.0 ** 12


def arcsinh(a):
    f32 = hl.f32
    ax = _abs(a)
    big = ax > f32(_BIG_HYP)
    sq = ax * ax
    v = hl.select(big, ax - f32(1), ax + sq / (f32(1) + hl.sqrt(f32(1) + sq)))
    return hl.strict_float(_flip(_signbit(a), _log1p32(v, big)))


def arccosh(a):
    f32 = hl.f32
    big = a > f32(_BIG_HYP)
    t = a - f32(1)  # exact for 1 <= a <= 2**24
    v = hl.select(big, t, t + hl.sqrt(t * (t + f32(2))))
    return hl.strict_float(hl.select(a < f32(1), f32(float("nan")), _log1p32(v, big)))


def arctanh(a):
    """atanh|x| = log1p(2|x| + 2|x| |x| / (1 - |x|)) / 2 below 1/2 (no
    cancellation near 0), log1p(2|x| / (1 - |x|)) / 2 above (1 - |x| exact);
    inf at |x| = 1, NaN beyond."""
    f32 = hl.f32
    ax = _abs(a)
    t = ax + ax
    v = hl.select(ax < f32(0.5), t + t * ax / (f32(1) - ax), t / (f32(1) - ax))
    return hl.strict_float(_flip(_signbit(a), f32(0.5) * _log1p32(v)))


# -- sin, cos, tan -------------------------------------------------------------------------------
def _pi_scaled(prec: int) -> int:
    """floor(pi * 2**prec), from Machin's formula in integers (a few guard
    bits short of exact in the last place)."""
    def arctan_inv(k):
        one, s, sign, j = 1 << prec, 0, 1, 1
        term = one // k
        while term:
            s += sign * (term // j)
            term //= k * k
            j += 2
            sign = -sign
        return s
    return 4 * (4 * arctan_inv(5) - arctan_inv(239))


def _two_over_pi_chunks(n=8, bits=24):
    """2/pi = sum of n chunks of 24 bits each (exact float64 values)."""
    prec = 64 + n * bits
    frac = (2 << (2 * prec)) // _pi_scaled(prec)  # 2/pi * 2**prec
    return [float((frac >> (prec - bits * (i + 1))) & ((1 << bits) - 1)) * 2.0 ** (-bits * (i + 1))
            for i in range(n)]


def _pio2_parts32(n=4, bits=12):
    """pi/2 as n float32 parts of ``bits`` significant bits each and a last
    float32 part for the rest (pi/2 to about 72 bits)."""
    prec = 128
    half_pi = _pi_scaled(prec) >> 1  # pi/2 * 2**prec, in [2**prec, 2**(prec+1))
    parts, rest = [], half_pi
    for i in range(n):
        shift = prec + 1 - bits * (i + 1)
        top = (rest >> shift) << shift
        parts.append(top / 2.0 ** prec)
        rest -= top
    parts.append(float(np.float32(rest / 2.0 ** prec)))
    return parts


_TWO_OVER_PI = _two_over_pi_chunks()
# sin(r)/r and cos(r) on |r| <= pi/4 as polynomials in r*r, degree 4: 5e-12
# and 7e-11 (tan = sin/cos stays within 1 ulp).
_SIN_POLY = [0.9999999999956778, -0.16666666631613547, 0.008333328784277637,
             -0.00019839202684865373, 2.71734952169024e-06]
_COS_POLY = [0.9999999999525448, -0.4999999961514589, 0.04166661671590205,
             -0.0013886618605785934, 2.4379880381834913e-05]


def _reduce_quadrant(a):
    """(r, q) with |a| = (q + r) * pi/2 (mod 2*pi), r in [-1/2, 1/2] as float64
    and q in 0..3. Exact for every float32 |a|: |a| = M * 2**E multiplies
    24-bit chunks of 2/pi (each product exact in float64); chunks whose
    product is a multiple of 4 are skipped, picked by E (Payne-Hanek)."""
    bits = hl.reinterpret(hl.UInt(32), a) & hl.u32(0x7FFFFFFF)
    e = hl.cast(hl.Int(32), bits >> hl.u32(23)) - hl.i32(150)
    first = hl.max((e + hl.i32(22)) / hl.i32(24) - hl.i32(1), hl.i32(0))  # floor div; 0..4
    d = _abs(_f64(a))
    p = [d * hl.mux(first, [_c(c) for c in _TWO_OVER_PI[j:j + 5]]) for j in range(4)]
    # p[0] is a multiple of 2**(E-24*(first+1)) <= 2; p[1] < 2**26, p[2] < 4,
    # p[3] < 2**-22 (each a 48-bit product); the next chunk would add < 2**-46
    p0 = p[0] - _c(4) * hl.floor(p[0] * _c(0.25))  # exact, in [0, 4)
    q = hl.round((p0 + p[1]) + p[2])
    r = (((p0 - q) + p[1]) + p[2]) + p[3]  # exact through + p[1]
    return r * _c(PI / 2), hl.cast(hl.Int(32), q) & hl.i32(3)


def _sin_cos(a):
    r, q = _reduce_quadrant(a)
    z = r * r
    s = r * _poly(z, _SIN_POLY)
    c = _poly(z, _COS_POLY)
    return s, c, q


def _trig_special(a, r):
    return hl.select(hl.is_nan(a) | hl.is_inf(a), hl.f32(float("nan")), r)


def sin(a):
    s, c, q = _sin_cos(a)
    v = hl.select((q & hl.i32(1)) == hl.i32(0), s, c)
    v = _flip(q >= hl.i32(2), v)
    return _trig_special(a, _f32(_flip(_signbit(a), v)))


def cos(a):
    s, c, q = _sin_cos(a)
    v = hl.select((q & hl.i32(1)) == hl.i32(0), c, s)
    v = _flip((q == hl.i32(1)) | (q == hl.i32(2)), v)
    return _trig_special(a, _f32(v))


def tan(a):
    s, c, q = _sin_cos(a)
    odd = (q & hl.i32(1)) == hl.i32(1)
    v = hl.select(odd, -c / s, s / c)
    return _trig_special(a, _f32(_flip(_signbit(a), v)))


# float32 sin and cos of |x| <= TRIG_FAST_MAX in float32 arithmetic, for
# kernels that check their arguments first (lowering.Lowerer.fast_trig): the
# exact reduction above needs float64 products, and with them these ran at
# 0.3-0.5x numpy's loops. Here q = round(|x| 2/pi) <= 2608, and
# |x| - q pi/2 subtracts q times each part of _PIO2_CW32 (four of 12 bits, so
# each product is exact, and the rest): Cody-Waite. sin and cos of r in
# [-pi/4, pi/4] are Cephes' sinf and cosf polynomials, cos with fdlibm's
# correction of 1 - z/2.
TRIG_FAST_MAX = 4096.0
_PIO2_CW32 = tuple(_pio2_parts32())
_SIN32 = (-1.6666654611e-1, 8.3321608736e-3, -1.9515295891e-4)
_COS32 = (4.166664568298827e-2, -1.388731625493765e-3, 2.443315711809948e-5)


def _sin_cos32(a):
    """(sin r, cos r, q & 3) with |a| = q pi/2 + r, for float32 |a| <= TRIG_FAST_MAX."""
    f32 = hl.f32
    ax = _abs(a)
    q = hl.round(ax * f32(2 / PI))
    r = ax
    for part in _PIO2_CW32:
        r = r - q * f32(part)
    z = r * r
    s = r + (r * z) * _poly32(z, _SIN32)
    hz = f32(0.5) * z
    w = f32(1) - hz
    c = w + (((f32(1) - w) - hz) + (z * z) * _poly32(z, _COS32))
    return s, c, hl.cast(hl.Int(32), q) & hl.i32(3)


def sin_fast(a):
    s, c, q = _sin_cos32(a)
    v = _flip(q >= hl.i32(2), hl.select((q & hl.i32(1)) == hl.i32(0), s, c))
    return _flip(_signbit(a), v)


def cos_fast(a):
    s, c, q = _sin_cos32(a)
    v = hl.select((q & hl.i32(1)) == hl.i32(0), c, s)
    return _flip((q == hl.i32(1)) | (q == hl.i32(2)), v)


# float32 tan of |x| <= TRIG_FAST_MAX. numpy's own float32 tan is up to 3.3
# ulp from the exact value (every 7th float32 in [0, 4096]), so ours must
# stay under 1.5 ulp (one step from the correctly rounded) to be within 4
# steps of numpy's; sin / cos of the above was 3 steps off. So r is carried
# as rh + rl (the Cody-Waite steps before the third part are exact, and
# Fast2Sum recovers what that one rounds away), tan(r) as th + tl, and the
# odd quadrants' -1 / (th + tl) is y - y*y*tl with y = 1 / th: at most 1.25
# ulp from the exact value. Dividing th + tl in float64 (1.12 ulp), or
# taking y's rounding back through Dekker's exact products, cost 1.27-1.33x
# as much (0.24-0.25 vs 0.19 ms for 256K values on one core). (tan(r) - r)
# / r**3 as a polynomial in z = r*r on [0, (pi/4)**2], degree 6: 3.3e-9
# relative to tan(r) with these float32 coefficients.
_TAN32 = (0.33333349227905273, 0.13332663476467133, 0.054059918969869614, 0.02128218114376068,
          0.010835816152393818, 8.954374789027497e-05, 0.004376265686005354)
_PIO2_LAST32 = float(np.float32(_PIO2_CW32[3] + _PIO2_CW32[4]))


def tan_fast(a):
    f32 = hl.f32
    ax = _abs(a)
    q = hl.round(ax * f32(2 / PI))
    p1, p2, p3 = (f32(p) for p in _PIO2_CW32[:3])
    # q <= 2608 has 12 bits, as do p1..p3, so every q * pk is exact; ax - q p1
    # and then - q p2 are exact too (multiples of 2**-23 below 2 in size; q <=
    # 1 for ax < 1). - q p3 rounds only where |t| >= |q p3| (smaller t gives a
    # difference of at most 24 bits), where Fast2Sum holds.
    t = (ax - q * p1) - q * p2
    p = q * p3
    rh = t - p
    rl = ((t - rh) - p) - q * f32(_PIO2_LAST32)
    z = rh * rh
    s0 = rh * z * _poly32(z, _TAN32)
    t0 = rh + s0
    small = s0 + rl * (f32(1) + t0 * t0)  # tan(rh + rl) = tan(rh) + rl (1 + tan(rh)**2)
    th = rh + small
    tl = small - (th - rh)  # Fast2Sum: |small| < |rh|
    y = f32(1) / th
    cot = y - (y * y) * tl
    odd = (hl.cast(hl.Int(32), q) & hl.i32(1)) == hl.i32(1)
    return _flip(_signbit(a) != odd, hl.select(odd, cot, th))


# Not wrapped in hl.strict_float: Halide 21 lowers that intrinsic by walking
# its argument as a tree, and these share their reductions (sin * cos + tan
# of float64 compiled in 1.4 s wrapped, against 0.08 s for libm's). Kernels
# take these paths only when compiled with the strict_float target
# (lowering.Lowerer: strict_kernel), which keeps every step as written.
FAST_TRIG = {"sin": sin_fast, "cos": cos_fast, "tan": tan_fast}


# -- power ------------------------------------------------------------------------------------------
def power(x, y):
    """numpy's float32 power: exp2(y * log2|x|) in float64 with C99 pow's
    special cases (pow(x, 0) = 1, pow(1, y) = 1, negative bases with integer
    exponents, signed zeros and infinities)."""
    xd, yd = _f64(x), _f64(y)
    ax = _abs(xd)
    inf = _c(float("inf"))
    e, lm = _log_parts(ax)
    l2 = hl.select(ax == _c(0), -inf, hl.select(ax == inf, inf, e + lm * _c(LOG2E)))
    t = yd * l2
    t = hl.select(l2 == _c(0), _c(0), t)  # |x| == 1: 1 ** +-inf is 1
    mag = exp2_f64(t)
    y_int = (hl.floor(yd) == yd) | hl.is_inf(yd)
    y_odd = (yd - _c(2) * hl.floor(yd * _c(0.5)) == _c(1)) & ~hl.is_inf(yd)
    neg = _signbit(xd)
    r = _flip(neg & y_odd, mag)
    r = hl.select(neg & ~y_int & (ax != _c(0)) & ~hl.is_inf(ax), _nan64(), r)
    r = hl.select(hl.is_nan(xd) | hl.is_nan(yd), _nan64(), r)
    r = hl.select((yd == _c(0)) | (xd == _c(1)), _c(1), r)
    return _f32(r)


UNARY = {
    "sin": sin, "cos": cos, "tan": tan,
    "arcsin": arcsin, "arccos": arccos, "arctan": arctan,
    "arcsinh": arcsinh, "arccosh": arccosh, "arctanh": arctanh,
    "exp2": exp2, "log": log, "log2": log2, "log10": log10, "log1p": log1p,
    "cbrt": cbrt,
}
BINARY = {"arctan2": arctan2, "power": power}
