"""Dense sweeps of the float32 tanh and exp lowerings (halojit/generators/
halide_ops.py ``_tanh``, ``_exp``: own float32 polynomials, not Halide's
hl.exp or libm) against numpy and against the correctly rounded result
(float64 numpy rounded to float32).

The contract is 4 ulp of numpy (tests/ops/test_transcendentals.py). The
tighter bounds against the correctly rounded result are what was measured
(tanh: every float32 in [0, 12) exhaustively, 3 ulp; exp: every 61st in
[-120, 100], 1 ulp) so that a change of coefficients or reduction that loses
accuracy fails here even while it still passes the contract.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import halojit

from helpers import ulp_distance

pytestmark = pytest.mark.level3

EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-40, -1e-40,
                  1.1754942e-38, 1.17549435e-38, -1.17549435e-38, 1e-30, 1e-10, 1e-7, 1e-4,
                  0.5, 1.0, 9.0, 9.01, 9.02, 9.03, 20.0, 88.0, 88.72283, 88.72284, 89.0, 100.0,
                  -87.33654, -87.34, -100.0, -103.97, -103.972, -104.0, -150.0, 1e10, -1e10,
                  3.4028235e38, -3.4028235e38], np.float32)




def _bit_range(lo, hi, stride):
    """Every ``stride``-th float32 from lo towards hi (same sign), by bit pattern."""
    a, b = np.float32(lo).view(np.int32), np.float32(hi).view(np.int32)
    if a > b:
        a, b = b, a
    return np.arange(a, b, stride, dtype=np.int32).view(np.float32)


def _subnormals(stride):
    x = np.arange(1, 1 << 23, stride, dtype=np.int32).view(np.float32)
    return np.concatenate([x, -x])


def _sweep(name, x, bound_numpy, bound_cr):
    fn = getattr(np, name)
    f = halojit.trace(lambda a: fn(a))
    got = f(x)
    assert f.lower(x).groups[0].ops == [name]  # the Halide kernel, not a fallback
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = fn(x)
        cr = fn(x.astype(np.float64)).astype(np.float32)
    assert got.dtype == np.float32
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN where numpy has none, or the reverse"
    for ref, bound, label in ((want, bound_numpy, "numpy"), (cr, bound_cr, "correctly rounded")):
        d = ulp_distance(got, ref)
        i = int(np.argmax(d))
        assert d[i] <= bound, (f"{name}({x[i]!r}) = {got[i]!r}, {label} {ref[i]!r}: {d[i]} ulp "
                               f"(bound {bound})")
    ok = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok])), "sign (of a zero?) differs"
    return got


def test_tanh_dense_sweep():
    x = np.concatenate([
        EDGES,
        _bit_range(0.0, 12.0, 97), _bit_range(-0.0, -12.0, 89),  # ~11M + ~12M values
        _bit_range(8.9, 9.1, 1), _bit_range(-8.9, -9.1, 1),      # where tanh reaches 1.0f
        _bit_range(12.0, 3.4e38, 4099), _bit_range(-12.0, -3.4e38, 4099),
        _subnormals(101),
    ])
    got = _sweep("tanh", x, 4, 3)
    assert np.array_equal(got[np.abs(x) >= 9.02], np.sign(x[np.abs(x) >= 9.02]))


def test_exp_dense_sweep():
    x = np.concatenate([
        EDGES,
        _bit_range(0.0, 100.0, 61), _bit_range(-0.0, -120.0, 59),
        _bit_range(-104.0, -87.0, 3),            # subnormal results and the flush to 0
        _bit_range(88.70, 88.73, 1),             # the overflow threshold
        _bit_range(120.0, 3.4e38, 4099), _bit_range(-120.0, -3.4e38, 4099),
        _subnormals(101),
    ])
    got = _sweep("exp", x, 4, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.exp(x)
    sub = (want > 0) & (want < np.float32(1.17549435e-38))
    assert sub.sum() > 100_000 and np.array_equal(got[want == 0], want[want == 0])
    assert np.array_equal(got[np.isinf(want)], want[np.isinf(want)])


@pytest.mark.parametrize("env", ["HALOJIT_STRICT_FLOAT", "HALOJIT_FAST_MATH"])
def test_rounding_tricks_survive_non_strict_kernels(env, monkeypatch):
    # (t + magic) - magic rounds t only under strict float semantics; without
    # hl.strict_float around them, fast-math folded it (tanh(0.17) gave 0.0,
    # exp(3.1) gave 32). HALOJIT_FAST_MATH has its own exp (Halide's), not tanh.
    monkeypatch.setenv(env, "0" if env == "HALOJIT_STRICT_FLOAT" else "1")
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-12, 12, 100000), rng.uniform(-0.2, 0.2, 100000),
                        rng.uniform(-80, 80, 100000)]).astype(np.float32)
    for name in ("tanh", "exp") if env == "HALOJIT_STRICT_FLOAT" else ("tanh",):
        fn = getattr(np, name)
        got = halojit.trace(lambda a, fn=fn: fn(a))(x)
        d = ulp_distance(got, fn(x))
        i = int(np.argmax(d))
        assert d[i] <= 4, f"{env}: {name}({x[i]!r}) = {got[i]!r}, numpy {fn(x)[i]!r}"
