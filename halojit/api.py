"""``trace()`` -> ``TracedFunction``: convert arguments, look up the
specialization for their avals, trace and build on a miss, run.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .config import BACKENDS, get_config
from .cuda import call_on_device, is_device_array
from .errors import DTypeError, HalojitError, ShapeError, TraceError, UnsupportedError
from .graph import tracer as _tracer
from .graph.interpret import interpret, last_uses
from .graph.ir import AbstractArray, Graph, Node, make_graph
from .graph.passes import optimize
from .graph.pytree import TreeDef, flatten

OPT_LEVELS = (0, 1, 2, 3)

try:  # the C call path (csrc/python/dispatch.cpp)
    from ._rt import Dispatcher as _Dispatcher
    from ._rt import dispatch_add as _dispatch_add
    from ._rt import dispatch_clear as _dispatch_clear
    from ._rt import dispatch_info as _dispatch_info
    from ._rt import tracing as _rt_tracing
except ImportError:  # a runtime without it: every call takes the Python path
    class _Dispatcher:
        def __call__(self, *args, **kwargs):
            return self._call(*args, **kwargs)

    _dispatch_add = _dispatch_clear = _dispatch_info = _rt_tracing = None


def _log(msg: str):
    if get_config().log:
        print(f"[halojit] {msg}", file=sys.stderr, flush=True)


# -- arguments -------------------------------------------------------------------
def convert_arg(i: int, name: str, a) -> tuple[np.ndarray, AbstractArray]:
    """(value, aval) of positional argument ``i``; weak for Python scalars."""
    if isinstance(a, np.ndarray):
        if isinstance(a, _tracer.non_ndarray_semantics()):  # their operators mean other things
            kind = "np.matrix" if isinstance(a, np.matrix) else "a masked array"
            raise DTypeError(
                f"argument {i} ({name}): {kind} is not supported: halojit traces plain ndarray "
                f"semantics, {'where * is elementwise' if kind == 'np.matrix' else 'with no mask'}; "
                "pass np.asarray(...) to mean that.")
        arr = a if type(a) is np.ndarray else np.asarray(a)  # other subclasses: their data
        if not arr.dtype.isnative:  # the kernels read native byte order: a converted copy
            arr = arr.astype(arr.dtype.newbyteorder("="))
    elif isinstance(a, np.generic):
        arr = np.asarray(a)
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
    elif isinstance(a, (bool, int, float)):
        dt = np.bool_ if isinstance(a, bool) else np.int64 if isinstance(a, int) else np.float64
        if dt is np.int64 and 2**63 <= a < 2**64:  # as numpy 2: fine beside uint64 arrays
            dt = np.uint64
        elif dt is np.int64 and not -2**63 <= a < 2**63:
            raise OverflowError(f"argument {i} ({name}): Python integer {a} is out of bounds "
                                "for int64 and uint64; pass it as a float or a numpy array.")
        arr = np.asarray(a, dtype=dt)
        return arr, AbstractArray((), arr.dtype, weak=True)
    elif isinstance(a, (list, tuple)):
        if any(isinstance(e, _tracer.non_ndarray_semantics()) for e in a):
            raise DTypeError(f"argument {i} ({name}): a list holding np.matrix or masked arrays "
                             "is not supported (their operators mean other things); pass "
                             "np.asarray(...) of each.")
        try:
            arr = np.asarray(a)
        except ValueError as e:
            raise ShapeError(f"argument {i} ({name}): cannot convert to an array: {e}") from None
    else:
        raise DTypeError(
            f"argument {i} ({name}): expected a numpy array, a list of numbers or a real "
            f"scalar, got {type(a).__name__}. Pass static values as keyword arguments.")
    dt = arr.dtype
    if dt.kind not in _tracer.SUPPORTED_KINDS or dt.itemsize > 8:
        raise DTypeError(
            f"argument {i} ({name}): dtype {dt} is not supported; expected bool, int8..int64, "
            "uint8..uint64, float16, float32 or float64.")
    return arr, AbstractArray(arr.shape, dt)


def _check_target(target) -> None:
    """Refuse an unknown target at trace() time, whatever the opt_level."""
    if not isinstance(target, str) or not target.strip():
        raise ValueError(f"trace: target must be a string such as 'host', got {target!r}.")
    import halide as hl
    if not hl.Target.validate_target_string(target.strip()):
        raise ValueError(
            f"trace: target {target!r} is not a Halide target; expected 'host', 'host-cuda' or "
            "a Halide target string such as 'x86-64-linux-avx2' (arch-bits-os-features).")


def _arg_names(fn, n):
    code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
    names = list(code.co_varnames[:code.co_argcount]) if code else []
    return [names[i] if i < len(names) else f"arg{i}" for i in range(n)]


# -- specializations ----------------------------------------------------------------
@dataclass
class Specialization:
    """One compiled (or interpreted) version of the function for one key."""

    key: tuple
    graph: Graph
    treedef: TreeDef
    bindings: list
    binding_avals: list
    checks: tuple | None  # (graph of values to check per call, a check for each)
    executor: Any
    build_seconds: float = 0.0
    # per output, how numpy returns it when 0-d: tracer.zero_d_kind (True a
    # numpy scalar, False a 0-d ndarray, k as positional argument k came)
    out_kinds: tuple = ()

    def check_bindings(self) -> str | None:
        """Why this specialization no longer fits the bound globals, or None."""
        for b, aval in zip(self.bindings, self.binding_avals):
            v = b.read()
            if not isinstance(v, np.ndarray) or v.shape != aval.shape or v.dtype != aval.dtype:
                got = f"{v.dtype}{v.shape}" if isinstance(v, np.ndarray) else type(v).__name__
                return f"bound array {b.name!r} changed from {aval} to {got}"
        return None


class NumpyExecutor:
    """Runs the optimized graph with the numpy references (opt_level 0-2)."""

    kernel_count = 0

    def __init__(self, graph: Graph, opt_level: int):
        self.graph = graph
        self.free = last_uses(graph) if opt_level >= 2 else None

    def __call__(self, inputs, outs=None):
        return interpret(self.graph, inputs, self.free)


def _fresh(value, inputs) -> np.ndarray:
    """An output the caller owns: never a constant or memory of an input."""
    arr = np.asarray(value)
    if not arr.flags.writeable or any(
            arr is x or np.may_share_memory(arr, x) for x in inputs if isinstance(x, np.ndarray)):
        return np.array(arr, copy=True)
    return arr


def _fresh_all(results, inputs) -> list:
    """Outputs the caller owns; one value returned twice (after CSE) is two arrays."""
    out = []
    for r in results:
        arr = _fresh(r, inputs)
        out.append(np.array(arr, copy=True) if any(arr is o for o in out) else arr)
    return out


class _SpecCache(dict):
    """Specializations by key, plus ``fast``: the same specializations keyed by
    the (shape, dtype) of plain ndarray arguments, which is cheaper to build
    than a key of AbstractArrays. Replacing or removing any entry (a stale
    binding, a tuning run) forgets every fast entry."""

    def __init__(self, on_forget=None):
        super().__init__()
        self.fast: dict = {}
        self.on_forget = on_forget  # also forgets the C call path's entries

    def forget_fast(self):
        self.fast.clear()
        if self.on_forget is not None:
            self.on_forget()

    def __setitem__(self, key, value):
        if key in self:
            self.forget_fast()
        super().__setitem__(key, value)

    def __delitem__(self, key):
        self.forget_fast()
        super().__delitem__(key)

    def pop(self, *args):
        self.forget_fast()
        return super().pop(*args)

    def popitem(self):
        self.forget_fast()
        return super().popitem()

    def clear(self):
        self.forget_fast()
        super().clear()


def _flat_key(n: int):
    """A function: n arguments -> one flat tuple of each one's (type, shape,
    dtype); AttributeError for a Python scalar or a list. Only plain
    ndarrays are keys of the fast path (an ndarray subclass, a jax array:
    the slow path). Unpacked and flat, not ``tuple(map(attrgetter(...),
    args))``: 2 arguments, key + dict lookup 255 ns against 440 ns (2-core
    VM), out of a ~3 us budget for a small call."""
    if n == 0:
        return lambda args: ()
    names = ", ".join(f"a{i}" for i in range(n))
    body = ", ".join(f"a{i}.__class__, a{i}.shape, a{i}.dtype" for i in range(n))
    scope: dict = {}
    exec(f"def key(args):\n    {names}, = args\n    return ({body},)", scope)
    return scope["key"]


# fast-path keys for up to 8 positional arguments; more take the slow path
_FAST_KEYS = tuple(_flat_key(n) for n in range(9))


def _array_key(args):
    """The fast-path key when every argument is a plain ndarray, else None."""
    if len(args) >= len(_FAST_KEYS):
        return None
    for a in args:
        if type(a) is not np.ndarray or not a.dtype.isnative:  # big-endian: converted first
            return None
    return _FAST_KEYS[len(args)](args)


def _scalar_out(kind, args) -> bool:
    """Whether a 0-d output of ``kind`` (tracer.zero_d_kind) is returned as
    a numpy scalar: True and False say so; k follows argument k, a scalar
    unless it was an ndarray (``args`` None: the fast paths, all ndarrays)."""
    if kind is True or kind is False:
        return kind
    return args is not None and not isinstance(args[kind], np.ndarray)


def _returned(results, kinds, args=None):
    """The function's results as numpy returns them: a 0-d one as a numpy
    scalar where numpy's op gives one (ufuncs, reductions, integer
    indexing), as a 0-d ndarray where it gives that (np.where, np.copy,
    x[...], x.astype of a 0-d array); not for arrays written with out=."""
    return [r[()] if isinstance(r, np.ndarray) and r.ndim == 0 and _scalar_out(k, args) else r
            for r, k in zip(results, kinds or (True,) * len(results))]


# -- the traced function ----------------------------------------------------------------
def _forget_native(ref):
    """A callback for _SpecCache: clears the C call path of the function
    behind the weak reference ``ref`` (no cycle through the cache)."""
    def forget():
        f = ref()
        if f is not None and _dispatch_clear is not None:
            _dispatch_clear(f)
    return forget


@contextlib.contextmanager
def _recording(ctx):
    """``ctx`` installed as this thread's trace; while any trace records,
    traced functions take the Python path (which inlines them)."""
    if _rt_tracing is not None:
        _rt_tracing(1)
    try:
        with _tracer.trace_context(ctx):
            yield ctx
    finally:
        if _rt_tracing is not None:
            _rt_tracing(-1)


def _is_traced(x) -> bool:
    return isinstance(x, _tracer.TracedArray)


_FLOATS = (float, complex, np.floating, np.complexfloating)


def _static_tag(v) -> str:
    """A static keyword value's type, and for floats their bits: 0.0 == -0.0
    would otherwise share a specialization (k / 0.0 and k / -0.0 differ)."""
    if isinstance(v, _FLOATS):
        return f"{type(v).__name__}:{np.asarray(v).tobytes().hex()}"
    if isinstance(v, tuple):
        return f"{type(v).__name__}({','.join(_static_tag(e) for e in v)})"
    return type(v).__name__


def _static_value(v):
    """``v`` for the cache key: NaN never equals itself (every call would
    miss), so it is keyed by its tag alone."""
    if isinstance(v, _FLOATS) and v != v:
        return "nan"
    if isinstance(v, tuple) and type(v) is tuple:
        return tuple(_static_value(e) for e in v)
    return v


class TracedFunction(_Dispatcher):
    """A numpy function captured by ``@halojit.trace``; call it like the original.

    Calling it enters C (``_rt.Dispatcher``): plain ndarray arguments of a
    shape and dtype seen before run their compiled plan from there; every
    other call comes to ``_call``, the general path, which registers what
    the C side can serve."""

    def __init__(self, fn, *, opt_level=3, backend=None, symbolic=True,
                 capture_as_const=False, target=None, autoscheduler=None):
        if opt_level not in OPT_LEVELS:
            raise ValueError(f"trace: opt_level must be one of {OPT_LEVELS}, got {opt_level!r}.")
        cfg = get_config()
        if backend is None:
            backend = cfg.backend if opt_level >= 3 else "numpy"
        elif not isinstance(backend, str):
            raise ValueError(f"trace: backend must be one of {BACKENDS}, got {backend!r}.")
        elif backend.strip().lower() not in BACKENDS:
            raise HalojitError(f"trace: backend={backend!r} is not a backend; expected one of "
                               f"{', '.join(b.upper() for b in BACKENDS)} (case-insensitive).")
        else:
            backend = backend.strip().lower()
        _check_target(target or cfg.target)
        self.fn = fn
        self.opt_level = opt_level
        self.backend = backend
        self.symbolic = bool(symbolic)
        self.capture_as_const = bool(capture_as_const)
        self.target = target or cfg.target
        self.autoscheduler = autoscheduler
        self._cache: _SpecCache = _SpecCache(_forget_native(weakref.ref(self)))
        self._fast = self._cache.fast  # the same dict, one attribute lookup less per call
        self._lock = threading.RLock()
        self._replay = False
        self._segments = None  # a replayed function's compiled segments
        self._stats = {"compiles": 0, "hits": 0, "misses": 0, "traces": 0}
        self._argnames: list[str] | None = None
        functools.update_wrapper(self, fn)
        if not hasattr(self, "__name__"):  # a functools.partial, a callable object
            inner = getattr(fn, "func", fn)
            self.__name__ = getattr(inner, "__name__", type(inner).__name__)

    # -- keys --------------------------------------------------------------------
    def _convert(self, args):
        if self._argnames is None or len(self._argnames) < len(args):
            self._argnames = _arg_names(self.fn, len(args))
        return [convert_arg(i, self._argnames[i], a) for i, a in enumerate(args)]

    def _static_key(self, kwargs):
        items = []
        for k in sorted(kwargs):
            v = kwargs[k]
            try:
                hash(v)
            except TypeError:
                raise TypeError(
                    f"{self.__name__}: keyword argument {k!r} is static (part of the cache key) "
                    f"and must be hashable; got {type(v).__name__}. Pass arrays positionally, "
                    "or use a tuple instead of a list.") from None
            items.append((k, _static_tag(v), _static_value(v)))
        return tuple(items)

    def _key(self, avals, kwargs, target=None):
        return (tuple(avals), self._static_key(kwargs), self.opt_level, self.backend,
                target or self.target)

    def _miss_reason(self, key) -> str:
        if not self._cache:
            return "first call"
        best = None
        for other in self._cache:
            diffs = []
            for i, (a, b) in enumerate(zip(key[0], other[0])):
                if a != b:
                    diffs.append(f"argument {i} is {a} (cached: {b})")
            if len(key[0]) != len(other[0]):
                diffs.append(f"{len(key[0])} arguments (cached: {len(other[0])})")
            if key[1] != other[1]:
                diffs.append(f"static kwargs {dict((k, v) for k, _, v in key[1])} "
                             f"(cached: {dict((k, v) for k, _, v in other[1])})")
            if key[4] != other[4]:
                diffs.append(f"target {key[4]} (cached: {other[4]})")
            if best is None or len(diffs) < len(best):
                best = diffs
        return "; ".join(best) or "bound arrays changed"

    # -- calling ------------------------------------------------------------------
    def _call(self, *args, out=None, **kwargs):
        fast = self._fast
        if fast and not kwargs:
            try:  # plain ndarrays of a seen shape and dtype: ~1.2 us to the kernels
                fast = fast.get(_FAST_KEYS[len(args)](args))
            except (AttributeError, IndexError):  # a Python scalar, a list; 9+ arguments
                fast = None
            if fast is not None and _tracer.current() is None:
                self._stats["hits"] += 1
                return fast[0](args) if out is None else fast[1](args, out)
        if _tracer.current() is not None:  # called inside another trace: inline
            return self.fn(*args, **kwargs)
        if any(is_device_array(a) for a in args):  # CuPy/PyTorch/JAX arrays on a GPU
            return call_on_device(self, args, kwargs, out)
        converted = self._convert(args)
        values = [v for v, _ in converted]
        avals = [a for _, a in converted]
        if self._replay:
            return self._run_replay(values, avals, kwargs, out, args)
        spec = self._cache.get(self._key(avals, kwargs))
        if spec is not None and not spec.bindings:
            self._stats["hits"] += 1  # the fast path
            if spec.checks is None and not kwargs:
                key = _array_key(args)
                if key is not None:
                    entry = self._cache.fast[key] = self._fast_entry(spec)
                    self._register_native(args, spec, entry[0])
            return self._run(spec, values, out, args)
        first = []
        spec = self._get_spec(values, avals, kwargs, None, first)
        if spec is None:
            return self._run_replay(values, avals, kwargs, out, args)
        if first and first[0] is not None:
            return self._finish(spec, first[0], values, out, args)
        return self._run(spec, values, out, args)

    def _get_spec(self, values, avals, kwargs, target=None, first=None):
        """The specialization for these arguments, traced and built on a miss.

        ``first`` receives the eager results of a symbolic=False first call.
        Returns None when the function must be replayed (exclude_from_trace).
        """
        key = self._key(avals, kwargs, target)
        spec = self._cache.get(key)
        if spec is not None:
            stale = spec.check_bindings()
            if stale:
                _log(f"{self.__name__}: cache miss ({stale})")
                with self._lock:
                    self._cache.pop(key, None)
                spec = None
        if spec is not None:
            self._stats["hits"] += 1
            return spec
        self._stats["misses"] += 1
        with self._lock:
            spec = self._cache.get(key)
            if spec is None:
                _log(f"{self.__name__}: cache miss ({self._miss_reason(key)})")
                spec, eager = self._specialize(key, values, avals, kwargs, target)
                if spec is None:
                    return None
                self._cache[key] = spec
                if first is not None:
                    first.append(eager)
        return spec

    def _run(self, spec: Specialization, values, out, args=None):
        inputs = values + [b.read() for b in spec.bindings]
        if spec.checks is not None:  # numpy's OverflowError for f(x_int8, 1000), IndexError
            graph, checks = spec.checks
            for v, check in zip(interpret(graph, inputs), checks):
                check(v)
        if out is not None:  # checked before any kernel runs; kernels write into it
            outs = _check_out(out, spec.graph.outputs, self.__name__)
            results = spec.executor(inputs, outs)
        else:
            results = spec.executor(inputs)
        return self._finish(spec, results, values, out, args)

    def _fast_entry(self, spec):
        """What the fast path keeps: (call, call_out), ``call(args)`` -> the
        function's result, ``call_out(args, out)`` -> it, written into ``out``.
        From the executor's own closures when it has them (a Halide plan whose
        outputs are fresh arrays: measured on the 2-core VM, a 4K-element call
        spends ~1.5 us here above its kernels, against ~3 us through _run)."""
        leaf = spec.treedef.kind == "leaf"
        unflatten = spec.treedef.unflatten
        fast = getattr(spec.executor, "fast_call", None)
        # every argument an ndarray here: an output as argument k is one too
        scalars = [_scalar_out(k, None) for k in spec.out_kinds] if spec.out_kinds else None
        calls = fast(leaf, scalars) if fast is not None else None
        if calls is None:
            call, call_out = (lambda args: self._run_fast(spec, list(args))), None
        else:
            call, call_out = calls
            if not leaf:
                call = (lambda c: lambda args: unflatten(c(args)))(call)

        def out_call(args, out):
            r = call_out(args, out) if call_out is not None else None
            if r is None:  # anything unusual: the general path checks and explains
                return self._run_fast(spec, list(args), out)
            return r if leaf else unflatten([r])
        return call, out_call

    def _register_native(self, args, spec, call):
        """Hand this specialization to the C call path: the plan itself when
        its outputs are plain fresh arrays (no pooled buffers, no device),
        else the fast path's ``call``. Called once per argument signature."""
        if _dispatch_add is None:
            return
        ex = spec.executor
        leaf = spec.treedef.kind == "leaf"
        unflatten = None if leaf else spec.treedef.unflatten
        plan = getattr(ex, "plan", None)
        native = (plan is not None and getattr(ex, "fresh_outputs", False)
                  and getattr(ex, "fast_call", None) is not None
                  and all(getattr(ex, "_small_out", (False,)))
                  and not getattr(plan, "uses_device", True)
                  # the C path returns every 0-d output as a numpy scalar
                  and all(shape or _scalar_out(k, None)
                          for (shape, _), k in zip(ex._out_specs, spec.out_kinds)))
        try:
            if native:
                work = max((n.aval.size * n.aval.dtype.itemsize for n in spec.graph.nodes),
                           default=0)  # tiny inputs may still broadcast into big work
                _dispatch_add(self, tuple(args), plan, tuple(ex.consts), ex.native_out_specs(),
                              leaf, unflatten, None, work)
            else:
                _dispatch_add(self, tuple(args), None, (), [], True, None, call)
        except (TypeError, ValueError) as e:  # never fatal: these calls stay on the Python path
            _log(f"{self.__name__}: the C call path refused this signature ({e})")

    def _run_fast(self, spec: Specialization, values, out=None):
        """_run for plain ndarray arguments of a cached shape, no bindings, no
        weak scalars: only ``out=`` is left to validate."""
        if out is not None:
            results = spec.executor(values, _check_out(out, spec.graph.outputs, self.__name__))
            return self._finish(spec, results, values, out)
        results = spec.executor(values)
        if not getattr(spec.executor, "fresh_outputs", False):
            results = _fresh_all(results, values)
        return spec.treedef.unflatten(_returned(results, spec.out_kinds))

    def _finish(self, spec, results, values, out, args=None):
        results = _fresh_all(results, values)
        if out is not None:
            return spec.treedef.unflatten(_write_out(results, out, self.__name__))
        return spec.treedef.unflatten(_returned(results, spec.out_kinds, args))

    # -- tracing -------------------------------------------------------------------
    def _trace(self, values, avals, kwargs, eager):
        ctx = _tracer.TraceContext(self.fn, symbolic=self.symbolic,
                                   capture_as_const=self.capture_as_const, eager=eager)
        traced = [ctx.add_input(a, v) for v, a in zip(values, avals)]
        for k, t in enumerate(traced):
            t._scalar0d = k  # returned (or astype'd, reshaped) as it was passed
        with _recording(ctx):
            leaves, treedef = self._flatten(self.fn(*traced, **kwargs))
            nodes = [ctx.as_node(x) for x in leaves]
        ctx.out_kinds = tuple(_tracer.zero_d_kind(x) for x in leaves)
        self._stats["traces"] += 1
        return ctx, nodes, treedef

    def _flatten(self, result):
        """(array leaves, tree) of what the function returned; an object that
        hides traced arrays (a generator, a dataclass) is a TraceError."""
        try:
            return flatten(result, _tracer.is_array_leaf, _is_traced)
        except TypeError as e:
            raise TraceError(f"{self.__name__}: {e}") from None

    def _specialize(self, key, values, avals, kwargs, target=None):
        t0 = time.perf_counter()
        eager = not self.symbolic
        try:
            ctx, nodes, treedef = self._trace(values, avals, kwargs, eager)
        except _tracer._NeedsReplay:
            self._replay = True
            _log(f"{self.__name__}: uses exclude_from_trace; replaying its body on every call")
            return None, None
        if ctx.uses_exclude:
            self._replay = True
            return None, None
        first = [ctx.values[n] for n in nodes] if eager else None
        if eager:
            _tracer.warn_symbolic_false(self.__name__, ctx.value_branches)
        graph = make_graph(ctx.inputs, nodes)
        graph = optimize(graph, self.opt_level)
        executor = self._build(graph, target or self.target)
        spec = Specialization(
            key=key, graph=graph, treedef=treedef, bindings=list(ctx.bindings),
            binding_avals=[n.aval for n in ctx.inputs[len(values):]],
            checks=(make_graph(ctx.inputs, [n for n, _ in ctx.checks]),
                    [c for _, c in ctx.checks]) if ctx.checks else None,
            executor=executor,
            build_seconds=time.perf_counter() - t0,
            out_kinds=ctx.out_kinds)
        self._stats["compiles"] += getattr(executor, "kernel_count", 0)
        _log(f"{self.__name__}: built {self.backend} specialization for "
             f"({', '.join(map(str, avals))}) in {spec.build_seconds * 1e3:.1f} ms")
        return spec, first

    def _build(self, graph: Graph, target: str):
        if self.backend == "halide" and self.opt_level >= 3:
            from .generators.build import build_halide_executor
            return build_halide_executor(graph, target, self.autoscheduler)
        return NumpyExecutor(graph, self.opt_level)

    def _run_replay(self, values, avals, kwargs, out, args=None):
        """A call of a function with exclude_from_trace blocks: its body runs,
        the traced code between blocks as compiled segments (halojit.replay)."""
        if self._segments is None:
            from .replay import Segments
            self._segments = Segments(self)
        call, traced = self._segments.new_call(values, avals)
        for k, t in enumerate(traced[:len(values)]):
            t._scalar0d = k
        with _recording(call.ctx):
            leaves, treedef = self._flatten(self.fn(*traced, **kwargs))
            nodes = [call.ctx.as_node(x) for x in leaves]
            call.materialize(nodes)
        self._stats["hits" if call.hit else "misses"] += 1
        results = _fresh_all([call.ctx.values[n] for n in nodes], values)
        if out is not None:
            return treedef.unflatten(_write_out(results, out, self.__name__))
        kinds = [_tracer.zero_d_kind(x) for x in leaves]
        return treedef.unflatten(_returned(results, kinds, args))

    # -- introspection ---------------------------------------------------------------
    def stats(self) -> dict:
        """Counters: compiles (kernels built), hits, misses, traces, entries."""
        stats = dict(self._stats, entries=len(self._cache))
        if _dispatch_info is not None:
            stats["hits"] += _dispatch_info(self)[1]
        return stats

    def cache_entries(self) -> list[dict]:
        """One dict per cached specialization: its input avals and static kwargs."""
        return [{"inputs": [str(a) for a in k[0]], "static": {n: v for n, _, v in k[1]},
                 "target": k[4], "kernels": getattr(s.executor, "kernel_count", 0)}
                for k, s in self._cache.items()]

    def lower(self, *args, target=None, **kwargs):
        """Trace, optimize and compile for these arguments without running."""
        from .lowered import lower
        return lower(self, args, kwargs, target)

    def profile(self, *args, repeat: int = 1, **kwargs) -> list[dict]:
        """Run once per ``repeat`` and return each kernel's run time (seconds,
        best of the repeats) with its ops and compile time."""
        converted = self._convert(args)
        values = [v for v, _ in converted]
        spec = self._get_spec(values, [a for _, a in converted], kwargs)
        ex = spec.executor if spec is not None else None
        if ex is None or not hasattr(ex, "timings"):
            return []
        best = None
        ex.profile = True
        try:
            for _ in range(max(1, repeat)):
                self._run(spec, values, None)
                t = ex.timings()
                best = t if best is None else [min(a, b) for a, b in zip(best, t)]
        finally:
            ex.profile = False
        return [{"kernel": k.fn_name, "ops": k.ops, "run_seconds": s,
                 "compile_seconds": k.compile_seconds, "scheduler": k.spec}
                for k, s in zip(ex.kernels, best)]

    def dump(self, path, *example_args, arg_names=None, output_names=None, test_vectors=True,
             extra_examples=(), static=None, levels=None):
        """Write a self-contained artifact (``.hjm``) that ``halojit.load`` and
        the C++ embedding API run with no Python and no libHalide.

        One specialization per argument tuple (``example_args`` and each of
        ``extra_examples``), compiled for several x86 feature levels picked
        at load time; ``static`` holds the function's keyword arguments.
        Returns the artifact's path. See ``halojit/runtime/artifact.py``.
        """
        from .runtime.artifact import dump
        return dump(self, path, example_args, arg_names=arg_names, output_names=output_names,
                    test_vectors=test_vectors, extra_examples=extra_examples,
                    static=static or {}, levels=levels)

    def tune(self, *example_args, budget_s: float = 60.0, workers: int | None = None,
             executor=None, **kwargs):
        """Search schedules for every fusion group at these arguments' shapes,
        measure them, and record the best in the tuning database (used by
        every later compile, in any process). Returns a TuneReport; keyword
        arguments other than the three below are the function's static ones.

        ``budget_s``: wall-clock budget of the whole run; ``workers``: parallel
        compiles; ``executor``: a concurrent.futures.Executor for the compiles
        (e.g. Dask's ``client.get_executor()``), local processes by default.
        """
        from .schedules.tune import tune_function
        return tune_function(self, example_args, kwargs, budget_s=budget_s, workers=workers,
                             executor=executor)

    def __repr__(self):
        return (f"<halojit.trace {self.__name__} opt_level={self.opt_level} "
                f"backend={self.backend} target={self.target}>")

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)


def _check_out(out, nodes, fname) -> list:
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(outs) != len(nodes):
        raise ShapeError(f"{fname}: out= has {len(outs)} arrays, the function returns "
                         f"{len(nodes)}.")
    for i, (o, n) in enumerate(zip(outs, nodes)):
        if not isinstance(o, np.ndarray):
            raise DTypeError(f"{fname}: out[{i}] must be a numpy array, got {type(o).__name__}.")
        if o.shape != n.shape:
            raise ShapeError(f"{fname}: out[{i}] has shape {o.shape}, expected {n.shape}.")
        if o.dtype != n.dtype:
            raise DTypeError(f"{fname}: out[{i}] has dtype {o.dtype}, expected {n.dtype}.")
        if not o.flags.writeable:
            raise ValueError(f"{fname}: out[{i}] is read-only.")
    return outs


def _write_out(results, out, fname):
    outs = _check_out(out, results, fname)
    for o, r in zip(outs, results):
        if r is not o:  # compiled kernels already wrote into o
            np.copyto(o, r)
    return outs


def trace(fn: Callable | None = None, *, opt_level: int = 3, backend: str | None = None,
          symbolic: bool = True, capture_as_const: bool = False, target: str | None = None,
          autoscheduler=None):
    """Capture a numpy function into a static graph and compile it.

    Usable bare (``@halojit.trace``) or with options (``@halojit.trace(opt_level=1)``).
    Positional arguments are graph inputs; keyword arguments are static.
    """
    def wrap(f):
        return TracedFunction(f, opt_level=opt_level, backend=backend, symbolic=symbolic,
                              capture_as_const=capture_as_const, target=target,
                              autoscheduler=autoscheduler)
    return wrap(fn) if fn is not None else wrap
