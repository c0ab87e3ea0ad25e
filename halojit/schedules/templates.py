"""Hand schedule templates, applied to a lowered group instead of an
autoscheduler when they fit (``applicable``) and win by measurement.

Each template returns the schedule it applied as text (the group's
``.schedule`` in introspection). Times are medians of 11 warm runs, 2-core
x86-64 (AVX-512) CI machine, float32, strict_float, fresh outputs.
"""

from __future__ import annotations

import math
import os

import halide as hl

from ..errors import HalojitError
from ..graph.passes.flatten import merge_trailing
from ..graph.passes.matmul import FEW_ROWS, MAX_CHUNK_BYTES
from ..graph.ops.reduce import SCANS, SCATTERS, SORTING
from .col_reduce import COL_REDUCE, apply_col_reduce, col_reduce_fits
from .concat import CONCAT, apply_concat, concat_fits, unit_reshape
from .full_reduce import FULL_REDUCE, apply_full_reduce, full_reduce_fits
from .row_arg import ROW_ARG, apply_row_arg, row_arg_fits
from .scatter import SCATTER, apply_scatter, scatter_fits
from .select import SELECT, apply_select, select_fits
from .sort import SORT, apply_sort, sort_fits
from .transpose import TRANSPOSE, apply_transpose, tile_blocks, transpose_fits

# name -> (defaults, doc)
TEMPLATES = {
    "RowReduce": ({"vector": "16", "rows_per_task": "32", "block": "4", "inline": "1",
                   "prefetch": "16"},
                  "reductions over the last axis: parallel tasks of rows_per_task rows in "
                  "blocks of block rows; a block's reductions and shared intermediates "
                  "computed at the block, vectorized, the block's rows unrolled; "
                  "inline=1 recomputes cheap shared values (x - mean) where read; a large "
                  "input prefetched whole blocks and at least prefetch KiB ahead (0: none)"),
    "Matmul": ({"tile_m": "8", "tile_n": "64", "vector": "16", "unroll_k": "1", "few": "1"},
               "GEMM: parallel panels of tile_n columns with B packed per panel, "
               "tile_m x 2-vector FMA accumulator blocks in registers, epilogue per block; "
               "few=1: at most KSPLIT_ROWS rows read B in place, a panel of column blocks "
               "per task with every accumulator in registers; few=2: K split per task "
               "instead (rfactor), whole B rows streamed; few=0: packed as larger ones"),
    "Stencil": ({"rows": "32", "tile_x": "0", "vector": "32", "sliding": "1", "prefetch": "16"},
                "2-D stencils (a value read through shifted slices): parallel strips of "
                "rows (x tiles of tile_x columns, 0 = the whole width), intermediate "
                "stages computed per output row and kept as a sliding window over the "
                "strip (sliding=1) or per strip (sliding=0); a large input prefetched whole "
                "rows and at least prefetch KiB ahead (0: none)"),
    "Elementwise": ({"vector": "64", "task_kib": "1024", "parallel": "1"},
                    "elementwise groups: parallel tasks of about task_kib KiB of output "
                    "(one serial task with parallel=0), rows vectorized vector lanes wide "
                    "(several native vectors per iteration: loads issued ahead of long "
                    "math chains); last axes shorter than 16 fused with the ones before"),
    "FullReduce": FULL_REDUCE,
    "ColReduce": COL_REDUCE,
    "RowArg": ROW_ARG,
    "Transpose": TRANSPOSE,
    "Concat": CONCAT,
    "Sort": SORT,
    "Select": SELECT,
    "Scatter": SCATTER,
}


REDUCTIONS = ("sum", "prod", "max", "min", "nanmax", "nanmin", "any", "all", "argmax", "argmin")


def row_reduce_fits(graph) -> bool:
    """One output of full rows (ndim >= 2, last axis > 1), no matmul, and
    every reduction over the last axis only: softmax, layernorm, ...

    Row sums (1-D outputs) stay with Adams2019: under strict_float Halide
    cannot prove float adds associative, so atomic() vectorization of the
    reduction silently degrades to a serial loop (27 ms vs 4.7 ms on a
    4096x4096 row sum, measured)."""
    if len(graph.outputs) != 1:
        return False
    out = graph.outputs[0].aval
    if out.ndim < 2 or out.shape[-1] <= 1:
        return False
    found = False
    for node in graph.nodes:
        if node.op == "matmul" or node.op in SCANS or node.op in SORTING or node.op in SCATTERS:
            return False
        if node.op in REDUCTIONS:
            found = True
            x = node.inputs[0].aval
            if node.params["axes"] != (x.ndim - 1,):
                return False
            # the output's rows are the reduced rows (a (64, 256) mean of
            # (64, 256, 1024) rows is a row sum: its vectors would run across
            # rows, 5.7 ms where Adams2019 takes 1.3)
            if x.ndim != out.ndim or x.shape[-1] != out.shape[-1]:
                return False
    return found


def _slice_counts(graph) -> dict:
    """value -> how many slices read it at an offset: a slice that picks one
    index of a longer axis (``x[:, 1:2]``, a short matmul's columns after
    passes/matmul.py) is a gather of that plane, not a shifted window; (2**20,
    3) @ (3, 3) float32 expanded ran 1.83 ms under the Stencil template and
    0.46 under Elementwise (2-core AVX-512 VM, best of 21)."""
    count: dict = {}
    for n in graph.nodes:
        if n.op == "slice" and not any(e == 1 < d for e, d in zip(n.shape, n.inputs[0].shape)):
            count[n.inputs[0]] = count.get(n.inputs[0], 0) + 1
    return count


def sliced_reads(graph) -> int:
    """The most slices any one value is read through (a stencil reads its
    input at two or more offsets)."""
    return max(_slice_counts(graph).values(), default=0)


def stencil_chain(graph) -> bool:
    """Whether a stencil group chains stencils: two or more computed values
    read through shifted slices (a time-stepped update), or a np.pad between
    them. Halide's sliding window and storage folding do not survive such
    chains (the pad's clamped reads hide the footprint), so each stage would
    be stored per strip in full, recomputed per row three times over."""
    stencils = sum(k >= 2 and v.op != "input" for v, k in _slice_counts(graph).items())
    return stencils >= 2 or any(n.op == "pad" for n in graph.nodes)


def stencil_fits(graph) -> bool:
    """One 2-D output (both axes > 1) of a group that reads a value through
    two or more slices and has no reduction or matmul: blurs, finite
    differences, box filters written with numpy slicing."""
    if len(graph.outputs) != 1:
        return False
    out = graph.outputs[0].aval
    if out.ndim != 2 or min(out.shape) <= 1:
        return False
    if any(n.op == "matmul" or n.op in SCANS or n.op in SORTING or n.op in SCATTERS
           or n.op in REDUCTIONS
           for n in graph.nodes):
        return False
    return sliced_reads(graph) >= 2


def elementwise_fits(graph) -> bool:
    """One output whose last axis is at least 16 wide, or becomes so fused
    with the axes before it (``flat_axes``), computed only by elementwise
    ops and broadcasts (no reduction, matmul, movement that reorders or
    slices, or integer power, whose lowering is a stage with an update;
    with a short last axis slices, reshapes and concatenations too, see
    SHORT_AXIS_VIEWS): every value inlines into the output. Gathers
    (``take``: ``W[ids]``, ``x[:, perm]``) inline too, their index read in
    order: an embedding lookup of 4096 rows of (50000, 256) float32 took
    0.46 ms under Adams2019 (columns outermost), 0.25 here (numpy 0.43)."""
    from ..graph.ops import inlines
    if len(graph.outputs) != 1:
        return False
    out = graph.outputs[0].aval
    k, width = flat_axes(out.shape) if out.ndim else (1, 0)
    if width < 16 and out.size >= 16:
        return False  # (fewer than 16 values in all: one scalar loop, see apply_elementwise)
    short = k > 1
    stacked = stacked_columns(graph.outputs[0])
    return all(n.op in ("input", "constant", "take") or inlines(n)
               or (short and n.op in SHORT_AXIS_VIEWS) or channel_pick(n)
               or (out.ndim == 1 and shifted_window(n))
               or (stacked and (n is graph.outputs[0] or unit_reshape(n)))
               for n in graph.nodes)


def shifted_window(node) -> bool:
    """A 1-D slice with step 1 (``x[2:]``, ``x[1:-1]``): inlined, a read at
    a fixed offset, dense vectors. 1-D stencils (np.diff, np.gradient's
    interior, moving sums written with slices) fit the Elementwise template
    with them; 2-D ones take Stencil."""
    return node.op == "slice" and node.aval.ndim == 1 and tuple(node.params["steps"]) == (1,)


# ``a[..., i, j]`` of matrices of at most this many elements is a channel pick
# too: the elements of batched 2x2 to 4x4 matrices (np.linalg.det's cofactor
# and LU steps, a hand-written 3x3 determinant) read with a constant stride.
SHORT_MATRIX = 16


def channel_pick(node) -> bool:
    """``x[..., j]``: a slice of one index of a short last axis (at most
    passes.matmul.SHORT_CHANNELS long: an image's channels, a point's
    coordinates, the columns of ``X @ v`` in numpy_api._vector_product),
    ``a[..., i, j]``: one element of each matrix of a stack of matrices of
    at most SHORT_MATRIX elements, or the reshape that drops their size-1
    axes. Inlined, it is a strided read
    of x in the output's order, vector loads and shuffles where x is dense
    (_picked_condition)."""
    from ..graph.passes.matmul import SHORT_CHANNELS
    if node.op == "reshape":
        src = node.inputs[0]
        return src.op == "slice" and channel_pick(src) and \
            [d for d in node.shape if d != 1] == [d for d in src.shape if d != 1]
    if node.op != "slice":
        return False
    x = node.inputs[0].shape
    if len(x) >= 2 and node.shape[-2:] == (1, 1) and 1 < x[-1] * x[-2] <= SHORT_MATRIX:
        # ``a[..., i, j]``: an element of a small matrix per batch entry
        return node.shape[:-2] == x[:-2] and all(s == 0 for s in node.params["starts"][:-2])
    return bool(x) and node.shape[:-1] == x[:-1] and node.shape[-1] == 1 < x[-1] <= SHORT_CHANNELS \
        and all(s == 0 for s in node.params["starts"][:-1])


# Movement whose lowering is index arithmetic (a select for concatenate),
# inlined by the Elementwise template where the output's last axis is short:
# a flip ``x[:, ::-1]``, a channel swap ``x[..., ::-1]``, ``alpha[..., None]``
# (a reshape), ``np.stack([r, g, b], axis=-1)``. Adams2019 took 96 ms for
# ``x[:, ::-1].astype(np.float32)`` of a (1080, 1920, 3) uint8 image and
# 352 ms for an alpha blend ``a * al[..., None] + b * (1 - al[..., None])``,
# this 1.6 and 0.95 (numpy 8-14 and 23; one core, ad-hoc timing). With wide
# rows Adams2019 stays: it kept reversed and strided reads ahead (x[::-1] *
# 2 of 4M float32, 1.0 against 2.6 ms), and stencils (a value read through
# shifted slices) have their own template, chosen first.
SHORT_AXIS_VIEWS = ("slice", "reshape", "concatenate")


# the last axes of an elementwise output are fused until this wide
FLAT_WIDTH = 256


def flat_axes(shape) -> tuple[int, int]:
    """(k, width): the Elementwise template loops over the last ``k`` axes
    of ``shape`` as one of ``width`` elements. k is 1 unless the last axis
    is shorter than 16: an HWC image's 3 channels, a batch of (..., 2)
    points. Then the trailing axes are fused until FLAT_WIDTH wide."""
    if not shape or shape[-1] >= 16:
        return 1, shape[-1] if shape else 1
    return merge_trailing(shape, FLAT_WIDTH)


def _vectorize(f, var, factor: int):
    """``f.vectorize(var, factor, GuardWithIf)`` through an explicit split:
    the Python binding's three-argument vectorize names the inner Var like
    the outer one and Halide refuses the split ("can't split v0 into v0 and
    v0") in some schedules."""
    inner = hl.Var(f"{var.name()}_vi")
    f.split(var, var, inner, factor, hl.TailStrategy.GuardWithIf).vectorize(inner)


def fuse_loops(f, var, others, prefix: str):
    """``var``'s loop fused with each of ``others`` (Halide order: inner
    first) in turn; the fused Var (``var`` itself when there are none)."""
    for k, v in enumerate(others):
        fused = hl.Var(f"{prefix}{k}")
        f.fuse(var, v, fused)
        var = fused
    return var


# elements per parallel task of schedule_rows, at least
ROW_TASK_ELEMENTS = 1 << 16


def schedule_rows(f, size: int, last: int, vector: int, parallel: bool) -> str:
    """``f`` vectorized along its last numpy axis and, when it holds at least
    two tasks' worth of elements, parallel over chunks of rows (or of a 1-D
    axis)."""
    args = f.args()  # Halide order: args[0] is numpy's last axis
    if not args:
        return f"{f.name()}: scalar"
    x = args[0]
    parts = []
    if parallel and size >= 2 * ROW_TASK_ELEMENTS:
        if len(args) > 1:
            row = fuse_loops(f, args[1], list(args[2:]), "row")
            rows = max(1, ROW_TASK_ELEMENTS // max(1, last))
            ro, ri = hl.Var("ro"), hl.Var("ri")
            f.split(row, ro, ri, rows, hl.TailStrategy.GuardWithIf).parallel(ro)
            parts.append(f".split(row, ro, ri, {rows}).parallel(ro)")
        else:
            xo, xi = hl.Var("xo"), hl.Var("xi")
            f.split(x, xo, xi, ROW_TASK_ELEMENTS, hl.TailStrategy.GuardWithIf).parallel(xo)
            parts.append(f".split({x.name()}, xo, xi, {ROW_TASK_ELEMENTS}).parallel(xo)")
            x = xi
    if last >= vector:
        _vectorize(f, x, vector)
        parts.append(f".vectorize({x.name()}, {vector})")
    return f.name() + "".join(parts)


def _int(params, key):
    try:
        v = int(params[key])
    except (KeyError, ValueError):
        raise HalojitError(f"template parameter {key}={params.get(key)!r}: expected an integer.")
    if v < 1:
        raise HalojitError(f"template parameter {key}={v}: expected >= 1.")
    return v


def set_prefetch(lowered, params, rows: int) -> str:
    """Ask for software prefetches (streaming.add_prefetch) of every input
    with rows (2-D and up), whole groups of ``rows`` of its rows and at
    least ``params["prefetch"]`` KiB ahead (0: none); they are kept only
    for inputs too large for the L3 (streaming.prefetch_inputs). Returns
    the schedule line that says so, or ""."""
    if str(params.get("prefetch", "0")) == "0":
        return ""
    kib = _int(params, "prefetch")
    for k, node in enumerate(lowered.graph.inputs):
        if len(node.shape) >= 2 and node.shape[-1]:
            step = rows * node.shape[-1] * node.dtype.itemsize
            lowered.prefetch[k] = -(-kib * 1024 // step) * step
    return f"prefetch(inputs, {kib} KiB ahead in whole groups of {rows} row(s))"


def fix_extents(lowered) -> None:
    """Constant extents, zero mins: the real shapes (kernels are compiled per
    shape; asserted at run time). Loops get constant trip counts, a block's
    intermediates constant sizes (stack, not heap) and tails are known."""
    for p, x in zip(lowered.params, lowered.graph.inputs):
        for d, extent in enumerate(reversed(x.shape)):
            p.dim(d).set_bounds(0, extent)
    for f, o in zip(lowered.outputs, lowered.graph.outputs):
        for d, extent in enumerate(reversed(o.shape)):
            f.output_buffer().dim(d).set_bounds(0, extent)


def apply_row_reduce(lowered, params) -> str:
    """Parallel tasks of ``rows_per_task`` rows, walked in blocks of
    ``block`` rows: every stage of a block (row reductions' per-lane
    partials, shared intermediates such as softmax's exp) is computed at the
    block, vectorized along the row, and the partials' update loops run the
    block's rows innermost and unrolled, so a block keeps ``block``
    independent accumulator chains (one row alone waits on its adds'
    latency: the template measured 8-10 ms on softmax (16384, 1024) with
    block 1, Adams2019 7.0 ms). Blocks run along numpy's second-to-last
    axis (a shorter axis shrinks the block); rows narrower than the vector
    halve it down to 4 lanes (softmax (12000, 10) 0.34 -> 0.17 ms with 8
    lanes, par with Adams2019).

    Measured (``halojit tune --bench``, tuning timer, best runs, 2-core
    x86-64 AVX-512 KVM VM shared with other jobs, float32, strict_float,
    (16384, 1024)): layernorm Adams2019 default 4.89 ms, block 4 / 128 rows
    per task / vector 16 3.98 ms (1.23x; paired rounds 1.28x), blocks of
    8-16 rows 4.1-4.3 ms. Softmax 6.6-6.9 ms (vector 64) against the
    default's 7.0-7.1: its strict exp takes about 3 ms, the max pass and
    the subtract most of the rest; the per-row division costs nothing
    measurable (a multiply in its place: same time).

    With ``inline`` (default 1), a shared value the lowering marks cheap
    (Stage.cheap: one or two adds/subtracts/multiplies from loads, such as
    layernorm's x - mean) is recomputed where read instead of stored per
    block: one pass over the block fewer and 16 KiB less in L1. Layernorm
    (16384, 1024), medians of 15, same VM: 4.89 -> 4.60 ms (4096 rows: 0.96
    -> 0.88). Inlining softmax's exp instead costs 8.2 -> 10.6 ms (exp
    computed twice); it is not cheap and stays stored.

    The rows unrolled are the input's second-to-last axis wherever the
    reduction keeps it: softmax's and layernorm's keepdims reductions have
    a size-1 axis first in Halide's order, and unrolling that one left the
    rows a loop with the accumulators in memory (a store and a reload per
    vector). Unrolling the rows, 2-core AVX2 VM (AMD EPYC), float32, min
    of 3 alternating processes of 11 interleaved runs, (16384, 1024) with
    out= (with lowering.partial_lanes): softmax 10.70 -> 10.05 ms,
    layernorm 7.50 -> 6.66; in cache, (256, 1024): 0.137 -> 0.119 ms and
    0.070 -> 0.057.

    Halide's ``prefetch`` of the next block's rows (at rb, offset 1) made
    layernorm 4.25 -> 9.6 ms: Halide 21 emits prefetchnta, one per 256
    bytes, all at the block's start. Spreading it over the block instead
    (softmax's exp stage prefetching the input row ``block`` rows ahead, at
    its row loop) emits nothing: Halide clips a prefetch to the loop's own
    iterations and drops it ("the prefetched area will always be empty").
    What works is a prefetch before each vector load of a large input,
    inserted in the LLVM bitcode (``prefetch``, set_prefetch and
    streaming.add_prefetch): (16384, 1024) with out=, same VM, softmax 9.8
    -> 8.6 ms, layernorm 5.9 -> 4.8."""
    vector, per_task = _int(params, "vector"), _int(params, "rows_per_task")
    block = _int(params, "block")
    inline = int(params.get("inline", 1))
    out = lowered.outputs[0]
    shape = lowered.graph.outputs[0].shape
    while vector > 4 and vector > shape[-1]:  # narrow rows: a narrower vector, not none
        vector //= 2
    args = out.args()  # Halide order: args[0] is numpy's last axis
    x, outer = args[0], args[1:]
    lines = []
    fix_extents(lowered)
    # Blocks of ``block`` rows along numpy's second-to-last axis; an N-D
    # output's other outer axes fuse with the block index into one loop, so
    # a block never straddles two of them.
    height = max(1, shape[-2])
    block = max(1, min(block, height))
    rb, ri, ro = hl.Var("rb"), hl.Var("ri"), hl.Var("ro")
    # ShiftInwards: every block has exactly ``block`` rows (a constant region
    # for the stages, so their row loops unroll); the last block overlaps
    # its neighbour and recomputes a few rows, which is harmless for pure
    # outputs.
    out.split(outer[0], rb, ri, block, hl.TailStrategy.ShiftInwards)
    blocks = -(-height // block)
    rb = fuse_loops(out, rb, outer[1:], "rb")
    for d in shape[:-2]:
        blocks *= d
    if len(outer) > 1:
        lines.append(f"{out.name()}.fuse(row blocks, outer dims -> rb)")
    per = max(1, min(blocks, per_task // block))
    out.split(rb, ro, rb, per, hl.TailStrategy.GuardWithIf)
    if per < blocks:  # one task: no parallel loop, no thread pool for it
        out.parallel(ro)
    if shape[-1] >= vector:
        _vectorize(out, x, vector)
    lines.append(f"{out.name()}.split(row, rb, ri, {block}).split(rb, ro, rb, {per})"
                 f"{'.parallel(ro)' if per < blocks else ''}.vectorize(x, {vector})")
    computed = [out]
    from ..generators.lowering import TRIG_CHECK_KINDS
    for st in lowered.stages:
        f = st.func
        if st.kind in TRIG_CHECK_KINDS:
            continue  # trig_fast_paths
        if st.kind == "materialized" and st.cheap and inline:
            f.compute_inline()
            lines.append(f"{f.name()}.compute_inline()  # cheap: recomputed where read")
            continue
        f.compute_at(out, rb)
        computed.append(f)
        if st.kind == "materialized":
            if st.shape and st.shape[-1] >= vector:
                _vectorize(f, f.args()[0], vector)
            lines.append(f"{f.name()}.compute_at({out.name()}, rb).vectorize(x, {vector})")
        elif st.kind == "partial":  # per-lane partial results: a pure, vector dimension
            pargs = f.args()
            lane = pargs[0]
            f.vectorize(lane)
            upd = f.update()
            upd.vectorize(lane)
            text = f"{f.name()}.compute_at({out.name()}, rb).vectorize(lane); update().vectorize(lane)"
            if block > 1 and len(pargs) >= 2:  # row_reduce_fits: the input has rows
                # the block's rows inside the reduction loop, unrolled:
                # independent accumulator chains held in registers. Halide
                # lists numpy's axes last to first, so the rows (numpy's
                # second-to-last axis of the input, the same axis of the
                # reduction with or without keepdims) are pargs[1 - ndim].
                rows = pargs[1 - len(st.in_shape)]
                upd.reorder(*pargs[1:], *[st.rdom[i] for i in range(st.rdom.dimensions())])
                upd.unroll(rows)
                text += ".reorder(rows, r).unroll(rows)"
            lines.append(text)
        else:
            # No atomic().vectorize(r.x): under strict_float Halide cannot prove
            # our NaN-propagating max or strict float adds associative.
            lines.append(f"{f.name()}.compute_at({out.name()}, rb)")
    lines.append(set_prefetch(lowered, params, block))
    lines += trig_fast_paths(lowered, computed)
    return "\n".join(filter(None, lines))


def matmul_fits(graph) -> bool:
    """One output of the shape of exactly one float32/float64 matmul of an
    (..., M, K) by a 2-D (K, N) or an (..., K, N) operand of the same rank
    (plus elementwise prologue and epilogue), no reductions."""
    mms = [n for n in graph.nodes if n.op == "matmul"]
    if len(graph.outputs) != 1 or len(mms) != 1:
        return False
    mm = mms[0]
    a, b = mm.inputs
    return graph.outputs[0].shape == mm.shape and mm.aval.ndim >= 2 and \
        a.aval.ndim == mm.aval.ndim and b.aval.ndim in (2, mm.aval.ndim) and \
        mm.dtype.kind == "f" and mm.dtype.itemsize >= 4 and \
        not any(n.op in REDUCTIONS for n in graph.nodes) and _pointwise_after(graph, mm)


def _pointwise_after(graph, mm) -> bool:
    """Whether every op after the matmul is elementwise: the template
    computes each output block's accumulators alone (bound_extent), so an
    epilogue reading the product at other rows (``p * p[3]``, ``p + p.T``,
    ``np.roll(p, 1, 0)``) read outside them: a bounds error, or silently
    wrong values for the roll."""
    from ..graph.ops import ELEMENTWISE, REGISTRY
    after, todo = set(), [mm]
    users = graph.users()
    while todo:
        for u in users.get(todo.pop(), ()):
            if u not in after:
                if REGISTRY[u.op].trait != ELEMENTWISE:
                    return False
                after.add(u)
                todo.append(u)
    return True


def matmul_block(params, itemsize: int = 4, natural_f32: int = 16) -> int:
    """Lanes of one packed-B column block: two vectors of ``vector`` float32
    lanes (at most the target's: 8 on AVX2, 4 on SSE), in the matmul's type.
    The lowering packs B in blocks of this width; the template reads it back
    from the pack stage and keeps rows x block accumulators in registers."""
    return 2 * min(_int(params, "vector"), natural_f32) * 4 // itemsize


# Below this many flops a matmul runs serially (a thread pool wake-up costs
# about 5-10 us, a core does ~100 GFLOP/s).
SERIAL_MAX_FLOPS = 1 << 21

# Rows of B (of K) per unrolled step of a pack computed once at the root
PACK_ROWS = 8

# Largest register block: rows x 2 vectors of accumulators, plus the 2 B
# vectors and a broadcast A value, in AVX-512's 32 registers.
MAX_BLOCK_ROWS = 14

# FEW_ROWS (passes.matmul, which keeps such matmuls whole): matmuls of at
# most this many rows (2 with 16 vector registers) read B in place
# (_apply_few_rows). x (M, K) @ W (K, N) float32, W of 16 MiB (hot in the
# L3 between calls), 2-core AVX-512 VM (Zen 4), medians of 7 interleaved
# calls, packed (few=0) -> in place (numpy): M = 1 1.4-2.1 -> 0.21-0.22 ms
# (0.15-0.24), M = 2 1.1-2.0 -> 0.27 (1.1), M = 3 1.6-1.9 -> 0.34-0.37
# (1.1-1.2), M = 4 2.1-2.3 -> 0.46-0.81 (1.1-1.2); W of 64 MiB, M = 1-4
# 9.7-10.8 -> 1.9-4.6 (1.3-5.5).
# KSPLIT_ROWS: the most rows that read B in place (either way: column
# panels, few=1, or the K split per task, few=2, B still read once, the
# rows' partial sums in L1/L2). Packed (few=0) -> K split (numpy), same VM,
# medians of 7 interleaved: W (1024, 4096) M = 5
# 2.06 -> 1.24 ms (1.58), M = 8 2.27 -> 2.09 (1.49), M = 12 3.15 -> 2.75
# (1.84); W (4096, 1024) M = 5 2.84 -> 1.73 (1.84), M = 8 2.23 -> 1.84
# (1.20); W (4096, 4096) M = 5 11.4 -> 4.5 (6.8), M = 8 11.3 -> 6.2
# (5.7), M = 12 14.4 -> 8.4 (7.5). At M = 16 packing wins (3.1 against 7.2).
# Column panels beat both at 5-12 rows, with AVX-512, where B is small
# enough (few_rows_mode).
KSPLIT_ROWS = 12
# Rows whose accumulators (2 vectors per column block, at most 24) leave
# room for panels of 2 or more column blocks (_apply_few_rows).
PANEL_ROWS = 6
# Above PANEL_ROWS, panels of one block (128 bytes of each B row) read B
# well up to this size; past it, packing wins (few_rows_mode).
PANEL_B_BYTES = 8 << 20


def apply_matmul(lowered, params) -> str:
    """A GEMM in the BLIS shape: parallel over panels of ``tile_n`` columns
    (packed B panel computed per task, K x tile_n, in L2), then row blocks
    of ``tile_m`` rows, then ``2*vector``-wide column blocks, each a
    tile_m x 2-vector accumulator block held in registers over all of k
    (FMA: the group compiles without strict_float, see lowering).
    Extents are fixed to the real shape (kernels are per shape) so that
    the packed-B index x % block simplifies to dense vector loads.

    Measured (medians of 9, calls 0.25 s apart, one process, 2-core x86-64
    AVX-512 VM, float32; numpy = OpenBLAS 0.3.31 sgemm, 2 threads):
    512x1024 @ 1024x4096: numpy 13.3 ms (323 GFLOP/s), this 13.1 ms (329),
    Adams2019 75.4 ms; MLP gelu(x@W1+b1)@W2: numpy 38.6 ms, this 27.1 ms,
    Adams2019 152 ms. One thread each: numpy 23.0 ms, this 23.2-24.0 ms.
    Without the B packing: 39 ms (16 KiB-strided B rows thrash L1);
    without constant extents: 75 ms (gathers); tile_m 12: within 2% of 8.
    avx2 11.1 ms and sse41 31.8 ms for 512x1024 @ 1024x1024 (avx512 6.1).
    OpenBLAS's threads spin for a while after a numpy call and take a core
    from the next kernel (the MLP measured 42 ms right after numpy's):
    time them apart.

    Small (serial) matmuls with no column tail read B in place, row blocks
    innermost per column block: the MLP at the benchmark's small size
    (16x64 @ 64x256 with the gelu epilogue, then @ 256x64), kernel best of
    2000 runs, packed -> unpacked: 5.9 -> 5.2-5.5 us and 4.1-4.4 -> 2.8-3.3
    us (same machine, shared with other jobs).
    With a column tail the unpacked B read gathers in the tail block:
    (100, 100, 100) 17.8 -> 53.9 us, so those keep the packing.

    A batched B (..., K, N) is packed per matrix: the batch loops go
    outside the panel loop and fuse with it into one parallel loop, a task
    per (matrix, panel) packing that panel. Halojit's times on this VM are
    bimodal (0.45 or 0.9 ms for (4, 256, 256) @ (4, 256, 256), the same
    kernel: the pool's two threads sometimes share one core); numpy 0.52-0.6."""
    uk = _int(params, "unroll_k")
    out = lowered.outputs[0]
    (mm,) = [s for s in lowered.stages if s.kind == "matmul"]
    packs = [s for s in lowered.stages if s.kind == "pack"]
    if not packs:
        raise HalojitError("Matmul needs the packed-B lowering (lower_group(spec=Matmul))")
    pack = packs[0]
    node = next(n for n in lowered.graph.nodes if n.op == "matmul")
    block = pack.shape[-1]  # as the lowering packed B (matmul_block)
    vec = block // 2
    n, m = mm.shape[-1], node.shape[-2]
    flat_rows = math.prod(mm.shape[:-1])
    batched_b = len(pack.shape) > 3  # B has batch axes: packed per matrix
    # 32 vector registers with AVX-512 (16-lane float32 vectors), 16 below
    max_rows = MAX_BLOCK_ROWS if vec * node.dtype.itemsize >= 64 else 6
    rows = max(1, min(_int(params, "tile_m"), max_rows, m))
    panel = max(block, _int(params, "tile_n") // block * block)
    serial = 2 * flat_rows * n * mm.in_shape[-1] < SERIAL_MAX_FLOPS
    # Small and no column tail: B read in place, row blocks inside each
    # column block (its K x block slice stays in L1 for them), no packing
    # (a copy of all of B per call, for at most a few reuses), one panel (no
    # out-of-range blocks in a last partial panel). A tail block would read
    # B through the pack's clamped index: gathers.
    mode = int(params.get("few", "1"))
    if mode == 1 and max_rows <= 6 and FEW_ROWS < flat_rows <= KSPLIT_ROWS:
        mode = 2  # 16 vector registers: too few for these rows' panel accumulators
    limit = KSPLIT_ROWS if mode == 2 or max_rows > 6 else 2
    few = not serial and not batched_b and flat_rows <= limit and n % block == 0 and mode != 0
    fix_extents(lowered)
    if few and mode == 2:
        return _apply_few_rows_ksplit(lowered, out, mm, pack, vec)
    if few:
        return _apply_few_rows(lowered, out, mm, pack, block, vec, flat_rows, n)
    direct = serial and n % block == 0
    if direct:
        panel = n
    # batch dims (A of shape (..., M, K)) stay loops outside the row blocks:
    # a block of rows never straddles two matrices (bounds stay tight)
    x, y, *batch = out.args()
    xo, xi, xii, yo, yi, task = (hl.Var(v) for v in ("xo", "xi", "xii", "yo", "yi", "task"))
    guard, shift = hl.TailStrategy.GuardWithIf, hl.TailStrategy.ShiftInwards
    # Columns split into vectors, vectors into 2-vector blocks (xii: the
    # vector in its block), blocks into panels. Only the last vector can be
    # partial (a predicated store); a block or panel reaching past the axis
    # skips what lies there with a scalar if on the vector or block index.
    # Splitting x by panel and then by block left vectors wholly past the
    # last column under a predicate (the second of a 16-wide float64 block
    # when N = 8; the blocks after the first of a 64-wide panel when N = 16).
    # Where loop partitioning or an enclosing if made their index known, the
    # predicate was all false, the simplifier folded the loads under it, and
    # the is_nan of a float comparison in the epilogue (a @ b * (c > 0))
    # folded to a scalar in a vector expression, which Halide 21 divided by
    # zero lanes: SIGFPE, the compiler died.
    xv, lane, xb = hl.Var("xv"), hl.Var("lane"), hl.Var("xb")
    out.split(x, xv, lane, vec, guard).split(xv, xb, xii, 2, guard)
    out.split(xb, xo, xi, panel // block, guard)
    out.split(y, yo, yi, rows, shift)
    if direct:
        out.reorder(xii, yi, yo, xi, *batch, xo)
    elif batched_b:  # a panel of one matrix's B per pack: the batch loops outside it
        out.reorder(xii, yi, xi, yo, xo, *batch)
    else:
        out.reorder(xii, yi, xi, yo, *batch, xo)
    # enough tasks for the thread pool: split the rows too when panels are few
    panels = -(-n // panel)
    want = 4 * (os.cpu_count() or 2)
    chunks = min(-(-m // rows), -(-want // panels)) if panels < want else 1
    lines = [f"{out.name()}.split(x, xv, lane, {vec}).split(xv, xb, xii, 2)"
             f".split(xb, xo, xi, {panel // block}).split(y, yo, yi, {rows})"
             + (".reorder(xii, yi, yo, xi, xo)" if direct else ".reorder(xii, yi, xi, yo, xo)")]
    if serial:  # less work than a pool wake-up
        anchor = xo
        lines.append("    # serial: small" + (", B unpacked" if direct else ""))
    elif batched_b:  # every (matrix, panel) a task, its B panel packed in it
        anchor = fuse_loops(out, xo, batch, "task")
        out.parallel(anchor)
        lines.append("    .fuse(xo, batch..., task).parallel(task)")
    elif batch and panels < want:  # few panels: batch x panels tasks, B packed per task
        out.reorder(xii, yi, xi, yo, xo, *batch).fuse(xo, batch[0], task).parallel(task)
        anchor = task
        lines.append("    .reorder(..., xo, batch...).fuse(xo, batch0, task).parallel(task)")
    elif chunks > 1 and not batch:
        yoo = hl.Var("yoo")
        blocks = -(-m // rows)
        out.split(yo, yoo, yo, -(-blocks // chunks), guard)
        out.reorder(xii, yi, xi, yo, yoo, xo).fuse(yoo, xo, task).parallel(task)
        anchor = task
        lines.append(f"    .split(yo, yoo, yo, ...).fuse(yoo, xo, task).parallel(task)  # {chunks} row chunks")
    else:
        out.parallel(xo)
        anchor = xo
        lines.append("    .parallel(xo)")
    out.vectorize(lane)
    out.unroll(yi)
    lines.append("    .vectorize(lane).unroll(yi)")
    c = mm.func
    j, i, jb, *_ = c.args()
    c.compute_at(out, yo if direct else xi).store_in(hl.MemoryType.Register)
    # one block per xi (the guards on vectors made its extent dynamic, which
    # a Register allocation refuses: (1, 64, 48) @ (5, 48, 80) float64)
    c.bound_extent(j, block).bound_extent(i, rows).bound_extent(jb, 1)
    c.vectorize(j, vec).unroll(j).unroll(i)
    r = mm.rdom
    upd = c.update()
    upd.reorder(j, i, r.x, jb).vectorize(j, vec).unroll(j).unroll(i)
    if uk > 1:
        upd.unroll(r.x, uk, guard)
    pj = pack.func.args()[0]
    # row chunks of the same panels, B read through a transpose: packed per
    # task, each chunk gathered its columns again
    shared_pack = (chunks > 1 and not batch and not serial and not direct
                   and node.inputs[1].op == "transpose")
    if direct:
        pack.func.compute_inline()
    elif shared_pack:  # once, in parallel blocks of PACK_ROWS rows of K
        pk, pjb = pack.func.args()[1:3]
        ko, ki, t = hl.Var("ko"), hl.Var("ki"), hl.Var("ptask")
        pack.func.compute_root().split(pk, ko, ki, PACK_ROWS, guard).reorder(pj, ki, ko, pjb)
        pack.func.fuse(ko, pjb, t).parallel(t).vectorize(pj, vec).unroll(pj).unroll(ki)
    else:
        pack.func.compute_at(out, anchor).vectorize(pj, vec).unroll(pj)
    for st in lowered.stages:
        if st.kind == "materialized":
            st.func.compute_inline()
        elif st.kind == "arows":  # a transposed A, stored row-major once per call
            f = st.func.compute_root()
            kk, i, *rest = f.args()
            tile, tblock = (int(TRANSPOSE[0][key]) for key in ("tile", "block"))
            tile_blocks(f, kk, i, rest, tile, tblock, parallel=not serial)
            lines.append(f"{f.name()}.compute_root().tile(k, rows, {tile}, {tile})"
                         f".tile({tblock}, {tblock}).vectorize(k).unroll(rows)"
                         "  # A read through a transpose")
        elif st not in (mm, pack):
            st.func.compute_root()
    lines += [f"{c.name()}.compute_at({out.name()}, {'yo' if direct else 'xi'}).store_in(Register)"
              f".vectorize(j, {vec}).unroll(j).unroll(i)  # {rows}x{block} accumulators",
              f"{c.name()}.update().reorder(j, i, k).vectorize(j, {vec}).unroll(j).unroll(i)"
              + (f".unroll(k, {uk})" if uk > 1 else ""),
              f"{pack.func.name()}.compute_inline()" if direct else
              f"{pack.func.name()}.compute_root().split(k, ko, ki, {PACK_ROWS})"
              f".fuse(ko, jb, t).parallel(t).vectorize(j, {vec}).unroll(ki)  # once for "
              f"{chunks} row chunks" if shared_pack else
              f"{pack.func.name()}.compute_at({out.name()}, {anchor.name()}).vectorize(j, {vec})"]
    return "\n".join(lines)


def _read_b_in_place(lowered, mm, pack) -> None:
    """The few-row schedules' other stages: B's pack and the elementwise
    values inlined, anything else (a transposed A's rows) stored once."""
    pack.func.compute_inline()
    for st in lowered.stages:
        if st.kind == "materialized":
            st.func.compute_inline()
        elif st not in (mm, pack):
            st.func.compute_root()


def _apply_few_rows(lowered, out, mm, pack, block, vec, rows, n) -> str:
    """A matmul of at most KSPLIT_ROWS rows (x @ W at batch 1-12; up to 2
    with 16 vector registers): B is read at most a few times whatever the
    order, so packing it would only add a copy of B per call. Each
    parallel task takes a panel of ``blocks`` column blocks and walks k
    once, the rows x panel accumulators in registers (at most 24 vectors),
    reading each B row's panel as contiguous vectors."""
    x, y, *batch = out.args()
    most = max(1, 24 // (2 * rows))  # column blocks of a panel: 2 vectors each
    total = n // block
    tasks = 4 * (os.cpu_count() or 2)
    # panels that divide the columns: no partial panel, so the lowering's
    # clamp of B's column index folds away (clamped, B was gathered)
    fits = [d for d in range(1, most + 1) if total % d == 0]
    blocks = max([d for d in fits if total // d >= tasks] or [1])
    panel = blocks * block
    xo, xi = hl.Var("xo"), hl.Var("xi")
    out.split(x, xo, xi, panel, hl.TailStrategy.GuardWithIf)
    out.reorder(xi, y, *batch, xo).parallel(xo)
    _vectorize(out, xi, vec)
    c = mm.func
    j, i, jb, *_ = c.args()
    c.compute_at(out, xo).store_in(hl.MemoryType.Register)
    c.bound_extent(j, block).bound_extent(i, rows).bound_extent(jb, blocks)
    c.vectorize(j, vec).unroll(j).unroll(i).unroll(jb)
    upd = c.update()
    r = mm.rdom
    upd.reorder(j, i, jb, r.x).vectorize(j, vec).unroll(j).unroll(i).unroll(jb)
    _read_b_in_place(lowered, mm, pack)
    return "\n".join([
        f"{out.name()}.split(x, xo, xi, {panel}).reorder(xi, y, xo).parallel(xo).vectorize(xi, {vec})",
        f"{c.name()}.compute_at({out.name()}, xo).store_in(Register)  # {rows}x{panel} accumulators",
        f"{c.name()}.update().reorder(j, i, jb, k).vectorize(j, {vec}).unroll(j, i, jb)",
        f"{pack.func.name()}.compute_inline()  # B read in place"])


def _apply_few_rows_ksplit(lowered, out, mm, pack, vec) -> str:
    """Few rows, K cut into a chunk per task (``rfactor``): each task streams
    whole rows of B into rows x n partial sums (in L1/L2), then the chunks'
    sums are added. The column panels of _apply_few_rows read B in strips of
    0.5-1.5 KiB per row, which stream worse once B leaves the cache or when
    one row leaves few accumulators to hide it (few_rows_mode)."""
    c = mm.func
    j, i, jb, *_ = c.args()
    k = mm.in_shape[-1]
    tasks = 2 * (os.cpu_count() or 2)
    per = -(-k // tasks)
    ro, ri, t = hl.RVar("ro"), hl.RVar("ri"), hl.Var("t")
    upd = c.update()
    upd.split(mm.rdom.x, ro, ri, per, hl.TailStrategy.GuardWithIf)
    part = upd.rfactor(ro, t)  # part(j, i, jb, t): the sums over chunk t of K
    part.compute_root().parallel(t).vectorize(j, vec)
    part.update().reorder(j, jb, i, ri, t).vectorize(j, vec).unroll(j).parallel(t)
    c.compute_root().vectorize(j, vec)
    c.update().vectorize(j, vec)
    _vectorize(out, out.args()[0], vec)
    _read_b_in_place(lowered, mm, pack)
    return "\n".join([
        f"{c.name()}.update().split(k, ko, ki, {per}).rfactor(ko, t) -> part",
        f"part.compute_root().parallel(t); update().reorder(j, jb, i, ki, t).vectorize(j, {vec})",
        f"{c.name()}.compute_root()  # the {tasks} chunks' sums added",
        f"{pack.func.name()}.compute_inline()  # B read in place, K split"])


def few_rows_mode(graph) -> str:
    """The Matmul template's ``few`` for a group (_apply_few_rows). Up to
    PANEL_ROWS rows: "2" (K split per task) for one row with K >= 1024, a
    K past MAX_CHUNK_BYTES or a B past 3/4 of the L3, else "1" (column
    panels). PANEL_ROWS + 1 to KSPLIT_ROWS rows: "1" for a B of at most
    PANEL_B_BYTES, else "0" (packed). Float32, 2-core Zen 4 VM, medians of
    7 interleaved calls in one run, panels / K split / packed (numpy), ms:

    | B (K, N) | M = 5 | M = 8 | M = 12 |
    |---|---|---|---|
    | (1024, 1024) | 0.074 / 0.34 / 0.17 (0.34) | 0.13 / 0.59 / 0.19 (0.30) | 0.20 / 0.83 / 0.28 (0.42) |
    | (2048, 1024) | 0.16 / 0.61 / 0.38 (0.65) | 0.36 / 1.21 / 0.72 (0.59) | 0.42 / 1.74 / 0.60 (0.78) |
    | (2048, 2048) | 1.07 / 1.51 / 1.99 (1.52) | 2.64 / 2.37 / 1.94 (1.64) | 4.15 / 3.22 / 2.42 (2.17) |
    | (4096, 1024) | 1.21 / 2.08 / 1.60 (1.46) | 2.86 / 2.69 / 2.15 (1.41) | 3.47 / 4.05 / 2.33 (1.99) |
    | (4096, 4096) | 6.3 / 6.0 / 7.4 (7.2) | 12.2 / 7.9 / 7.8 (6.7) | 15.4 / 11.0 / 9.0 (8.0) |

    (1024, 2048) and (1024, 4096) alike; M = 6 of (2048, 2048): 0.83 /
    1.97 / 2.49 (1.77). Earlier, for 1-4 rows, same VM, medians of 7
    interleaved calls, panels / K split (numpy):
    M = 1: (1024, 4096) 0.24 / 0.21 (0.15), (4096, 1024) 0.36 / 0.22
    (0.24), (256, 8192) 0.076 / 0.16 (0.064); M = 2-4: panels ahead in
    the L3, (4096, 1024) 0.27-0.46 against 0.40-0.59 (numpy 1.12-1.14);
    W of 64 MiB (4096, 4096): M = 1 4.0 / 1.9 (1.27), M = 2 3.5 / 2.7
    (5.5), M = 4 5.9 / 4.6 (5.4). A K past MAX_CHUNK_BYTES (which
    passes.matmul no longer cuts into chunks at these row counts) takes the
    K split too: (2, 8192) @ (8192, 512) 0.63 / 0.45 (1.36), (3, 16384) @
    (16384, 256) 0.89 / 0.55 (1.26), (2, 32768) @ (32768, 128) 0.62 / 0.37
    (1.43), (4, 8192) @ (8192, 1024) 3.4 / 2.9 (3.3)."""
    from ..config import l3_cache_bytes
    mm = next(n for n in graph.nodes if n.op == "matmul")
    a, b = mm.inputs
    k = a.shape[-1]
    rows = math.prod(a.shape[:-1])
    long_k = k * b.dtype.itemsize > MAX_CHUNK_BYTES  # kept whole by split_long_matmuls
    b_bytes = b.aval.size * b.dtype.itemsize
    if b.aval.ndim != 2 or rows > KSPLIT_ROWS:
        return "1"  # ignored: packed
    if rows > PANEL_ROWS:
        return "1" if b_bytes <= PANEL_B_BYTES else "0"
    if (rows == 1 and k >= 1024) or long_k or b_bytes >= 3 * l3_cache_bytes() // 4:
        return "2"
    return "1"


def stencil_vector(params, width: int) -> int:
    """The Stencil template's vector lanes for rows ``width`` long:
    ``params["vector"]``, halved down to 16 for narrower rows."""
    vector = _int(params, "vector")
    while vector > 16 and vector > width:  # narrow images: a narrower vector, not none
        vector //= 2
    return vector


def stencil_rows(params, height: int) -> int:
    """The Stencil template's rows per strip: ``params["rows"]``, at most
    ``height``."""
    return min(_int(params, "rows"), height)


def apply_stencil(lowered, params) -> str:
    """Parallel strips of ``rows`` output rows, each walked row by row; an
    intermediate 2-D stage (the blur's horizontal pass) is stored per strip
    (per x tile) and computed one row at a time as the rows below need it,
    so Halide keeps a sliding window of it (sliding=1: each value computed
    once, the input read once), or computed for the whole strip first
    (sliding=0: two extra rows per strip). Tails are guarded (GuardWithIf),
    so any shape is exact.

    Measured (``halojit tune --bench``, tuning timer, best runs, 2-core
    x86-64 AVX-512 KVM VM shared with other jobs, float32, strict_float):
    separable 3x3 blur (4096, 4096): Adams2019 default 4.67 ms (its first
    pass computed 6 rows per 4 output rows), rows 64 / whole width / vector
    32 / sliding 3.64 ms (1.28x; paired rounds 1.25x); strips of 16-32 rows,
    x tiles and sliding=0 3-10% slower. (An earlier note here blamed the
    two x / 3 divisions per output; measured since, a float32 division by
    a constant or a per-row value runs as fast as a copy on this machine,
    so the bound is the passes' memory traffic, not the division.)"""
    tile_x = int(params.get("tile_x", 0))
    sliding = int(params.get("sliding", 1))
    fix_extents(lowered)
    out = lowered.outputs[0]
    height, width = lowered.graph.outputs[0].shape
    vector, rows = stencil_vector(params, width), stencil_rows(params, height)
    if lowered.shifted is not None:
        return _apply_shifted_stencil(lowered, params, vector, rows, sliding)
    guard = hl.TailStrategy.GuardWithIf
    x, y = out.args()
    yo, yi, xo, xi = hl.Var("yo"), hl.Var("yi"), hl.Var("xo"), hl.Var("xi")
    out.split(y, yo, yi, rows, guard)
    lines = [f"{out.name()}.split(y, yo, yi, {rows})"]
    if 0 < tile_x < width:
        out.split(x, xo, xi, tile_x, guard).reorder(xi, yi, xo, yo)
        inner, store = xi, xo
        lines.append(f"    .split(x, xo, xi, {tile_x}).reorder(xi, yi, xo, yo)")
    else:
        inner, store = x, yo
    if rows < height:  # one strip: no parallel loop, no thread pool for it
        out.parallel(yo)
    if width >= vector:
        _vectorize(out, inner, vector)
    lines.append(f"    {'.parallel(yo)' if rows < height else ''}"
                 f".vectorize({inner.name()}, {vector})")
    lines += _stencil_stages(lowered, store, yi if sliding else store, yo, vector)
    lines.append(set_prefetch(lowered, params, 1))
    return "\n".join(filter(None, lines))


def _stencil_stages(lowered, store, at, strip, vector: int) -> list[str]:
    """The Stencil template's intermediate stages: a 2-D one stored per
    ``store`` loop of the output and computed per ``at`` loop, vectorized;
    a lower-dimensional one once per ``strip``. Returns schedule lines."""
    out, lines = lowered.outputs[0], []
    for st in lowered.stages:
        f = st.func
        if len(st.shape) == 2:
            f.store_at(out, store).compute_at(out, at)
            if st.shape[-1] >= vector:
                _vectorize(f, f.args()[0], vector)
            lines.append(f"{f.name()}.store_at({out.name()}, {store.name()})"
                         f".compute_at({out.name()}, {at.name()}).vectorize(x, {vector})")
        else:  # a lower-dimensional shared value: once per strip
            f.compute_at(out, strip)
            lines.append(f"{f.name()}.compute_at({out.name()}, {strip.name()})")
    return lines


def _apply_shifted_stencil(lowered, params, vector: int, rows: int, sliding: int) -> str:
    """The Stencil template on an output whose rows are shifted to 16-byte
    boundaries (lowering.Lowerer._define_shifted): the update's RDom is
    (lane, block, row, strip); strips in parallel, lanes vectorized, the
    intermediate stages per strip as in apply_stencil."""
    from ..generators.streaming import SHIFT_MAX_LANES
    out = lowered.outputs[0]
    height = lowered.graph.outputs[0].shape[0]
    r = lowered.shifted
    lane, row, strip = r[0], r[2], r[3]
    stage = out.update(0)
    stage.allow_race_conditions()  # disjoint rows; the last strip's overlap writes equal values
    stage.vectorize(lane)
    lines = [f"{out.name()}.update(0)  # rows shifted to 16-byte boundaries: RDom (lane, "
             f"block, row, strip), strips of {rows} rows",
             f"    .vectorize(lane, {min(SHIFT_MAX_LANES, vector)})"]
    if rows < height:
        stage.parallel(strip)
        lines[-1] += ".parallel(strip)"
    lines += _stencil_stages(lowered, strip, row if sliding else strip, strip, vector)
    lines.append(set_prefetch(lowered, params, 1))
    return "\n".join(filter(None, lines))


def apply_elementwise(lowered, params) -> str:
    """Rows vectorized ``vector`` lanes wide (4 AVX-512 float32 vectors by
    default), parallel tasks of about ``task_kib`` KiB of output; rows
    longer than a task are cut into column chunks.

    Why wide: a long math chain per element (tanh, exp) fills the core's
    out-of-order window with one vector's arithmetic, so the next loads
    are issued late; once the arrays leave the cache every iteration waits
    on memory. Four independent vectors per iteration keep loads in
    flight. Measured (best of 9, 2-core x86-64 AVX-512 KVM VM, float32,
    strict_float, the halojit float32 tanh on (16384, 1024) into a
    preallocated output): Adams2019's 16-lane schedule 16-19 ms, 32 lanes
    6.0 ms, 64 lanes 5.5 ms, 16 lanes unrolled 4x 8.0 ms; on (4096, 1024),
    in cache, 1.50 -> 1.26 ms.

    The lever left for large outputs is the store itself. A plain store to an
    uncached line reads it first (read-for-ownership), so writing 64 MiB
    moves 128 MiB. Non-temporal stores skip that read. Measured on the
    2-core AVX2 VM (AMD EPYC), relu(x + b) on (16384, 1024) float32, two
    threads, best of 20, in C with intrinsics: plain stores 5.2-5.8 ms,
    _mm256_stream_ps 3.4-4.0 ms; in the same run a Halide kernel took 5.3 ms.
    Halide 21 has no non-temporal store. Two workarounds were tried and
    dropped:
      - an extern stage that stream-copies each tile, split and parallel:
        Halide queries the extern's bounds once for the whole output, so
        each tile recomputes its producer over the whole image;
      - a serial Halide kernel per 32-row chunk into a scratch buffer in
        L2, then a streaming copy out (C driver, OpenMP): 5.6 ms, slower
        than the plain kernel.
    What works: LLVM's !nontemporal metadata on the stores, compiled by
    llvmlite's LLVM from Halide's bitcode (generators/streaming.py, for every
    template): 4.8 -> 3.4-3.6 ms on the same workload. 32-byte vmovntps
    would fault on numpy's large arrays (16 bytes past a page), so outputs
    are declared 16-byte aligned and take two 16-byte stores per vector."""
    vector, task_kib, parallel = task_params(lowered, params)
    out = lowered.outputs[0]
    node = lowered.graph.outputs[0]
    shape = node.shape
    if node.aval.size < 16:
        # a few values (a determinant, a 3-vector): scalar code, every value
        # inlined. Adams2019 took 2.7-5 s to schedule np.linalg.det of (3,
        # 3, 3) (90 ops), this 0.3 s.
        inline_stages(lowered)
        lines = [f"{out.name()}: {node.aval.size} value(s), one scalar loop"]
        return "\n".join(lines + _schedule_trig_checks(lowered, False))
    if stacked_columns(node):
        return _apply_columns(lowered, vector, task_kib, parallel)
    k, width = flat_axes(shape)
    while vector > 16 and vector > width:
        vector //= 2
    step = math.lcm(shape[-1], 16)
    if k > 1 and step <= width:  # a multiple of the last axis: each vector starts at index 0
        vector = max(step, vector // step * step)
    per_task = max(vector, task_kib * 1024 // max(1, node.dtype.itemsize))
    args = out.args()  # Halide order: args[0] is numpy's last axis
    x, outer = fuse_loops(out, args[0], list(args[1:k]), "flat"), list(args[k:])
    shape = shape[:len(shape) - k] + (width,)
    guard = hl.TailStrategy.GuardWithIf
    lines = [] if k == 1 else [f"{out.name()}.fuse(last {k} dims -> {x.name()})"]
    row = None
    if outer:
        row = fuse_loops(out, outer[0], outer[1:], "row")
        if len(outer) > 1:
            lines.append(f"{out.name()}.fuse(outer dims -> row)")
    n_rows = 1
    for d in shape[:-1]:
        n_rows *= d
    xi = x
    chunk = max(vector, per_task // vector * vector)
    if not parallel:
        lines.append(f"{out.name()}: one serial task")
    elif row is None and chunk >= width:
        # one task: no chunk loop. A GuardWithIf split wider than the axis
        # around an is_nan crashed Halide 21's simplifier (SIGFPE) when the
        # axis was a multiple of the vector: np.ones(131072, np.float32) < 0
        # killed the compiler (a float comparison checks is_nan)
        lines.append(f"{out.name()}: one task")
    elif width > per_task or row is None:
        xo, xi = hl.Var("xo"), hl.Var("xi")
        out.split(x, xo, xi, chunk, guard)
        if row is not None:
            task = hl.Var("task")
            out.reorder(xi, xo, row).fuse(xo, row, task).parallel(task)
            lines.append(f"{out.name()}.split(x, xo, xi, {chunk}).fuse(xo, row, task).parallel(task)")
        else:
            out.parallel(xo)
            lines.append(f"{out.name()}.split(x, xo, xi, {chunk}).parallel(xo)")
    else:
        rows = max(1, min(n_rows, per_task // width))
        ro, ri = hl.Var("ro"), hl.Var("ri")
        out.split(row, ro, ri, rows, guard).parallel(ro)
        lines.append(f"{out.name()}.split(row, ro, ri, {rows}).parallel(ro)")
    _vectorize(out, xi, vector)
    lines.append(f"    .vectorize({xi.name()}, {vector})")
    inline_stages(lowered)
    lines += _schedule_trig_checks(lowered, parallel and n_rows * width >= TRIG_PARALLEL_MIN)
    dense = _dense_condition(lowered, node.shape, k) if k > 1 else None
    picked = _picked_condition(lowered)
    if picked is not None:
        dense = picked if dense is None else dense & picked
    trig = lowered.trig_ok
    for cond, what in ((None if trig is None or dense is None else trig & dense,
                        "arguments of sin/cos/tan checked and dense"),
                       (trig, "arguments of sin/cos/tan checked"),
                       (dense, f"dense over the last {k} axes or channels")):
        if cond is not None:
            out.specialize(cond)
            lines.append(f"{out.name()}.specialize({what})")
    return "\n".join(lines)


def stacked_columns(node) -> bool:
    """Whether an output is a few columns put side by side along its last
    axis (``np.stack([x, y, z], axis=1)``, ``np.column_stack``), each
    computed by its own expression."""
    return (node.op == "concatenate" and node.aval.ndim >= 2
            and node.params["axis"] == node.aval.ndim - 1 and 1 < node.shape[-1] <= SHORT_MATRIX)


# A group of column chains computes the values live at a checkpoint about
# every CHECKPOINT_OPS nodes once per vector of rows, instead of inlining
# every value into the output's one expression, whose bounds inference in
# Halide grew with the cube of its length. Lorenz RK4 on (100000, 3)
# float64, 2-core Intel VM, kernel compile / warm call: 10 steps 2.5 s /
# 1.6 ms inlined, 1.9 s / 1.8 ms with checkpoints; 20 steps 6.0 s / 3.2
# ms, 3.1 s / 3.1 ms; 50 steps 64 s / 8.1 ms, 13.5 s / 7.4 ms (every 400
# nodes: 1.4, 3.0 and 15.5 s).
CHECKPOINT_OPS = 200


def column_checkpoints(lowered, n_rows: int) -> tuple[list, int]:
    """The materialized stages to compute per vector of rows: at each of
    a few cuts of the group's node order, about CHECKPOINT_OPS apart,
    the values computed before the cut and read after it, where they are
    all materialized columns of ``n_rows`` rows (any input view aside) and
    fewest. -> (stages, number of cuts)."""
    from ..graph.ops import MOVEMENT, REGISTRY
    graph = lowered.graph
    nodes = graph.nodes
    if len(nodes) < 2 * CHECKPOINT_OPS or lowered.trig_ok is not None:
        return [], 0  # (the sin/cos/tan check, computed first, reads the values)
    stage_of = {st.node: st for st in lowered.stages
                if st.kind == "materialized" and st.node is not None}
    pos = {n: k for k, n in enumerate(nodes)}
    users = graph.users()
    outs = set(graph.outputs)
    live = [0] * (len(nodes) + 1)  # values crossing the cut after position k
    bad = [0] * (len(nodes) + 1)   # of them, values that are not such columns
    last_use = {}

    def cheap(n):  # loads: an input, a constant, or a view of one
        while n.op not in ("input", "constant"):
            if REGISTRY[n.op].trait != MOVEMENT or len(n.inputs) != 1:
                return False
            n = n.inputs[0]
        return True

    for n in nodes:
        if cheap(n):
            continue
        end = len(nodes) if n in outs else max((pos[u] for u in users[n]), default=pos[n])
        last_use[n] = end
        st = stage_of.get(n)
        ok = st is not None and st.shape in ((n_rows,), (n_rows, 1))
        live[pos[n]] += 1
        live[end] -= 1
        if not ok:
            bad[pos[n]] += 1
            bad[end] -= 1
    for k in range(1, len(nodes) + 1):
        live[k] += live[k - 1]
        bad[k] += bad[k - 1]
    saved, cuts = [], 0
    for target in range(CHECKPOINT_OPS, len(nodes) - CHECKPOINT_OPS // 2, CHECKPOINT_OPS):
        window = range(target - CHECKPOINT_OPS // 4, target + CHECKPOINT_OPS // 4)
        best = min(((live[k], k) for k in window if bad[k] == 0 and live[k] > 0), default=None)
        if best is None:
            continue
        cut, cuts = best[1], cuts + 1
        for n, end in last_use.items():
            if pos[n] <= cut < end and stage_of[n] not in saved:
                saved.append(stage_of[n])
    return saved, cuts


# Groups of more nodes than this skip _apply_columns's dense copy. 20 RK4
# steps (1900 nodes) on (100000, 3) float64, 2-core Intel VM: with it 9.0 s
# to compile, 3.2 ms to run; without 5.9 s, 3.0 ms. np.stack of three
# short expressions of (2**20,) float32 needs it: 1.77 ms without, 0.74 with.
COLUMNS_DENSE_MAX_OPS = 256


def _apply_columns(lowered, vector: int, task_kib: int, parallel: bool) -> str:
    """Rows vectorized, the columns an unrolled loop inside: each unrolled
    column is one piece of the concatenation, whose select Halide folds
    away, and the columns' strided stores become one interleaved store.
    Fusing the columns into the vector instead (flat_axes) computes every
    piece in every lane and selects per lane. Lorenz RK4 steps on (100000,
    3) float64 after passes/slices.py (three column chains), kernel compile
    and warm call with out=, 2-core Intel VM: 10 steps 3.8 s and 1.8 ms
    fused, 2.5 s and 1.6 ms here; 20 steps 6.0 s and 3.2 ms here. A stack
    of three short float32 expressions of 2**20 rows runs as fast either way
    (0.71-0.74 ms, numpy 16)."""
    out = lowered.outputs[0]
    node = lowered.graph.outputs[0]
    cols = node.shape[-1]
    args = out.args()  # args[0] is the columns
    row = fuse_loops(out, args[1], list(args[2:]), "row")
    n_rows = node.aval.size // cols
    lanes = max(8, 1 << max(0, (vector // cols).bit_length() - 1))
    guard = hl.TailStrategy.GuardWithIf
    lines = []
    if len(args) > 2:
        lines.append(f"{out.name()}.fuse(outer dims -> row)")
    per_task = max(lanes, task_kib * 1024 // max(1, node.dtype.itemsize) // cols // lanes * lanes)
    ri = row
    if parallel and n_rows > per_task:
        ro, ri = hl.Var("ro"), hl.Var("ri")
        out.split(row, ro, ri, per_task, guard).parallel(ro)
        lines.append(f"{out.name()}.split(row, ro, ri, {per_task}).parallel(ro)")
    rv, rl = hl.Var("rv"), hl.Var("rl")
    out.split(ri, rv, rl, lanes, guard).reorder(args[0], rl, rv).vectorize(rl).unroll(args[0])
    lines.append(f"{out.name()}.split(ri, rv, rl, {lanes}).reorder(c, rl, rv)"
                 f".vectorize(rl).unroll(c)  # {cols} columns")
    inline_stages(lowered)
    saved, cuts = column_checkpoints(lowered, n_rows)
    for st in saved:
        st.func.compute_at(out, rv)
        _vectorize(st.func, st.func.args()[-1], lanes)
    if saved:
        lines.append(f"{len(saved)} values at {cuts} checkpoint(s): "
                     f".compute_at({out.name()}, rv).vectorize(row, {lanes})")
    lines += _schedule_trig_checks(lowered, parallel and node.aval.size >= TRIG_PARALLEL_MIN)
    # rows strided by their length, in the output and in inputs of two or
    # more axes: the columns' stores and loads are then known interleavings.
    # A long computation per row is compiled once, for any strides: the
    # copy doubled its compile and gained nothing (see COLUMNS_DENSE_MAX_OPS)
    dense = None
    if len(lowered.graph.nodes) <= COLUMNS_DENSE_MAX_OPS:
        dense = dense_condition([(out.output_buffer(), node.shape, 2)] + [
            (p, x.shape, 2) for p, x in zip(lowered.params, lowered.graph.inputs)
            if x.aval.ndim >= 2])
    trig = lowered.trig_ok
    for cond, what in ((None if trig is None or dense is None else trig & dense,
                        "arguments of sin/cos/tan checked and rows dense"),
                       (trig, "arguments of sin/cos/tan checked"), (dense, "rows dense")):
        if cond is not None:
            out.specialize(cond)
            lines.append(f"{out.name()}.specialize({what})")
    return "\n".join(lines)


def task_params(lowered, params) -> tuple[int, int, bool]:
    """(vector, task_kib, parallel) of the Elementwise and Concat templates,
    the group's extents fixed."""
    fix_extents(lowered)
    return (_int(params, "vector"), _int(params, "task_kib"),
            params.get("parallel", "1") != "0")


def inline_stages(lowered) -> None:
    """Every stored value but the sin/cos/tan check inlined where read
    (computed once per lane by CSE)."""
    from ..generators.lowering import TRIG_CHECK_KINDS
    for st in lowered.stages:
        if st.kind not in TRIG_CHECK_KINDS:
            st.func.compute_inline()


# Elements below which the Elementwise template's sin/cos/tan argument check runs
# on one core (as the kernel itself does below its own threshold).
TRIG_PARALLEL_MIN = 1 << 16


def _schedule_trig_checks(lowered, parallel: bool) -> list[str]:
    """Lowerer.trig_ok's passes, each before the output: its flags a vector
    of lanes per task, the tasks in parallel."""
    lines = []
    for st in lowered.stages:
        f = st.func
        if st.kind == "trigpart":
            lane, task = f.args()
            f.compute_root()
            upd = f.update()
            if st.shape[1] > 1:
                f.vectorize(lane)
                upd.vectorize(lane)
            if parallel:
                upd.parallel(task)
            lines.append(f"{f.name()}.compute_root().update().vectorize(lane)"
                         + (".parallel(task)" if parallel else "") + "  # sin/cos/tan argument check")
        elif st.kind == "trigflag":
            f.compute_root()
    return lines


def trig_fast_paths(lowered, funcs) -> list[str]:
    """Where sin, cos or tan take their checked fast path (lowered.trig_ok,
    in a Concat or reduction template's group): the argument check computed at the
    root first, then a copy of every definition of each of ``funcs`` (the
    stages the template computes, not inlined) for the call where it holds,
    in which Halide folds each fast/exact select to the fast path. Called
    last: a specialization copies the stage's schedule as it stands.
    (4096, 1024) float32, 2-core Zen 4 VM, two threads, best of 15, exact
    path -> checked (numpy): np.sin(x).sum(axis=0) (ColReduce) 5.4 -> 1.5 ms
    (2.6-2.9), a softmax of np.cos(x) (RowReduce) 5.1 -> 2.7 (10.9),
    np.cos(x).mean() (FullReduce) 4.7 -> 1.6 (2.9)."""
    if lowered.trig_ok is None:
        return []
    size = max((n.aval.size for n in lowered.graph.nodes), default=0)
    lines = _schedule_trig_checks(lowered, size >= TRIG_PARALLEL_MIN)
    for f in funcs:
        f.specialize(lowered.trig_ok)
        for u in range(f.num_update_definitions()):
            f.update(u).specialize(lowered.trig_ok)
        lines.append(f"{f.name()}.specialize(arguments of sin/cos/tan checked)")
    return lines


def _dense_condition(lowered, shape, k: int):
    """The condition for a copy of ``lowered``'s one output's schedule for
    the call where it and every input of its shape over the last ``k`` axes
    are dense there (see dense_condition), or None. Halide then knows the
    fused loop's index is the address: vector loads and stores, where the
    general case gathers and scatters each lane. On the 2-core Zen 4 VM,
    one core, (512, 512, 3) uint8 image -> (x / 255 - m) * 2, m of shape
    (3,): Adams2019 15.5 ms, fused with gathers 0.58, dense 0.05 (numpy 2.4)."""
    tail = shape[len(shape) - k:]
    buffers = [(lowered.outputs[0].output_buffer(), shape, k)]
    buffers += [(p, x.shape, k) for p, x in zip(lowered.params, lowered.graph.inputs)
                if x.shape[len(x.shape) - k:] == tail]
    return dense_condition(buffers)


def _picked_condition(lowered):
    """The condition that every input read through ``channel_pick`` slices
    is dense over its last two axes (three for matrix elements), or None:
    its channels are then a constant stride apart and Halide loads them as
    vectors and shuffles, where an unknown stride loads each lane alone:
    (512, 512, 3) @ (3,) float32, one core, 0.15 -> 0.057 ms (2-core Zen 4
    VM; numpy 0.084)."""
    picked = {}  # input -> the trailing axes to be dense over: 2, or 3 for matrix elements
    for n in lowered.graph.nodes:
        if n.op == "slice" and channel_pick(n):
            x = n.inputs[0]
            picked[x] = max(picked.get(x, 2), 3 if n.shape[-2:] == (1, 1) and x.shape[-2] > 1
                            else 2)
    return dense_condition([(p, x.shape, picked[x]) for p, x in
                            zip(lowered.params, lowered.graph.inputs)
                            if x in picked and x.aval.ndim >= 2])


def specialize_dense_inputs(stage, lowered, what: str) -> list[str]:
    """A copy of ``stage`` (a reduction's update) for the call where every
    input is dense, in a group that reads one through a reshape merging
    axes (passes/flatten.py: ``img.sum()`` of (512, 512, 3), column sums
    keeping 3 elements): its merged index is then the address, and the
    loads vectors rather than per-lane gathers."""
    if not any(n.op == "reshape" for n in lowered.graph.nodes):
        return []
    dense = dense_condition([(p, x.shape, len(x.shape)) for p, x in
                             zip(lowered.params, lowered.graph.inputs)])
    if dense is None:
        return []
    stage.specialize(dense)
    return [f"{what}.specialize(dense inputs)"]


def dense_condition(buffers):
    """The condition (an hl.Expr, or None when always true) that each
    (Halide buffer, numpy shape, k) is dense over its last k axes: every
    one of them longer than 1, but the last, strided by the product of the
    later extents. Extents are constants (fix_extents), so under it Halide
    folds a merged index (``j % 3 + (j / 3) * 3``) back into ``j``."""
    dense = None
    for b, shape, k in buffers:
        stride = 1
        for d in range(min(k, len(shape)) - 1):  # Halide order: dim 0 is numpy's last axis
            stride *= shape[-1 - d]
            if shape[-2 - d] > 1:
                cond = b.dim(d + 1).stride() == stride
                dense = cond if dense is None else dense & cond
    return dense


# name -> (fits, apply)
_APPLY = {
    "RowReduce": (row_reduce_fits, apply_row_reduce),
    "Matmul": (matmul_fits, apply_matmul),
    "Stencil": (stencil_fits, apply_stencil),
    "FullReduce": (full_reduce_fits, apply_full_reduce),
    "ColReduce": (col_reduce_fits, apply_col_reduce),
    "RowArg": (row_arg_fits, apply_row_arg),
    "Elementwise": (elementwise_fits, apply_elementwise),
    "Transpose": (transpose_fits, apply_transpose),
    "Concat": (concat_fits, apply_concat),
    "Sort": (sort_fits, apply_sort),
    "Select": (select_fits, apply_select),
    "Scatter": (scatter_fits, apply_scatter),
}


def apply_template(lowered, name: str, params: dict) -> str:
    if name not in _APPLY:
        raise HalojitError(f"unknown template {name!r}; expected one of {sorted(TEMPLATES)}.")
    fits, apply = _APPLY[name]
    if not fits(lowered.graph):
        raise HalojitError(f"{name} does not apply to this group")
    return apply(lowered, params)
