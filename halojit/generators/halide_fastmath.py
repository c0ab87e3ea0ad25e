"""Fast-math float32 transcendentals (``HALOJIT_FAST_MATH=1``): float32
polynomials, Cody-Waite range reduction, no special-case patches.

Kernels compile without strict_float in this mode, so LLVM contracts these
polynomials to FMA. Errors (measured against numpy, README table): a few
ulp near the origin; sin/cos/tan lose accuracy beyond |x| ~ 1e5 (no
Payne-Hanek); subnormal results may flush to zero; NaN and inf are not
guaranteed to propagate as numpy's. Functions missing here use the accurate
versions (halide_math).
"""

from __future__ import annotations

import math

import halide as hl

F32 = hl.Float(32)
LOG2E = 1.0 / math.log(2.0)


def _c(v):
    return hl.f32(float(v))


def _poly(x, coefs):
    r = _c(coefs[-1])
    for c in reversed(coefs[:-1]):
        r = r * x + _c(c)
    return r


def _negate_if(cond, v):
    u = hl.UInt(32)
    return hl.reinterpret(F32, hl.reinterpret(u, v) ^ hl.select(cond, hl.u32(1 << 31), hl.u32(0)))


def _signbit(a):
    return (hl.reinterpret(hl.UInt(32), a) >> hl.u32(31)) != hl.u32(0)


# Cephes sinf/cosf (|r| <= pi/4) and atanf (|t| <= tan(pi/8)) minimax coefficients.
_SIN = [-1.6666654611e-1, 8.3321608736e-3, -1.9515295891e-4]
_COS = [4.166664568298827e-2, -1.388731625493765e-3, 2.443315711809948e-5]
_ATAN = [-3.33329491539e-1, 1.99777106478e-1, -1.38776856032e-1, 8.05374449538e-2]
# pi/2 in three float32 parts (Cephes DP1..DP3 scaled by 2)
_PIO2 = (1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8)
# 2**f on |f| <= 1/2 (Chebyshev fit, relative error 2.6e-9)
_EXP2 = [0.9999999999595481, 0.6931471805459297, 0.24022651213595628, 0.05550410941216611,
         0.009618025602921581, 0.001333345056044933, 0.00015469731987053203]


def _sin_cos(a):
    q = hl.round(a * _c(2 / math.pi))
    # strict: fast-math would reassociate the Cody-Waite steps (1e-6 errors)
    r = hl.strict_float(a - q * _c(_PIO2[0]) - q * _c(_PIO2[1]) - q * _c(_PIO2[2]))
    z = r * r
    s = r + r * z * _poly(z, _SIN)
    c = _c(1) - _c(0.5) * z + z * z * _poly(z, _COS)
    return s, c, hl.cast(hl.Int(32), q) & hl.i32(3)


def sin(a):
    s, c, q = _sin_cos(a)
    v = hl.select((q & hl.i32(1)) == hl.i32(0), s, c)
    return _negate_if(q >= hl.i32(2), v)


def cos(a):
    s, c, q = _sin_cos(a)
    v = hl.select((q & hl.i32(1)) == hl.i32(0), c, s)
    return _negate_if((q == hl.i32(1)) | (q == hl.i32(2)), v)


def tan(a):
    s, c, q = _sin_cos(a)
    return hl.select((q & hl.i32(1)) == hl.i32(0), s / c, -c / s)


def exp2(a):
    x = hl.clamp(a, _c(-127), _c(128))
    n = hl.round(x)
    p = _poly(x - n, _EXP2)
    scale = hl.reinterpret(F32, (hl.cast(hl.Int(32), n) + hl.i32(127)) << hl.i32(23))
    return hl.select(a != a, a, p * scale)


def log2(a):
    return hl.log(a) * _c(LOG2E)


def log10(a):
    return hl.log(a) * _c(math.log10(math.e))


def expm1(a):
    small = a * _poly(a, [1.0, 0.5, 1 / 6, 1 / 24, 1 / 120, 1 / 720, 1 / 5040, 1 / 40320])
    return hl.select(hl.abs(a) < _c(0.5), small, hl.exp(a) - _c(1))


def log1p(a):
    u = a + _c(1)
    d = hl.strict_float(u - _c(1))  # fast-math would fold (a + 1) - 1 to a
    return hl.select(d == _c(0), a, hl.log(u) * (a / d))


def sinh(a):
    e = hl.exp(hl.abs(a))
    big = _negate_if(_signbit(a), (e - _c(1) / e) * _c(0.5))
    z = a * a
    small = a * _poly(z, [1.0, 1 / 6, 1 / 120, 1 / 5040, 1 / 362880])
    return hl.select(hl.abs(a) < _c(1), small, big)


def cosh(a):
    e = hl.exp(hl.abs(a))
    return (e + _c(1) / e) * _c(0.5)


def _atan01(t):
    mid = t > _c(math.tan(math.pi / 8))
    u = hl.select(mid, (t - _c(1)) / (t + _c(1)), t)
    z = u * u
    r = u + u * z * _poly(z, _ATAN)
    return hl.select(mid, r + _c(math.pi / 4), r)


def arctan(a):
    ax = hl.abs(a)
    inv = ax > _c(1)
    r = _atan01(hl.select(inv, _c(1) / ax, ax))
    return _negate_if(_signbit(a), hl.select(inv, _c(math.pi / 2) - r, r))


def arctan2(y, x):
    ax, ay = hl.abs(x), hl.abs(y)
    hi, lo = hl.max(ax, ay), hl.min(ax, ay)
    r = _atan01(hl.select(hi == _c(0), _c(0), lo / hi))
    r = hl.select(ay > ax, _c(math.pi / 2) - r, r)
    r = hl.select(_signbit(x), _c(math.pi) - r, r)
    return _negate_if(_signbit(y), r)


def _sqrt_one_minus_sq(a):
    return hl.sqrt((_c(1) - a) * (_c(1) + a))


def arcsin(a):
    return arctan2(a, _sqrt_one_minus_sq(a))


def arccos(a):
    return arctan2(_sqrt_one_minus_sq(a), a)


UNARY = {
    "exp": hl.exp, "log": hl.log,  # Halide's own float32 polynomials, unpatched
    "sin": sin, "cos": cos, "tan": tan, "arcsin": arcsin, "arccos": arccos, "arctan": arctan,
    "sinh": sinh, "cosh": cosh, "exp2": exp2, "expm1": expm1, "log2": log2, "log10": log10,
    "log1p": log1p,
}
BINARY = {"arctan2": arctan2}
