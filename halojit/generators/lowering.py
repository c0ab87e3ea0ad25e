"""A fusion group (a local Graph) -> one Halide Pipeline: the algorithm only.

Every value is a ``Lazy``: ``at(idx)`` returns its Halide Expr at a numpy-order
index. Elementwise and movement ops compose index maps and Exprs; reductions,
matmul, values read more than once and group outputs become Funcs, whose
numpy axes are reversed into Halide dimensions (numpy's last axis is x).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import halide as hl
import numpy as np

from ..config import get_config
from ..errors import UnsupportedError
from ..graph.ir import Graph, Node
from ..graph.ops import ELEMENTWISE, REGISTRY, frontier, inlines
from . import halide_math as M
from . import halide_math64 as M64
from . import halide_ops as H
from .chunks import (CHUNKS, GPU_CHUNKS, GPU_LANES, GPU_ROW_LANES, LANES,  # noqa: F401
                     LAST_CHUNK_VECTORS, LAST_CHUNKS, SPLIT_MIN, chunking)
from .compile import native_lanes
from .streaming import shifted_rows


class Lazy:
    __slots__ = ("shape", "dtype", "fn", "func")

    def __init__(self, shape, dtype, fn, func=None):
        self.shape, self.dtype, self.fn, self.func = tuple(shape), np.dtype(dtype), fn, func

    def at(self, idx):
        return self.fn(list(idx))


def _fcall(f: hl.Func, idx, component=None):
    args = tuple(reversed(idx))
    e = f[args] if args else f[()]
    return hl.Expr(e[component] if component is not None else e)


def _memo_lazy(lazy: Lazy) -> Lazy:
    """``lazy`` whose Expr is built once per index and shared by its readers."""
    cache: dict = {}

    def at(idx):
        key = tuple(str(e) for e in idx)
        if key not in cache:
            cache[key] = lazy.at(idx)
        return cache[key]
    return Lazy(lazy.shape, lazy.dtype, at)


def func_lazy(f, shape, dtype, component=None, convert=None):
    def at(idx):
        e = _fcall(f, idx, component)
        return convert(e) if convert else e
    return Lazy(shape, dtype, at, f)


def bcast_index(idx, shape):
    """Index into an operand of ``shape`` broadcast to the index's shape."""
    sub = idx[len(idx) - len(shape):] if shape else []
    return [hl.Expr(0) if d == 1 else e for e, d in zip(sub, shape)]


@dataclass
class Stage:
    """A Func the algorithm created, for schedule templates to find."""

    # "reduce", "argreduce", "scan", "matmul", "pack" / "arows" (a matmul's
    # packed B / row-major A), "materialized", ...
    kind: str
    func: hl.Func
    shape: tuple  # numpy order
    rdom: object = None
    in_shape: tuple = ()
    # materialized only: recomputing the value where it is read costs at most
    # CHEAP_BUDGET single-instruction ops (add, subtract, multiply) per
    # element, so a template may inline it instead of storing it
    cheap: bool = False
    # colpart only: the update's loops innermost first, in the input's memory
    # order (kept Vars and reduced RVars interleaved), then the chunk Var
    loop_order: tuple = ()
    # sortnet / radixnet / sorted only: the numpy axis sorted along (a
    # sortnet's rdom is the list of its updates' RDoms, one per comparator
    # step; a radixnet's is its RadixPlan)
    axis: int = -1
    # partial only: how many chunks (a pure dimension after the lane) the
    # lowering cut the reduction into; 1 when not chunked
    chunks: int = 1
    # materialized only: the graph node whose value the Func holds
    node: object = None


# Ops that recompute in one vector instruction (no float16 rounding), and how
# many of them an inlined value may cost per element (see Stage.cheap).
CHEAP_OPS = frozenset({"add", "subtract", "multiply", "negative", "positive", "broadcast_to"})
CHEAP_BUDGET = 2
# Float ops whose Expr is a deep DAG (halide_ops._float_fmod's exact steps
# reuse each step's result several times): always a Func of their own, so a
# consumer's Expr holds a call to it. Halide 21's is_nan and strict_float
# walk an Expr as a tree, exponential in those steps: a float32 remainder
# inlined into is_nan took 32 s, and (x % 2.0).max(axis=0) on a (3, 4)
# array never finished compiling (max's NaN check).
DEEP_FLOAT_OPS = frozenset({"remainder", "fmod", "floor_divide"})
# float64 power too (halide_math64.power, double-double steps): a consumer
# that tests it for NaN (np.maximum, np.isnan) walked it as a tree.
# Float transcendentals: halide_ops builds each as a polynomial Expr that
# uses its argument several times, wrapped in strict_float. Halide's
# strict_float lowering walks an Expr as a tree, so a transcendental of a
# transcendental inlined grows with the product of those uses: exp(exp(sin(x)))
# on float32 took 30 s and 6 GB to compile. One that feeds another, directly
# or through other inlined ops (np.exp(np.exp(x) * 0.1): four levels of it
# never finished, 12-18 GB, on float32 as on float64), is a Func of its own
# (its consumer's Expr holds a call): 0.6 s.
TRANSCENDENTAL_OPS = frozenset({
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin",
    "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "cbrt",
    "power", "arctan2", "hypot"})
# Lowerer.trig_ok's pass: the lanes of a vector of its flags, and how many
# tasks share it (the Elementwise template runs them in parallel).
TRIG_CHECK_LANES = 16
TRIG_CHECK_TASKS = 8
# the Stage kinds of those passes
TRIG_CHECK_KINDS = ("trigpart", "trigflag")
# A sin, cos or tan whose argument is computed by more ops than this in its
# group takes the exact path alone (_fast_trig): the check pass computes the
# argument once more, and the kernel is compiled twice over. A damped
# pendulum (np.sin of the angle) stepped 10 times on (50000, 2) float64,
# 2-core Intel VM under load: checked, 28 s to compile and 26.6 ms a call;
# exact alone, 1.8 s and 24.2 ms.
TRIG_CHECK_CONE_MAX = 64
# Input axes shorter than this are read through a clamp (_clamp_short): the
# widest natural vector on AVX-512, 64 one-byte lanes.
SHORT_AXIS = 64


# Ops whose Halide lowering reads each operand as a plain value: no is_nan,
# is_inf or strict_float call on it (those walk an Expr as a tree; see
# DEEP_FLOAT_OPS). Comparisons only in strict_float CPU kernels (Lowerer.
# plain_compare). Lowerer.expr_shared: values read twice under such ops alone
# stay Exprs.
TREE_SAFE_OPS = frozenset({
    "add", "subtract", "multiply", "divide", "negative", "positive", "where",
    "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "invert", "broadcast_to"})


# A value read more than once is a Func (computed once) rather than an
# Expr inlined at each read when it is an array; a 0-d value only when its
# Expr, unfolded as a tree, is larger than this: np.i0 of a 0-d float64
# (two 30-term Chebyshev recurrences, each term reading the previous two:
# a Fibonacci-sized tree) compiled for 113-216 s under every scheduler.
TREE_MAX = 256


class Lowerer:
    """Builds the Halide algorithm of one local graph."""

    def __init__(self, graph: Graph, name: str, matmul_block: int | None = None,
                 strict_wrap: bool = False, fast_math: bool = False,
                 col_chunks: int | None = None, lanes: int = LANES, gpu: bool = False,
                 guard_inputs: bool = False, fast_trig: bool = False, pieces: bool = False,
                 shift_rows: tuple[int, int, int] | None = None, share_exprs: bool = False,
                 sort_radix: str = "auto", sort_chunks: int = 0):
        self.graph = graph
        # the Sort template's "radix" (auto, 1 or 0: radix_sorts) and
        # "chunks" (0: radix_chunks) parameters
        self.sort_radix = sort_radix
        self.sort_chunks = sort_chunks
        # the Stencil template schedules this group and streams its 2-D
        # output, whose rows are not whole 16-byte multiples: the output is
        # written by one update whose vector stores start at 16-byte
        # boundaries (_define_shifted); shift_rows is (elements per 16
        # bytes, the template's vector lanes, its rows per strip)
        self.shift_rows = shift_rows
        self.shifted: hl.RDom | None = None
        # the Concat template schedules this group: its one output (a
        # concatenation or pad along the last axis) is defined piece by
        # piece (concat_pieces), an update per piece over an RDom of its
        # extent; piece_rdoms holds them in order, as (RDom, extent)
        self.pieces = pieces
        self.piece_rdoms: list[tuple[hl.RDom, int]] = []
        # sin, cos and tan evaluate halide_math(64).FAST_TRIG where every
        # argument of the group is at most TRIG_FAST_MAX in magnitude, as
        # checked by a pass over the arguments (trig_ok); the schedule
        # specializes the outputs on that check (lower_group)
        self.fast_trig = fast_trig
        self.trig_checks: dict[Node, hl.Expr] = {}
        # an autoscheduler schedules this group, which reads part of an
        # intermediate: every input index is clamped (_guard_all)
        self.guard_inputs = guard_inputs
        # a GPU target: full reductions combine their partials per chunk
        # first (lower_reduce), so that no thread loops over all of them
        self.gpu = gpu
        # values read more than once inline as shared Exprs, not Funcs
        # (expr_shared): the Elementwise template inlines every Func anyway
        self.share_exprs = share_exprs
        # per-lane partials of a reduction over the last axis (partial_lanes)
        self.lanes = lanes
        self.name = name
        self.fast_math = fast_math  # HALOJIT_FAST_MATH: halide_fastmath's float32 functions
        # lanes of a packed-B column block when the Matmul template schedules
        # this group (lower_matmul_blocked), else None
        self.matmul_block = matmul_block
        # chunks of a reduction over leading axes when the ColReduce template
        # schedules this group (lower_col_reduce), else None
        self.col_chunks = col_chunks
        # the kernel compiles without strict_float so that the matmul
        # accumulation contracts to FMA; every other value is wrapped in
        # hl.strict_float, which keeps numpy's NaN/inf/-0.0 semantics there
        self.strict_wrap = strict_wrap
        # the kernel compiles with strict_float (compile.host_target)
        self.strict_kernel = get_config().strict_float and not fast_math and not strict_wrap
        # float comparisons without their NaN test: Halide turns them into
        # strict_lt and kin, which its simplifier does not negate or flip
        self.plain_compare = self.strict_kernel and not gpu
        self.counter = 0
        # chunked reductions' RDoms by their loops (lower_reduce): sibling
        # reductions of one array share one, so a template can fuse their
        # loops (compute_with needs the same loop names)
        self.rdoms: dict[tuple, hl.RDom] = {}
        self.stages: list[Stage] = []
        self.params: list[hl.ImageParam] = []
        self.env: dict[Node, Lazy] = {}
        users: dict[Node, int] = {}
        for n in graph.nodes:
            for i in n.inputs:
                users[i] = users.get(i, 0) + 1
        self.users = users
        self.walked = self._walked() if share_exprs else set()
        # nodes whose Expr (not a Func call) contains a transcendental's
        # polynomial, directly or through other inlined ops
        self.holds_transcendental: set[Node] = set()
        # per lowered node, the size of its Expr as a tree (1: a Func call)
        self.tree: dict[Node, int] = {}

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}_{self.counter}"

    def vars(self, n: int):
        return [hl.Var(f"v{i}") for i in range(n)]

    def strict(self, e):
        """``e`` (an Expr or a tuple of them) as strict float when strict_wrap."""
        if not self.strict_wrap:
            return e
        if isinstance(e, tuple):
            return tuple(self.strict(x) for x in e)
        if not isinstance(e, hl.Expr):
            e = hl.Expr(e)
        return hl.strict_float(e) if e.type().is_float() else e

    def cheap(self, node: Node) -> bool:
        """Whether ``node`` recomputes from Funcs, inputs and per-row values in
        at most CHEAP_BUDGET CHEAP_OPS per element (layernorm's x - mean:
        one subtract). Per-row values (last axis 1 under a wider node) are
        loop invariants of the row loop, hoisted by LLVM."""
        wide = node.shape[-1] > 1 if node.shape else False
        ops, stack, seen = 0, [node], set()
        while stack:
            v = stack.pop()
            if v in seen or v.op in ("input", "constant"):
                continue
            seen.add(v)
            if v is not node and self.env[v].func is not None:
                continue  # a load
            if wide and v.shape and v.shape[-1] == 1:
                continue
            if v.op not in CHEAP_OPS or v.dtype == np.float16:
                return False
            ops += v.op != "broadcast_to"
            stack.extend(v.inputs)
        return ops <= CHEAP_BUDGET

    def _tree_safe(self, node: Node) -> bool:
        if node.op in H.STRICT_COMPARE:
            return self.plain_compare or not any(i.dtype.kind == "f" for i in node.inputs)
        if node.op == "astype":  # float -> int tests for NaN
            return not (node.inputs[0].dtype.kind == "f" and node.dtype.kind != "f")
        return node.op in TREE_SAFE_OPS

    def _walked(self) -> set:
        """Nodes some later op reads through an is_nan or strict_float call
        (directly or through tree-safe ops): their values stay Funcs."""
        walked: set = set()
        for n in reversed(self.graph.nodes):
            if n in walked or not self._tree_safe(n):
                walked.update(n.inputs)
        return walked

    def expr_shared(self, node: Node, holds_transcendental: bool) -> bool:
        """Whether ``node``, read more than once, stays an Expr shared by its
        readers rather than a Func. Halide inlines a chain of Funcs one by
        one, each into a growing Expr: a Mandelbrot iteration on (600, 800)
        float64, 50 steps of 5 shared values each, spent 5 s there
        (compile_to_module), 0.07 s as one Expr DAG, which its CSE shares.
        Only where no later op walks the Expr as a tree (is_nan,
        strict_float: exponential in the shared levels), for arrays, not
        slices (stencils read them at other indices) or transcendentals."""
        return (self.share_exprs and bool(node.shape) and node.op != "slice"
                and node not in self.walked and not holds_transcendental
                and node.op not in DEEP_FLOAT_OPS)

    def is_view_of_load(self, node: Node) -> bool:
        """Whether ``node`` is a slice of an input or of a stored Func: its
        reads are the operand's loads at shifted indices, so storing it would
        only copy (and a stored copy between the stages of a stencil chain
        stopped Halide's sliding window: the heat equation stepped 8 times
        on (2048, 2048) recomputed each intermediate row 3x, 119 ms)."""
        if node.op != "slice":
            return False
        (src,) = node.inputs
        return src.op == "input" or self.env[src].func is not None

    def is_constant(self, node: Node) -> bool:
        """Whether ``node`` is computed from constants alone (no input)."""
        return all(n.op == "constant" for n in frontier(node, lambda v: True))

    def materialize(self, lazy: Lazy, prefix="t", cheap: bool = False) -> Lazy:
        f = hl.Func(self.fresh(prefix))
        vs = self.vars(len(lazy.shape))
        e = self.strict(lazy.at(vs))
        if vs:
            f[tuple(reversed(vs))] = e
        else:
            f[()] = e
        self.stages.append(Stage("materialized", f, lazy.shape, cheap=cheap))
        return func_lazy(f, lazy.shape, lazy.dtype)

    def lower(self):
        """-> (pipeline, input ImageParams, output Funcs)."""
        for i, node in enumerate(self.graph.inputs):
            p = hl.ImageParam(H.storage_type(node.dtype), node.aval.ndim, f"in{i}")
            self.params.append(p)
            dt = node.dtype
            clamp = _guard_all if self.guard_inputs else _clamp_short
            self.env[node] = Lazy(node.shape, dt, (lambda p, dt, shape: lambda idx: H.from_storage(
                p[tuple(reversed(clamp(idx, shape)))] if idx else p[()], dt))(
                    p, dt, node.shape))
        for node in self.graph.nodes:
            if node.op == "input":
                continue
            if node.op == "constant":
                self.env[node] = self._constant(node)
                continue
            transcendental = node.op in TRANSCENDENTAL_OPS and node.dtype.kind == "f"
            if transcendental:
                for i in node.inputs:  # nested transcendentals: see TRANSCENDENTAL_OPS
                    if i in self.holds_transcendental and self.env[i].func is None:
                        self.env[i] = self.materialize(self.env[i], cheap=False)
            lazy = self._lower_node(node)
            # the node's Expr as a tree: its DAG shares the values it reads,
            # but Halide's passes walk trees (see TREE_MAX)
            tree = 1 + sum(self.tree.get(i, 1) for i in node.inputs if self.env[i].func is None)
            shared = self.users.get(node, 0) > 1 and (node.aval.size > 1 or tree > TREE_MAX) \
                and not self.is_view_of_load(node)
            deep = (node.op in DEEP_FLOAT_OPS and node.dtype.kind == "f") or (
                node.op == "power" and node.dtype == np.float64)
            holds = transcendental or any(i in self.holds_transcendental and self.env[i].func is None
                                          for i in node.inputs)
            if lazy.func is None and shared and not deep and self.expr_shared(node, holds):
                lazy = _memo_lazy(lazy)
            elif lazy.func is None and (shared or deep):
                lazy = self.materialize(lazy, cheap=self.cheap(node))
                self.stages[-1].node = node
            if lazy.func is None and holds:
                self.holds_transcendental.add(node)
            self.env[node] = lazy
            self.tree[node] = tree if lazy.func is None else 1
        outputs = []
        for k, node in enumerate(self.graph.outputs):
            f = hl.Func(f"{self.name}_out{k}")
            vs = self.vars(node.aval.ndim)
            if self.pieces:
                self._define_pieces(f, node, vs)
                outputs.append(f)
                continue
            if self.shift_rows is not None and k == 0:
                self._define_shifted(f, node, vs)
                outputs.append(f)
                continue
            e = self.strict(H.to_storage(self.env[node].at(vs), node.dtype))
            if vs:
                f[tuple(reversed(vs))] = e
            else:
                f[()] = e
            outputs.append(f)
        return hl.Pipeline(outputs), self.params, outputs

    def _define_pieces(self, f: hl.Func, node: Node, vs) -> None:
        """``f`` as an undefined pure definition and one update per piece of
        ``node`` (concat_pieces), each writing its own columns."""
        f[tuple(reversed(vs))] = hl.undef(H.storage_type(node.dtype))
        outer = vs[:-1]
        one_row = node.aval.size == node.shape[-1]
        for start, extent, value in concat_pieces(self, node):
            rdom = hl.RDom([(0, extent)], self.fresh("piece"))
            r = hl.Expr(rdom.x)
            # One row: the vectorized tail is peeled into constant indices,
            # and Halide 21 cannot generate a predicated load running
            # backwards (np.concatenate([a, a[::-1]])) whose flipped start
            # is a negative constant (an internal assert, "base >= 0", in
            # CodeGen_LLVM). A clamp keeps the tail's lanes in bounds; loop
            # partitioning drops it from the steady state (likely).
            src = hl.min(hl.likely(r), extent - 1) if one_row else r
            e = self.strict(H.to_storage(value(list(outer), src), node.dtype))
            f[tuple(reversed(outer + [r + start]))] = e
            self.piece_rdoms.append((rdom, extent))

    def _define_shifted(self, f: hl.Func, node: Node, vs) -> None:
        """``f`` (2-D) as an undefined pure definition and one update whose
        vector stores start, in every row, at a 16-byte boundary.

        Row y's flat offset y * stride lacks ``head`` (0 to a - 1, a =
        elements per 16 bytes) of a multiple of a. The update's RDom is
        (lane, block, row, strip): ``vector`` lanes by enough blocks for a
        row, strips of ``rows`` rows (the last one shifted up to end at the
        last row, so no strip has a tail: Halide strips the likely below
        from a guarded tail's loops). The first ``whole`` blocks of a row
        write its body, columns head + block * vector + lane, as dense
        vector stores at multiples of a from the row's boundary (16-byte
        aligned on a 16-byte aligned buffer, which
        streaming.mark_nontemporal marks so: Halide cannot prove it); the
        blocks after them write the columns left at both ends (per-lane
        indices, scalar stores) and repeat the last column where they run
        past (the same value again). The block condition is marked likely,
        so Halide's loop partitioning gives the body blocks their own loop,
        free of the select."""
        a, vector, rows = self.shift_rows
        height, width = node.shape
        whole = (width - (a - 1)) // vector  # body blocks, whatever the head
        edges = width - whole * vector
        f[tuple(reversed(vs))] = hl.undef(H.storage_type(node.dtype))
        rdom = hl.RDom([(0, vector), (0, whole + -(-edges // vector)), (0, rows),
                        (0, -(-height // rows))], self.fresh("row"))
        lane, block, row, strip = (hl.Expr(rdom[i]) for i in range(4))
        y = hl.min(strip * rows, height - rows) + row
        head = (-(y * f.output_buffer().dim(1).stride())) % a  # Euclidean: 0 .. a-1
        k = (block - whole) * vector + lane  # the k-th column left over
        # both clamped for bounds inference (the stages it reads are computed
        # for these columns only); in the partitioned body loop the
        # simplifier drops the min (block < whole there) and the store
        # stays dense (hl.unsafe_promise_clamped instead hides the likely
        # from the partitioning)
        edge = hl.clamp(hl.select(k < head, k, k + whole * vector), 0, width - 1)
        body = hl.min(head + block * vector + lane, width - 1)
        col = hl.select(hl.likely(block < whole), body, edge)
        f[col, y] = self.strict(H.to_storage(self.env[node].at([y, col]), node.dtype))
        self.shifted = rdom

    def _constant(self, node: Node) -> Lazy:
        value = node.params["value"].value
        if value.size != 1:
            raise UnsupportedError("non-scalar constants must be group inputs")
        lit = H.literal(value.reshape(()), node.dtype)
        return Lazy(node.shape, node.dtype, lambda idx: lit)

    def trig_ok(self, arg: Node, lazy: Lazy) -> hl.Expr:
        """The condition that every value of ``arg`` (a float32 Lazy, or
        float16 computed in float32) is at most M.TRIG_FAST_MAX in magnitude
        (a float64 one M64.TRIG_FAST_MAX; NaN and inf are not): a uint8
        ``part`` per lane and task, the max of
        the flags |v| > TRIG_FAST_MAX over its share of ``arg`` (tasks split
        the first axis, or the only one; lanes the last, read through a
        clamp that repeats its last element), and their max ``flag``. One
        check per distinct argument (np.sin(t) and np.cos(t) share one)."""
        if arg in self.trig_checks:
            return self.trig_checks[arg]
        shape = lazy.shape

        def bad(idx):
            # |v|'s bits against the bound's: NaN and inf are above it, also
            # where Halide treats a float compare as if NaN never occurred
            v = H.opaque(M._abs(lazy.at(idx)))
            wide = v.type() == hl.Float(64)
            bits = hl.reinterpret(hl.UInt(64 if wide else 32), v)
            top = (int(np.float64(M64.TRIG_FAST_MAX).view(np.uint64)) if wide
                   else int(np.float32(M.TRIG_FAST_MAX).view(np.uint32)))
            return hl.select(bits <= hl.cast(bits.type(), top), hl.u8(0), hl.u8(1))

        flag = hl.Func(self.fresh("trigflag"))
        if not shape:
            flag[()] = bad([])
        else:
            lanes = TRIG_CHECK_LANES if shape[-1] >= TRIG_CHECK_LANES else 1
            tasks = TRIG_CHECK_TASKS
            part = hl.Func(self.fresh("trigpart"))
            lane, task = hl.Var("lane"), hl.Var("task")
            part[lane, task] = hl.u8(0)
            width = -(-shape[-1] // lanes)
            if len(shape) == 1:
                per = -(-width // tasks)
                r = hl.RDom([(0, per)])
                i = (task * per + r.x) * lanes + lane
                idx = [hl.min(hl.likely(i), shape[0] - 1)]
            else:
                rows = -(-shape[0] // tasks)
                r = hl.RDom([(0, width)] + [(0, n) for n in reversed(shape[1:-1])] + [(0, rows)])
                rv = [r[k] for k in range(len(shape))]  # innermost first
                row = hl.min(hl.likely(task * rows + rv[-1]), shape[0] - 1)
                col = hl.min(hl.likely(rv[0] * lanes + lane), shape[-1] - 1)
                idx = [row] + rv[1:-1][::-1] + [col]
            part[lane, task] = hl.max(part[lane, task], bad(idx))
            rr = hl.RDom([(0, lanes), (0, tasks)])
            flag[()] = hl.u8(0)
            flag[()] = hl.max(flag[()], part[rr.x, rr.y])
            self.stages.append(Stage("trigpart", part, (tasks, lanes)))
        self.stages.append(Stage("trigflag", flag, ()))
        ok = flag[()] == hl.u8(0)
        self.trig_checks[arg] = ok
        return ok

    def _lower_node(self, node: Node) -> Lazy:
        opdef = REGISTRY[node.op]
        operands = [self.env[i] for i in node.inputs]
        if node.op == "power" and node.dtype.kind in "iu":
            return lower_int_power(self, node, operands)
        if opdef.trait == ELEMENTWISE:
            trig_ok = None
            if self.fast_trig and _fast_trig_op(node):
                trig_ok = self.trig_ok(node.inputs[0], operands[0])
            return lower_elementwise(node, operands, self.fast_math, self.strict_kernel, trig_ok,
                                     self.plain_compare)
        fn = LOWER.get(node.op)
        if fn is None:
            raise UnsupportedError(f"no Halide lowering for op {node.op!r}")
        return fn(self, node, operands)


def _clamp_short(idx, shape):
    """Input indices, clamped along axes shorter than SHORT_AXIS.

    Adams2019 splits a vectorized loop by the natural vector width (16
    float32 lanes, 64 for bytes on AVX-512) with ShiftInwards even when the
    axis is shorter: the one iteration then starts before 0 and reads the
    input out of bounds, a Halide error at run time (softmax of (4, 8) float32
    after the exp lowering changed its cost model's inputs: "Input buffer in0
    is accessed at -8"). Values computed there are never stored; clamping
    keeps the reads inside the buffer and costs a min/max per access on
    short axes only. Axes of length 1 too (a clamp to 0, free): the Matmul
    template's column vectors shift the same way on a one-column B, "Input
    buffer in1 is accessed at -15" for (1, 64) @ (64, 1) with an epilogue."""
    return [hl.clamp(i, 0, n - 1) if n < SHORT_AXIS else i for i, n in zip(idx, shape)]


# ops that can read part of a value computed in the group: where an
# autoscheduler schedules such a group, its input reads are guarded
# (_guard_all). Not every group: the clamps cost 20% on a uint8 (1080,
# 1920, 3) image's astype + transpose under Adams2019 (1.32 -> 1.60 ms).
PART_READS = frozenset({"slice", "concatenate", "pad"})


def _guard_all(idx, shape):
    """Input indices of a group an autoscheduler schedules: _clamp_short's
    clamp on short axes, and a clamp marked ``likely`` in range on the
    others, as Halide's boundary conditions do, so that loop partitioning
    gives the loops' steady state plain vector loads.

    Adams2019 sizes a producer's ShiftInwards split from its region at one
    iteration of the consumer's loop; where that region varies (the
    producer read in full and through a narrow slice, ``t + t[:, :1]`` of
    a transposed (64, 64, 1) input, or one row of it, ``x.T[7][:, None] +
    x.T[..., None]``), an iteration whose region is shorter than the split
    starts before 0: "Input buffer in0 is accessed at -15"."""
    return [hl.clamp(i, 0, n - 1) if n < SHORT_AXIS else hl.clamp(hl.likely(i), 0, n - 1)
            for i, n in zip(idx, shape)]


# -- elementwise -----------------------------------------------------------------------
def lower_elementwise(node: Node, operands, fast_math: bool = False,
                      strict: bool = True, trig_ok=None, plain_compare: bool = False) -> Lazy:
    """``strict``: the kernel compiles with strict_float (float64 power needs
    it); ``plain_compare``: float comparisons without a NaN test (Lowerer.
    plain_compare). ``trig_ok`` (sin, cos and tan only, see Lowerer.trig_ok): the
    argument check under which M.FAST_TRIG's (M64's for float64) version is
    exact enough."""
    shape, out_dt = node.shape, node.dtype
    if node.op == "astype":
        (a,) = operands
        src = a.dtype
        return Lazy(shape, out_dt, lambda idx: H.cast(a.at(idx), src, out_dt))
    if node.op == "copy":  # stripped before codegen (views.strip_copies); identity if not
        (a,) = operands
        return Lazy(shape, out_dt, a.at)
    if node.op == "bitcast":  # through the storage types (float16 computes in float32)
        (a,) = operands
        return Lazy(shape, out_dt, lambda idx: H.from_storage(hl.reinterpret(
            H.storage_type(out_dt), H.to_storage(a.at(idx), a.dtype)), out_dt))
    if node.op == "where":
        c, a, b = operands
        return Lazy(shape, out_dt, lambda idx: hl.select(
            c.at(bcast_index(idx, c.shape)), a.at(bcast_index(idx, a.shape)),
            b.at(bcast_index(idx, b.shape))))
    if fast_math:
        table = H.FAST_UNARY if len(operands) == 1 else H.FAST_BINARY
    else:
        table = H.UNARY if len(operands) == 1 else H.BINARY
    fn = table[node.op]
    if plain_compare and node.op in H.STRICT_COMPARE:
        fn = H.STRICT_COMPARE[node.op]
    if node.op == "power" and out_dt == np.float64 and not strict:
        fn = hl.pow  # halide_math64.power needs a strict_float kernel
    if trig_ok is not None:
        exact, fast = fn, (M64 if out_dt == np.float64 else M).FAST_TRIG[node.op]
        fn = lambda a: hl.select(trig_ok, fast(H.opaque(a)), exact(a))  # noqa: E731
    if node.op == "subtract" and out_dt.kind == "f" and node.inputs[0] is node.inputs[1]:
        # y - y is +0, or NaN where y is inf or NaN. Halide's analysis of an
        # update f = f + v simplifies v as if floats were finite (y - y and
        # is_finite(y) fold), drops the update, and a sum of y - y over an
        # inf gave 0 where numpy gives NaN: so the NaN comes from y's bits
        fn = H.self_difference
    divisor = _scalar_constant(node.inputs[1]) if node.op == "divide" else None
    if divisor is not None and out_dt.kind == "f" and divisor != 0:
        fn = H.divide_by_constant(divisor)
    round16 = out_dt == np.float16
    # y * 0 and 0 / y: Halide's interval arithmetic (no NaN) bounds them to
    # exactly [0, 0] and then drops what looks constant: where(isnan(y * 0),
    # 0, y * 0) lost its select and kept the NaN (see H.opaque)
    hide = node.op in ("multiply", "divide") and out_dt.kind == "f" and any(
        _scalar_constant(i) == 0 for i in node.inputs)

    def at(idx):
        e = fn(*[x.at(bcast_index(idx, x.shape)) for x in operands])
        if e.type() != H.compute_type(out_dt):
            e = hl.cast(H.compute_type(out_dt), e)
        e = H.round_f16(e) if round16 else e
        return H.opaque(e) if hide else e
    return Lazy(shape, out_dt, at)


def _scalar_constant(node: Node):
    """The Python value of a one-element constant node, else None."""
    if node.op != "constant" or node.aval.size != 1:
        return None
    return node.params["value"].value.item()


def lower_int_power(lw: Lowerer, node: Node, operands) -> Lazy:
    """Integer power by square-and-multiply as a loop over the exponent's bits
    (as one Expr, every step doubles the tree and compiles never finish).
    A negative exponent gives 0 here, but never arrives: numpy raises
    ValueError, and the tracer raises DomainError for a constant one while
    tracing and for an exponent array at each call that holds one."""
    a, b = operands
    t = H.compute_type(node.dtype)
    vs = lw.vars(node.aval.ndim)
    exp = b.at(bcast_index(vs, b.shape))
    f = hl.Func(lw.fresh("ipow"))
    _define(f, vs, (hl.cast(t, 1), a.at(bcast_index(vs, a.shape))))
    cur = _ref(f, vs, tuple_valued=True)
    res, sq = hl.Expr(cur[0]), hl.Expr(cur[1])
    r = hl.RDom([hl.Range(0, t.bits())])
    bit = ((exp >> hl.cast(t, r.x)) & hl.cast(t, 1)) != hl.cast(t, 0)
    mul = H.BINARY["multiply"]
    _define(f, vs, (hl.select(bit, mul(res, sq), res), mul(sq, sq)))
    lw.stages.append(Stage("materialized", f, node.shape))

    def at(idx):
        v = _fcall(f, idx, 0)
        if t.is_int():
            v = hl.select(b.at(bcast_index(idx, b.shape)) < hl.cast(t, 0), hl.cast(t, 0), v)
        return v
    return Lazy(node.shape, node.dtype, at, f)


# -- reductions ------------------------------------------------------------------------
def _reduce_setup(lw: Lowerer, node: Node, x: Lazy):
    axes, keep = node.params["axes"], node.params["keepdims"]
    out_vars = lw.vars(node.aval.ndim)
    # innermost (numpy's last) reduced axis first: RDom dim 0 is the inner loop
    rdom = hl.RDom([hl.Range(0, x.shape[a]) for a in reversed(axes)]) if axes else None
    rvars = {a: rdom[k] for k, a in enumerate(reversed(axes))} if axes else {}
    return out_vars, rdom, _src_index(len(x.shape), rvars, out_vars, keep)


def _src_index(ndim, rvars, out_vars, keep):
    """A reduction's input index: ``rvars[d]`` on reduced axes d, the output's
    Vars elsewhere (keepdims outputs skip their unit Vars)."""
    idx, j = [], 0
    for d in range(ndim):
        if d in rvars:
            idx.append(rvars[d])
            j += keep
        else:
            idx.append(out_vars[j])
            j += 1
    return idx


def _define(f, out_vars, value):
    args = tuple(reversed(out_vars))
    if args:
        f[args] = value
    else:
        f[()] = value


def _ref(f, out_vars, tuple_valued=False):
    args = tuple(reversed(out_vars))
    r = f[args] if args else f[()]
    return r if tuple_valued else hl.Expr(r)



def _arg_reducer(op, dt, n: int):
    """(value type, init pair, combine, step) of argmax/argmin as a reduction of
    (value, position) pairs: the better value wins, a tie the lower
    position, so pairs combine in any order (per-lane partials, parallel
    chunks) and give numpy's first occurrence. NaN is best (numpy returns
    the first NaN); the init holds position n, past every element, with the
    worst value, so that any element replaces it. Positions are int32."""
    dt = np.dtype(dt)
    if dt.kind == "b":  # as uint8 0 and 1: vectors of Halide bools stored wrong
        dt = np.dtype(np.uint8)
    ct = H.compute_type(dt)
    if dt.kind == "f":
        worst = H.literal(-np.inf if op == "argmax" else np.inf, dt)
    else:
        info = np.iinfo(dt)
        worst = H.literal(info.min if op == "argmax" else info.max, dt)

    def ahead(a, b):  # whether value a beats value b outright
        return a > b if op == "argmax" else a < b

    def combine(acc, v):
        (av, ai), (bv, bi) = acc, v
        if dt.kind == "f":
            an, bn = hl.is_nan(av), hl.is_nan(bv)
            tie = (av == bv) | (an & bn)
            wins = (bn & ~an) | (~an & ahead(bv, av)) | (tie & (bi < ai))
        else:
            wins = ahead(bv, av) | ((av == bv) & (bi < ai))
        return (hl.select(wins, bv, av), hl.select(wins, bi, ai))

    def step(acc, v):  # v's position is after acc's: only a better value wins
        (av, ai), (bv, bi) = acc, v
        if dt.kind == "f":
            wins = ~hl.is_nan(av) & (hl.is_nan(bv) | ahead(bv, av))
        else:
            wins = ahead(bv, av)
        return (hl.select(wins, bv, av), hl.select(wins, bi, ai))
    return ct, (worst, hl.i32(n)), combine, step


def _nan_pick(op):
    """combine(acc, v) of a float max/min reduction, two compares and a
    blend per vector; ties keep the accumulator.

    max/min propagate NaN as numpy does: a NaN value wins, a NaN
    accumulator stays (v > NaN is false). np.maximum's elementwise lowering
    (NaN checks on both operands around a max) takes five operations and
    two register copies: softmax (16384, 1024) with RowReduce vector 32,
    best of 21, 2-core AVX-512 VM, 7.5-7.7 -> 7.1-7.2 ms.

    nanmax/nanmin (np.fmax/fmin.reduce) start from NaN and skip it: a NaN
    value never wins over a number, a NaN accumulator takes any value, so
    the result is NaN only where every value is (numpy's nanmax in one
    pass, where a max of NaN-filled values and an all-NaN test took two)."""
    better = (lambda acc, v: v > acc) if op in ("max", "nanmax") else (lambda acc, v: v < acc)
    if op.startswith("nan"):
        return lambda acc, v: hl.select(better(acc, v) | hl.is_nan(acc), v, acc)
    return lambda acc, v: hl.select(hl.is_nan(v) | better(acc, v), v, acc)


def _reducer(op, dt):
    """(accumulator type, init Expr, combine(acc, v)) of a reduction op."""
    ct = H.compute_type(dt)
    if op == "sum":
        if dt.kind == "f" and dt.itemsize < 8:  # float16/32 sums accumulate in float64:
            ct = hl.Float(64)                   # more accurate than numpy's pairwise sum
        return ct, hl.cast(ct, 0), H.BINARY["add"]
    if op == "prod":
        if dt.kind == "f" and dt.itemsize < 8:  # as sums: float32 lane chains of a
            ct = hl.Float(64)                   # large product drift by 1e-3
        return ct, (hl.cast(ct, 1) if dt.kind != "b" else H.literal(True, dt)), \
            H.BINARY["multiply"]
    if op in ("nanmax", "nanmin"):  # float operands only (numpy_api.reduction)
        return ct, H.literal(np.nan, dt), _nan_pick(op)
    if op in ("max", "min"):
        if dt.kind == "f":
            init = H.literal(-np.inf if op == "max" else np.inf, dt)
        elif dt.kind == "b":
            init = H.literal(op == "min", dt)
        else:
            info = np.iinfo(dt)
            init = H.literal(info.min if op == "max" else info.max, dt)
        if dt.kind == "f":
            return ct, init, _nan_pick(op)
        return ct, init, H.BINARY["maximum" if op == "max" else "minimum"]
    if op in ("any", "all"):
        return ct, H.literal(op == "all", np.bool_), (
            (lambda a, b: a | b) if op == "any" else (lambda a, b: a & b))
    raise UnsupportedError(f"reduction {op}")


def _over(e, rdom):
    """``e``, tied to ``rdom``: Halide takes an update's RDom from its
    Exprs, and where the operand's index does not vary along the reduced
    axes (the edge padding of a size-1 axis, a gather of index 0 repeated)
    the update ran once: np.pad(x[:, None], ((0, 0), (1, 1)), 'edge').sum(-1)
    gave x. The select folds away when the loop is lowered."""
    return hl.select(rdom[0] >= 0, e, e)


def lower_reduce(lw: Lowerer, node: Node, operands) -> Lazy:
    (x,) = operands
    dt, op = node.dtype, node.op
    axes = node.params["axes"]
    if not axes:
        return x  # axis=() or a 0-d operand: every reduction is the identity
    arg = op in ("argmax", "argmin")
    step = None
    if arg:  # (value, position) pairs, combined in any order (_arg_reducer)
        ct, init, combine, step = _arg_reducer(op, x.dtype, x.shape[axes[0]])
    else:
        ct, init, combine = _reducer(op, dt)
    last = len(x.shape) - 1
    if lw.col_chunks and last not in axes:
        return lower_col_reduce(lw, node, x, ct, init, combine)
    n = x.shape[last]
    out_vars = lw.vars(node.aval.ndim)
    f = hl.Func(lw.fresh(op))
    _define(f, out_vars, init)

    def value(idx, rd=None):
        if arg:
            return (hl.cast(ct, x.at(idx)), hl.cast(hl.Int(32), idx[axes[0]]))
        e = H.opaque(hl.cast(ct, x.at(idx)))
        return e if rd is None else _over(e, rd)

    part_value = value

    def ref(g, v):  # a Func's value there: an arg-reduction's pair as two Exprs
        r = _ref(g, v, tuple_valued=arg)
        return (hl.Expr(r[0]), hl.Expr(r[1])) if arg else r

    def src_index(rvars):
        return _src_index(len(x.shape), rvars, out_vars, node.params["keepdims"])

    if last in axes and n >= SPLIT_MIN:
        # lanes over the last axis, and CHUNKS pure chunks so that a full
        # reduction runs in parallel: chunks of the longest other reduced
        # axis when it is long enough, else chunks of the last axis itself
        # when the output is too small to give the cores work
        outer = [a for a in axes if a != last]
        lane, chunk = hl.Var("lane"), hl.Var("chunk")
        part = hl.Func(lw.fresh(op + "_part"))
        how, o = chunking(x.shape, axes, node.shape)
        # a full reduction on a GPU: a block of GPU_LANES threads per chunk
        gpu_full = lw.gpu and not out_vars and how is not None and n >= 4 * GPU_LANES
        lanes = GPU_LANES if gpu_full else lw.lanes
        vecs = n // lanes
        main = vecs * lanes  # the last axis' elements the partials cover
        # float32 sums: each partial adds ``group`` vectors' float32 sum
        group = (SUM_GROUP if op == "sum" and ct == hl.Float(64) and x.dtype == np.float32
                 and not lw.gpu and vecs >= 2 * SUM_GROUP else 1)
        if group > 1:
            def part_value(idx, rd):
                terms = [x.at(idx[:last] + [idx[last] + k * lanes] + idx[last + 1:])
                         for k in range(group)]
                while len(terms) > 1:  # a balanced tree: (a + b) + (c + d)
                    terms = [a + b for a, b in zip(terms[::2], terms[1::2])]
                return _over(H.opaque(hl.cast(ct, terms[0])), rd)
        if how == "outer":
            mid = [a for a in outer if a != o]
            extent = x.shape[o]
            chunks = min(extent, GPU_CHUNKS if gpu_full else CHUNKS)
            size = -(-extent // chunks)
            pvars = out_vars + [chunk, lane]
            key = ("outer", tuple(x.shape), tuple(axes), group, lanes, chunks)
            rk = lw.rdoms.get(key)
            if rk is None:
                rk = lw.rdoms[key] = hl.RDom([hl.Range(0, vecs // group)]
                                             + [hl.Range(0, x.shape[a]) for a in reversed(mid)]
                                             + [hl.Range(0, size)])
                rk.where(chunk * size + rk[len(mid) + 1] < extent)
            main = vecs // group * group * lanes
            # the min is a no-op under the where() above; it tells bounds
            # inference that the last chunk stops at the array's end
            rvars = {last: rk[0] * (group * lanes) + lane,
                     o: hl.min(chunk * size + rk[len(mid) + 1], extent - 1)}
            rvars.update({a: rk[1 + k] for k, a in enumerate(reversed(mid))})
        elif how == "last":
            # chunks of ``per`` groups of vectors along the last axis; the other
            # reduced axes (all short, else "outer") loop inside each chunk
            chunks = (max(1, min(GPU_CHUNKS, vecs // 4)) if gpu_full
                      else min(LAST_CHUNKS, vecs // LAST_CHUNK_VECTORS))
            per = vecs // chunks // group  # groups of vectors per chunk
            main = chunks * per * group * lanes  # the rest joins the tail
            pvars = out_vars + [chunk, lane]
            key = ("last", tuple(x.shape), tuple(axes), group, lanes, chunks)
            rk = lw.rdoms.get(key)
            if rk is None:
                rk = lw.rdoms[key] = hl.RDom([hl.Range(0, per)]
                                             + [hl.Range(0, x.shape[a]) for a in reversed(outer)])
            rvars = {last: (chunk * per + rk[0]) * (group * lanes) + lane}
            rvars.update({a: rk[1 + k] for k, a in enumerate(reversed(outer))})
            start = {last: chunk * per * group * lanes + lane}
        else:
            chunks = 1
            pvars = out_vars + [lane]
            rk = hl.RDom([hl.Range(0, vecs // group)])
            rvars = {last: rk.x * (group * lanes) + lane}
            start = {last: lane}
            main = vecs // group * group * lanes
        if arg:
            # a lane's pairs come in position order: it starts from its first
            # element and keeps the earlier of equals without comparing
            # positions (``step``), a few vector ops fewer per element
            _define(part, pvars, value(src_index(start)))
            _define(part, pvars, step(ref(part, pvars), value(src_index(rvars))))
        else:
            _define(part, pvars, init)
            _define(part, pvars, combine(ref(part, pvars), part_value(src_index(rvars), rk)))
        if gpu_full:
            # each chunk's lanes first (one block: shared memory), then the
            # chunks: no GPU thread runs a loop over every partial
            csum = hl.Func(lw.fresh(op + "_chunk"))
            _define(csum, [chunk], init)
            rl = hl.RDom([hl.Range(0, lanes)])
            _define(csum, [chunk], combine(ref(csum, [chunk]), ref(part, [chunk, rl[0]])))
            lw.stages.append(Stage("chunksum", csum, (chunks,), rl, (chunks, lanes)))
            rl = hl.RDom([hl.Range(0, chunks)])
            _define(f, out_vars, combine(ref(f, out_vars), ref(csum, [rl[0]])))
        else:
            chunked = len(pvars) > len(out_vars) + 1
            rl = hl.RDom([hl.Range(0, lanes)] + ([hl.Range(0, chunks)] if chunked else []))
            picked = out_vars + ([rl[1], rl[0]] if chunked else [rl[0]])
            _define(f, out_vars, combine(ref(f, out_vars), ref(part, picked)))
        if n > main:
            rt = hl.RDom([hl.Range(main, n - main)] +
                         [hl.Range(0, x.shape[a]) for a in reversed(outer)])
            tail = {last: rt[0]}
            tail.update({a: rt[1 + k] for k, a in enumerate(reversed(outer))})
            _define(f, out_vars, combine(ref(f, out_vars), value(src_index(tail), rt)))
        lw.stages.append(Stage("partial", part, (lanes,) + tuple(node.shape), rk, x.shape,
                               chunks=chunks))
        rdom = rl
    else:
        rdom = hl.RDom([hl.Range(0, x.shape[a]) for a in reversed(axes)])
        rvars = {a: rdom[k] for k, a in enumerate(reversed(axes))}
        _define(f, out_vars, combine(ref(f, out_vars), value(src_index(rvars), rdom)))
    lw.stages.append(Stage("reduce", f, node.shape, rdom, x.shape))
    if arg:
        return func_lazy(f, node.shape, dt, component=1,
                         convert=lambda e: hl.cast(hl.Int(64), e))
    return func_lazy(f, node.shape, dt, convert=_wide_convert(ct, dt))


# Vectors of float32 a per-lane float64 partial of a sum takes at a time,
# added first in float32 as (a + b) + (c + d): one conversion and one
# float64 add per 4 vectors instead of 4 of each, which bound an in-cache sum.
# The error stays below numpy's pairwise float32 sum (two float32 roundings
# per group, then float64): row sums of (4096, 4096) standard normals within
# 1.2e-5 of the exact sum, numpy 2.8e-5, float64 partials alone 7.6e-6. An
# intermediate float32 sum can overflow where a float64 one would not, as in
# numpy's float32 sum. 2-core AVX-512 VM (Zen 4), min of 41 calls, three
# alternating processes, (512, 1024) float32 in cache: x.sum(-1) 23.3 ->
# 18.6 us, x.var(-1) 60.7 -> 45.0, layernorm 91.7 -> 77.1, softmax alike
# (its exp bounds it); (1024, 2048) row sums 105 -> 138-165 GB/s (numba's
# float32 fastmath row sums 160-180). Out of cache the memory bounds them:
# (4096, 4096) row sums alike. 2 and 8 vectors were tried: 2 gained half
# as much, 8 no more than 4.
SUM_GROUP = 4


def _wide_convert(ct, dt):
    """Back from a wider accumulator (float64 sums of float32) to dt, or None."""
    if ct == H.compute_type(dt):
        return None
    if dt == np.float16:
        return lambda e: H.round_f16(hl.cast(hl.Float(32), e))
    return lambda e: hl.cast(H.compute_type(dt), e)


def lower_col_reduce(lw: Lowerer, node: Node, x: Lazy, ct, init, combine) -> Lazy:
    """A reduction over leading axes (the last axis kept: column sums, a
    softmax over axis 0) for the ColReduce template. The outermost reduced
    axis is cut into ``lw.col_chunks`` chunks of consecutive rows; a chunk's
    partial keeps one accumulator per kept element (a whole row of them) and
    walks its rows in memory order, so every read streams; the reduce stage
    then combines the chunks' partials in chunk order."""
    axes, keep = node.params["axes"], node.params["keepdims"]
    out_vars = lw.vars(node.aval.ndim)
    o = min(axes)
    extent = x.shape[o]
    chunks = max(1, min(lw.col_chunks, extent))
    size = -(-extent // chunks)
    chunks = -(-extent // size)  # no empty chunk
    inner = [a for a in sorted(axes) if a != o]
    chunk = hl.Var("chunk")
    rk = hl.RDom([hl.Range(0, x.shape[a]) for a in reversed(inner)] + [hl.Range(0, size)])
    rows = rk[len(inner)]
    rvars = {a: rk[k] for k, a in enumerate(reversed(inner))}
    rvars[o] = chunk * size + rows
    if chunks * size != extent:
        rk.where(rvars[o] < extent)
        # a no-op under the where(); it tells bounds inference that the last
        # chunk stops at the array's end
        rvars[o] = hl.min(rvars[o], extent - 1)
    idx = _src_index(len(x.shape), rvars, out_vars, keep)
    order = []
    for d in reversed(range(len(x.shape))):  # memory order, innermost first
        if d not in axes:
            order.append(idx[d])
        elif d == o:
            order.append(rows)
        else:
            order.append(rk[inner[::-1].index(d)])
    if keep:
        order += [out_vars[d] for d in axes]  # unit dims: outermost
    part = hl.Func(lw.fresh(node.op + "_colpart"))
    pvars = [chunk] + out_vars
    _define(part, pvars, init)
    _define(part, pvars, combine(_ref(part, pvars), _over(H.opaque(hl.cast(ct, x.at(idx))), rk)))
    lw.stages.append(Stage("colpart", part, (chunks,) + tuple(node.shape), rk, x.shape,
                           loop_order=tuple(order) + (chunk,)))
    f = hl.Func(lw.fresh(node.op))
    _define(f, out_vars, init)
    rc = hl.RDom([hl.Range(0, chunks)])
    _define(f, out_vars, combine(_ref(f, out_vars), _ref(part, [rc.x] + out_vars)))
    lw.stages.append(Stage("reduce", f, node.shape, rc, x.shape))
    return func_lazy(f, node.shape, node.dtype, convert=_wide_convert(ct, node.dtype))


def lower_argreduce(lw: Lowerer, node: Node, operands) -> Lazy:
    """argmax/argmin as one serial loop per output, for GPU targets (whose
    templates know this "argreduce" stage); CPU targets lower them as
    reductions of (value, position) pairs (lower_reduce, _arg_reducer),
    with per-lane partials and parallel chunks as other reductions."""
    (x,) = operands
    out_vars, rdom, idx = _reduce_setup(lw, node, x)
    (axis,) = node.params["axes"]
    first = [hl.Expr(0) if d == axis else e for d, e in enumerate(idx)]
    f = hl.Func(lw.fresh(node.op))
    _define(f, out_vars, (hl.i64(0), x.at(first)))
    cur = _ref(f, out_vars, tuple_valued=True)
    best_i, best_v = hl.Expr(cur[0]), hl.Expr(cur[1])
    v = x.at(idx)
    better = (v > best_v) if node.op == "argmax" else (v < best_v)
    if x.dtype.kind == "f":
        better = ~hl.is_nan(best_v) & (hl.is_nan(v) | better)
    elif x.dtype.kind == "b":
        better = (v & ~best_v) if node.op == "argmax" else (~v & best_v)
    r = rdom[0]
    _define(f, out_vars, (hl.select(better, hl.cast(hl.Int(64), r), best_i),
                          hl.select(better, v, best_v)))
    lw.stages.append(Stage("argreduce", f, node.shape, rdom, x.shape))
    return func_lazy(f, node.shape, node.dtype, component=0)


# each scan's step, a binary ufunc
SCAN_COMBINE = {"cumsum": "add", "cumprod": "multiply", "cummax": "maximum", "cummin": "minimum",
                "cumfmax": "fmax", "cumfmin": "fmin"}


def lower_scan(lw: Lowerer, node: Node, operands) -> Lazy:
    """cumsum / cumprod / cummax... along one axis: the first element, then an update
    over the rest of the axis in order, each partial rounded to the output
    dtype as numpy's accumulate loops do (float32 sums stay float32, so the
    results match numpy's bit for bit)."""
    (x,) = operands
    dt, axis = node.dtype, node.params["axis"]
    n = x.shape[axis]
    ct = H.compute_type(dt)
    combine = H.BINARY[SCAN_COMBINE[node.op]]
    f16 = dt == np.float16
    out_vars = lw.vars(len(x.shape))
    f = hl.Func(lw.fresh(node.op))
    _define(f, out_vars, hl.cast(ct, x.at(out_vars)))
    r = None
    if n > 1:
        r = hl.RDom([hl.Range(1, n - 1)])
        at = [hl.Expr(r.x) if d == axis else hl.Expr(v) for d, v in enumerate(out_vars)]
        prev = [r.x - 1 if d == axis else hl.Expr(v) for d, v in enumerate(out_vars)]
        e = combine(_ref(f, prev), hl.cast(ct, x.at(at)))
        _define(f, at, H.round_f16(e) if f16 else e)
    lw.stages.append(Stage("scan", f, node.shape, r, x.shape))
    return func_lazy(f, node.shape, dt)


def sort_steps(n: int) -> list[tuple[int, int]]:
    """The comparator steps of a bitonic sorting network over n elements,
    as (block, distance): ``(b, 0)`` compares element i with its mirror in
    its block of b (i's partner is base + b - 1 - (i - base)), ``(0, d)``
    with i + d or i - d (by the parity of i // d). The lower index takes the
    minimum in every comparator, so padding to a power of two with +inf at
    the end changes nothing: comparators with a partner past n are left
    out instead (the element keeps its value)."""
    steps, block = [], 2
    while block // 2 < n:
        steps.append((block, 0))
        d = block // 4
        while d >= 1:
            steps.append((0, d))
            d //= 2
        block *= 2
    return steps


def _sort_key(e, dt):
    """An integer key whose order is numpy's sort order of the values: a
    float's bits with the magnitude flipped below zero (-0.0 just below
    +0.0), every NaN above +inf; a bool as uint8; integers as they are."""
    t = e.type()
    if dt.kind == "b":
        return hl.cast(hl.UInt(8), e)
    if not t.is_float():
        return e
    it = hl.Int(t.bits())
    b = hl.reinterpret(it, e)
    k = b ^ ((b >> (t.bits() - 1)) & it.max())
    return hl.select(hl.is_nan(e), it.max(), k)


def _sort_value(k, dt, t):
    """The value of a key (_sort_key's inverse; NaN comes back as one NaN)."""
    if dt.kind == "b":
        return k != 0
    if not t.is_float():
        return k
    return hl.reinterpret(t, k ^ ((k >> (t.bits() - 1)) & k.type().max()))


def lower_sort(lw: Lowerer, node: Node, operands) -> Lazy:
    """np.sort / np.argsort along one axis: a bitonic network (sort_steps)
    over integer keys (_sort_key), so that NaN sorts last as in numpy. One
    Func ``net`` holds the network twice (a last Var ``slot``): step s
    reads slot s % 2 and writes the other, an update over an RDom along the
    axis (Halide refuses a pure Var read at another place of the Func it
    defines), so the network is one buffer whatever its length. ``sorted``
    reads the final slot.

    A sort's comparators are an integer min and max. An argsort's network
    carries (key, position) pairs and orders equal keys by position: the
    stable order (numpy's kind="stable"), with -0.0 equal to +0.0."""
    (x,) = operands
    axis, dt = node.params["axis"], node.dtype
    indices = node.op == "argsort"
    n = x.shape[axis]
    if not lw.gpu and radix_sorts(x.shape, axis, lw.sort_radix):
        return lower_radix_sort(lw, node, x)
    steps = sort_steps(n)
    if not steps:
        return Lazy(node.shape, node.dtype, lambda idx: hl.i64(0)) if indices else x
    vs = lw.vars(len(x.shape))
    slot = hl.Var("slot")
    net = hl.Func(lw.fresh("sortnet"))

    def ref(idx, k):
        e = net[tuple(reversed(idx)) + (k,)]
        return (hl.Expr(e[0]), hl.Expr(e[1])) if indices else hl.Expr(e)
    # slot 1 is written by the first step before any read: zeros, so that
    # the keys are computed once (the template unrolls the slot loop)
    first = hl.Expr(slot) == 0
    v = x.at(vs)
    key = _sort_key(hl.select(v == 0, hl.cast(v.type(), 0), v) if indices and v.type().is_float()
                    else v, x.dtype)
    if indices:
        pos = hl.cast(hl.Int(32), vs[axis])
        init = (hl.select(first, key, hl.cast(key.type(), 0)), hl.select(first, pos, 0))
    else:
        init = hl.select(first, key, hl.cast(key.type(), 0))
    net[tuple(reversed(vs)) + (slot,)] = init
    rdoms = []
    for s, (block, d) in enumerate(steps):
        r = hl.RDom([hl.Range(0, n)])
        rdoms.append(r)
        i = hl.Expr(r.x)
        if block:
            partner = 2 * ((i / block) * block) + (block - 1) - i
            lower = i % block < block // 2
        else:
            lower = (i / d) % 2 == 0
            partner = hl.select(lower, i + d, i - d)
        at = [i if a == axis else v for a, v in enumerate(vs)]
        there = [hl.clamp(partner, 0, n - 1) if a == axis else v for a, v in enumerate(vs)]
        mine, theirs = ref(at, s % 2), ref(there, s % 2)
        inside = partner < n if n & (n - 1) else None  # not a power of two: partners past the end
        if indices:
            first_is_less = (mine[0] < theirs[0]) | ((mine[0] == theirs[0]) & (mine[1] < theirs[1]))
            keep = lower == first_is_less
            keep = keep if inside is None else keep | ~inside
            e = tuple(hl.select(keep, m, t) for m, t in zip(mine, theirs))
        else:
            e = hl.select(lower, hl.min(mine, theirs), hl.max(mine, theirs))
            e = e if inside is None else hl.select(inside, e, mine)
        net[tuple(reversed(at)) + ((s + 1) % 2,)] = e
    final = ref(vs, len(steps) % 2)
    out = hl.Func(lw.fresh("sorted"))
    out[tuple(reversed(vs))] = (hl.cast(hl.Int(64), final[1]) if indices
                                else _sort_value(final, dt, H.compute_type(dt)))
    lw.stages.append(Stage("sortnet", net, tuple(x.shape), rdoms, axis=axis))
    lw.stages.append(Stage("sorted", out, tuple(x.shape), axis=axis))
    return func_lazy(out, node.shape, dt)


# A lone row (every other axis of extent 1) at least RADIX_MIN_ONE long, or
# rows at least RADIX_MIN_ROWS long, sort by LSD radix (lower_radix_sort)
# instead of the bitonic network, whose log2(n)**2 / 2 steps each compile to
# a loop of their own: np.sort of 2**20 float32 took 14 s to compile and
# 150 ms a call (numpy 41), the radix sort 1.5 s and 6.9 ms (2-core Zen 4
# VM, medians of 7 interleaved). Network -> radix, float32, one process:
# a lone row of 64 sorts in 1 -> 2 us, of 256 in 5 -> 3 us (argsort 8 ->
# 3); rows sort faster from 4096 ((256, 4096) 6.2 -> 5.4 ms) but argsort
# only from 16384 ((256, 4096) 12.2 -> 15.2 ms, (64, 16384) 22 -> 9.7).
RADIX_MIN_ONE = 256
RADIX_MIN_ROWS = 8192
# bits of the key per radix pass (256 bins: every bin's write cursor stays
# in L1); a lone row is cut into chunks of at least RADIX_CHUNK elements,
# one per thread, that count and scatter in parallel
RADIX_BITS = 8
RADIX_CHUNK = 1 << 15


def radix_sorts(shape, axis: int, mode: str = "auto") -> bool:
    """Whether a sort along ``axis`` of ``shape`` takes lower_radix_sort:
    by length (mode "auto"), always ("1") or never ("0"; the network)."""
    n = shape[axis]
    if not all(shape) or n < 2 or mode == "0":
        return False
    if mode == "1":
        return True
    lone = int(np.prod(shape)) == n
    return n >= (RADIX_MIN_ONE if lone else RADIX_MIN_ROWS)


def radix_chunks(shape, axis: int, chunks: int = 0) -> int:
    """Chunks of a radix sort's row: ``chunks`` if given (the Sort
    template's parameter), else one per thread for a long lone row;
    always 1 where other axes hold rows (they sort in parallel instead)."""
    n = shape[axis]
    if int(np.prod(shape)) != n:
        return 1
    if chunks > 0:
        return max(1, min(chunks, n))
    threads = get_config().num_threads or os.cpu_count() or 1
    return max(1, min(threads, n // RADIX_CHUNK))


def _radix_key(v, dt, ut, stable_zero: bool):
    """An unsigned key of type ``ut`` (at least v's width) whose unsigned
    order is numpy's sort order of the values (_sort_key's, NaN last);
    ``stable_zero`` keys -0.0 as +0.0 (argsort: equal values keep their
    order)."""
    t = v.type()
    if dt.kind in "bu":
        return hl.cast(ut, v)
    bits = t.bits()
    sign = hl.cast(hl.UInt(bits), 1) << hl.cast(hl.UInt(bits), bits - 1)
    if t.is_float():
        if stable_zero:
            v = hl.select(v == 0, hl.cast(t, 0), v)
        v = _sort_key(v, dt)
    return hl.cast(ut, hl.reinterpret(hl.UInt(bits), v) ^ sign)


def _radix_value(key, dt, t):
    """The value of a _radix_key of a value of type ``t``."""
    if dt.kind == "b":
        return key != hl.cast(key.type(), 0)
    if dt.kind == "u":
        return hl.cast(t, key)
    bits = t.bits()
    sign = hl.cast(hl.UInt(bits), 1) << hl.cast(hl.UInt(bits), bits - 1)
    k = hl.reinterpret(hl.Int(bits), hl.cast(hl.UInt(bits), key) ^ sign)
    return _sort_value(k, dt, t) if t.is_float() else k


@dataclass
class RadixPlan:
    """What the Sort template needs of a radix sort's ``radixnet`` Func:
    per pass its four updates' RDoms (clear, count, cursor, scatter), the
    chunks of the row and whether other axes hold rows; the Funcs of the
    keys' span and of the passes that move keys."""
    rdoms: list
    chunks: int
    rows: bool
    span: object
    passes: object


# lanes of the min and max over a row's keys (radixspan)
SPAN_LANES = 16


def lower_radix_sort(lw: Lowerer, node: Node, x) -> Lazy:
    """np.sort / np.argsort along one axis by LSD radix sort of unsigned
    keys (_radix_key), RADIX_BITS per pass, low digit first: each pass is
    stable, so the last one leaves the keys sorted (and an argsort's equal
    keys in their first order, numpy's kind="stable").

    One Func ``radixnet`` holds, per row, two slots (a Var ``slot``) of
    [counts | cursors | keys]: counts and cursors have a bin per digit per
    chunk of the row (RADIX_CHUNK, one chunk per thread for a lone row,
    else one chunk per row), the keys the row's n. Its pure definition puts
    the keys in slot 0; pass q reads slot q % 2 and per chunk, with four
    updates: clears the counts, counts the digits, sets each (digit, chunk)
    cursor to the number of keys of lower digits or of the same digit in
    earlier chunks (a serial scan over the bins), and scatters: for each
    key in order, its key to the other slot at its cursor, then the cursor
    up by one. The scatter is an update over an RDom of (2, n): its first
    step writes the key, the second the cursor, at places read from the
    Func itself (Halide has no update that writes two places). A chunk's
    cursors and keys are its own, so chunks (or rows) run in parallel.
    An argsort's Func is a Tuple of (key or count, position).

    Passes whose digit every key of the row shares are skipped: they would
    leave the order as it is. Those are the high digits above the highest
    bit in which the row's least and greatest keys differ (``radixspan``,
    a vectorized min and max per lane and chunk, and ``radixpasses``): an
    int64 row of values below 1000 takes 2 passes, not 8. The sorted keys
    are then in slot (passes % 2)."""
    axis, dt = node.params["axis"], node.dtype
    indices = node.op == "argsort"
    shape, n = tuple(x.shape), x.shape[axis]
    vs = lw.vars(len(shape))
    others = [v for a, v in enumerate(vs) if a != axis]
    rest = tuple(reversed(others))  # Halide order after (j, slot)
    chunks = radix_chunks(shape, axis, lw.sort_chunks)
    m = -(-n // chunks)
    bins = 1 << RADIX_BITS
    counts = chunks * bins
    head = 2 * counts  # the keys start after the counts and the cursors
    j, slot = hl.Var("rj"), hl.Var("slot")
    src = [hl.clamp(j - head, 0, n - 1) if a == axis else v for a, v in enumerate(vs)]
    v = x.at(src)
    t = v.type()
    bits = max(8, t.bits())
    ut = hl.UInt(64 if bits == 64 else 32)
    key = _radix_key(v, x.dtype, ut, indices)
    net = hl.Func(lw.fresh("radixnet"))
    zero = hl.cast(ut, 0)
    first = (hl.Expr(slot) == 0) & (hl.Expr(j) >= head)
    if indices:
        net[(j, slot) + rest] = hl.Tuple([hl.select(first, key, zero),
                                          hl.select(first, hl.cast(hl.Int(32), j - head), 0)])
    else:
        net[(j, slot) + rest] = hl.select(first, key, zero)

    def at(pos, s):
        e = net[(pos, s) + rest]
        return (hl.Expr(e[0]), hl.Expr(e[1])) if indices else (hl.Expr(e), None)

    def put(pos, s, k, i=None):
        net[(pos, s) + rest] = hl.Tuple([k, i if i is not None else hl.i32(0)]) if indices else k

    def key_at(r_elem, r_chunk, s):  # the chunk's element in slot s
        i = r_chunk * m + r_elem
        return at(head + (hl.min(i, n - 1) if chunks * m > n else i), s)

    # the least and greatest key per lane of SPAN_LANES and chunk, read from
    # the input (each chunk's last vector may read past it: the same row)
    lane, ch = hl.Var("lane"), hl.Var("chunk")
    span = hl.Func(lw.fresh("radixspan"))
    span[(lane, ch) + rest] = hl.Tuple([hl.cast(ut, ut.max()), zero])
    rspan = hl.RDom([hl.Range(0, -(-m // SPAN_LANES))])
    at_in = [hl.min(ch * m + rspan.x * SPAN_LANES + lane, n - 1) if a == axis else w
             for a, w in enumerate(vs)]
    kin = _radix_key(x.at(at_in), x.dtype, ut, indices)
    old = span[(lane, ch) + rest]
    span[(lane, ch) + rest] = hl.Tuple([hl.min(hl.Expr(old[0]), kin),
                                        hl.max(hl.Expr(old[1]), kin)])
    span.bound(lane, 0, SPAN_LANES).bound(ch, 0, chunks)
    rall = hl.RDom([hl.Range(0, SPAN_LANES), hl.Range(0, chunks)])
    lo = hl.minimum(hl.Expr(span[(rall.x, rall.y) + rest][0]))
    hi = hl.maximum(hl.Expr(span[(rall.x, rall.y) + rest][1]))
    # the passes that move keys: the digits up to the highest differing bit
    passes = hl.Func(lw.fresh("radixpasses"))
    passes[rest] = (hl.i32(ut.bits() + RADIX_BITS - 1)
                    - hl.cast(hl.Int(32), hl.count_leading_zeros(lo ^ hi))) / RADIX_BITS
    moves = passes[rest]

    rdoms = []
    for q in range(bits // RADIX_BITS):
        a, b = q % 2, 1 - q % 2
        clear = hl.RDom([hl.Range(0, counts)])
        put(clear.x, a, zero)
        count = hl.RDom([hl.Range(0, m), hl.Range(0, chunks)])
        count.where(moves > q)
        if chunks * m > n:
            count.where(count.y * m + count.x < n)
        d = count.y * bins + _key_digit(key_at(count.x, count.y, a)[0], q * RADIX_BITS,
                                        RADIX_BITS)
        put(d, a, at(d, a)[0] + hl.cast(ut, 1))
        # cursors in (digit, chunk) order, each after the one before it
        scan = hl.RDom([hl.Range(0, chunks), hl.Range(0, bins)])
        c, dg = scan.x, scan.y
        pc = hl.clamp(hl.select(c == 0, chunks - 1, c - 1), 0, chunks - 1)
        pd = hl.clamp(hl.select(c == 0, dg - 1, dg), 0, bins - 1)
        prev = pc * bins + pd
        put(counts + c * bins + dg, a,
            hl.select((c == 0) & (dg == 0), zero, at(counts + prev, a)[0] + at(prev, a)[0]))
        sc = hl.RDom([hl.Range(0, 2), hl.Range(0, m), hl.Range(0, chunks)])
        sc.where(moves > q)
        if chunks * m > n:
            sc.where(sc.z * m + sc.y < n)
        k, i = key_at(sc.y, sc.z, a)
        cur = counts + sc.z * bins + _key_digit(k, q * RADIX_BITS, RADIX_BITS)
        cursor = at(cur, a)[0]
        dest = head + hl.clamp(hl.cast(hl.Int(32), cursor), 0, n - 1)
        write = hl.Expr(sc.x) == 0
        site = (hl.select(write, dest, cur), hl.select(write, b, a))
        value = hl.select(write, k, cursor + hl.cast(ut, 1))
        net[site + rest] = hl.Tuple([value, hl.select(write, i, 0)]) if indices else value
        rdoms.append((clear, count, scan, sc))
    k, i = at(head + vs[axis], moves & 1)
    out = hl.Func(lw.fresh("sorted"))
    out[tuple(reversed(vs))] = hl.cast(hl.Int(64), i) if indices else _radix_value(k, dt, t)
    net.bound(j, 0, head + n).bound(slot, 0, 2)
    plan = RadixPlan(rdoms, chunks, int(np.prod(shape)) != n, span, passes)
    lw.stages.append(Stage("radixnet", net, shape, plan, axis=axis))
    lw.stages.append(Stage("sorted", out, shape, axis=axis))
    return func_lazy(out, node.shape, dt)


# Bits of the key each radix selection pass resolves, high first: up to 12
# in the first (4096 bins) for long rows, 8 (256) for rows of a few
# thousand, whose per-row work over the bins (their sums, the digit's
# search) would outweigh the passes; then about as many, at most 10. A
# wide first digit leaves few keys sharing the wanted value's bin, so the
# later passes' test of each key against the bits found (a branch per key
# and position) is rarely taken and well predicted. Medians of 7
# interleaved, float32, 2-core Zen 4 VM, 8-bit digits -> these:
# np.percentile(x, [10, 50, 90]) of 2**20 12.3 -> 3.5 ms (numpy 19.3),
# np.median 2.0 -> 1.6 (numpy 12.4); 12 bits throughout made np.median of
# (1000, 1000) along rows 4.8 -> 11.9 ms.
SELECT_MAX_BITS = 12
SELECT_REST_BITS = 10


def select_digits(width: int, n: int) -> list[int]:
    """The bits per pass for a key of ``width`` bits over rows of ``n``:
    [12, 10, 10] for 32 bits and n = 2**20, [8, 8, 8, 8] for n = 4096,
    [12, 9, 9, 9, 9, 8, 8] for 64 bits and n = 2**20."""
    first = max(8, min(SELECT_MAX_BITS, n.bit_length() - 6))
    rest = width - first
    passes = -(-rest // min(SELECT_REST_BITS, first))
    return [first] + [rest // passes + (k < rest % passes) for k in range(passes)]


def _key_digit(key, shift: int, bits: int):
    """(key >> shift) & (2**bits - 1) as an int32, bits <= 16, built from
    uint8 pieces: Halide bounds a uint8 (and a uint8 masked), so the
    histogram it indexes has a known size; through a mask, a clamp or
    unsafe_promise_clamped of the uint32 it found the index unbounded."""
    key = key if isinstance(key, hl.Expr) else hl.Expr(key)
    ut, u8 = key.type(), hl.UInt(8)

    def byte(at, keep):
        b = hl.cast(u8, key >> hl.cast(ut, at))
        return hl.cast(hl.Int(32), b if keep >= 8 else b & hl.cast(u8, (1 << keep) - 1))
    if bits <= 8:
        return byte(shift, bits)
    # the digit's top 8 bits whole, its low ones masked (the other way round
    # Halide's simplifier merged the two into one uint16, unbounded again)
    return byte(shift + bits - 8, 8) * (1 << (bits - 8)) + byte(shift, bits - 8)


def lower_select(lw: Lowerer, node: Node, operands) -> Lazy:
    """The values at positions ``kth`` of the sorted last axis, as numpy's
    partition finds them but by radix selection: an unsigned key per value
    whose order is the sort order (_radix_key, NaN last), then one pass per
    digit of 8-12 bits of the key (select_digits), high first. A pass
    counts, per position j, the keys that share the bits found so far into
    bins by their next digit (``selhist``, an update over the axis), sums
    the bins (``selcum``), and picks the bin that holds the wanted rank
    (``seldigit``); the rank goes
    on within that bin (``selrank``). After the last pass the bits found are
    the key of the value (``selected``). 3 passes over a float32 row, 7 over
    a float64 one (select_digits), each a read of the keys; a sort's network
    makes about log2(n)**2 / 2 passes. The first pass, which counts every
    key, is shared by all positions; a position right after a selected one
    comes from it in one vectorized count (``selpart``, ``selnext``)."""
    x = operands[0]
    kth, dt = tuple(node.params["kth"]), node.dtype
    n, m = x.shape[-1], len(kth)
    vs = lw.vars(len(x.shape))
    rows = tuple(reversed(vs[:-1]))  # Halide order, after the axis
    j = vs[-1]  # the position's index in the output, the axis' Var in the input
    v = x.at(vs)
    t = v.type()
    width = 64 if t.bits() == 64 else 32
    ut = hl.UInt(width)
    key = hl.Func(lw.fresh("selkey"))
    key[tuple(reversed(vs))] = _radix_key(v, dt, ut, False)
    lw.stages.append(Stage("selkey", key, tuple(x.shape)))
    ct = hl.Int(32) if n < 2**31 else hl.Int(64)
    # positions right after another one selected by the passes (a median's
    # two middles, a quantile's neighbours) follow from it in one count
    bases, derived, source = [], [], {}
    for k in sorted(set(kth)):
        if k - 1 in source and source[k - 1][0] == "base":
            source[k] = ("next", len(derived))
            derived.append(source[k - 1][1])
        else:
            source[k] = ("base", len(bases))
            bases.append(k)

    def by_index(var, values, typ):  # values[var] for a Var over len(values)
        e = hl.cast(typ, values[-1])
        for i in range(len(values) - 2, -1, -1):
            e = hl.select(hl.Expr(var) == i, hl.cast(typ, values[i]), e)
        return e
    # a second operand: each row's positions are its rank plus kth, clipped
    offset = hl.cast(ct, operands[1].at(list(vs[:-1]) + [hl.Expr(0)])) if len(operands) > 1 \
        else None

    def position(e):
        return e if offset is None else hl.clamp(e + offset, 0, n - 1)
    rank = position(by_index(j, bases, ct))
    prefix = None
    b = hl.Var("bin")
    at = (j,) + rows
    base_shape = tuple(x.shape[:-1]) + (len(bases),)
    shift = width
    for p, bits_p in enumerate(select_digits(width, n)):
        shift -= bits_p
        bins = 1 << bits_p
        r = hl.RDom([hl.Range(0, n)])
        kr = key[(r.x,) + rows]
        # the first pass counts every key, the same for every position: one
        # histogram for all of them
        hat = at if p else rows
        hist_kind, cum_kind = ("selhist", "selcum") if p else ("selhist0", "selcum0")
        hist = hl.Func(lw.fresh(hist_kind))
        hist[(b,) + hat] = hl.cast(ct, 0)
        if prefix is not None:
            r.where((kr >> hl.cast(ut, shift + bits_p)) == prefix)
        digit = _key_digit(kr, shift, bits_p)
        hist[(digit,) + hat] = hist[(digit,) + hat] + hl.cast(ct, 1)
        cum = hl.Func(lw.fresh(cum_kind))
        cum[(b,) + hat] = hist[(b,) + hat]
        rb = hl.RDom([hl.Range(1, bins - 1)])
        cum[(rb.x,) + hat] = cum[(rb.x - 1,) + hat] + hist[(rb.x,) + hat]
        rc = hl.RDom([hl.Range(0, bins)])
        # the bins wholly below the rank: the wanted value's digit
        pick = hl.Func(lw.fresh("seldigit"))
        pick[at] = hl.i32(0)
        pick[at] = pick[at] + hl.select(cum[(rc.x,) + hat] <= rank, 1, 0)
        d = pick[at]
        below = hl.select(d > 0, cum[(hl.clamp(d - 1, 0, bins - 1),) + hat], hl.cast(ct, 0))
        state = hl.Func(lw.fresh("selrank"))
        bits = hl.cast(ut, d)
        state[at] = hl.Tuple([bits if prefix is None else (prefix << hl.cast(ut, bits_p)) | bits,
                              rank - below])
        hist.bound(b, 0, bins)
        cum.bound(b, 0, bins)
        hist_shape = base_shape if p else tuple(x.shape[:-1])
        lw.stages.append(Stage(hist_kind, hist, hist_shape, r))
        lw.stages.append(Stage(cum_kind, cum, hist_shape, rb))
        lw.stages.append(Stage("seldigit", pick, base_shape, rc))
        lw.stages.append(Stage("selrank", state, base_shape))
        prefix, rank = hl.Expr(state[at][0]), hl.Expr(state[at][1])
    final = state
    following = None
    if derived:
        # For a base's key kb at position k, the key at k + 1 is kb again
        # when more than k + 1 keys are <= kb, else the least key above kb:
        # per-lane partial counts and minima over the row, vectorized.
        lanes = 16
        lane = hl.Var("lane")
        rl = hl.RDom([hl.Range(0, -(-n // lanes))])
        i = rl.x * lanes + lane
        kr = key[(hl.min(i, n - 1),) + rows]
        kb = hl.Expr(final[(by_index(j, derived, hl.Int(32)),) + rows][0])
        part = hl.Func(lw.fresh("selpart"))
        part[(lane,) + at] = hl.Tuple([hl.cast(ct, 0), ut.max()])
        old = part[(lane,) + at]
        inside = i < n
        part[(lane,) + at] = hl.Tuple([
            hl.Expr(old[0]) + hl.select(inside & (kr <= kb), hl.cast(ct, 1), hl.cast(ct, 0)),
            hl.select(inside & (kr > kb), hl.min(hl.Expr(old[1]), kr), hl.Expr(old[1]))])
        rs = hl.RDom([hl.Range(0, lanes)])
        count = hl.sum(hl.Expr(part[(rs.x,) + at][0]))
        least = hl.minimum(hl.Expr(part[(rs.x,) + at][1]))
        following = hl.Func(lw.fresh("selnext"))
        nxt = position(by_index(j, [bases[t] + 1 for t in derived], ct))
        following[at] = hl.select(count > nxt, kb, least)
        derived_shape = tuple(x.shape[:-1]) + (len(derived),)
        lw.stages.append(Stage("selpart", part, derived_shape, rl))
        lw.stages.append(Stage("selnext", following, derived_shape))
    found = None  # the key at each output position
    for pos in range(m - 1, -1, -1):
        kind, idx = source[kth[pos]]
        e = hl.Expr(final[(hl.Expr(idx),) + rows][0]) if kind == "base" else \
            hl.Expr(following[(hl.Expr(idx),) + rows])
        found = e if found is None else hl.select(hl.Expr(j) == pos, e, found)
    out = hl.Func(lw.fresh("selected"))
    out[at] = _radix_value(found, dt, t)
    lw.stages.append(Stage("selected", out, tuple(x.shape[:-1]) + (m,)))
    return func_lazy(out, node.shape, dt)


def lower_scatter(lw: Lowerer, node: Node, operands) -> Lazy:
    """A copy of the 1-D base, then one update over an RDom of the index's
    shape, in C order: ``out(index(r)) = value(r)``, or the ufunc of the
    element and the value computed in the ufunc's loop dtypes and cast
    back, as numpy's unbuffered ufunc.at (repeated indices apply one after
    another, the last assignment wins). The tracer checked the index range
    before the call; the clamp only keeps Halide's bounds inference finite.

    The positions (int32) and the values are Funcs of the index's shape,
    which the Scatter template computes ahead of the loop, vectorized along
    their last axis and in parallel, unless they are read from an input as
    they are, or the values are made of constants alone: those are inlined
    into the loop (the position Func is then no stage of its own)."""
    base, index, *values = operands
    dt, n, shape = node.dtype, node.shape[0], index.shape
    (x,) = lw.vars(1)
    f = hl.Func(lw.fresh("scatter"))
    f[x] = base.at([x])
    r = None
    if n and all(shape):
        vs = lw.vars(len(shape))
        pos = hl.Func(lw.fresh("scatter_index"))
        _define(pos, vs, hl.cast(hl.Int(32), hl.clamp(index.at(vs), 0, n - 1)))
        if node.inputs[1].op != "input":
            lw.stages.append(Stage("scatter_index", pos, shape))
        loads = []
        for v, vnode in zip(values, node.inputs[2:]):
            if vnode.op == "input" or lw.is_constant(vnode):
                loads.append(v)
                continue
            vf = hl.Func(lw.fresh("scatter_value"))
            _define(vf, vs, v.at(vs))
            lw.stages.append(Stage("scatter_value", vf, shape))
            loads.append(func_lazy(vf, shape, v.dtype))
        # C order: the RDom's first dimension (innermost) is numpy's last axis
        r = hl.RDom([hl.Range(0, d) for d in reversed(shape)] or [hl.Range(0, 1)])
        ridx = [hl.Expr(r[len(shape) - 1 - a]) for a in range(len(shape))]
        at = _ref(pos, ridx)
        name = node.params["ufunc"]
        if name is None:
            e = loads[0].at(ridx)
        else:
            *ins, res = (np.dtype(d) for d in node.params["loop"])
            args = [H.cast(hl.Expr(f[at]), dt, ins[0])] + [v.at(ridx) for v in loads]
            e = H.BINARY[name](*args) if len(args) == 2 else H.UNARY[name](*args)
            if e.type() != H.compute_type(res):
                e = hl.cast(H.compute_type(res), e)
            if res == np.float16:
                e = H.round_f16(e)
            e = H.cast(e, res, dt)
        f[at] = lw.strict(e)
    lw.stages.append(Stage("scatter", f, (n,), r, shape))
    return func_lazy(f, (n,), dt)


# -- movement -----------------------------------------------------------------------------
def _reshape_groups(src, dst):
    """Pair runs of non-unit dims with equal products: [(src axes, dst axes)].

    Size-1 axes are left out (their index is 0); shapes have no zero dims.
    """
    s_nz = [i for i, d in enumerate(src) if d != 1]
    d_nz = [j for j, d in enumerate(dst) if d != 1]
    groups, i, j = [], 0, 0
    while i < len(s_nz) and j < len(d_nz):
        si, dj = [s_nz[i]], [d_nz[j]]
        ps, pd = src[s_nz[i]], dst[d_nz[j]]
        i, j = i + 1, j + 1
        while ps != pd:
            if ps < pd:
                si.append(s_nz[i])
                ps *= src[s_nz[i]]
                i += 1
            else:
                dj.append(d_nz[j])
                pd *= dst[d_nz[j]]
                j += 1
        groups.append((si, dj))
    return groups


def lower_reshape(lw: Lowerer, node: Node, operands) -> Lazy:
    (x,) = operands
    src, dst = x.shape, node.shape
    groups = _reshape_groups(src, dst)

    def at(idx):
        out = [hl.Expr(0)] * len(src)
        for si, dj in groups:
            if len(si) == 1 and len(dj) == 1:
                out[si[0]] = idx[dj[0]]
                continue
            lin = idx[dj[0]]
            for j in dj[1:]:
                lin = lin * dst[j] + idx[j]
            for i in reversed(si[1:]):
                out[i] = lin % src[i]
                lin = lin / src[i]
            out[si[0]] = lin
        return x.at(out)
    return Lazy(dst, node.dtype, at)


def lower_transpose(lw, node, operands):
    (x,) = operands
    perm = node.params["perm"]

    def at(idx):
        src = [None] * len(perm)
        for out_axis, in_axis in enumerate(perm):
            src[in_axis] = idx[out_axis]
        return x.at(src)
    return Lazy(node.shape, node.dtype, at)


def lower_broadcast(lw, node, operands):
    (x,) = operands
    return Lazy(node.shape, node.dtype,
                lambda idx: keep_index(x.at(bcast_index(idx, x.shape)), idx, x.shape))


def keep_index(value, idx, shape):
    """``value`` still naming the index terms a broadcast drops (the new
    leading axes, the size-1 axes), in a select Halide's simplifier removes.
    Halide gives an update a reduction domain only when its definition names
    one of the domain's variables: a sum over an axis that a broadcast made
    (``np.broadcast_to(v, (3, 4)).sum(axis=0)``, ``np.tile``, ``np.repeat``)
    otherwise lost its loop and added each value once."""
    dropped = idx[:len(idx) - len(shape)] + [
        e for e, d in zip(idx[len(idx) - len(shape):], shape) if d == 1]
    dropped = [e if isinstance(e, hl.Expr) else hl.Expr(e) for e in dropped
               if not isinstance(e, (int, np.integer))]
    if not dropped:
        return value
    named = dropped[0] == dropped[0]
    for e in dropped[1:]:
        named = named & (e == e)
    return hl.select(named, value, value)


def lower_slice(lw, node, operands):
    (x,) = operands
    starts, steps = node.params["starts"], node.params["steps"]

    def at(idx):
        return x.at([e * step + start if (step, start) != (1, 0) else e
                     for e, start, step in zip(idx, starts, steps)])
    return Lazy(node.shape, node.dtype, at)


def lower_concatenate(lw, node, operands):
    axis = node.params["axis"]
    offsets = np.cumsum([0] + [x.shape[axis] for x in operands]).tolist()

    def at(idx):
        i = idx[axis]
        result = None
        for k in reversed(range(len(operands))):
            x = operands[k]
            local = list(idx)
            local[axis] = hl.clamp(i - offsets[k], 0, x.shape[axis] - 1)  # keep reads in bounds
            e = x.at(local)
            result = e if result is None else hl.select(i < offsets[k + 1], e, result)
        return result
    return Lazy(node.shape, node.dtype, at)


def _pad_index(i, n, lo, mode):
    # The clamps are no-ops at run time; they tell bounds inference the
    # reads stay inside the input (it cannot see through select).
    return hl.clamp(_pad_source(i, n, lo, mode), 0, n - 1)


def _pad_source(i, n, lo, mode):
    j = i - lo
    if mode in ("constant", "edge"):
        return hl.clamp(j, 0, n - 1)
    if mode == "wrap":
        return j % n  # Euclidean: always in [0, n)
    if mode == "reflect":
        if n == 1:
            return hl.Expr(0)
        period = 2 * (n - 1)
        k = j % period
        return hl.select(k >= n, period - k, k)
    period = 2 * n  # symmetric
    k = j % period
    return hl.select(k >= n, period - 1 - k, k)


def _pad_at(node, x, idx, last_src=None):
    """The padded value at ``idx``; ``last_src``: the source index along the
    last axis where it is known to lie inside the input (the middle piece
    of concat_pieces), which then takes no clamp or select there."""
    widths, mode = node.params["pad_width"], node.params["mode"]
    src = [_pad_index(e, n, lo, mode) for e, n, (lo, _) in zip(idx, x.shape, widths)]
    free = zip(idx, x.shape, widths)
    if last_src is not None:
        src[-1] = last_src
        free = list(free)[:-1]
    v = x.at(src)
    if mode != "constant":
        return v
    inside = None
    for e, n, (lo, _) in free:
        c = (e >= lo) & (e < lo + n)
        inside = c if inside is None else inside & c
    return v if inside is None else hl.select(inside, v, H.literal(node.params["value"], node.dtype))


def lower_pad(lw, node, operands):
    (x,) = operands
    return Lazy(node.shape, node.dtype, lambda idx: _pad_at(node, x, idx))


def concat_pieces(lw, node):
    """A concatenation or pad along the last axis (the Concat template's
    output) as pieces: [(start, extent, value)] where value(outer, r) is
    the output at outer index ``outer`` (numpy order, the last axis left
    out) and last index ``start + r``, 0 <= r < extent, without the select
    and clamps that choose the piece (so a piece's loads are plain vector
    loads where its source is contiguous). Pieces of extent 0 are left out."""
    operands = [lw.env[i] for i in node.inputs]
    if node.op == "concatenate":
        pieces, start = [], 0
        for x in operands:
            n = x.shape[-1]
            pieces.append((start, n, lambda outer, r, x=x: x.at(outer + [r])))
            start += n
    else:
        (x,) = operands
        lo, hi = node.params["pad_width"][-1]
        n = x.shape[-1]
        border = lambda off: lambda outer, r: _pad_at(node, x, outer + [r + off])  # noqa: E731
        pieces = [(0, lo, border(0)),
                  (lo, n, lambda outer, r: _pad_at(node, x, outer + [r + lo], last_src=r)),
                  (lo + n, hi, border(lo + n))]
    return [p for p in pieces if p[1] > 0]


def _take_position(e, n: int, mode: str):
    """An index Expr as an in-bounds int32 position along an axis of n.
    Under "raise" the tracer has checked the range; the clamps only tell
    bounds inference that the reads stay inside the axis. The clamping
    happens in a signed type: Halide 21's bounds inference gives up on a
    clamped value cast from an unsigned type ("Buffer in0 may be accessed
    in an unbounded way"), so wide unsigned indices are reinterpreted:
    uint64 as int64 from the start, as numpy converts indices to intp;
    uint32 after its modulo, its values past int32 (negative now) clipping
    to the end. (A uint64 modulo also hung Halide's compile.)"""
    t = e.type()
    if t.bits() < 32:  # n may not fit the index type
        e, t = hl.cast(hl.Int(32), e), hl.Int(32)
    elif t.is_uint() and t.bits() == 64:
        e, t = hl.reinterpret(hl.Int(64), e), hl.Int(64)
    if mode == "wrap":
        e = e % hl.cast(t, n)  # Euclidean for signed integers: always in [0, n)
    wide_unsigned = t.is_uint()
    if wide_unsigned:
        t = hl.Int(t.bits())
        e = hl.reinterpret(t, e)
    if mode == "raise" and not wide_unsigned:
        e = hl.select(e < 0, e + hl.cast(t, n), e)
    elif mode == "clip" and wide_unsigned:
        e = hl.select(e < 0, hl.cast(t, n - 1), e)
    e = hl.cast(hl.Int(32), hl.clamp(e, hl.cast(t, 0), hl.cast(t, n - 1)))
    return hl.clamp(e, 0, n - 1)


def lower_take(lw, node, operands):
    x, index = operands
    axis, mode, along = node.params["axis"], node.params["mode"], node.params["along"]
    n, k = x.shape[axis], len(index.shape)

    def at(idx):
        if along:
            pos = _take_position(index.at(bcast_index(idx, index.shape)), n, mode)
            src = bcast_index(idx, x.shape)
            src[axis] = pos
            return x.at(src)
        pos = _take_position(index.at(idx[axis:axis + k]), n, mode)
        return x.at(idx[:axis] + [pos] + idx[axis + k:])
    return Lazy(node.shape, node.dtype, at)


# -- linear algebra -------------------------------------------------------------------------
def lower_matmul(lw, node, operands):
    a, b = operands
    dt = node.dtype
    if lw.matmul_block and len(a.shape) == node.aval.ndim >= 2 \
            and len(b.shape) in (2, node.aval.ndim) and dt.kind == "f" and dt.itemsize >= 4:
        return lower_matmul_blocked(lw, node, a, b, lw.matmul_block)
    k = a.shape[-1]
    out_vars = lw.vars(node.aval.ndim)
    batch, m, n = out_vars[:-2], out_vars[-2], out_vars[-1]
    f = hl.Func(lw.fresh("matmul"))
    r = hl.RDom([hl.Range(0, k)])
    ct = H.compute_type(dt)
    a_idx = bcast_index(batch, a.shape[:-2]) + [m, r.x]
    b_idx = bcast_index(batch, b.shape[:-2]) + [r.x, n]
    prod = H.BINARY["multiply"](a.at(a_idx), b.at(b_idx))
    if dt.kind == "b":
        _define(f, out_vars, H.literal(False, dt))
        _define(f, out_vars, _ref(f, out_vars) | prod)
    else:
        _define(f, out_vars, hl.cast(ct, 0))
        _define(f, out_vars, H.BINARY["add"](_ref(f, out_vars), H.opaque(prod)))
    convert = H.round_f16 if dt == np.float16 else None
    lw.stages.append(Stage("matmul", f, node.shape, r, a.shape))
    return func_lazy(f, node.shape, dt, convert=convert)


def reads_transposed(node) -> bool:
    """Whether ``node`` (a matmul's A) reads a transpose that moves its
    source's last axis, directly or through elementwise ops and reshapes
    that only split the last axis (``z.T @ z``, its K chunks)."""
    def through(n):
        if n.op == "transpose":
            return n.params["perm"][-1] == len(n.params["perm"]) - 1
        if n.op == "reshape":
            src = n.inputs[0].shape
            return bool(src and n.shape) and src[-1] % max(1, n.shape[-1]) == 0
        return inlines(n)
    return any(f.op == "transpose" for f in frontier(node, through))


def _store_rows(lw, a, lead, index, shape):
    """A matmul's A stored row-major (Stage "arows" of ``shape``, its rows
    ``lead`` Vars, read from ``a`` at ``index`` + k), computed once per
    call and scheduled as a tiled transpose by the template: the register
    blocks then read A along its rows, not one cache line per k (8 KiB
    apart for K = 2048: no prefetcher follows). ``a.T @ b``, float32,
    medians of 7, 2-core AVX-512 VM, before -> after (numpy): 2048^3 161 ->
    60 ms (53), (512, 1024) @ (1024, 4096) 35.7 -> 16.3 (14.8)."""
    kk = hl.Var("k")
    f = hl.Func(lw.fresh("arows"))
    f[[kk] + lead[::-1]] = lw.strict(a.at(index + [kk]))
    lw.stages.append(Stage("arows", f, shape))
    return func_lazy(f, shape, a.dtype)


def lower_matmul_blocked(lw, node, a, b, block):
    """C = A @ B for the Matmul template: B packed into column blocks
    ``bpack[j, k, jb] = B[k, jb*block + j]`` (contiguous rows of ``block``
    lanes; the last block is padded by clamping), and C computed per block,
    ``cblock[j, i, jb] = sum_k A[i, k] * bpack[j, k, jb]``. A batched A
    (..., M, K) with a 2-D B is one matrix of prod(...) * M rows; with a
    batched B (..., K, N) both Funcs take the batch indices as their last
    arguments (Halide order), each operand's size-1 batch axes broadcast.

    The accumulation is the only unstrict float arithmetic of the group
    (``Lowerer.strict_wrap``): it contracts to FMA, and its summation order
    already differs from numpy's BLAS."""
    *batch, m, k = a.shape
    n = b.shape[-1]
    j, i, kk, jb = hl.Var("j"), hl.Var("i"), hl.Var("k"), hl.Var("jb")
    pack = hl.Func(lw.fresh("bpack"))
    c = hl.Func(lw.fresh("matmul"))
    r = hl.RDom([hl.Range(0, k)])
    ct = H.compute_type(node.dtype)
    col = hl.min(jb * block + j, n - 1)
    transposed = reads_transposed(node.inputs[0])
    if len(b.shape) == 2:
        rows = int(np.prod(batch, dtype=np.int64)) * m

        def a_index(i):  # row i of the flattened A -> (batch..., m) indices
            idx = [i % m if batch else i]
            rest = i / m
            for d in reversed(batch):
                idx.insert(0, rest % d)
                rest = rest / d
            return idx
        bv = []
        pack[j, kk, jb] = lw.strict(b.at([kk, col]))
        if transposed:
            a = _store_rows(lw, a, [i], a_index(i), (rows, k))
            a_at = a.at([i, r.x])
        else:
            a_at = a.at(a_index(i) + [r.x])
        shapes = (-(-n // block), k, block), (rows, n)
    else:
        out_batch = node.shape[:-2]
        bv = [hl.Var(f"b{d}") for d in range(len(out_batch))]  # numpy order
        pack[[j, kk, jb] + bv[::-1]] = lw.strict(
            b.at(bcast_index(bv, b.shape[:-2]) + [kk, col]))
        if transposed:
            av = [hl.Var(f"a{d}") for d in range(len(a.shape) - 2)]
            a = _store_rows(lw, a, av + [i], av + [i], a.shape)
        a_at = a.at(bcast_index(bv, a.shape[:-2]) + [i, r.x])
        shapes = (*out_batch, -(-n // block), k, block), (*out_batch, m, n)
    cargs = [j, i, jb] + bv[::-1]
    c[cargs] = hl.cast(ct, 0)
    c[cargs] = c[cargs] + H.opaque(lw.strict(a_at) * pack[[j, r.x, jb] + bv[::-1]])
    lw.stages.append(Stage("pack", pack, shapes[0]))
    lw.stages.append(Stage("matmul", c, shapes[1], r, (*shapes[1][:-1], k)))

    def at(idx):
        *bidx, row, x = idx
        if bv:  # batched B: C keeps the batch axes
            return plus_zero(c[[x % block, row, x // block] + bidx[::-1]])
        stride = m  # back to the flattened row
        for d, e in zip(reversed(batch), reversed(bidx)):
            row = row + e * stride
            stride *= d
        return plus_zero(c[x % block, row, x // block])

    def plus_zero(v):
        # a sum from +0.0 is never -0.0 (numpy's), but the unstrict
        # accumulation may fold 0 + p to p: for K = 1 a product of -0.0 came
        # out -0.0. A strict + 0.0 turns -0.0 into +0.0 and keeps the rest.
        return lw.strict(hl.Expr(v) + hl.cast(ct, 0))
    return Lazy(node.shape, node.dtype, at, c)


LOWER = {
    "sum": lower_reduce, "prod": lower_reduce, "max": lower_reduce, "min": lower_reduce,
    "nanmax": lower_reduce, "nanmin": lower_reduce, "any": lower_reduce, "all": lower_reduce,
    "argmax": lambda lw, node, operands: (lower_argreduce if lw.gpu else lower_reduce)(
        lw, node, operands),
    "argmin": lambda lw, node, operands: (lower_argreduce if lw.gpu else lower_reduce)(
        lw, node, operands),
    **{name: lower_scan for name in SCAN_COMBINE}, "sort": lower_sort,
    "argsort": lower_sort, "select": lower_select, "scatter": lower_scatter,
    "reshape": lower_reshape, "transpose": lower_transpose, "broadcast_to": lower_broadcast,
    "slice": lower_slice, "concatenate": lower_concatenate, "pad": lower_pad,
    "take": lower_take, "matmul": lower_matmul,
}


@dataclass
class LoweredGroup:
    pipeline: hl.Pipeline
    params: list
    outputs: list
    stages: list
    graph: Graph
    target: object = None  # the target to compile for when not the requested one
    # input index -> bytes ahead to prefetch, set by a schedule template
    # (streaming.add_prefetch; kept only for streaming.prefetch_inputs)
    prefetch: dict = field(default_factory=dict)
    # Lowerer.trig_ok's checks, all true (an hl.Expr), or None: the schedule
    # specializes the output on it (apply_elementwise)
    trig_ok: object = None
    # (RDom, extent) of the output's pieces when the Concat template
    # schedules the group (Lowerer.pieces), in update order
    piece_rdoms: list = field(default_factory=list)
    # the RDom of the output's one update when its rows are shifted to
    # 16-byte boundaries (Lowerer.shift_rows), else None
    shifted: object = None


def partial_lanes(target) -> int:
    """How many per-lane partials a reduction over the last axis keeps: one
    native float32 vector of the CPU target (16 on AVX-512, 8 on AVX2, 4 on
    SSE/NEON), GPU_ROW_LANES for GPU targets (a thread per lane), LANES
    when none is given.

    Sixteen lanes on an AVX2 target are two registers per row, and LLVM
    lowers the NaN-aware max's 16-lane masks through byte packing (21
    instructions per two vectors instead of 5 per vector); the float64 sums
    of float32 take four registers per row. 2-core AVX2 VM (AMD EPYC),
    float32, min of 11 interleaved runs, 16 -> 8 lanes: row sum (4096,
    4096) 2.41 -> 1.62 ms; softmax (256, 1024), in cache, 0.128 -> 0.119."""
    if target is not None and target.has_gpu_feature():
        return GPU_ROW_LANES
    return native_lanes(target, LANES)


def _fast_trig_op(node: Node) -> bool:
    """A sin, cos or tan of a float type (float16 computes in float32)."""
    return node.op in M.FAST_TRIG and node.dtype in (np.float16, np.float32, np.float64)


def _cone(node: Node) -> int:
    """How many ops compute ``node`` from the group's inputs and constants."""
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n in seen or n.op in ("input", "constant"):
            continue
        seen.add(n)
        todo.extend(n.inputs)
    return len(seen)


def _fast_trig(graph: Graph, spec, gpu: bool, fast_math: bool) -> bool:
    """Whether sin, cos and tan take the checked fast path
    (Lowerer.trig_ok): on CPU targets, in groups the Elementwise, Concat,
    RowReduce, ColReduce or FullReduce template schedules (each specializes
    the stages it computes on the check), in strict_float kernels only (FAST_TRIG is
    not wrapped in it) and outside fast-math mode (which has its own)."""
    if gpu or fast_math or spec is None or not get_config().strict_float:
        return False
    trig = [n for n in graph.nodes if _fast_trig_op(n)]
    if not trig or any(_cone(n.inputs[0]) > TRIG_CHECK_CONE_MAX for n in trig):
        return False
    from ..schedules.autoschedule import autoschedules
    if autoschedules(spec):
        return True  # checked after lowering (lower_group)
    from ..schedules.templates import _APPLY
    # templates that schedule the check and specialize on it
    # (templates.trig_fast_paths; Elementwise and Concat their one output)
    if spec.name not in ("Elementwise", "Concat", "RowReduce", "ColReduce", "FullReduce"):
        return False
    return _APPLY[spec.name][0](graph)


def lower_group(graph: Graph, name: str, spec=None, target=None,
                fast_math: bool = False, streamed=()) -> LoweredGroup:
    """The group's algorithm. ``spec`` (a ScheduleSpec) and ``target`` (the
    kernel's hl.Target) decide the lowering of the templates that need
    their own (Matmul packs B and its kernel drops strict_float for FMA,
    see ``LoweredGroup.target``; ColReduce, Concat, RowArg); ``streamed``
    (indices of the outputs written with streaming stores) that of the
    Stencil template's output (Lowerer.shift_rows)."""
    block, wrap, col_chunks = None, False, None
    if spec is not None and spec.name == "ColReduce":
        from ..schedules.col_reduce import col_chunks_of, col_reduce_fits
        if col_reduce_fits(graph):
            col_chunks = col_chunks_of(dict(spec.params))
    if spec is not None and spec.name == "Matmul":
        from ..schedules.templates import matmul_fits, matmul_block
        if matmul_fits(graph):
            mm = next(n for n in graph.nodes if n.op == "matmul")
            block = matmul_block(dict(spec.params), mm.dtype.itemsize, native_lanes(target, 16))
            wrap = target is not None and target.has_feature(hl.TargetFeature.StrictFloat)
    lanes = partial_lanes(target)
    if spec is not None and spec.name == "RowArg":
        from ..schedules.row_arg import arg_unroll, row_arg_fits
        if row_arg_fits(graph):  # independent accumulator vectors per row
            lanes *= arg_unroll(dict(spec.params))
    from ..schedules.autoschedule import autoschedules
    guard = autoschedules(spec) and any(
        n.op in PART_READS and any(i.op != "input" for i in n.inputs) for n in graph.nodes)
    gpu = target is not None and target.has_gpu_feature()
    fast_trig = _fast_trig(graph, spec, gpu, fast_math)
    pieces, shift = False, None
    if spec is not None and spec.name == "Concat":
        from ..schedules.concat import concat_fits
        pieces = concat_fits(graph)
    if 0 in streamed:
        shift = shifted_rows(graph, spec)

    radix, sort_chunks = "auto", 0
    if spec is not None and spec.name == "Sort":
        from ..schedules.sort import radix_params
        radix, sort_chunks = radix_params(dict(spec.params))

    share = False
    if spec is not None and spec.name == "Elementwise" and not gpu:
        from ..schedules.templates import stacked_columns
        share = not stacked_columns(graph.outputs[0])  # columns keep Funcs to checkpoint

    def lower(fast_trig):
        lw = Lowerer(graph, name, block, wrap, fast_math, col_chunks, lanes, gpu=gpu,
                     guard_inputs=guard, fast_trig=fast_trig, pieces=pieces, shift_rows=shift,
                     share_exprs=share, sort_radix=radix, sort_chunks=sort_chunks)
        return lw, lw.lower()
    lw, (pipeline, params, outputs) = lower(fast_trig)
    if fast_trig and autoschedules(spec) and any(
            st.kind not in TRIG_CHECK_KINDS for st in lw.stages):
        # an autoscheduler may compute a stage holding the fast/exact select
        # at the root, outside the outputs' specialization: both paths would
        # run, so such groups keep the exact one alone
        lw, (pipeline, params, outputs) = lower(False)
    lowered = LoweredGroup(pipeline, params, outputs, lw.stages, graph,
                           piece_rdoms=lw.piece_rdoms, shifted=lw.shifted)
    for ok in lw.trig_checks.values():
        lowered.trig_ok = ok if lowered.trig_ok is None else lowered.trig_ok & ok
    if wrap:
        lowered.target = target.without_feature(hl.TargetFeature.StrictFloat)
    return lowered
