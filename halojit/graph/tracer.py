"""The tracer: ``TracedArray`` stands in for numpy arrays while a function
runs, dispatching ufuncs and numpy functions to graph nodes.

``TraceContext`` owns one trace: its input nodes, arrays bound from
globals/closures, weak-scalar range checks, and (``eager``) the concrete
value of every node for ``symbolic=False`` and replayed functions.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from typing import Any, Callable

import numpy as np

from ..errors import (DomainError, DTypeError, ShapeError, TraceError, TraceWarning,
                      UnsupportedError, format_loc)
from .ir import AbstractArray, Const, Node
from .ops import get as get_op
from .ops.elementwise import UFUNCS, resolve_ufunc

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUMPY_DIR = os.path.dirname(np.__file__)
_state = threading.local()

SUPPORTED_KINDS = "biuf"



def non_ndarray_semantics() -> tuple[type, ...]:
    """The ndarray subclasses whose operators mean other things: np.matrix, and
    numpy's masked array once ``numpy.ma`` is loaded (none can exist before, and
    ``np.ma`` would import it: ~20 ms of a new process's first call)."""
    ma = sys.modules.get("numpy.ma")
    return (np.matrix, ma.MaskedArray) if ma is not None else (np.matrix,)

def user_loc() -> str | None:
    """file:line of the innermost frame outside halojit and numpy."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not (fn.startswith(_PKG_DIR) or fn.startswith(_NUMPY_DIR) or fn.startswith("<__array_function__")):
            return f"{os.path.basename(fn)}:{f.f_lineno}"
        f = f.f_back
    return None


def numpy_caller() -> str | None:
    """The name of the outermost numpy Python function between here and the
    user's frame (``full`` for np.full), or None (a C function: no frame)."""
    f, name = sys._getframe(1), None
    while f is not None:
        fn = f.f_code.co_filename
        if fn.startswith(_NUMPY_DIR):
            name = f.f_code.co_name
        elif not (fn.startswith(_PKG_DIR) or fn.startswith("<__array_function__")):
            break
        f = f.f_back
    return name


# what to write instead when numpy's Python function ``name`` met a traced value
_CALLER_HINTS = {
    "full": "np.full(shape, v) with a traced v: write np.broadcast_to(v, shape) (a read-only "
            "view; np.zeros(shape, dtype) + v for a writable array)",
}


def current() -> "TraceContext | None":
    return getattr(_state, "ctx", None)


def in_excluded_block() -> bool:
    """True inside ``with halojit.exclude_from_trace():`` while a body replays."""
    return getattr(_state, "excluded", 0) > 0


def check_dtype(dtype, what: str, loc=None) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.kind not in SUPPORTED_KINDS or dt.itemsize > 8:
        raise DTypeError(
            f"{what}: dtype {dt} is not supported{format_loc(loc)}; expected bool, "
            "int8..int64, uint8..uint64, float16, float32 or float64."
        )
    return dt


class Binding:
    """Where a bound (non-captured) global or closure array is re-read from."""

    __slots__ = ("kind", "ref", "name")

    def __init__(self, kind, ref, name):
        self.kind, self.ref, self.name = kind, ref, name

    def read(self):
        if self.kind in ("global", "kwdefault"):
            return self.ref[self.name]
        if self.kind == "default":
            return self.ref[0].__defaults__[self.ref[1]]
        return self.ref.cell_contents


class TraceContext:
    def __init__(self, fn, symbolic=True, capture_as_const=False, eager=False, lazy=None):
        self.fn = fn
        self.symbolic = symbolic
        self.capture_as_const = capture_as_const
        self.eager = eager or not symbolic
        # a replay of a function with exclude_from_trace blocks: ``lazy(node)``
        # computes a value when Python needs it (halojit.replay), so the traced
        # code between blocks runs as compiled segments
        self.lazy = lazy
        self.inputs: list[Node] = []
        self.input_values: list[np.ndarray] = []  # concrete, when eager
        self.bindings: list[Binding] = []
        self.bound_ids: dict[int, Node] = {}
        # (value, check): ``check(value)`` raises numpy's error for this
        # call's inputs before any kernel runs (a weak Python int that does
        # not fit its dtype, an index array out of range); ``value`` is
        # computed from the inputs with the numpy references
        self.checks: list[tuple[Node, Callable]] = []
        self.values: dict[Node, np.ndarray] = {}
        self.value_branches = 0
        self.uses_exclude = False
        self._names = self._binding_names(fn)

    def add_check(self, node: Node, check: Callable) -> None:
        """``check(value of node)`` before every call's kernels (see
        ``checks``); on an eager first call (symbolic=False), right away,
        since that call runs on the values as it traces."""
        if self.eager:
            check(self.values[node])
        elif self.lazy is not None:  # a replay: numpy raises here, before what follows runs
            check(self.lazy(node))
            return
        self.checks.append((node, check))

    # -- inputs -----------------------------------------------------------
    def add_input(self, aval: AbstractArray, value=None, name=None) -> "TracedArray":
        node = Node("input", (), {"index": len(self.inputs)}, aval, None)
        self.inputs.append(node)
        self.input_values.append(value)  # also keeps the array alive: ids stay unique
        if self.eager or self.lazy is not None:
            self.values[node] = value
        t = TracedArray(node, self)
        t._is_input = True
        t._scalar0d = False  # a bound global or a replay's array: an ndarray (see zero_d_kind)
        return t

    @staticmethod
    def _binding_names(fn) -> dict[int, Binding]:
        out: dict[int, Binding] = {}
        fn = getattr(fn, "__wrapped__", fn)
        code = getattr(fn, "__code__", None)
        if code is None:
            return out
        glb = getattr(fn, "__globals__", {})
        for name in code.co_names:
            v = glb.get(name)
            if isinstance(v, np.ndarray):
                out.setdefault(id(v), Binding("global", glb, name))
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if isinstance(v, np.ndarray):
                out.setdefault(id(v), Binding("cell", cell, name))
        # an array as a parameter's default value is read at every call, like a global
        for name, v in (getattr(fn, "__kwdefaults__", None) or {}).items():
            if isinstance(v, np.ndarray):
                out.setdefault(id(v), Binding("kwdefault", fn.__kwdefaults__, name))
        for i, v in enumerate(getattr(fn, "__defaults__", None) or ()):
            if isinstance(v, np.ndarray):
                out.setdefault(id(v), Binding("default", (fn, i), f"default {i}"))
        return out

    # -- operands ----------------------------------------------------------
    def as_node(self, x, loc=None) -> Node:
        if isinstance(x, Node):
            return x
        if isinstance(x, TracedArray):
            if x._ctx is not self:
                raise TraceError(
                    f"a traced array from another trace was used here{format_loc(loc)}; "
                    "traced arrays must not escape their function (return them instead)."
                )
            return x._node
        if isinstance(x, np.generic):
            check_dtype(x.dtype, "operand", loc)
            if self.lazy is not None:
                return self._array_operand(np.asarray(x))
            return self.constant(np.asarray(x))
        if isinstance(x, (bool, int, float)):
            dt = np.bool_ if isinstance(x, bool) else np.int64 if isinstance(x, int) else np.float64
            if dt is np.int64 and 2**63 <= x < 2**64:  # numpy 2 takes these too (uint64 arrays)
                dt = np.uint64
            elif dt is np.int64 and not (-2**63 <= x < 2**63):  # numpy's error too
                raise OverflowError(f"Python integer {x} does not fit in int64 or uint64"
                                    f"{format_loc(loc)}.")
            return self.constant(np.asarray(x, dtype=dt), weak=True)
        if isinstance(x, np.ndarray):
            if isinstance(x, non_ndarray_semantics()):
                raise DTypeError(
                    f"{type(x).__name__} operand{format_loc(loc)}: halojit traces plain ndarray "
                    "semantics (np.matrix's * is a matrix product, a masked array has a mask); "
                    "use np.asarray(...) to mean a plain array.")
            check_dtype(x.dtype, "operand", loc)
            return self._array_operand(x)
        if isinstance(x, (list, tuple)):
            arr = np.asarray(x)
            check_dtype(arr.dtype, "operand", loc)
            return self.constant(arr)
        raise DTypeError(
            f"expected an array or a real scalar as operand, got {type(x).__name__}{format_loc(loc)}."
        )

    def _array_operand(self, arr: np.ndarray) -> Node:
        if self.lazy is not None and self._names.get(id(arr)) is None:
            # a replay: arrays made by the Python around the traced code (an
            # excluded block's results) differ from call to call: inputs of
            # the segment that reads them, not constants of its kernels
            node = self.bound_ids.get(id(arr))
            if node is None:
                node = self.bound_ids[id(arr)] = self.add_input(
                    AbstractArray(arr.shape, arr.dtype), arr)._node
            return node
        if not self.capture_as_const:
            binding = self._names.get(id(arr))
            if binding is not None:
                node = self.bound_ids.get(id(arr))
                if node is None:
                    node = self.add_input(AbstractArray(arr.shape, arr.dtype), arr)._node
                    node.params["bound"] = binding.name
                    self.bindings.append(binding)
                    self.bound_ids[id(arr)] = node
                return node
        return self.constant(arr)

    def constant(self, value: np.ndarray, weak=False) -> Node:
        aval = AbstractArray(value.shape, value.dtype, weak)
        node = Node("constant", (), {"value": Const(value)}, aval, None)
        if self.eager:
            self.values[node] = node.params["value"].value
        return node

    # -- emitting ------------------------------------------------------------
    def emit(self, op: str, inputs, params=None, loc=None) -> "TracedArray":
        loc = loc or user_loc()
        nodes = [self.as_node(x, loc) for x in inputs]
        params = dict(params or {})
        opdef = get_op(op)
        aval = opdef.infer([n.aval for n in nodes], params, loc)
        node = Node(op, nodes, params, aval, loc)
        if self.eager:
            with np.errstate(all="ignore"):
                self.values[node] = opdef.reference([self.values[n] for n in nodes], params)
        return TracedArray(node, self)

    def cast(self, x, dtype, loc=None) -> Node:
        """``x`` as ``dtype``; a weak scalar input gets numpy's range check."""
        node = self.as_node(x, loc)
        dtype = np.dtype(dtype)
        if node.dtype == dtype and not node.aval.weak:
            return node
        if node.aval.weak and node.dtype.kind in "iu" and dtype.kind in "iu":
            if node.op == "constant":
                value = node.params["value"].value
                np.asarray(int(value), dtype=dtype)  # OverflowError, exactly as numpy
            else:  # a weak input, or Python arithmetic on weak inputs: checked per call
                self.add_check(node, lambda v, dt=dtype: np.asarray(v.item(), dtype=dt))
        if node.dtype == dtype and node.op == "constant":
            return self.constant(node.params["value"].value)
        return self.emit("astype", [node], {"dtype": dtype}, loc)._node

    def weak_cast(self, x, dtype, loc=None) -> Node:
        """A weak value as ``dtype``, still weak: where only Python scalars meet
        (``3 * 4.5`` computes in float64 and stays a weak Python float), so
        that every op's operands have its loop dtypes."""
        node = self.as_node(x, loc)
        dtype = np.dtype(dtype)
        if node.dtype == dtype:
            return node
        if node.op == "constant":
            return self.constant(node.params["value"].value.astype(dtype), weak=True)
        out = Node("astype", [node], {"dtype": dtype},
                   AbstractArray(node.shape, dtype, weak=True), loc or user_loc())
        if self.eager:
            self.values[out] = np.asarray(self.values[node]).astype(dtype)
        return out

    def ufunc(self, name: str, operands, loc=None) -> "TracedArray":
        loc = loc or user_loc()
        nodes = [self.as_node(x, loc) for x in operands]
        if name in _COMPARISONS:
            r = self._compare_python_int(name, nodes, loc)
            if r is not None:
                return r
        in_dts, _, weak = resolve_ufunc(name, [n.aval for n in nodes], loc)
        cast = self.weak_cast if weak else self.cast
        given, nodes = nodes, [cast(n, dt, loc) for n, dt in zip(nodes, in_dts)]
        if name == "power" and in_dts[0].kind in "iub" and in_dts[1].kind in "iub":
            # after the casts: uint8 ** -2 is numpy's OverflowError (-2 does not fit)
            _check_int_power(given[1], loc)
            if nodes[1].op != "constant" and nodes[1].dtype.kind == "i":
                self._check_negative_exponent(nodes[1], loc)
        return self.emit(name, nodes, None, loc)

    def _check_negative_exponent(self, exponent: Node, loc) -> None:
        """An integer exponent known only at call time: numpy's ValueError
        at every call where it holds a negative value, before any kernel
        runs (one more pass over the exponent, in numpy)."""
        flag = np.any(TracedArray(exponent, self) < 0)

        def check(value):
            if np.any(value):
                raise DomainError(
                    f"Integers to negative integer powers are not allowed{format_loc(loc)}: "
                    "the exponent array holds a negative value at this call; expected "
                    ">= 0, or a float base (x.astype(np.float64) ** n).")
        self.add_check(flag._node, check)

    def _compare_python_int(self, name, nodes, loc) -> "TracedArray | None":
        """numpy 2 compares an integer array with a Python int exactly, even
        out of the array's range (``x_uint8 < -1`` is all False, no error)."""
        if len(nodes) != 2 or [n.aval.weak for n in nodes].count(True) != 1:
            return None
        k = 0 if nodes[0].aval.weak else 1
        s, x = nodes[k], nodes[1 - k]
        # a Python int may lie outside x's range: an int64 one unless x is int64, and
        # one of 2**63 or more (a weak uint64 constant, or argument) unless x is uint64
        beyond_int64 = s.dtype == np.uint64 and (
            s.op == "constant" or (s.op == "input" and x.dtype != np.uint64))
        narrower_x = s.dtype.kind == "i" and x.dtype != np.int64
        if x.dtype.kind not in "iu" or not (beyond_int64 or narrower_x):
            return None
        if k == 0:
            name = _FLIPPED[name]
        above, below = _COMPARISONS[name]
        info = np.iinfo(x.dtype)

        def everywhere(value):
            c = self.constant(np.asarray(value))
            if not x.shape:
                return TracedArray(c, self)
            return self.emit("broadcast_to", [c], {"shape": x.shape}, loc)
        if s.op == "constant":
            v = int(s.params["value"].value)
            if info.min <= v <= info.max:
                return None
            return everywhere(above if v > info.max else below)
        if s.dtype == np.uint64:  # an argument of 2**63 or more: above all of x
            return everywhere(above)
        # A weak int input: its value is known only at call time.
        i64 = np.dtype(np.int64)
        s = self.emit("astype", [s], {"dtype": i64}, loc)._node
        clipped, masks = s, []
        if info.min > np.iinfo(i64).min:
            lo = self.constant(np.asarray(info.min, i64))
            masks.append((self.emit("less", [s, lo], None, loc)._node, below))
            clipped = self.emit("maximum", [clipped, lo], None, loc)._node
        if info.max < np.iinfo(i64).max:
            hi = self.constant(np.asarray(info.max, i64))
            masks.append((self.emit("greater", [s, hi], None, loc)._node, above))
            clipped = self.emit("minimum", [clipped, hi], None, loc)._node
        clipped = self.emit("astype", [clipped], {"dtype": x.dtype}, loc)._node
        r = self.emit(name, [x, clipped], None, loc)
        for mask, value in masks:
            r = self.emit("where", [mask, self.constant(np.asarray(value)), r], None, loc)
        return r

    def concrete(self, node: Node) -> np.ndarray:
        """The value of ``node`` in an eager trace or a replay."""
        return self.lazy(node) if self.lazy is not None else self.values[node]

    def value_of(self, node: Node, loc=None, why="") -> np.ndarray:
        if self.lazy is not None:
            return self.lazy(node)
        if not self.eager:
            if why in ("int()", "using a traced array as a Python index"):
                # np.zeros(n), np.linspace(0, 1, n), x.reshape(n, -1), x[:n]: a size
                advice = ("A size or slice bound must be known while tracing: pass it as a "
                          "static keyword argument (part of the cache key) or read it from a "
                          "shape (x.shape[0]); pick per-call values with np.where or an "
                          "integer-array index (x[i]); or trace with symbolic=False to freeze "
                          "the first call's value.")
            else:
                advice = ("Use np.where for value-dependent choices, make the condition a "
                          "static keyword argument, or trace with symbolic=False to freeze "
                          "the first call's path.")
            raise TraceError(
                f"{why} needs the value of a traced array{format_loc(loc)}, but symbolic "
                f"tracing only knows shapes and dtypes. {advice}"
            )
        self.value_branches += 1
        return self.values[node]


# comparison -> (result where the Python int is above the array dtype's
# range, result where it is below), with the array on the left.
_COMPARISONS = {"equal": (False, False), "not_equal": (True, True), "less": (True, False),
                "less_equal": (True, False), "greater": (False, True),
                "greater_equal": (False, True)}
_FLIPPED = {"equal": "equal", "not_equal": "not_equal", "less": "greater",
            "less_equal": "greater_equal", "greater": "less", "greater_equal": "less_equal"}


class TracedArray:
    """A numpy-like array inside a trace; every operation records a node."""

    __array_priority__ = 1000
    __hash__ = None

    def __init__(self, node: Node, ctx: TraceContext):
        self._n = node
        self._ctx = ctx
        self._is_input = False
        # How numpy hands this value back when it is 0-d (zero_d_kind): True
        # as a numpy scalar (what ufuncs, reductions and integer indexing
        # return), False as a 0-d ndarray (np.where, np.copy, x[...]), or k
        # as positional argument k was passed (shape-keeping methods of an
        # argument: x.astype, x.reshape; a scalar unless it was an ndarray)
        self._scalar0d = True
        # numpy views of intermediates (slices, reshapes, transposes): the
        # trace records values, not memory, so an in-place write reaches no
        # other array. An array that such a write left behind numpy's (a
        # view taken before its base changed, a base changed through a
        # view) refuses every later use (_check_fresh).
        self._base = None  # the array this one is a view of, if an intermediate
        self._seen = 0  # the base's _writes when this view was taken or written
        self._writes = 0  # in-place writes into this array or through its views
        self._write_loc = ""  # where the last of them was
        self._through_view = ""  # where a write through a view changed this array
        self._view_writes = 0  # writes through views since this array was last assigned

    @property
    def _node(self) -> Node:
        self._check_fresh()
        return self._n

    @_node.setter
    def _node(self, node: Node):
        self._n = node

    @property
    def _root(self) -> "TracedArray":
        """The array whose memory this one is (itself, or the base it views)."""
        return self if self._base is None else self._base

    def _check_fresh(self):
        base = self._base
        if self._through_view or (base is not None and base._writes != self._seen):
            where = self._through_view or base._write_loc
            raise UnsupportedError(
                f"this array shares memory with one that an in-place operation changed "
                f"afterwards{where}, and is used here{format_loc(user_loc())}. In numpy "
                "the write shows through views; halojit traces values, not memory, so it "
                "would not. Take the view after the write, or build the new value without "
                "writing in place (`y = y + 1`, np.where, np.concatenate).")

    # -- attributes ------------------------------------------------------------
    shape = property(lambda self: self._n.shape)
    dtype = property(lambda self: self._n.dtype)
    ndim = property(lambda self: self._n.aval.ndim)
    size = property(lambda self: self._n.aval.size)
    itemsize = property(lambda self: self._n.dtype.itemsize)
    nbytes = property(lambda self: self._n.aval.size * self._n.dtype.itemsize)

    def __repr__(self):
        return f"TracedArray({self._n.aval})"  # also for an array _check_fresh refuses

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object (a 0-d traced array)")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d traced array")
        return (self[i] for i in range(self.shape[0]))

    # -- values: only when eager -----------------------------------------------
    def _value(self, why):
        return self._ctx.value_of(self._node, user_loc(), why)

    def __bool__(self):
        v = self._value("a Python branch or bool()")
        return bool(v)

    def __int__(self):
        return int(self._value("int()"))

    def __float__(self):
        return float(self._value("float()"))

    def __index__(self):
        if self.dtype.kind not in "iu":
            raise TypeError("only integer arrays can be used as an index")
        return int(self._value("using a traced array as a Python index"))

    def __complex__(self):
        return complex(self._value("complex()"))

    def __round__(self, ndigits=None):
        # numpy's scalars and 0-d arrays: round(x) is a Python int (a
        # value), round(x, n) is np.round(x, n), an array of x's dtype
        if ndigits is None:
            return round(self._value("round() without ndigits, a Python int"))
        return np.round(self, ndigits)

    def item(self, *args):
        return self._value(".item()").item(*args)

    def tolist(self):
        return self._value(".tolist()").tolist()

    def __array__(self, dtype=None, copy=None):
        if not self._ctx.eager and self._ctx.lazy is None:  # np.asarray(x) works: name the others
            caller = numpy_caller()
            if caller in _CALLER_HINTS:
                raise TraceError(
                    f"np.{caller} converted a traced value to a numpy array here"
                    f"{format_loc(user_loc())}; a positional argument of a traced function is "
                    f"a graph input, whose value is unknown while tracing. {_CALLER_HINTS[caller]}.")
            raise TraceError(
                f"numpy converted a traced array to a numpy array here{format_loc(user_loc())}: "
                "a traced value used as a size or fill value (np.arange(n), np.full(shape, v): "
                "positional arguments are graph inputs; pass a size as a keyword argument, "
                "which is static), "
                "a numpy function given a list of traced arrays (np.sum([x, y])), a traced "
                "value or index used on a numpy array (a[0] = x, a[idx] = v, a[idx] += 1, "
                "np.eye(n)[labels]), or a C extension. Inside the trace only shapes and dtypes "
                "are known: stack the list first (np.sum(np.stack([x, y]))), pass a numpy "
                "array read at traced indices as an argument of the traced function (then "
                "table[idx] works; one-hot rows: (labels[:, None] == np.arange(n)).astype(x.dtype)"
                " instead of np.eye(n)[labels]), make the array you write into "
                "from a traced one (a = np.zeros_like(x, shape=(n,)); a[idx] = v works), "
                "build arrays with np.stack/np.concatenate, or trace with symbolic=False to "
                "freeze the first call's values.")
        v = self._value("converting to a numpy array (np.asarray)")
        return np.asarray(v, dtype=dtype)

    # -- numpy protocols --------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if in_excluded_block():  # plain numpy on the values, every call
            return getattr(ufunc, method)(*_concrete(inputs), **_concrete(kwargs))
        from .numpy_api import apply_ufunc, with_zero_d_kinds
        result = _strong(apply_ufunc(self._ctx, ufunc, method, inputs, kwargs))
        if kwargs.get("out") is not None:  # out= itself
            return result
        return with_zero_d_kinds(result, True)  # a ufunc's 0-d result is a numpy scalar

    def __array_function__(self, func, types, args, kwargs):
        if in_excluded_block():
            return func(*_concrete(args), **_concrete(kwargs))
        from .numpy_api import HANDLERS, zero_d_result
        handler = HANDLERS.get(func)
        if handler is None:
            name = getattr(func, "__module__", "numpy").replace("numpy", "np", 1)
            raise UnsupportedError(
                f"{name}.{func.__name__} is not supported inside @halojit.trace"
                f"{format_loc(user_loc())}; compute it outside the traced function or in "
                "a `with halojit.exclude_from_trace():` block."
            )
        result = _strong(handler(*args, **kwargs))
        return result if kwargs.get("out") is not None else zero_d_result(func, args, result)

    def __getattr__(self, name):
        # Only reached when normal lookup fails: an ndarray method halojit
        # does not trace (x.searchsorted()) gets a clear error instead of AttributeError.
        if not name.startswith("__") and hasattr(np.ndarray, name) and in_excluded_block():
            return getattr(_concrete(self), name)
        if not name.startswith("__") and hasattr(np.ndarray, name):
            raise UnsupportedError(
                f"ndarray.{name} is not supported inside @halojit.trace{format_loc(user_loc())}; "
                "compute it outside the traced function or in a "
                "`with halojit.exclude_from_trace():` block.")
        raise AttributeError(f"'TracedArray' object has no attribute {name!r}")

    # -- writes ------------------------------------------------------------------
    def __setitem__(self, key, value):
        from .numpy_api import setitem
        setitem(self, key, value)

    def _check_writable(self, what: str):
        if getattr(self, "_readonly", None):
            raise ValueError(f"{what}: assignment destination is read-only ({self._readonly} "
                             f"returns a read-only view in numpy){format_loc(user_loc())}.")
        if self._is_input:
            raise TraceError(
                f"{what} writes into an input argument or a view of one"
                f"{format_loc(user_loc())}; traced "
                "functions must not modify their inputs. Work on a copy: `x = x.copy()` or "
                "`y = x + 1`."
            )

    def _assign(self, other: "TracedArray", what: str):
        """Store ``other`` into this array as numpy's ``out=`` does: same shape,
        result cast with casting='same_kind'."""
        self._check_writable(what)
        loc = user_loc()
        if other.shape != self.shape:
            raise ShapeError(
                f"{what}: the result has shape {other.shape}, but is written into an array "
                f"of shape {self.shape}{format_loc(loc)}; an in-place result cannot change "
                "the shape. Write `x = x + y` instead.")
        if other.dtype != self.dtype:
            if not np.can_cast(other.dtype, self.dtype, "same_kind"):
                raise DTypeError(
                    f"{what}: cannot cast the result from {other.dtype} to {self.dtype} with "
                    f"casting rule 'same_kind'{format_loc(loc)}, as numpy; write "
                    "`x = x + y` to get the promoted dtype.")
            other = self._ctx.emit("astype", [other], {"dtype": self.dtype}, loc)
        node = other._node
        self._check_fresh()  # a stale array refuses the write too
        root = self._root
        root._writes += 1
        root._write_loc = format_loc(loc)
        if root is not self:  # numpy changes the base: it and its other views go stale
            root._through_view = format_loc(loc)
            root._view_writes += 1
            self._seen = root._writes
        else:
            self._view_writes = 0
        self._node = node
        return self


def zero_d_kind(x):
    """How numpy returns ``x`` (a function's result) when it is 0-d: True a
    numpy scalar, False a 0-d ndarray, or k as positional argument k came
    (TracedArray._scalar0d). An array of one or more axes is an ndarray."""
    if isinstance(x, TracedArray):
        return x._scalar0d if x.ndim == 0 else False
    return not isinstance(x, np.ndarray)


def with_zero_d_kind(src, result, kind):
    """``result`` returned as ``kind`` when 0-d (see zero_d_kind). A result
    that is ``src`` itself (a no-op reshape, np.asarray of an array) becomes
    a new view of it where the kind differs, so ``src`` keeps its own."""
    if not isinstance(result, TracedArray):
        return result
    now = zero_d_kind(src)
    if result is src and (type(now) is not type(kind) or now != kind):  # argument 0 is not False
        result = TracedArray(src._node, src._ctx)
        if src._is_input:  # as numpy_api._view: a write into it is a write into the input
            result._is_input = True
        else:
            result._base, result._seen = src._root, src._root._writes
        if getattr(src, "_readonly", None):
            result._readonly = src._readonly
    result._scalar0d = kind
    return result


def _strong(result):
    """numpy functions return numpy objects: a result computed from Python
    scalars only is strong (np.negative(2) is np.int64(-2)), while Python
    operators keep it weak (-2 stays a Python int)."""
    if isinstance(result, TracedArray) and result._node.aval.weak:
        strong = result._ctx.emit("astype", [result._node], {"dtype": result.dtype})
        strong._scalar0d = result._scalar0d  # np.where(True, 1.0, 2.0) is a 0-d array
        return strong
    if isinstance(result, (tuple, list)):
        items = [_strong(r) for r in result]
        return type(result)(*items) if hasattr(result, "_fields") else type(result)(items)
    return result


def _binary(name, reflected=False):
    def op(self, other):
        operands = (other, self) if reflected else (self, other)
        if isinstance(other, complex):
            raise DTypeError(f"{name}: complex numbers are not supported{format_loc(user_loc())}; "
                             "expected a real scalar or array.")
        if not isinstance(other, (TracedArray, np.ndarray, np.generic, bool, int, float, list, tuple)):
            return NotImplemented
        return self._ctx.ufunc(name, operands)
    return op


def _inplace(name):
    def op(self, other):
        self._check_writable(f"an in-place `{name}`")
        return self._assign(self._ctx.ufunc(name, (self, other)), f"an in-place `{name}`")
    return op


for _dunder, _ufunc in [
    ("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("truediv", "divide"),
    ("floordiv", "floor_divide"), ("mod", "remainder"), ("pow", "power"),
    ("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "bitwise_xor"),
    ("lshift", "left_shift"), ("rshift", "right_shift"),
]:
    setattr(TracedArray, f"__{_dunder}__", _binary(_ufunc))
    setattr(TracedArray, f"__r{_dunder}__", _binary(_ufunc, reflected=True))
    setattr(TracedArray, f"__i{_dunder}__", _inplace(_ufunc))
for _dunder, _ufunc in [("eq", "equal"), ("ne", "not_equal"), ("lt", "less"),
                        ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal")]:
    setattr(TracedArray, f"__{_dunder}__", _binary(_ufunc))
for _dunder, _ufunc in [("neg", "negative"), ("pos", "positive"), ("abs", "absolute"),
                        ("invert", "invert")]:
    setattr(TracedArray, f"__{_dunder}__", (lambda u: lambda self: self._ctx.ufunc(u, (self,)))(_ufunc))


def _check_int_power(exponent: Node, loc) -> None:
    """numpy raises ValueError for an integer to a negative integer power; an
    exponent known while tracing (a Python int, a captured constant) is
    checked here, before any kernel runs; one computed at call time is
    checked at each call (TraceContext._check_negative_exponent)."""
    if exponent.op != "constant":
        return
    value = np.asarray(exponent.params["value"].value)
    if value.dtype.kind == "i" and value.size and value.min() < 0:
        raise DomainError(f"Integers to negative integer powers are not allowed{format_loc(loc)}: "
                          f"the exponent is {value.min()}; expected >= 0, or a float base "
                          "(x.astype(np.float64) ** n).")


def _divmod(self, other):
    return (self // other, self % other)


def _rdivmod(self, other):
    return (other // self, other % self)


def _pow(self, other):
    # ndarray.__pow__ computes x ** 2 (an exact Python int) as np.square,
    # which differs from np.power for bool (int8, not int64): mirror it.
    if type(other) is int and other == 2:
        return self._ctx.ufunc("square", (self,))
    return _binary("power")(self, other)


TracedArray.__divmod__ = _divmod
TracedArray.__rdivmod__ = _rdivmod
TracedArray.__pow__ = _pow


def _ipow(self, other):
    self._check_writable("an in-place `power`")
    return self._assign(_pow(self, other), "an in-place `power`")


TracedArray.__ipow__ = _ipow


# numpy's array constructors take no __array_function__: np.asarray(x) of a
# traced x would ask for its value. While any thread traces they are wrapped
# (numpy_api.array_of_traced takes traced values, everything else goes to
# numpy as before); code that imported them by name keeps numpy's own. So
# is np.vectorize's __call__ (numpy_more.vectorize_call).
_CONSTRUCTORS = ("asarray", "array", "asanyarray", "ascontiguousarray")
_patch_lock = threading.Lock()
_patch_depth = 0
_originals: dict = {}


def _wrap_constructor(name, original):
    def constructor(a, *args, **kwargs):
        if current() is not None and not in_excluded_block():
            from .numpy_api import array_of_traced, holds_traced
            if holds_traced(a):
                return array_of_traced(name, a, *args, **kwargs)
        return original(a, *args, **kwargs)
    constructor.__wrapped__ = original
    constructor.__name__ = constructor.__qualname__ = name
    constructor.__doc__ = original.__doc__
    return constructor


def _wrap_vectorize_call(original):
    """np.vectorize's ``__call__`` (no __array_function__ either: it would
    ask for values): with traced arguments, numpy_more.vectorize_call."""
    def call(self, *args, **kwargs):
        if current() is not None and not in_excluded_block():
            from .numpy_api import holds_traced
            if any(holds_traced(a) for a in (*args, *kwargs.values())):
                from .numpy_more import vectorize_call
                return vectorize_call(self, args, kwargs)
        return original(self, *args, **kwargs)
    call.__wrapped__ = original
    call.__name__ = call.__qualname__ = "__call__"
    call.__doc__ = original.__doc__
    return call


def _patch_constructors(enter: bool):
    global _patch_depth
    with _patch_lock:
        if enter:
            _patch_depth += 1
            if _patch_depth == 1:
                for name in _CONSTRUCTORS:
                    _originals[name] = getattr(np, name)
                    setattr(np, name, _wrap_constructor(name, _originals[name]))
                _originals["vectorize.__call__"] = np.vectorize.__call__
                np.vectorize.__call__ = _wrap_vectorize_call(np.vectorize.__call__)
        else:
            _patch_depth -= 1
            if _patch_depth == 0:
                np.vectorize.__call__ = _originals.pop("vectorize.__call__")
                for name, original in _originals.items():
                    setattr(np, name, original)
                _originals.clear()


class trace_context:
    """Installs ``ctx`` as the current trace of this thread."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __enter__(self):
        self.prev = current()
        _state.ctx = self.ctx
        _patch_constructors(True)
        return self.ctx

    def __exit__(self, *exc):
        _patch_constructors(False)
        _state.ctx = self.prev


def warn_symbolic_false(fn_name: str, branches: int):
    warnings.warn(
        f"halojit.trace({fn_name}, symbolic=False): the first call ran eagerly and its "
        f"graph is replayed on later calls; {branches} value-dependent Python decision(s) "
        "were frozen to the first call's outcome.",
        TraceWarning,
        stacklevel=_user_stacklevel(),
    )


def _user_stacklevel() -> int:
    """warnings.warn's stacklevel of the innermost frame outside halojit,
    as seen from the caller of this function."""
    f, level = sys._getframe(1), 1
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
        f, level = f.f_back, level + 1
    return level


class exclude_from_trace:
    """``with halojit.exclude_from_trace():`` runs its block in Python on every call.

    A function that uses it is replayed: its body runs at each call, the
    traced code around its blocks as compiled segments (halojit.replay), and
    the block sees numpy arrays: ``np.asarray(x)``, and numpy functions,
    ufuncs and methods run on the values there.
    """

    def __enter__(self):
        ctx = current()
        self._counted = False
        if ctx is not None:
            ctx.uses_exclude = True
            if ctx.lazy is None:  # a trace (eager too): switch to replaying, block not run yet
                raise _NeedsReplay()
            _state.excluded = getattr(_state, "excluded", 0) + 1
            self._counted = True
        return self

    def __exit__(self, *exc):
        if self._counted:
            _state.excluded -= 1
        return False


def _concrete(x):
    """``x`` with every traced array (nested in lists, tuples and dicts) replaced
    by its value: what numpy functions see inside an excluded block."""
    if isinstance(x, TracedArray):
        return np.asarray(x._ctx.concrete(x._node))
    if isinstance(x, (list, tuple)):
        return type(x)(_concrete(v) for v in x)
    if isinstance(x, dict):
        return {k: _concrete(v) for k, v in x.items()}
    return x


class _NeedsReplay(Exception):
    """Raised inside a trace that meets ``exclude_from_trace``."""


def is_array_leaf(x: Any) -> bool:
    return isinstance(x, (TracedArray, np.ndarray, np.generic))


from . import numpy_api as _numpy_api  # noqa: E402,F401  (installs methods and handlers)
from . import numpy_composite as _numpy_composite  # noqa: E402,F401  (more handlers)
from . import numpy_search as _numpy_search  # noqa: E402,F401  (searchsorted, interp, convolve)
from . import numpy_more as _numpy_more  # noqa: E402,F401  (stacking, isin, linalg spellings)
from . import numpy_scatter as _numpy_scatter  # noqa: E402,F401  (histogram, ufunc.at)
from . import numpy_linalg as _numpy_linalg  # noqa: E402,F401  (det, inv, solve of small matrices)
