"""Surprising tracing behaviours, pinned. Each test says what happens and
why; a change here is a change of documented behaviour."""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest

import halojit
from halojit import TraceError, TraceWarning, UnsupportedError
from helpers import assert_same, jit

X = np.arange(6, dtype=np.float32).reshape(2, 3)


# -- symbolic=False ------------------------------------------------------------------------------
def test_symbolic_false_freezes_the_first_calls_branch_and_warns(opt_level):
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 100

    g = jit(f, opt_level, symbolic=False)
    with pytest.warns(TraceWarning, match=r"symbolic=False.*1 value-dependent Python "
                                          r"decision\(s\) were frozen"):
        np.testing.assert_array_equal(g(X), X * 2)
    # -X sums to < 0: plain Python would take the other branch; the graph does not.
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning on a cache hit
        np.testing.assert_array_equal(g(-X), -X * 2)
    assert g.stats()["misses"] == 1 and g.stats()["hits"] == 1


def test_symbolic_false_warning_points_at_the_callers_line(opt_level):
    g = jit(lambda x: x * (2 if x.max() > 3 else 3), opt_level, symbolic=False)
    with pytest.warns(TraceWarning) as record:
        g(X)
    assert record[0].filename == __file__


def test_symbolic_false_new_shape_retraces_with_the_new_values(opt_level):
    g = jit(lambda x: x * 2 if x.sum() > 0 else x - 100, opt_level, symbolic=False)
    with pytest.warns(TraceWarning):
        g(X)
    with pytest.warns(TraceWarning):
        np.testing.assert_array_equal(g(-X[:1]), -X[:1] - 100)  # a new key: branch re-taken


def test_symbolic_false_value_dependent_shapes_are_frozen(opt_level):
    g = jit(lambda x: x[: int(x[0])], opt_level, symbolic=False)
    with pytest.warns(TraceWarning):
        np.testing.assert_array_equal(g(np.array([2.0, 5.0, 6.0])), [2.0, 5.0])
    np.testing.assert_array_equal(g(np.array([1.0, 7.0, 8.0])), [1.0, 7.0])  # still 2 long


# -- globals and closures ------------------------------------------------------------------------
G_WEIGHTS = np.ones(3, np.float32)


def uses_global(x):
    return x * G_WEIGHTS


def test_global_array_is_re_read_at_every_call(opt_level):
    global G_WEIGHTS
    saved = G_WEIGHTS
    try:
        G_WEIGHTS = np.ones(3, np.float32)
        f = jit(uses_global, opt_level)
        np.testing.assert_array_equal(f(X), X)
        G_WEIGHTS[:] = 2  # an in-place update takes effect, no retrace
        np.testing.assert_array_equal(f(X), X * 2)
        assert f.stats()["misses"] == 1
        G_WEIGHTS = np.full(3, 3, np.float32)  # rebinding (same aval): the new array is read
        np.testing.assert_array_equal(f(X), X * 3)
        assert f.stats()["misses"] == 1
        G_WEIGHTS = np.full((2, 1), 4, np.float64)  # a new shape and dtype: retraces
        assert_same(f(X), X * np.full((2, 1), 4.0))
        assert f.stats()["misses"] == 2
    finally:
        G_WEIGHTS = saved


def test_closure_array_is_re_read_at_every_call(opt_level):
    w = np.ones(3, np.float32)

    def f(x):
        return x + w

    g = jit(f, opt_level)
    np.testing.assert_array_equal(g(X), X + 1)
    w += 10
    np.testing.assert_array_equal(g(X), X + 11)
    assert g.stats()["misses"] == 1


def test_default_value_arrays_are_re_read_at_every_call(opt_level):
    w, b = np.ones(3, np.float32), np.zeros(3, np.float32)

    def f(x, b=b, *, w=w):
        return x * w + b

    g = jit(f, opt_level)
    np.testing.assert_array_equal(g(X), X)
    w[:] = 5  # in place, as numpy's f would see it
    b += 1
    np.testing.assert_array_equal(g(X), X * 5 + 1)
    f.__kwdefaults__["w"] = np.full(3, 2, np.float32)  # rebound: the new array is read
    np.testing.assert_array_equal(g(X), X * 2 + 1)
    np.testing.assert_array_equal(g(X, np.ones(3, np.float32)), X * 2 + 1)  # passed: an input
    frozen = jit(f, opt_level, capture_as_const=True)
    np.testing.assert_array_equal(frozen(X), X * 2 + 1)
    w[:], b[:] = 7, 7
    np.testing.assert_array_equal(frozen(X), X * 2 + 1)
    assert g.stats()["misses"] == 2


def test_float_static_kwargs_keep_their_sign_and_nan_hits():
    g = halojit.trace(lambda a, *, k: a / k)
    a = np.array([1.0, -1.0], np.float32)
    np.testing.assert_array_equal(g(a, k=0.0), [np.inf, -np.inf])
    np.testing.assert_array_equal(g(a, k=-0.0), [-np.inf, np.inf])  # 0.0 == -0.0, not the same key
    np.testing.assert_array_equal(g(a, k=(-0.0, 1)[0]), [-np.inf, np.inf])
    for _ in range(2):
        assert np.isnan(g(a, k=float("nan"))).all()
    assert g.stats()["misses"] == 3  # the second NaN hits


def test_capture_as_const_freezes_globals_and_closures(opt_level):
    global G_WEIGHTS
    saved = G_WEIGHTS
    try:
        G_WEIGHTS = np.ones(3, np.float32)
        f = jit(uses_global, opt_level, capture_as_const=True)
        np.testing.assert_array_equal(f(X), X)
        G_WEIGHTS[:] = 5   # the constant is a copy taken at trace time
        np.testing.assert_array_equal(f(X), X)
        G_WEIGHTS = np.zeros((7,), np.float32)  # not even a rebinding is noticed
        np.testing.assert_array_equal(f(X), X)
        assert f.stats()["misses"] == 1
    finally:
        G_WEIGHTS = saved


def test_global_python_scalars_are_frozen_at_trace_time(opt_level):
    scale = {"value": 2.0}
    k = 2.0

    def f(x):
        return x * k * scale["value"]

    g = jit(f, opt_level)
    np.testing.assert_array_equal(g(X), X * 4)
    k = 10.0  # noqa: F841  (a Python float: baked in as a constant, no retrace)
    scale["value"] = 10.0
    np.testing.assert_array_equal(g(X), X * 4)


def test_numpy_random_runs_once_at_trace_time(opt_level):
    rng = np.random.default_rng(0)
    g = jit(lambda x: x + rng.random(3), opt_level)
    a, b = g(X), g(X)
    np.testing.assert_array_equal(a, b)  # the same "random" numbers every call


def test_arrays_computed_outside_numpy_dispatch_are_constants(opt_level):
    table = np.arange(3.0)
    g = jit(lambda x: x + np.cumsum(table), opt_level)  # cumsum of a plain array: eager
    np.testing.assert_array_equal(g(X), X + np.cumsum(np.arange(3.0)))
    table[:] = 100  # bound by reference, but only `table` itself is re-read; its cumsum
    np.testing.assert_array_equal(g(X), X + np.cumsum(np.arange(3.0)))  # was a constant


# -- the cache key -------------------------------------------------------------------------------
def test_static_kwargs_are_part_of_the_cache_key(opt_level):
    traces = []

    def f(x, *, power=2, mode="a"):
        traces.append((power, mode))
        return x ** power if mode == "a" else -x

    g = jit(f, opt_level)
    g(X, power=2)
    g(X, power=2)
    assert g.stats()["misses"] == 1 and g.stats()["hits"] == 1
    np.testing.assert_array_equal(g(X, power=3), X ** 3)
    assert g.stats()["misses"] == 2
    np.testing.assert_array_equal(g(X, power=3, mode="b"), -X)
    assert g.stats()["misses"] == 3
    g(X, mode="b", power=3)  # keyword order does not matter
    assert g.stats()["misses"] == 3
    assert traces == [(2, "a"), (3, "a"), (3, "b")]


def test_static_kwargs_of_equal_value_but_different_type_are_different_keys(opt_level):
    g = jit(lambda x, *, k: x * k, opt_level)
    assert g(X, k=2).dtype == np.float32
    g(X, k=2.0)
    g(X, k=True)
    assert g.stats()["misses"] == 3


def test_positional_python_scalars_are_inputs_not_constants(opt_level):
    g = jit(lambda x, s: x * s, opt_level)
    np.testing.assert_array_equal(g(X, 2.0), X * 2)
    np.testing.assert_array_equal(g(X, 3.0), X * 3)  # same key: no retrace, new value
    assert g.stats()["misses"] == 1
    g(X, 3)  # an int is another key (weak int64 vs weak float64)
    assert g.stats()["misses"] == 2


def test_weak_int_input_range_is_checked_at_every_call(opt_level):
    g = jit(lambda x, s: x + s, opt_level)
    x8 = np.zeros(3, np.int8)
    np.testing.assert_array_equal(g(x8, 100), np.full(3, 100, np.int8))
    with pytest.raises(OverflowError, match="Python integer 1000 out of bounds for int8"):
        g(x8, 1000)  # a cache hit, but numpy would raise: so does halojit


def test_weak_int_input_range_is_checked_on_an_eager_first_call(opt_level):
    # symbolic=False runs the first call on values as it traces: the check
    # must run then too (it used to wrap 1000 to -24 silently)
    g = jit(lambda x, s: x + s, opt_level, symbolic=False)
    with pytest.raises(OverflowError, match="Python integer 1000 out of bounds for int8"), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g(np.zeros(3, np.int8), 1000)


# -- Python side effects -------------------------------------------------------------------------
def test_python_side_effects_happen_only_when_tracing(opt_level, capsys):
    log = []

    def f(x):
        print("tracing f")
        log.append(x.shape)
        return x + 1

    g = jit(f, opt_level)
    for _ in range(3):
        g(X)
    assert log == [(2, 3)] and capsys.readouterr().out == "tracing f\n"
    g(X[:1])  # a new shape traces again
    assert log == [(2, 3), (1, 3)]


def test_exclude_from_trace_block_runs_at_every_call(opt_level):
    seen = []

    def f(x):
        y = x * 2
        with halojit.exclude_from_trace():
            seen.append(float(np.asarray(y).sum()))  # real values, every call
        return y + 1

    g = jit(f, opt_level)
    for k in range(3):
        np.testing.assert_array_equal(g(X + k), (X + k) * 2 + 1)
    assert seen == [float(((X + k) * 2).sum()) for k in range(3)]


def test_exclude_from_trace_values_feed_later_traced_code(opt_level):
    def f(x):
        y = x + 1
        with halojit.exclude_from_trace():
            s = np.sort(np.asarray(y), axis=1)  # unsupported in a trace, fine here
            k = int(np.asarray(y).argmax())
        return y * s + k

    g = jit(f, opt_level)
    for x in (X, X[:, ::-1].copy(), -X):
        y = x + 1
        np.testing.assert_array_equal(g(x), y * np.sort(y, axis=1) + int(y.argmax()))


def test_exclude_from_trace_block_sees_numpy_arrays(opt_level):
    kinds = []

    def f(x):
        y = x * 2
        with halojit.exclude_from_trace():
            kinds.append((type(np.asarray(y)), type(np.array(y))))
            u = np.unique(y)  # untraceable numpy runs on the values here
            pos = y.ravel().searchsorted(0.0)  # and so do untraced methods
            n = len(np.unique(np.asarray(y).round()))
        return y[:, :1] + u.size + pos + n

    g = jit(f, opt_level)
    for x in (X, X * 3):
        y = x * 2
        want = y[:, :1] + np.unique(y).size + y.ravel().searchsorted(0.0) + len(np.unique(y.round()))
        np.testing.assert_array_equal(g(x), want)
    assert set(kinds) == {(np.ndarray, np.ndarray)}


def test_exclude_from_trace_traced_parts_run_as_compiled_segments(opt_level):
    calls = []

    def f(x, s):
        y = np.exp(x * 0.5) + s  # segment 1: compiled from the second call on
        with halojit.exclude_from_trace():
            m = np.median(np.asarray(y))  # a numpy scalar: an input of the next segment
            calls.append(1)
            k = 3 + int(np.floor(np.asarray(x).ravel()[0])) % 2  # 3 and 4 by turns
        if y.sum() > 0:  # a value-dependent branch outside the block: computed, every call
            y = y - m
        return np.tanh(y) * k

    g = jit(f, opt_level)
    for i in range(5):
        x = X + i
        want = f(x, 2.0)
        assert_same(g(x, 2.0), want)
    stats = g.stats()
    if opt_level == 3:
        # k alternates 3, 4: each last segment is seen twice, so compiled too
        assert stats["compiles"] >= 2
    assert stats["hits"] >= 1 and len(calls) == 10


def test_exclude_from_trace_keeps_numpy_range_checks(opt_level):
    def f(x, s):
        y = x + s
        with halojit.exclude_from_trace():
            n = np.asarray(y).size
        return y * n

    g = jit(f, opt_level)
    x = X.astype(np.int8)
    for _ in range(3):
        assert_same(g(x, 100), f(x, 100))
    with pytest.raises(OverflowError):  # numpy: int8 + 1000 raises, at every call
        g(x, 1000)


def test_exclude_from_trace_varying_python_numbers_do_not_compile_every_call(opt_level):
    def f(x):
        with halojit.exclude_from_trace():
            k = int(np.asarray(x).sum() * 1000) % 997  # a new constant at each call
        return x * k + 1

    g = jit(f, opt_level)
    for i in range(6):
        np.testing.assert_array_equal(g(X + i), f(X + i))
    assert g.stats()["compiles"] == 0  # each structure seen once: run in numpy, not compiled


# -- outputs -------------------------------------------------------------------------------------
Pair = collections.namedtuple("Pair", "total parts")


def test_namedtuple_outputs_are_rebuilt(opt_level):
    g = jit(lambda x: Pair(x.sum(), [x * 2, {"m": x.max()}]), opt_level)
    for _ in range(2):  # miss, then hit
        r = g(X)
        assert type(r) is Pair and isinstance(r.parts[1], dict)
        assert_same(r.total, X.sum())
        np.testing.assert_array_equal(r.parts[0], X * 2)


def test_generator_outputs_are_refused(opt_level):
    with pytest.raises(TraceError, match="generator"):
        jit(lambda x: (r * 2 for r in x), opt_level)(X)


def test_other_objects_holding_traced_arrays_are_refused(opt_level):
    class Box:
        def __init__(self, v):
            self.v = v

    with pytest.raises(TraceError, match="Box object holding traced arrays.*namedtuple"):
        jit(lambda x: Box([x + 1]), opt_level)(X)
    constant = Box(np.ones(2))  # nothing traced inside: returned as is, like an int
    r = jit(lambda x: (constant, x + 1), opt_level)(X)
    assert r[0] is constant


def test_outputs_may_be_any_nesting_of_tuple_list_dict(opt_level):
    def f(x, y):
        return {"sum": x + y, "parts": [x, (y, x * y)], "n": 3, "none": None}, x.max()

    g = jit(f, opt_level)
    y = np.ones(3, np.float32)
    for _ in range(2):  # miss, then hit
        out, m = g(X, y)
        assert list(out) == ["sum", "parts", "n", "none"]
        assert out["n"] == 3 and out["none"] is None  # non-array leaves come back as is
        assert isinstance(out["parts"], list) and isinstance(out["parts"][1], tuple)
        np.testing.assert_array_equal(out["parts"][1][1], X * y)
        assert_same(m, X.max())
        assert isinstance(m, np.float32)  # a 0-d result is a numpy scalar, as in numpy


def test_outputs_that_are_inputs_or_constants_are_fresh_arrays(opt_level):
    const = np.arange(3.0)

    def f(x):
        return x, const, x.reshape(3, 2), x.T, np.asarray(7.0) * 1

    g = jit(f, opt_level, capture_as_const=True)
    x = X.copy()
    for _ in range(2):
        a, c, r, t, s = g(x)
        assert not np.shares_memory(a, x) and not np.shares_memory(r, x)
        assert not np.shares_memory(t, x) and not np.shares_memory(c, const)
        a[:] = -1
        c[:] = -1  # the caller may modify them...
        r[:] = -1
        t[:] = -1
        assert a.flags.writeable and c.flags.writeable
    np.testing.assert_array_equal(x, X)  # ...without touching the input
    np.testing.assert_array_equal(g(x)[1], np.arange(3.0))  # ...or later calls


def test_the_same_output_twice_gives_two_arrays(opt_level):
    g = jit(lambda x: (x + 1, x + 1), opt_level)
    a, b = g(X)
    a[:] = 0
    np.testing.assert_array_equal(b, X + 1)


def test_input_arrays_are_never_written(opt_level):
    def f(x, y):
        z = x * 1
        z += y
        z[...] if False else None
        return z, x, np.clip(x, 0, 1, out=None)

    x, y = X.copy(), np.ones(3, np.float32)
    before = (x.copy(), y.copy())
    g = jit(f, opt_level)
    for _ in range(2):
        out = g(x, y, out=None)
        for o in out:
            o[...] = 99
    np.testing.assert_array_equal(x, before[0])
    np.testing.assert_array_equal(y, before[1])


# -- in-place updates -----------------------------------------------------------------------------
def test_in_place_update_of_a_temporary_rebinds_the_name(opt_level):
    def f(x):
        y = x * 1
        alias = y
        y += 1
        return y, alias

    a, b = jit(f, opt_level)(X)
    np.testing.assert_array_equal(a, X + 1)
    np.testing.assert_array_equal(b, X + 1)  # the same Python object: sees the update


def _view_writes():
    def stale_view(x):  # numpy: the view sees y += 1
        y = x * 1
        first_row = y[0]
        y += 1
        return first_row

    def through_slice(x):  # numpy: the write reaches y
        y = x * 1
        z = y[:, 1:]
        z *= 2
        return y

    def through_out(x):
        y = x * 1
        np.multiply(y[0], 2, out=y[0])
        return y

    def through_transpose(x):
        y = x * 1
        t = y.T
        t += 1
        return y.sum()

    def sibling_view(x):  # another view of the same base
        y = x * 1
        a, b = y[:1], y[1:]
        a -= 1
        return b

    def through_view(x):  # x.view() and x.view(dtype) share memory too
        y = x * 1
        v = y.view()
        v += 1
        return y

    def stale_bits(x):
        y = x * 1
        bits = y.view(np.int32)
        y += 1
        return bits

    def through_astype_no_copy(x):  # astype(same dtype, copy=False) is x itself
        y = x * 1
        z = y.astype(np.float32, copy=False)[1:]
        z -= 1
        return y

    return [stale_view, through_slice, through_out, through_transpose, sibling_view,
            through_view, stale_bits, through_astype_no_copy]


def test_view_like_constructors_alias_as_numpy(opt_level):
    def f(x):
        y = x * 1
        a = np.array(y, copy=None)  # y itself
        b = y.astype(y.dtype, copy=False)  # y itself
        c, d = np.array(y), np.asarray(y, copy=True)  # copies
        a += 1
        b *= 2
        return y, c, d

    got = jit(f, opt_level)(X)
    for g, w in zip(got, f(X.copy())):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("make", [lambda x: x.view(), lambda x: x.view(np.int32),
                                  lambda x: x.astype(x.dtype, copy=False),
                                  lambda x: np.array(x, copy=None)],
                         ids=["view", "view-int32", "astype-no-copy", "array-copy-none"])
def test_writes_through_view_like_forms_of_an_input_are_refused(make, opt_level):
    def f(x):
        v = make(x)
        v += 1
        return v

    with pytest.raises(TraceError, match="input"):
        jit(f, opt_level)(X)


@pytest.mark.parametrize("fn", _view_writes(), ids=lambda f: f.__name__)
def test_in_place_writes_shared_through_views_are_refused(fn, opt_level):
    """numpy carries an in-place write into every array sharing the memory;
    the trace records values, so such an array would silently keep its old
    values (it did, until the differential fuzz found it): using one raises
    UnsupportedError, naming the write."""
    with pytest.raises(UnsupportedError, match=r"in-place operation changed.*test_footguns.py"):
        jit(fn, opt_level)(X)


def test_out_fill_and_copyto_into_arrays_made_inside(opt_level):
    def f(x):
        a = x * 1
        np.clip(a, -0.5, 0.5, out=a)
        b = (x[0] * 0).astype(np.int32)
        x.sum(axis=0, out=b)  # numpy casts a reduction's result unsafely into out
        c = x + 0
        c.cumsum(axis=1, out=c)
        d = x.astype(np.int8)
        d.fill(3)
        np.copyto(d, 7, where=x > 0)
        e = x * 0
        np.copyto(e, x[0])  # broadcast
        r = np.round(x * 10, out=x * 0)  # the out= array comes back
        return a, b, c, d, e, r

    got = jit(f, opt_level)(X)
    for g, w in zip(got, f(X.copy())):
        assert_same(g, w)


@pytest.mark.parametrize("fn,x,oshape,odt", [
    (np.sum, np.float32([0.6, 0.6]), (), np.int32),             # unsafe: summed in float32
    (np.sum, np.int64([2**40 + 1, -2**40]), (), np.float32),     # unsafe: summed in int64
    (np.cumsum, np.float64([1e-8, 1, -1]), (3,), np.float32),
    (np.prod, np.float64([0.5, 4.0]), (), np.int32),
    (np.sum, np.int64([1, 1, -2]), (), np.bool_),
    (np.mean, np.float64([[0.6, 0.6, 0.6], [0.7, -0.7, 1.9]]), (3,), np.int64),
    (np.sum, np.float32([1e8, 1, -1e8]), (), np.float64),        # safe: summed in float64
    (np.sum, np.int8([100, 100, 100]), (), np.int16),
    (np.mean, np.float16([1, 2, 2]), (), np.float32),
])
def test_reductions_into_an_out_of_another_dtype(fn, x, oshape, odt, opt_level):
    """numpy accumulates in out's dtype only where the input casts to it
    safely; otherwise in its own dtype, then casts the result into out."""
    def f(a):
        o = np.zeros_like(a, shape=oshape, dtype=odt)
        fn(a, axis=0, out=o)
        return o

    assert_same(jit(f, opt_level)(x), f(x))


def test_in_place_writes_that_views_do_not_see_still_work(opt_level):
    def f(x):
        h = x * 2
        rows = h[::2]
        rows += 1  # h is stale from here, but not used again
        rows *= 3  # the view itself stays usable
        y = x * 1
        y += 1
        return rows, y[0] + y.T[:, 0], np.sort(y.ravel())

    got = jit(f, opt_level)(X)
    want = f(X.copy())
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_traced_arrays_must_not_escape(opt_level):
    leaked = []

    def leak(x):
        leaked.append(x * 2)
        return x

    jit(leak, opt_level)(X)
    g = jit(lambda x: x + leaked[0], opt_level)
    with pytest.raises(TraceError, match=r"a traced array from another trace was used here"):
        g(X)


def test_method_of_a_class_traces_with_self_as_an_input():
    """Every positional argument is a graph input, ``self`` included: trace a
    function of arrays and call it from the method instead."""
    class Scaler:
        @halojit.trace(opt_level=1)
        def apply(self, x):
            return x * 2

    with pytest.raises(halojit.DTypeError, match=r"argument 0 \(self\)"):
        Scaler().apply(X)  # self is a positional argument: it must be an array


def test_operators_on_python_scalar_inputs_follow_numpy_not_python(opt_level):
    """Positional Python scalars are traced as weak 0-d arrays: operators
    between two of them compute as numpy would (True + True is True), not as
    Python (2). numpy functions on them give strong numpy scalars, as numpy."""
    g = jit(lambda a, b: a + b, opt_level)
    assert g(True, True) == np.True_  # Python: 2
    h = jit(lambda x, s: x + np.negative(s), opt_level)
    assert h(np.ones(2, np.int8), 2).dtype == np.int64  # np.negative(2) is np.int64: strong
    k = jit(lambda x, s: x + -s, opt_level)
    assert k(np.ones(2, np.int8), 2).dtype == np.int8  # -s stays a weak Python int


def _into(ufunc, dtype, *args, **kw):
    def f(x):
        o = np.zeros_like(x, dtype=dtype)
        ufunc(x, *args, out=o, **kw)
        return o
    return f


@pytest.mark.parametrize("fn", [
    _into(np.add, np.int32, 1.7, casting="unsafe"),
    _into(np.floor, np.int32, casting="unsafe"),
    _into(np.add, np.float64, 1, casting="safe"),
    lambda x: x.astype(np.float16, casting="same_kind"),
    lambda x: np.concatenate([x, x], dtype=np.int32, casting="unsafe"),
    lambda x: np.vstack([x, x], dtype=np.int8, casting="unsafe"),
    lambda x: np.hstack([x, x], dtype=np.float64),
])
def test_casting_keywords_allow_what_numpy_allows(fn, opt_level):
    x = np.float32([0.5, 1.5, -2.5])
    assert_same(jit(fn, opt_level)(x), fn(x))


@pytest.mark.parametrize("fn", [
    _into(np.add, np.int32, 1.7),                      # same_kind, the default
    _into(np.add, np.float16, 1, casting="safe"),
    lambda x: x.astype(np.int32, casting="safe"),
    lambda x: np.concatenate([x, x], dtype=np.int32),  # same_kind
    lambda x: np.stack([x, x], dtype=np.int32, casting="safe"),
])
def test_casting_keywords_refuse_what_numpy_refuses(fn, opt_level):
    x = np.float32([0.5, 1.5, -2.5])
    with pytest.raises(TypeError):
        fn(x)
    with pytest.raises(TypeError, match="cast"):
        jit(fn, opt_level)(x)
