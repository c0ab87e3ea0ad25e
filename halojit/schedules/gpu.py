"""Schedules for CUDA targets: the default recipe per group, the fallback
chain, and the GpuReduce template.

Halide's GPU autoschedulers compile without a device (HALIDE_NOTES d), but
Anderson2021 and Li2018 give row reductions one thread per row, serial over
the row: a 1024-wide softmax row is 1024 dependent loads per thread. Row
reductions take GpuReduce instead; everything else takes Anderson2021 with
the device's multiprocessor count as its parallelism, then Li2018.

No schedule changes what a kernel computes (no atomics, no rfactor), so a
schedule is checked by compiling it; its speed needs a device: `halojit
bench` on a GPU machine measures it.
"""

from __future__ import annotations

import math

import halide as hl

from ..errors import HalojitError

# name -> (defaults, doc), as templates.TEMPLATES
GPU_TEMPLATES = {
    "GpuReduce": ({"rows_per_block": "8", "threads_x": "32"},
                  "reductions over the last axis (and full reductions): one block per "
                  "rows_per_block rows; each row's lane partials run on 64 threads with "
                  "coalesced loads and are combined in shared memory; the row's elementwise "
                  "output is written by threads_x x rows_per_block threads"),
    "GpuElementwise": ({"threads": "256"},
                       "groups without reductions: each output one kernel of `threads`-thread "
                       "blocks, consecutive threads along numpy's last axis (coalesced), the "
                       "leading axes fused into one block dimension; intermediates recomputed "
                       "where read"),
}
REDUCE_KINDS = ("reduce", "argreduce", "partial")


def gpu_reduce_fits(graph) -> bool:
    """One output, no matmul, at least one reduction, and every reduction
    over the last axis only with an output of at most 2 dims, or a full
    reduction to a scalar."""
    from ..graph.ops.reduce import SCANS, SCATTERS, SORTING
    from .templates import REDUCTIONS
    if len(graph.outputs) != 1:
        return False
    out = graph.outputs[0].aval
    if out.ndim > 2:
        return False
    found = False
    for node in graph.nodes:
        if node.op == "matmul" or node.op in SCANS or node.op in SORTING or node.op in SCATTERS:
            return False
        if node.op in REDUCTIONS:
            found = True
            n_in = node.inputs[0].aval.ndim
            if node.params["axes"] != (n_in - 1,) and not (out.ndim == 0 and n_in >= 1):
                return False
    return found


def gpu_elementwise_fits(graph) -> bool:
    """No reduction, matmul, scan or sort, and no stencil chain (a slice of
    a computed value): every output element is computed on its own from the
    inputs, and intermediates are recomputed where read. Stencil chains
    stay with Anderson2021: the blur of bench/ (4096, 4096) took 0.18 ms
    a call on an H100 with it, 0.34 with its first pass computed per block
    in shared memory."""
    from ..graph.ops.reduce import SCANS, SCATTERS, SORTING
    from .templates import REDUCTIONS
    for n in graph.nodes:
        if n.op in REDUCTIONS or n.op == "matmul" or n.op in SCANS or n.op in SORTING \
                or n.op in SCATTERS:
            return False
        if n.op == "slice" and n.inputs[0].op not in ("input", "constant"):
            return False
    return True


def default_gpu_spec(local):
    """GpuReduce for rows and full reductions, GpuElementwise for groups
    without reductions, Anderson2021 for the rest. Anderson2021 gave the
    elementwise chain of bench/ (16M float32) blocks of 16 threads: 0.63 ms
    a kernel on an H100, where 3 reads and 1 write at its bandwidth take
    about 0.1 ms."""
    from .autoschedule import make_spec
    from .scatter import scatter_fits
    from .select import select_fits
    if scatter_fits(local):  # a serial loop: on the host (see README, "CUDA")
        return make_spec("Scatter")
    if select_fits(local):  # serial counting passes: on the host too
        return make_spec("Select")
    if gpu_reduce_fits(local):
        return make_spec("GpuReduce")
    if gpu_elementwise_fits(local):
        return make_spec("GpuElementwise")
    return make_spec("Anderson2021", anderson_params())


def anderson_params() -> dict:
    from ..cuda import parallelism
    return {"parallelism": str(parallelism())}


def gpu_fallback_chain(spec):
    """On a CUDA target: the spec, then Anderson2021, Li2018 and Mullapudi2016's
    GPU schedule; Halide's default (every stage on the host) only last."""
    from .autoschedule import NO_SCHEDULE, ScheduleSpec, make_spec
    chain = [spec]
    for alt in (make_spec("Anderson2021", anderson_params()), make_spec("Li2018"),
                make_spec("Mullapudi2016", {"experimental_gpu_schedule": "1",
                                            "parallelism": "128",
                                            "last_level_cache_size": "49152"})):
        if alt.name != spec.name:
            chain.append(alt)
    chain.append(ScheduleSpec(NO_SCHEDULE))
    return chain


def _int(params, key):
    """templates._int, capped at CUDA's 1024 threads per block."""
    from .templates import _int as positive
    v = positive(params, key)
    if v > 1024:
        raise HalojitError(f"GPU template parameter {key}={v}: expected at most 1024.")
    return v


def _all_defs(f):
    """f's pure definition and every update."""
    yield f
    for i in range(f.num_update_definitions()):
        yield f.update(i)


def _gpu_root(f, lines, tx=32, ty=8):
    """f and its updates as their own kernel: 2-D thread tiles over the
    first two dims, 1-D blocks over one, a single thread for a scalar."""
    f.compute_root()
    args = f.args()
    for d in _all_defs(f):
        if len(args) >= 2:
            xo, yo, xi, yi = hl.Var(), hl.Var(), hl.Var(), hl.Var()
            d.gpu_tile(args[0], args[1], xo, yo, xi, yi, tx, ty, hl.TailStrategy.GuardWithIf)
        elif len(args) == 1:
            xo, xi = hl.Var(), hl.Var()
            d.gpu_tile(args[0], xo, xi, tx * ty, hl.TailStrategy.GuardWithIf)
        else:
            d.gpu_single_thread()
    lines.append(f"{f.name()}.compute_root().gpu_tile(...)")


def _inline(f, lines) -> bool:
    """Recompute a pure intermediate where it is used: always valid, and
    cheaper on a GPU than a kernel boundary or a shared-memory row."""
    if f.num_update_definitions():
        return False
    f.compute_inline()
    lines.append(f"{f.name()}.compute_inline()")
    return True


def apply_gpu_reduce(lowered, params) -> str:
    rows, tx = _int(params, "rows_per_block"), _int(params, "threads_x")
    out = lowered.outputs[0]
    args = out.args()  # Halide order: args[0] is numpy's last axis
    lines = []
    if not args:  # a full reduction: one thread finishes what the partials left
        out.gpu_single_thread()
        lines.append(f"{out.name()}.gpu_single_thread()")
        csum = None  # lowering appends each chunksum just before its partial
        for st in lowered.stages:
            f = st.func
            if st.kind == "chunksum":
                # a block per chunk: its lanes (computed at it) in shared memory
                csum = f
                f.compute_root()
                for d in _all_defs(f):
                    d.gpu_blocks(f.args()[0])
                lines.append(f"{f.name()}.compute_root().gpu_blocks(chunk)")
            elif st.kind == "partial" and csum is not None:
                f.compute_at(csum, csum.args()[0])
                for d in _all_defs(f):
                    d.gpu_threads(f.args()[0])
                lines.append(f"{f.name()}.compute_at({csum.name()}, chunk).gpu_threads(lane)")
                csum = None
            elif st.kind == "partial":
                # (lane, chunk) partials: one block per chunk, a thread per lane
                fa = f.args()
                f.compute_root()
                for d in _all_defs(f):
                    if len(fa) >= 2:
                        d.gpu_blocks(fa[1]).gpu_threads(fa[0])
                    else:  # a 1-D sum: the lanes alone, as one block
                        d.gpu_tile(fa[0], hl.Var(), hl.Var(), 16, hl.TailStrategy.GuardWithIf)
                lines.append(f"{f.name()}.compute_root().gpu_blocks(chunk).gpu_threads(lane)")
            elif st.kind in REDUCE_KINDS:
                f.compute_at(out, hl.Var.outermost())
                lines.append(f"{f.name()}.compute_at({out.name()}, outermost)")
            elif not _inline(f, lines):
                _gpu_root(f, lines)
        return "\n".join(lines)
    row_var = args[-1]
    rb, ri = hl.Var("rb"), hl.Var("ri")
    if len(args) == 2:
        xo, xi = hl.Var("xo"), hl.Var("xi")
        out.split(row_var, rb, ri, rows, hl.TailStrategy.GuardWithIf)
        out.split(args[0], xo, xi, tx, hl.TailStrategy.GuardWithIf)
        out.reorder(xi, ri, xo, rb).gpu_blocks(rb).gpu_threads(xi, ri)
        lines.append(f"{out.name()}.split(row, rb, ri, {rows}).split(x, xo, xi, {tx})"
                     ".reorder(xi, ri, xo, rb).gpu_blocks(rb).gpu_threads(xi, ri)")
    else:  # one value per row
        out.split(row_var, rb, ri, rows, hl.TailStrategy.GuardWithIf)
        out.gpu_blocks(rb).gpu_threads(ri)
        lines.append(f"{out.name()}.split(row, rb, ri, {rows}).gpu_blocks(rb).gpu_threads(ri)")
    for st in lowered.stages:
        f = st.func
        fa = f.args()
        if st.kind not in REDUCE_KINDS and _inline(f, lines):
            continue
        # per-row values of this block's rows, in shared memory; the row is
        # the outermost dim, a partial's lane (or a stage's x) the innermost
        f.compute_at(out, rb)
        two = len(fa) >= 2 and st.kind in ("partial", "materialized")
        threads = [fa[0], fa[-1]] if two else [fa[-1]]
        for d in _all_defs(f):
            d.gpu_threads(*threads)
        lines.append(f"{f.name()}.compute_at({out.name()}, rb).gpu_threads("
                     f"{'inner, row' if len(threads) == 2 else 'row'})")
    return "\n".join(lines)


def _pow2_at_least(n: int, cap: int) -> int:
    p = 1
    while p < min(n, cap):
        p *= 2
    return p


def _block_tile(f, shape, threads: int, lines) -> None:
    """Schedule output ``f`` (numpy ``shape``) as one kernel: numpy's last
    axis across threads (coalesced), the other axes fused into one."""
    args = f.args()  # Halide order: args[0] is numpy's last axis
    f.compute_root()
    if not args:
        f.gpu_single_thread()
        lines.append(f"{f.name()}.gpu_single_thread()")
        return
    tx = _pow2_at_least(shape[-1], min(32, threads))
    if len(args) == 1:
        xo, xi = hl.Var("xo"), hl.Var("xi")
        f.gpu_tile(args[0], xo, xi, threads, hl.TailStrategy.GuardWithIf)
        lines.append(f"{f.name()}.compute_root().gpu_tile(x, {threads})")
        return
    y = args[1]
    for i, a in enumerate(args[2:]):  # leading axes: one block dimension
        fused = hl.Var(f"y{i}")
        f.fuse(y, a, fused)
        y = fused
    ty = _pow2_at_least(math.prod(shape[:-1]), max(1, threads // tx))
    xo, yo, xi, yi = hl.Var("xo"), hl.Var("yo"), hl.Var("xi"), hl.Var("yi")
    f.gpu_tile(args[0], y, xo, yo, xi, yi, tx, ty, hl.TailStrategy.GuardWithIf)
    lines.append(f"{f.name()}.compute_root()" + (".fuse(leading axes)" if len(args) > 2 else "")
                 + f".gpu_tile(x, y, {tx}, {ty})")


def apply_gpu_elementwise(lowered, params) -> str:
    threads = _int(params, "threads")
    lines = []
    for f, node in zip(lowered.outputs, lowered.graph.outputs):
        _block_tile(f, tuple(node.shape), threads, lines)
    for st in lowered.stages:
        if not (st.kind == "materialized" and _inline(st.func, lines)):
            _gpu_root(st.func, lines)
    return "\n".join(lines)


APPLY = {"GpuReduce": apply_gpu_reduce, "GpuElementwise": apply_gpu_elementwise}
