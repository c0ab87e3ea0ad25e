"""The public API: trace (bare and with options), the specialization cache
(stats, cache_entries, HALOJIT_LOG miss reasons), out=, wrapping."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import halojit
from helpers import HAS_HALIDE_BACKEND, assert_same, jit

X = np.arange(12, dtype=np.float32).reshape(3, 4)


def test_public_names():
    for name in ("trace", "load", "exclude_from_trace", "config", "TracedFunction", "errors",
                 "HalojitError", "TraceError", "TraceWarning", "ShapeError", "DTypeError",
                 "UnsupportedError", "CompileError", "ArtifactError", "DomainError"):
        assert hasattr(halojit, name) and name in halojit.__all__


# -- trace, bare and with options --------------------------------------------------------------
def test_trace_bare_defaults(clean_env):
    clean_env.setenv("HALOJIT_BACKEND", "numpy")  # runs without Halide

    @halojit.trace
    def f(x):
        """Doubles x."""
        return x * 2

    assert isinstance(f, halojit.TracedFunction)
    assert (f.opt_level, f.backend, f.symbolic, f.capture_as_const) == (3, "numpy", True, False)
    assert f.target == "host"
    np.testing.assert_array_equal(f(X), X * 2)


def test_trace_default_backend_is_halide_at_level_3_and_numpy_below(clean_env):
    assert halojit.trace(lambda x: x).backend == "halide"
    assert halojit.trace(lambda x: x, opt_level=2).backend == "numpy"
    assert halojit.trace(lambda x: x, opt_level=3, backend="NUMPY").backend == "numpy"


def test_target_default_comes_from_the_environment(clean_env):
    clean_env.setenv("HALOJIT_TARGET", "host-cuda")
    assert halojit.trace(lambda x: x, opt_level=1).target == "host-cuda"
    assert halojit.trace(lambda x: x, opt_level=1, target="x86-64-linux").target == "x86-64-linux"


@pytest.mark.parametrize("level", [0, 1, 2])
def test_trace_with_options(level):
    @halojit.trace(opt_level=level, symbolic=True, capture_as_const=False)
    def f(x, y):
        return np.tanh(x @ y) + 1

    y = np.ones((4, 2), np.float32)
    assert f.opt_level == level and f.backend == "numpy"
    assert_same(f(X, y), np.tanh(X @ y) + 1)


def test_functools_wraps_metadata():
    def my_function(x, y=1):
        """Adds one."""
        return x + 1

    f = halojit.trace(my_function, opt_level=0)
    assert f.__name__ == "my_function" and f.__doc__ == "Adds one."
    assert f.__wrapped__ is my_function
    assert f.__module__ == __name__ and f.__qualname__.endswith("my_function")
    assert "my_function" in repr(f) and "opt_level=0" in repr(f)
    g = halojit.trace(opt_level=1)(my_function)
    assert g.__name__ == "my_function" and g.__doc__ == "Adds one."
    assert functools.wraps(f)(lambda: None).__name__ == "my_function"


def test_traced_functions_nest(opt_level):
    inner = jit(lambda x: x * 2, opt_level)
    outer = jit(lambda x: inner(x) + inner(x + 1), opt_level)
    np.testing.assert_array_equal(outer(X), X * 2 + (X + 1) * 2)
    assert inner.stats()["misses"] == 0  # inlined into the outer trace


def test_inputs_python_and_numpy_scalars_and_lists(opt_level):
    f = jit(lambda a, b: a * b, opt_level)
    assert_same(f(X, 2.0), X * 2.0)
    assert_same(f(X, np.float64(2.0)), X * np.float64(2.0))
    assert_same(f([1, 2, 3], 2), np.asarray([1, 2, 3]) * 2)
    assert_same(f((1.5, 2.5), True), np.asarray((1.5, 2.5)) * True)
    assert_same(f(np.int8(3), 2), np.int8(3) * 2)
    assert_same(f(3, 4.5), np.float64(13.5))


def test_zero_d_results_are_numpy_scalars(opt_level):
    f = jit(lambda x: (x.sum(), x[0, 0], x.reshape(12)[3:4]), opt_level)
    s, e, v = f(X)
    assert isinstance(s, np.float32) and isinstance(e, np.float32)
    assert isinstance(v, np.ndarray) and v.shape == (1,)


C0, A0, B0 = np.array(True), np.array(1.5), np.array(-2.0)  # 0-d arrays
ZERO_D_RESULTS = {
    # numpy returns a 0-d ndarray from np.where and the like (no ufunc)
    "where": (lambda c, a, b: np.where(c, a, b), (C0, A0, B0)),
    "where-py-scalars": (lambda c, a, b: np.where(c, 1.0, 2), (C0, A0, B0)),
    "where-tuple": (lambda c, a, b: (np.where(a > b, a, b), a + b), (C0, A0, B0)),
    "select": (lambda c, a, b: np.select([c], [a], 0.0), (C0, A0, B0)),
    "copy": (lambda a, b: np.copy(a + b), (A0, B0)),
    "broadcast-to": (lambda a, b: np.broadcast_to(a * b, ()), (A0, B0)),
    "ones-like": (lambda a, b: np.ones_like(a), (A0, B0)),
    "ellipsis": (lambda a, b: (a + b)[...], (A0, B0)),
    # functions whose last step reshapes or squeezes an array
    "cov-1d": (lambda v: np.cov(v), (np.array([3.0, 1.0, 2.5]),)),
    "tensordot-1d": (lambda v: np.tensordot(v, v * 2, 1), (np.array([3.0, 1.0, 2.5]),)),
    "isin-0d": (lambda a, b: np.isin(a, [b, 2.0]), (A0, B0)),
    "i0-0d": (lambda a, b: np.i0(a), (A0, B0)),
    "corrcoef-1d": (lambda v: np.corrcoef(v), (np.array([3.0, 1.0, 2.5]),)),  # c / c: a scalar
    # ufuncs, reductions, integer indexing: a numpy scalar
    "add": (lambda a, b: np.add(a, b), (A0, B0)),
    "maximum": (lambda a, b: np.maximum(a, b), (A0, B0)),
    "less": (lambda a, b: a < b, (A0, B0)),
    "clip": (lambda a, b: np.clip(a, b, 1.0), (A0, B0)),
    "ufunc-of-where": (lambda c, a, b: np.negative(np.where(c, a, b)), (C0, A0, B0)),
    "median": (lambda v: np.median(v), (np.array([3.0, np.nan, 1.0]),)),  # ends in a where
    "index": (lambda v: v[1], (np.array([3.0, 1.0]),)),
    # shape-keeping methods keep what they were called on: a 0-d array's is
    # an array, a scalar's a scalar; an argument comes back as it was passed
    "astype": (lambda a, b: a.astype(np.float32), (A0, B0)),
    "astype-of-sum": (lambda a, b: (a + b).astype(np.float32), (A0, B0)),
    "where-reshape": (lambda c, a, b: np.where(c, a, b).reshape(()), (C0, A0, B0)),
    "identity": (lambda a, b: a, (A0, B0)),
    "identity-scalar": (lambda a, b: a, (np.float64(1.5), B0)),
}


@pytest.mark.parametrize("name", sorted(ZERO_D_RESULTS))
def test_zero_d_results_are_what_numpy_returns(name, opt_level):
    """A 0-d result came back as a numpy scalar whatever made it; numpy
    returns a 0-d ndarray from np.where of 0-d arrays, np.copy, x[...],
    x.astype of a 0-d array (the miss, the hit and the fast path alike)."""
    fn, args = ZERO_D_RESULTS[name]
    want = fn(*args)
    f = jit(fn, opt_level)
    for _ in range(3):
        got = f(*args)
        for g, w in zip(got if isinstance(want, tuple) else [got],
                        want if isinstance(want, tuple) else [want]):
            assert type(g) is type(w), (type(g), type(w))
            assert_same(g, w)


def test_no_arguments_and_constant_outputs(opt_level):
    f = jit(lambda: np.ones(3) * 2, opt_level)
    np.testing.assert_array_equal(f(), np.full(3, 2.0))


# -- the cache ----------------------------------------------------------------------------------
def test_cache_hits_and_misses(opt_level):
    f = jit(lambda x, y: x + y, opt_level)
    assert {k: f.stats()[k] for k in ("compiles", "hits", "misses", "entries")} == \
        {"compiles": 0, "hits": 0, "misses": 0, "entries": 0}
    f(X, X)
    f(X, X + 1)          # same avals: a hit
    f(X.copy(), X)       # another array, same avals: a hit
    f(X.T, X.T)          # non-contiguous, another shape: a miss
    f(X[:, ::-1], X)     # negative strides, same avals as (X, X): a hit
    f(X.astype(np.float64), X)  # another dtype: a miss
    f(X, 1.0)            # a Python scalar: a miss
    f(X, 2.0)            # same weak aval: a hit
    s = f.stats()
    assert (s["misses"], s["hits"], s["entries"], s["traces"]) == (4, 4, 4, 4)
    assert s["compiles"] >= 0


def test_cache_entries_lists_each_specialization(opt_level):
    f = jit(lambda x, *, k=1: x * k, opt_level)
    f(X)
    f(X[:2].astype(np.int8), k=3)
    f(2.5)
    entries = f.cache_entries()
    assert [e["inputs"] for e in entries] == [["f32[3,4]"], ["i8[2,4]"], ["f64[]~weak"]]
    assert [e["static"] for e in entries] == [{}, {"k": 3}, {}]
    assert all(e["target"] == f.target for e in entries)


def test_cache_key_includes_the_opt_level_and_is_per_function(opt_level):
    fn = lambda x: x + 1  # noqa: E731
    a, b = jit(fn, opt_level), jit(fn, opt_level)
    a(X)
    b(X)
    assert a.stats()["misses"] == b.stats()["misses"] == 1


def test_halojit_log_prints_miss_reasons_to_stderr(opt_level, clean_env, capfd):
    clean_env.setenv("HALOJIT_LOG", "1")
    f = jit(lambda x, *, k=1: x * k, opt_level)
    f(X)
    err = capfd.readouterr().err
    assert "[halojit] <lambda>: cache miss (first call)" in err
    assert "built" in err and "specialization" in err  # one line per build
    f(X)
    assert capfd.readouterr().err == ""  # a hit logs nothing
    f(X[:2])
    assert "cache miss (argument 0 is f32[2,4] (cached: f32[3,4]))" in capfd.readouterr().err
    f(X, k=2)
    assert "cache miss (static kwargs {'k': 2} (cached: {}))" in capfd.readouterr().err


def test_halojit_log_off_by_default(opt_level, clean_env, capfd):
    jit(lambda x: x + 1, opt_level)(X)
    assert capfd.readouterr().err == ""


# -- out= ---------------------------------------------------------------------------------------
def test_out_writes_in_place(opt_level):
    f = jit(lambda x: np.exp(x) - 1, opt_level)
    out = np.empty_like(X)
    for _ in range(2):  # miss, then hit
        out[...] = 0
        r = f(X, out=out)
        assert r is out
        np.testing.assert_allclose(out, np.exp(X) - 1, rtol=1e-6)


def test_out_with_several_outputs(opt_level):
    f = jit(lambda x: (x + 1, x.sum(axis=0)), opt_level)
    o1, o2 = np.empty_like(X), np.empty(4, np.float32)
    r = f(X, out=(o1, o2))
    assert r[0] is o1 and r[1] is o2
    np.testing.assert_array_equal(o1, X + 1)
    np.testing.assert_array_equal(o2, X.sum(axis=0))
    r = f(X, out=[o1, o2])
    assert r[0] is o1


def test_out_is_never_passed_to_the_function(opt_level):
    seen = []

    def f(x, **kwargs):
        seen.append(sorted(kwargs))
        return x * 2

    out = np.empty_like(X)
    jit(f, opt_level)(X, out=out)
    assert seen == [[]]


def test_out_may_be_the_input(opt_level):
    x = X.copy()
    jit(lambda x: x[::-1] * 2, opt_level)(x, out=x)  # computed first, then written
    np.testing.assert_array_equal(x, X[::-1] * 2)


def test_out_0d(opt_level):
    out = np.empty((), np.float32)
    r = jit(lambda x: x.sum(), opt_level)(X, out=out)
    assert r is out and out[()] == X.sum()


def test_out_non_contiguous_view(opt_level):
    buf = np.zeros((3, 8), np.float32)
    jit(lambda x: x + 1, opt_level)(X, out=buf[:, ::2])
    np.testing.assert_array_equal(buf[:, ::2], X + 1)
    assert not buf[:, 1::2].any()


# -- levels --------------------------------------------------------------------------------------
@pytest.mark.parametrize("level", [0, 1, 2])
def test_every_numpy_level_agrees(level):
    def f(x, y):
        h = x @ y + 0.5
        return 0.5 * h * (1 + np.tanh(0.79788456 * (h + 0.044715 * h ** 3)))

    y = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)
    want = f(X / 10, y)
    assert_same(halojit.trace(f, opt_level=level)(X / 10, y), want)


@pytest.mark.skipif(not HAS_HALIDE_BACKEND, reason="the Halide backend is not built yet")
def test_level_3_halide_matches_numpy():
    f = jit(lambda x: np.exp(x).sum(axis=0), 3)
    assert_same(f(X / 10), np.exp(X / 10).sum(axis=0))



@pytest.mark.parametrize("a,b", [(3, 4.5), (True, 2), (2, 2.5), (True, 0.5), (7, 2)])
def test_only_python_scalars(a, b, opt_level):
    """Ops between weak scalars compute in numpy's loop dtype for them, and
    the result stays weak: it does not widen a float32 array later."""
    f = jit(lambda a, b, x: (a * b, np.where(a > 0, a, b), x * (a / b), np.maximum(a, b)),
            opt_level)
    x = np.ones(2, np.float32)
    got = f(a, b, x)
    want = (np.multiply(a, b), np.where(a > 0, a, b), x * (a / b), np.maximum(a, b))
    for g, w in zip(got, want):
        assert_same(g, w)


def test_tune_needs_compiled_kernels():
    f = halojit.trace(lambda x: x + 1, opt_level=1)
    with pytest.raises(halojit.UnsupportedError, match="only the Halide backend at opt_level 3"):
        f.tune(np.ones(2))


def test_readme_environment_table_mirrors_config():
    """Every HALOJIT_* variable is in the README's table, and only those."""
    import re
    from pathlib import Path

    from halojit.config import ENV_VARS
    readme = Path(__file__).resolve().parent.parent / "README.md"
    if not readme.exists():  # an installed copy's tests without the checkout
        pytest.skip("README.md is not beside the tests")
    text = readme.read_text()
    table = text[text.index("## Environment variables"):]
    table = table[:table.index("\n## ", 1)]
    listed = set(re.findall(r"^\| `(HALOJIT_\w+)` \|", table, re.M))
    assert listed == set(ENV_VARS), (sorted(listed - set(ENV_VARS)), sorted(set(ENV_VARS) - listed))


# -- inputs numpy takes that the kernels do not read as they are --------------------------------
def test_big_endian_inputs_are_converted(opt_level):
    f = jit(lambda x, y: x * 2 + y, opt_level)
    be = np.arange(6, dtype=">f4").reshape(2, 3)
    for _ in range(3):  # the slow path, then whatever the fast paths make of it
        got = f(be, np.float64(1).astype(">f8"))
        assert_same(got, be * 2 + np.float64(1))
        assert got.dtype == np.float64 and got.dtype.isnative
    np.testing.assert_array_equal(f(be.astype(np.float32), 1.0), be * 2 + 1)
    assert be.dtype == np.dtype(">f4")  # the caller's array is left alone


def test_matrix_and_masked_array_inputs_are_refused_and_other_subclasses_taken(opt_level):
    f = jit(lambda x: x * x, opt_level)
    with pytest.raises(halojit.DTypeError, match="np.matrix.*np.asarray"):
        f(np.arange(4.0).reshape(2, 2).view(np.matrix))  # numpy: a matrix product
    with pytest.raises(halojit.DTypeError, match="masked array"):
        f(np.ma.masked_array([1.0, 2.0], mask=[0, 1]))

    class Tagged(np.ndarray):
        pass

    got = f(np.arange(3.0).view(Tagged))
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, np.arange(3.0) ** 2)


def test_callables_without_a_name(monkeypatch):
    """functools.partial and callable objects trace (their name comes from
    the wrapped function or the class), with logging on too."""
    monkeypatch.setenv("HALOJIT_LOG", "1")

    class Scale:
        def __call__(self, x):
            return x * np.float32(2)

    for fn, want in ((functools.partial(lambda x, s: x * s, s=np.float32(3)), X * 3),
                     (Scale(), X * 2)):
        f = halojit.trace(fn, opt_level=0)
        assert_same(f(X), want)
        assert f.__name__ in repr(f) and f.__name__ in ("<lambda>", "Scale")


def test_round_of_a_traced_value():
    """round(x, n) is np.round (numpy's scalars round so); round(x) needs
    the value, a Python int, and says so."""
    x = np.float32([1.114, 1.117])
    assert_same(jit(lambda a: round(a.sum(), 2), 0)(x), round(x.sum(), 2))
    with pytest.raises(halojit.TraceError, match="round"):
        jit(lambda a: round(a.sum()) * a, 0)(x)
