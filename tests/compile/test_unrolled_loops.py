"""Python loops unrolled into one long elementwise group on a small array:
such groups take the Elementwise template as one serial task. Under
Adams2019 a Mandelbrot iteration of 30 steps on (30, 40) float64 failed to
schedule, Mullapudi2016 failed, and Li2018, next in the fallback chain,
compiled for over 20 minutes in 16 GB (6 steps: 48 s)."""

from __future__ import annotations

import numpy as np
import pytest

import halojit

from helpers import local_graphs

pytestmark = pytest.mark.level3


def mandelbrot(c_re, c_im, steps=30):
    zr, zi = np.zeros_like(c_re), np.zeros_like(c_im)
    count = np.zeros(c_re.shape, np.int32)
    for _ in range(steps):
        zr, zi = zr * zr - zi * zi + c_re, 2 * zr * zi + c_im
        inside = zr * zr + zi * zi < 4
        count = count + inside
        zr, zi = np.where(inside, zr, 2.0), np.where(inside, zi, 2.0)
    return count


@pytest.mark.parametrize("shape", [(30, 40), (1, 700)])
def test_mandelbrot_steps_compile_as_one_serial_elementwise_group(shape):
    re_, im = np.meshgrid(np.linspace(-2, 1, shape[1]), np.linspace(-1.5, 1.5, shape[0]))
    f = halojit.trace(mandelbrot)
    (g,) = f.lower(re_, im).groups
    assert g.scheduler.startswith("Elementwise;parallel=0"), g.scheduler
    np.testing.assert_array_equal(f(re_, im), mandelbrot(re_, im))


def chebyshev(x, coefs):
    """numpy's i0 core (Clenshaw): each term reads the previous two."""
    b0, b1 = x * 0.0, x * 0.0
    for c in coefs:
        b2, b1 = b1, b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


@pytest.mark.parametrize("terms", [3, 40])
def test_scalar_recurrence_is_computed_once_per_term(terms):
    """On a 0-d value such a recurrence unfolds into a Fibonacci-sized Expr
    tree (np.i0 of a 0-d float64, 2 x 30 terms: 113 s to compile under
    Halide's own schedule, 216 s under Mullapudi2016). A 0-d value read
    twice whose tree is large is computed once, as arrays are; short ones
    stay inlined."""
    from halojit.generators.lowering import TREE_MAX, lower_group

    coefs = list(np.random.default_rng(terms).standard_normal(terms))
    fn = lambda v: chebyshev(v, coefs)  # noqa: E731
    x = np.array(0.3)
    (graph,) = local_graphs(fn, x)
    stages = lower_group(graph, "t").stages
    assert (len(stages) > 0) == (terms == 40), len(stages)
    assert len(stages) < terms  # a Func every few terms, not one per term
    assert (1.6 ** terms > TREE_MAX) == (terms == 40)  # the unfolded tree's growth
    np.testing.assert_allclose(halojit.trace(fn)(x), fn(x), rtol=1e-12)
    np.testing.assert_allclose(halojit.trace(np.i0)(x), np.i0(x), rtol=1e-14)


def logistic_fit(X, y, w, steps):
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(X @ w)))
        w = w - 0.1 * X.T @ (p - y) / len(y)
    return w


@pytest.mark.parametrize("steps", [2, 10])
def test_long_small_groups_take_the_greedy_search(steps):
    """Gradient steps unrolled over small arrays make one group of many
    reductions; Adams2019's beam search took 27 s for 30 steps (332 ops)
    and 87 s for 50, its greedy search (beam_size=1) 6.9 and 15.9, with
    kernels as fast. Short groups keep the beam."""
    from halojit.generators.build import GREEDY_MIN_OPS, default_spec

    rng = np.random.default_rng(steps)
    X, y = rng.standard_normal((200, 5)), (rng.random(200) > 0.5).astype(float)
    w = rng.standard_normal(5) * 0.1
    fn = lambda a, b, c: logistic_fit(a, b, c, steps)  # noqa: E731
    (graph,) = local_graphs(fn, X, y, w)
    spec = default_spec(graph)
    assert spec.name == "Adams2019" and dict(spec.params)["parallelism"] == "1"
    long = len(graph.nodes) > GREEDY_MIN_OPS
    assert long == (steps == 10)
    assert (dict(spec.params).get("beam_size") == "1") == long, spec.key
    if long:
        np.testing.assert_allclose(halojit.trace(fn)(X, y, w), fn(X, y, w), rtol=1e-12)


def lorenz(y, s=10.0, r=28.0, b=8.0 / 3.0):
    x, v, z = y[:, 0], y[:, 1], y[:, 2]
    return np.stack([s * (v - x), x * (r - z) - v, x * v - b * z], axis=1)


def lorenz_rk4(y, steps, dt=0.01):
    for _ in range(steps):
        k1 = lorenz(y)
        k2 = lorenz(y + dt / 2 * k1)
        k3 = lorenz(y + dt / 2 * k2)
        k4 = lorenz(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


@pytest.mark.parametrize("rows,steps", [(1000, 4), (40000, 1), (1000, 12)])
def test_column_state_steps_compute_columns_side_by_side(rows, steps):
    """RK4 steps of a state kept as columns: the slices move up through
    the steps (passes/slices.py), so the kernel computes three column
    chains and stores them as one interleaved output, columns unrolled
    (templates._apply_columns), 12 steps through a few checkpoints
    (templates.column_checkpoints). Adds and multiplies in numpy's order
    without FMA: bit-exact."""
    y = np.random.default_rng(rows).standard_normal((rows, 3))
    fn = lambda y: lorenz_rk4(y, steps)  # noqa: E731
    f = halojit.trace(fn)
    lowered = f.lower(y)
    assert "slice(%" not in "".join(line for line in lowered.graph.splitlines()
                                    if "slice(%0" not in line)
    (g,) = lowered.groups
    assert "unroll(c)" in g.schedule, g.schedule
    # a long chain keeps the values live at a few cuts per vector of rows
    assert ("checkpoint" in g.schedule) == (steps == 12), g.schedule
    want = fn(y)
    np.testing.assert_array_equal(f(y), want)
    out = np.full_like(y, np.nan)
    assert f(y, out=out) is out
    np.testing.assert_array_equal(out, want)
    # strided rows (a column-major copy, every other row) take the general path
    for view in (np.asfortranarray(y), np.repeat(y, 2, axis=0)[::2]):
        np.testing.assert_array_equal(f(view), fn(view))
    np.testing.assert_array_equal(y, np.random.default_rng(rows).standard_normal((rows, 3)))


def pendulum(s, steps, dt=0.01):
    for _ in range(steps):
        th, om = s[..., 0], s[..., 1]
        s = s + dt * np.stack([om, -9.8 * np.sin(th) - 0.1 * om], axis=-1)
    return s


def test_sine_of_a_long_chain_takes_the_exact_path_alone():
    """The fast sine's argument check would compute the chain once more and
    compile the kernel twice (lowering.TRIG_CHECK_CONE_MAX); a sine of an
    input keeps its check."""
    from halojit.generators.lowering import TRIG_CHECK_CONE_MAX
    s = np.random.default_rng(5).standard_normal((2000, 2)) * 3
    fn = lambda s: pendulum(s, 8)  # noqa: E731
    f = halojit.trace(fn)
    (g,) = f.lower(s).groups
    assert "argument check" not in g.schedule, g.schedule
    assert len(g.ops) > TRIG_CHECK_CONE_MAX
    np.testing.assert_allclose(f(s), fn(s), rtol=1e-13, atol=1e-13)
    big = s * 1e6  # beyond the fast path's range: exact either way
    np.testing.assert_allclose(f(big), fn(big), rtol=1e-12, atol=1e-12)
    one = lambda s: pendulum(s, 1)  # noqa: E731
    (g,) = halojit.trace(one).lower(s).groups
    assert "argument check" in g.schedule, g.schedule
    np.testing.assert_allclose(halojit.trace(one)(s), one(s), rtol=1e-14, atol=1e-14)


def _materialized(fn, *args, spec="Elementwise"):
    from halojit.generators.compile import host_target
    from halojit.generators.lowering import lower_group
    from halojit.schedules.autoschedule import make_spec

    (graph,) = local_graphs(fn, *args)
    lowered = lower_group(graph, "t", make_spec(spec), host_target())
    return [st for st in lowered.stages if st.kind == "materialized"]


def test_elementwise_chain_shares_exprs_not_funcs():
    """Under the Elementwise template (which inlines every Func) values read
    twice stay one shared Expr: Halide inlined a chain of 250 Funcs (50
    Mandelbrot steps) one by one for 5 s, the Expr DAG lowers in 0.1 s.
    Comparisons take no NaN test in strict_float kernels, and values
    equal numpy's with NaN, inf and -0.0 in the inputs."""
    re_, im = np.meshgrid(np.linspace(-2, 1, 80), np.linspace(-1.5, 1.5, 60))
    im[0, :3] = [np.nan, np.inf, -0.0]
    fn = lambda a, b: mandelbrot(a, b, 40)  # noqa: E731
    assert _materialized(fn, re_, im) == []
    assert len(_materialized(fn, re_, im, spec="Adams2019")) > 40 * 3  # others keep Funcs
    f = halojit.trace(fn)
    np.testing.assert_array_equal(f(re_, im), fn(re_, im))
    out = np.full(re_.shape, -1, np.int32)
    assert f(re_, im, out=out) is out
    np.testing.assert_array_equal(out, fn(re_, im))


def test_values_read_through_nan_tests_stay_funcs():
    """np.maximum, np.isnan and a float -> int cast test their operands for
    NaN with is_nan, which Halide walks as a tree: values upstream of them
    stay Funcs (a shared Expr there grows exponentially with its depth)."""
    x = np.random.default_rng(5).standard_normal((40, 50))
    x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]

    def chain(a, last):
        for _ in range(6):
            a = a * a - a + 0.25
        return last(a)

    for last in (lambda a: np.maximum(a, 0.5), np.isnan, lambda a: (a * 8).astype(np.int32)):
        fn = lambda a, last=last: chain(a, last)  # noqa: E731
        assert len(_materialized(fn, x)) == 5  # every step's value but the last, read once
        with np.errstate(invalid="ignore"):  # inf - inf in numpy's steps
            np.testing.assert_array_equal(halojit.trace(fn)(x), fn(x))
    assert _materialized(lambda a: chain(a, lambda v: v + 1), x) == []


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_comparisons_of_nan_without_nan_tests(dtype):
    """Every comparison and its negation against numpy where either side is
    NaN, inf or -0.0: Halide must not fold ~(a < b) into a >= b."""
    vals = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.0], dtype)
    a, b = (m.ravel() for m in np.meshgrid(vals, vals))
    a, b = np.tile(a, 40), np.tile(b, 40)  # above the serial threshold too
    ops = (np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal)

    def fn(x, y):
        r = [op(x, y) for op in ops] + [~op(x, y) for op in ops] + [op(x, x) for op in ops]
        return np.stack(r) + np.where(~(x * 2 < y), x, y)[None]

    np.testing.assert_array_equal(halojit.trace(fn)(a, b), fn(a, b))
    np.testing.assert_array_equal(halojit.trace(fn)(a[:49], b[:49]), fn(a[:49], b[:49]))
