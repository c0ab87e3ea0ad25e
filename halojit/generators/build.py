"""An optimized graph -> a HalideExecutor: fusion groups, one kernel each
(from the disk cache or compiled in worker processes), and one C++ Plan that
runs them all in a single call.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import get_config
from ..graph.fusion import Group, group_graph, group_key, partition
from ..graph.ir import Graph, Node
from ..graph.passes.flatten import flatten_col_reductions, flatten_full_reductions
from ..graph.passes.matmul import expand_short_matmuls, split_long_matmuls, split_ragged_columns
from ..graph.passes.recompute import recompute_after_full_reductions
from ..graph.passes.views import peel_output_views, sink_output_transposes, strip_copies
from ..runtime.cache import halide_version, is_valid_so, kernel_dir, tuning_db_path
from ..schedules.autoschedule import ScheduleSpec, fallback_chain, make_spec, parse_autoscheduler
from .streaming import ALIGN, aligned_for_stream, prefetch_inputs, stream_outputs

# Bump when lowering or a template changes what a cached kernel computes or how.
CODEGEN_VERSION = "81"
# Groups whose values all have fewer elements are scheduled without parallel
# loops: waking the thread pool costs more than it saves. Medians, 2-core VM,
# kernel us, parallel / serial: softmax (16,1024) 22.6 / 18.6, (32,1024)
# 22.6 / 26.1; chain (16K) 9.4 / 9.1, (32K) 13.0 / 17.3.
SERIAL_MAX_ELEMENTS = 1 << 15
# An Elementwise task writes about 1 MiB of output, less where each element
# costs more than ELEMENT_OPS ops: np.linalg.det of (100000, 3, 3) float32
# (93 ops per determinant, 0.4 MB out) ran as one task.
ELEMENT_OPS = 16


def elementwise_task_kib(local: Graph) -> int:
    """The Elementwise template's task_kib for a group: 1024 KiB of output per
    task, shrunk in proportion to the ops computed per element past
    ELEMENT_OPS (at least 16 KiB)."""
    ops = sum(1 for n in local.nodes if n.op not in ("input", "constant"))
    return max(16, 1024 * ELEMENT_OPS // max(ELEMENT_OPS, ops))


# Small groups of more ops than this take Adams2019's greedy search (beam 1)
GREEDY_MIN_OPS = 64
# A serial Stencil with at most this many outputs (64x64: its first pass,
# 66x64 float32, is 17 KiB) computes each stage once for the whole strip
# (sliding=0); larger ones slide a window of rows (default_spec).
SMALL_STENCIL_ELEMENTS = 1 << 12
# Output pooling: outputs of at least this size, this many blocks per output.
POOL_MIN_BYTES = 1 << 20
POOL_SLOTS = 2
# sys.getrefcount of a pooled block referenced only by the pool: the list,
# the loop variable and getrefcount's own argument.
_FREE_REFCOUNT = 3


def _log(msg):
    if get_config().log:
        print(f"[halojit] {msg}", file=sys.stderr, flush=True)


@dataclass
class KernelInfo:
    """One fusion group's kernel, for introspection."""

    group: Group
    fn_name: str
    so_path: Path
    spec: str
    cached: bool
    compile_seconds: float
    stmt_path: str | None = None
    schedule_path: str | None = None
    streamed: tuple = ()  # indices of the group's outputs written with streaming stores

    @property
    def ops(self) -> list[str]:
        return [n.op for n in self.group.nodes]

    @property
    def schedule(self) -> str:
        return _read(self.schedule_path)

    @property
    def stmt(self) -> str:
        return _read(self.stmt_path)

    @property
    def ptx(self) -> str:
        """The kernel's CUDA device code (PTX) when compiled for a CUDA target, else ""."""
        return _read(self.so_path.with_suffix(".device_code"))


def _read(path):
    try:
        return Path(path).read_text() if path else ""
    except OSError:
        return ""


def default_spec(local: Graph, target=None) -> ScheduleSpec:
    """Adams2019, chosen by measurement over the RowReduce template once row
    reductions keep per-lane partials (lowering.LANES); median of 11, 2-core
    AVX-512 VM, float32, fresh outputs, numpy / Adams2019 / RowReduce in ms:
    softmax (4096,1024) 9.4 / 1.7 / 1.9; layernorm 10.9 / 1.0 / 1.1;
    row sum (4096,4096) 3.8 / 1.3 / 2.7 (RowReduce does not fit; fell back).

    A float matmul group takes the Matmul template (packed B, FMA register
    blocks): MLP (512x1024 @ 1024x4096, gelu, @ 4096x1024) numpy 38.6 ms,
    Adams2019 152 ms, Matmul 27.1 ms (schedules/templates.py). Batched
    (B of shape (..., K, N)), medians of 15 over 7 rounds, Adams2019 ->
    Matmul (numpy): (64, 128, 128) @ (64, 128, 128) 8.3 -> 1.0-1.9 ms
    (2.0-2.2); (8, 12, 128, 64) @ (8, 12, 64, 128) 3.0 -> 0.76-1.2 (1.8);
    (16, 512, 64) @ (16, 64, 512) 11.0 -> 1.7-2.1 (3.1-3.5).

    A large elementwise group takes the Elementwise template (wide vectors,
    parallel row tasks): tanh-GELU (16384, 1024) Adams2019 22.2 ms,
    Elementwise 6.2 ms; the chain and bias+relu within 3% either way.
    128 float32 lanes (512 bytes) rather than the template's 64, medians of
    30 with out=, two alternating runs: GELU 4.55-4.95 -> 4.36-4.71 ms, the
    chain 8.0-8.4 -> 7.5-7.75, bias+relu unchanged (2.4, memory-bound).

    A large full reduction (x.sum() of a 1-D array) takes FullReduce: the
    lowering's chunked partials as parallel tasks, which Adams2019
    serialises for some sizes (16M float32 sum 2.28 -> 1.19 ms).

    A group reducing over the last axis only (softmax, layernorm) takes
    RowReduce with vectors of 4 native registers (64 lanes on AVX-512; on
    the AVX2 VM 32 lanes ran 2-4% ahead of 64 at every size: min of 11
    interleaved calls, best of 3 processes, with out=, softmax (16384,
    1024) 9.73 -> 9.49 ms, (4096, 1024) 2.22 -> 2.18, (256, 1024) 0.120 ->
    0.118; layernorm 6.57 -> 6.47, 1.35 -> 1.31, 0.064 -> 0.062; 16
    lanes slower), since the cheap-value inlining and the
    two-compare max partials (lowering._nan_pick); medians of 21, 2-core
    AVX-512 VM shared with other jobs, float32, fresh outputs, Adams2019 ->
    RowReduce in ms: softmax (16384,1024) 8.2 -> 7.6-7.85, (4096,1024) 1.52
    -> 1.37, (64,1024) 0.028 -> 0.021; layernorm (16384,1024) 6.7 -> 4.2-4.7
    (out= 4.2-4.5), (4096,1024) 1.05 -> 0.88, (64,1024) 0.019 -> 0.014.
    3-D and wider groups block their second-to-last axis (the other leading
    axes fuse with the block index), medians of 11 over 5 alternating
    rounds, Adams2019 -> RowReduce: softmax (64, 256, 1024) 10.3 -> 9.4 ms,
    (16, 16, 64, 1024) 11.0 -> 9.4, (2, 2048, 64) 0.25 -> 0.15; layernorm
    (64, 256, 1024) 7.2 -> 6.6, (8, 128, 768) 0.27 -> 0.22. Below the
    serial threshold RowReduce runs every row in one task: softmax (4, 1024) 1.29x and
    layernorm 1.25x over serial Adams2019 (``halojit tune --bench --size
    small``, paired rounds).

    A 2-D group reading a value through shifted slices (the blur) takes
    Stencil: strips of up to 128 rows, each first-pass row computed once as
    a sliding window. Separable 3x3 blur (4096, 4096), medians of 30 after a
    warm-up, same VM: Adams2019 4.86 ms (out= 4.65), Stencil 3.86 (3.95);
    (64, 64) 1.33x (tuner, paired). Up to SMALL_STENCIL_ELEMENTS outputs the
    one strip computes its first pass whole (sliding=0; the tuner's pick at
    the small size on the 2-core AVX2 VM, 1.12x paired). Min of 201
    interleaved calls, best of 3 processes, AVX2, sliding 1 -> 0 (vector
    16 -> 32): (32, 32) 1.15 -> 0.87 us, (64, 64) 2.02 -> 1.72; at (128,
    128) sliding=1 stays ahead, 4.9 against 5.1.

    A reduction over leading axes that keeps the last one (``x.sum(axis=0)``,
    a softmax over axis 0) takes ColReduce where its accumulator rows stay
    small (col_reduce.default_params): chunks of rows streamed in parallel.
    Medians of 21, same VM, Adams2019 -> ColReduce in ms: column sum (4096,
    4096) 3.7-4.1 -> 1.25-1.42 (numpy 2.9), softmax over axis 0 (1024,
    4096) 5.0-5.2 -> 2.8-2.9, x.std(axis=0) (4096, 4096) 13.4 -> 2.6-3.1.

    An elementwise group reading an input through a transpose of its last
    axis takes Transpose (schedules/transpose.py): medians of 11 over 5
    rounds, Adams2019 -> Transpose (numpy): x.T + y (4096, 4096) 76 -> 16.6
    ms (155), x.T * 1 65 -> 13.9 (13.6, Fortran-ordered), CHW -> HWC (3,
    1080, 1920) 9.8 -> 1.3 (1.6).

    A group whose output is a concatenation or pad along its last axis
    takes Concat (schedules/concat.py): a pass per piece with plain vector
    loads. Best of 25, same VM, (2048, 2048) float32, Adams2019 or Stencil
    -> Concat (numpy): np.roll(x, 5, axis=1) 1.22 -> 0.40 ms (0.81),
    np.concatenate([x, y], axis=1) 3.9 -> 1.2 (5.0), np.pad(x, 3,
    mode="reflect") 1.55 -> 0.35 (0.86).

    A group with a sort or argsort takes Sort (schedules/sort.py), the
    only template its network fits (fusion keeps other axis loops out of
    its group). Min of 5 interleaved rounds, same VM, float32 (numpy): a
    3x3 median filter of (2048, 2048) through np.stack 4.9 ms (528),
    np.median over rows of (4096, 1024) 11.2 (42.8), np.sort along rows
    14.0 (7.2: numpy's SIMD quicksort), along columns 19.1 (55.9)."""
    if target is not None and target.has_gpu_feature():
        from ..schedules.gpu import default_gpu_spec
        return default_gpu_spec(local)
    from ..schedules.col_reduce import default_params as col_default_params
    from ..schedules.templates import (channel_pick, concat_fits, elementwise_fits, flat_axes,
                                      full_reduce_fits,
                                      matmul_fits, row_arg_fits, row_reduce_fits, scatter_fits,
                                      sort_fits,
                                      stencil_chain, stencil_fits, transpose_fits)
    from ..schedules.select import select_fits
    from .compile import native_lanes
    lanes = native_lanes(target, 16)  # float32 lanes of one native vector
    if matmul_fits(local):
        from ..schedules.templates import few_rows_mode
        return make_spec("Matmul", {"few": few_rows_mode(local)})
    serial = max((n.aval.size for n in local.nodes), default=0) < SERIAL_MAX_ELEMENTS
    if sort_fits(local):
        return make_spec("Sort", {"parallel": "0"} if serial else {})
    if select_fits(local):
        return make_spec("Select", {"parallel": "0"} if serial else {})
    if scatter_fits(local):
        return make_spec("Scatter", {"parallel": "0"} if serial else {})
    if row_arg_fits(local):
        return make_spec("RowArg", {"parallel": "0"} if serial else {})
    # both templates below need one output; small groups get one task (every
    # row, one strip): no parallel loop, no thread pool for tiny work
    if row_reduce_fits(local):
        rows = max(1, local.outputs[0].aval.size // max(1, local.outputs[0].aval.shape[-1]))
        # 4 native vectors per row: 64 lanes on AVX-512, 32 on AVX2
        return make_spec("RowReduce", {"vector": str(4 * lanes), **(
            {"rows_per_task": str(rows)} if serial else {})})
    if concat_fits(local):
        return make_spec("Concat", {"vector": str(4 * lanes), **({"parallel": "0"} if serial else {})})
    if stencil_fits(local):
        height = local.outputs[0].aval.shape[0]
        strip = height if serial else max(8, min(128, height // 16))
        if stencil_chain(local):  # each stage once per strip: no sliding window
            return make_spec("Stencil", {"rows": str(strip if serial else min(16, strip)),
                                         "tile_x": "0", "vector": "16", "sliding": "0"})
        if serial and local.outputs[0].aval.size <= SMALL_STENCIL_ELEMENTS:
            # one strip whose first pass fits in L1: computed whole, no window
            return make_spec("Stencil", {"rows": str(strip), "tile_x": "0",
                                         "vector": str(min(32, 4 * lanes)), "sliding": "0"})
        # a sliding window, 4 native vectors per row (2 serial)
        return make_spec("Stencil", {"rows": str(strip), "tile_x": "0",
                                     "vector": str((2 if serial else 4) * lanes), "sliding": "1"})
    col = col_default_params(local, serial)
    if col is not None:
        return make_spec("ColReduce", col)
    if serial:
        if elementwise_fits(local):
            # one serial task. A short last axis, fused with the ones before:
            # Adams2019 took 0.84 ms for (64, 64, 3) uint8 -> (x / 255 - m)
            # / s, this 0.006 (numpy 0.04; 2-core Zen 4 VM, one core). Wide
            # rows, best of 2001 calls: the small bench workloads (4, 1024)
            # chain 2.34 -> 2.08 us, GELU 2.54 -> 2.19, bias + relu 0.79 ->
            # 0.76. And a long unrolled loop of np.where steps on (30, 40)
            # (a Mandelbrot set, 30 steps): Adams2019 refused its schedule
            # ("computed at an invalid location"), Mullapudi2016 failed and
            # Li2018 compiled for over 20 minutes in 16 GB; this 2.4 s
            return make_spec("Elementwise", {"parallel": "0"})
        # Adams2019 believing in one core schedules no parallel loop. A long
        # group (a Python loop unrolled over small arrays) gets its greedy
        # search: the beam's time grows faster than the stage count.
        # Logistic regression on (200, 5) float64, compile s (run us):
        # 10 steps 3.1 (30) -> 2.0 (23), 30 steps 27.4 (68) -> 6.9 (67), 50
        # steps 87 -> 15.9 (116; numpy 345); 2-core AVX-512 VM
        return make_spec("Adams2019", {"parallelism": "1", **(
            {"beam_size": "1"} if len(local.nodes) > GREEDY_MIN_OPS else {})})
    if full_reduce_fits(local):
        return make_spec("FullReduce")
    if transpose_fits(local):
        return make_spec("Transpose")
    if elementwise_fits(local):
        # 8 native float32 vectors of the widest type per iteration (512
        # bytes on AVX-512, 256 on AVX2: 16 registers hold fewer in flight)
        # (4 of them where the group reads channels x[..., j] with a stride:
        # (2048, 2048, 3) @ (3,) float32 at 128 lanes 2.03 ms, 64 lanes 1.62,
        # (2**20, 8) @ (8,) 1.65 -> 1.11; numpy 2.58 and 1.70, Adams2019 1.56
        # and 1.83; medians of 9 interleaved, 2-core AVX-512 VM)
        widest = max((n.dtype.itemsize for n in local.nodes), default=4)
        per = (16 if any(map(channel_pick, local.nodes)) else 32) * lanes
        return make_spec("Elementwise", {"vector": str(max(16, min(128, per // widest))),
                                         "task_kib": str(elementwise_task_kib(local))})
    return make_spec("Adams2019")


def tuned_spec(local: Graph, target) -> ScheduleSpec | None:
    """The tuning database's best recipe for this group and target, or None."""
    if not tuning_db_path().exists():  # never tuned here: no sqlite3 import (5 ms)
        return None
    from ..schedules.tunedb import lookup
    return lookup(group_key(local), str(target))


def kernel_name(local: Graph, spec: ScheduleSpec, target, stream=None, prefetch=None) -> str:
    """The kernel's symbol and cache key; ``stream``: stream_outputs(local,
    target) and ``prefetch``: prefetch_inputs(local, target), when the
    caller has them already."""
    from .. import __version__
    h = hashlib.blake2b(digest_size=12)
    parts = (group_key(local), spec.key, str(target), halide_version(), __version__,
             CODEGEN_VERSION)
    if get_config().fast_math:  # the lowering differs, not only the target
        parts += ("fast_math",)
    if stream is None:
        stream = stream_outputs(local, target, spec)
    if stream:
        parts += ("stream" + ",".join(map(str, stream)),)
    if prefetch is None:
        prefetch = prefetch_inputs(local, target)
    if prefetch:  # inputs a template may prefetch (the config's size decides)
        parts += ("prefetch" + ",".join(map(str, prefetch)),)
    for part in parts:
        h.update(part.encode())
        h.update(b"|")
    return "hj_" + h.hexdigest()


def compile_kernels(groups: list[Group], target, autoscheduler=None) -> list[KernelInfo]:
    """A loaded-ready KernelInfo per group: cached .so files are reused,
    missing ones are compiled together (in parallel workers)."""
    user_spec = parse_autoscheduler(autoscheduler)
    out_dir = kernel_dir(target)
    infos: list[KernelInfo | None] = []
    requests, pending, by_name, streams = [], [], {}, {}
    for k, g in enumerate(groups):
        local = group_graph(g)
        # A user-given autoscheduler wins, then a tuning run's recorded best.
        spec = user_spec or tuned_spec(local, target) or default_spec(local, target)
        stream = stream_outputs(local, target, spec)
        prefetch = prefetch_inputs(local, target)
        fn = kernel_name(local, spec, target, stream, prefetch)
        so = out_dir / f"{fn}.so"
        meta = out_dir / f"{fn}.json"
        if is_valid_so(so, fn) and meta.exists():
            try:
                info = json.loads(meta.read_text())
                infos.append(KernelInfo(g, fn, so, info["spec"], True, 0.0,
                                        info.get("stmt"), info.get("schedule"), stream))
                _log(f"kernel {fn} ({len(g.nodes)} ops): disk cache hit")
                continue
            except (ValueError, KeyError):
                pass  # unreadable sidecar: rebuild
        infos.append(None)
        pending.append((k, fn))
        streams[k] = stream
        if fn in by_name:  # an identical group earlier in this graph: one compile
            continue
        by_name[fn] = len(requests)
        requests.append({"graph": local, "fn_name": fn, "target": str(target),
                         "fast_math": get_config().fast_math, "stream": stream,
                         "prefetch": prefetch,
                         "specs": fallback_chain(spec, target), "out_dir": str(out_dir)})
        _log(f"kernel {fn} ({len(g.nodes)} ops: {', '.join(n.op for n in g.nodes[:6])}"
             f"{'...' if len(g.nodes) > 6 else ''}): compiling ({spec})")
    if requests:
        # imported on a miss only: a warm process skips concurrent.futures
        # and logging (9 ms of its first call)
        from .worker import compile_groups
        results = compile_groups(requests)
        first = set()
        for k, fn in pending:
            res = results[by_name[fn]]
            shared = fn in first  # compiled once for an identical earlier group
            first.add(fn)
            if not shared:
                for f in res["failures"]:
                    _log(f"kernel {fn}: a scheduler failed, fell back: {f.splitlines()[0]}")
                _log(f"kernel {fn}: compiled in {res['compile_seconds']:.2f}s with {res['spec']}")
            infos[k] = KernelInfo(groups[k], fn, Path(res["so"]), res["spec"], shared,
                                  0.0 if shared else res["compile_seconds"], res.get("stmt"),
                                  res.get("schedule"), streams[k])
    return infos


_BOOL = np.dtype(np.bool_)


def _whole_items(a: np.ndarray) -> bool:
    """Whether every axis longer than 1 of ``a`` is strided by whole items
    (not so a field of a packed structured array: rows 17 bytes apart)."""
    return all(s % a.itemsize == 0 or n <= 1 for s, n in zip(a.strides, a.shape))


def _prep_input(x: np.ndarray) -> np.ndarray:
    """A view Halide can read: unit stride on the last axis, bool as uint8."""
    if x.ndim and x.shape[-1] > 1 and x.strides[-1] != x.itemsize:
        x = np.ascontiguousarray(x)
    if x.dtype is _BOOL:  # builtin dtypes are singletons; == np.bool_ costs a conversion
        x = x.view(np.uint8)
    return x


@dataclass
class PlanLayout:
    """Buffer ids of one graph's plan, as ``_rt.Plan`` and artifacts number
    them: the graph inputs, then the constants the kernels read, then the
    graph outputs the kernels write (first occurrence only), then the
    intermediates."""

    ids: dict
    consts: list        # constant nodes, fed after the graph inputs
    out_nodes: list     # kernel-written graph outputs
    intermediates: list # nodes with a plan-owned buffer, in id order
    steps: list         # (group index, [buffer id per kernel argument])

    @property
    def n_inputs(self) -> int:
        return len(self.ids) - len(self.out_nodes) - len(self.intermediates)


def plan_layout(graph: Graph, groups: list[Group]) -> PlanLayout:
    ids: dict[Node, int] = {node: k for k, node in enumerate(graph.inputs)}
    consts = []
    for g in groups:
        for x in g.inputs:
            if x.op == "constant" and x not in ids:
                ids[x] = len(ids)
                consts.append(x)
    produced = {o for g in groups for o in g.outputs}
    out_nodes = []
    for o in graph.outputs:
        if o in produced and o not in ids:
            ids[o] = len(ids)
            out_nodes.append(o)
    intermediates = []
    for g in groups:
        for o in g.outputs:
            if o not in ids:
                ids[o] = len(ids)
                intermediates.append(o)
    steps = [(k, [ids[x] for x in g.inputs] + [ids[o] for o in g.outputs])
             for k, g in enumerate(groups)]
    return PlanLayout(ids, consts, out_nodes, intermediates, steps)


def plan_dtype(dtype) -> str:
    """A plan buffer's dtype name: booleans are held as bytes."""
    return "uint8" if dtype == np.bool_ else np.dtype(dtype).name


class HalideExecutor:
    """Runs a graph's kernels through one C++ Plan call. ``views``: per
    output position, the numpy view its kernel output is returned through
    (passes/views.py; ``graph`` then has the viewed value as that output)."""

    def __init__(self, graph: Graph, target, kernels: list[KernelInfo], views=None):
        from .. import _rt
        from .compile import load_kernel, load_runtime
        load_runtime(target)
        self.graph = graph
        self.kernels = kernels
        self.kernel_count = sum(not k.cached for k in kernels)
        layout = plan_layout(graph, [info.group for info in kernels])
        self.consts = tuple(_prep_input(np.ascontiguousarray(x.params["value"].value))
                            for x in layout.consts)
        self.out_nodes = layout.out_nodes
        buffers: list = [None] * (layout.n_inputs + len(self.out_nodes))
        buffers += [(list(o.shape), plan_dtype(o.dtype)) for o in layout.intermediates]
        rt_kernels = [load_kernel(k.so_path, k.fn_name) for k in kernels]
        self.plan = _rt.Plan(rt_kernels, layout.steps, buffers, layout.n_inputs,
                             len(self.out_nodes))
        self._out_specs = [(o.shape, o.dtype) for o in self.out_nodes]
        self._out_nbytes = [o.aval.size * o.dtype.itemsize for o in self.out_nodes]
        self._out_pos = [graph.outputs.index(o) for o in self.out_nodes]
        # every output a distinct kernel-written array, in order: __call__
        # returns the arrays it allocated (api skips its freshness checks)
        self.fresh_outputs = list(graph.outputs) == self.out_nodes
        # outputs whose kernel streams its stores: it asserts a 16-byte aligned
        # address (and 16-byte multiple row strides where the rows allow)
        streamed = {info.group.outputs[j] for info in kernels for j in info.streamed}
        self._aligned = [o in streamed for o in self.out_nodes]
        self._small_out = [nbytes < POOL_MIN_BYTES and not al
                           for nbytes, al in zip(self._out_nbytes, self._aligned)]
        self._pools = [[] for _ in self.out_nodes]
        self._pool_lock = threading.Lock()
        self._ids = layout.ids
        self.views = views or {}
        self.profile = False

    def _alloc(self, k: int) -> np.ndarray:
        """Output k: from this executor's pool when its memory is free again.

        A fresh large array pays its page faults on first write (64 MiB:
        5.4 ms with numpy's huge pages, measured); recycling skips them. A
        pooled block is free when nothing but the pool references it: any
        live output or view of it holds a reference (views keep the owner).
        """
        shape, dtype = self._out_specs[k]
        nbytes = self._out_nbytes[k]
        if nbytes < POOL_MIN_BYTES:
            if not self._aligned[k]:  # _empty's address check only where a kernel asserts it
                return np.empty(shape, dtype)
            return _empty(nbytes).view(dtype).reshape(shape)
        pool = self._pools[k]
        with self._pool_lock:
            for mem in pool:
                if sys.getrefcount(mem) <= _FREE_REFCOUNT:
                    return mem.view(dtype).reshape(shape)
            if len(pool) < POOL_SLOTS:
                mem = _empty(nbytes)
                if mem.base is None:  # owners only: a view's views keep its owner alive, not it
                    pool.append(mem)
                return mem.view(dtype).reshape(shape)
        return _empty(nbytes).view(dtype).reshape(shape)

    def _target(self, k: int, given, ins) -> np.ndarray:
        """Write output k straight into the caller's ``out=`` array when a
        kernel can (unit-stride last axis, no overlap with an input)."""
        if given is not None and given[self._out_pos[k]] is not None:
            o = given[self._out_pos[k]]
            last_ok = (o.ndim == 0 or o.shape[-1] <= 1 or o.strides[-1] == o.itemsize) and \
                _whole_items(o)
            if self._aligned[k] and not aligned_for_stream(o):
                last_ok = False  # the kernel asserts alignment: write a copy
            if last_ok and not any(np.may_share_memory(o, x) for x in ins):
                return o
        return self._alloc(k)

    def __call__(self, inputs, given=None):
        # the plan copies inputs whose last axis is strided (contiguous=True)
        # and takes numpy bools for byte-bool kernel arguments
        ins = tuple(inputs) + self.consts
        seen = given
        if given is None:
            outs = [np.empty(*self._out_specs[k]) if small else self._alloc(k)
                    for k, small in enumerate(self._small_out)]
        else:
            if self.views:  # out= arrays seen through the inverse views, where they have them
                seen = [self.views[j].inverse(o) if j in self.views else o
                        for j, o in enumerate(given)]
            outs = [self._target(k, seen, ins) for k in range(len(self._out_specs))]
        self.plan.run(ins, outs, self.profile, True)
        results = outs if self.fresh_outputs else self.assemble(inputs, outs)
        if self.views:
            results = list(results)
            for j, view in self.views.items():
                r = results[j]
                # written through out=[j]'s inverse view: out=[j] itself is the result
                results[j] = given[j] if given is not None and r is seen[j] else view(r)
        return results

    def assemble(self, inputs, outs, other=lambda v: v) -> list:
        """The graph's outputs from the plan's ``outs``: an output that is an
        input or a constant is taken from there (through ``other``)."""
        by_node = dict(zip(self.out_nodes, outs))
        results = []
        for o in self.graph.outputs:
            if o in by_node:
                results.append(by_node[o])
            elif o.op == "input":
                results.append(other(inputs[o.params["index"]]))
            else:
                results.append(other(o.params["value"].value))
        return results

    def fast_call(self, leaf: bool, scalars=None):
        """(call, call_out) for the api's fast path, or None when this plan's
        outputs need post-processing (an input or constant returned, one
        output returned twice). ``call(args)``: args a tuple of plain
        ndarrays of this executor's avals -> the outputs (the one output
        itself when ``leaf``; a 0-d one as a numpy scalar where ``scalars``,
        one bool per output, says numpy returns one: default all). ``call_out(args,
        out)``: writes a single output into ``out`` when it fits (shape,
        dtype, writable, unit-stride last axis, no overlap with an input) and
        returns it, else None. Closures over locals: every attribute lookup
        of the general path costs ~20 ns; a small call's budget is ~3 us."""
        if not self.fresh_outputs:
            return None
        if self.views:
            return self._viewed_fast_call(leaf, scalars)
        return self._fast_call(leaf, scalars)

    def _fast_call(self, leaf: bool, scalars):
        run, consts, empty = self.plan.run, self.consts, np.empty
        specs, small, alloc = self._out_specs, self._small_out, self._alloc
        n_out = len(specs)
        if scalars is None:
            scalars = [True] * n_out
        unwrap = [not shape and sc for (shape, _), sc in zip(specs, scalars)]
        if n_out == 1 and small[0]:
            shape, dtype = specs[0]
            scalar = unwrap[0]

            def call(args):
                o = empty(shape, dtype)
                run(args + consts, (o,), False, True)
                return (o[()] if scalar else o) if leaf else [o[()] if scalar else o]
        else:
            def call(args):
                outs = [empty(*specs[k]) if sm else alloc(k) for k, sm in enumerate(small)]
                run(args + consts, outs, False, True)
                outs = [o[()] if u else o for o, u in zip(outs, unwrap)]
                return outs[0] if leaf else outs

        if n_out != 1:
            return call, None
        shape, dtype = specs[0]
        itemsize = dtype.itemsize
        may_share = np.may_share_memory
        aligned = self._aligned[0]

        def call_out(args, out):
            if (type(out) is not np.ndarray or out.shape != shape or out.dtype != dtype
                    or not out.flags.writeable):
                return None
            if shape and shape[-1] > 1 and out.strides[-1] != itemsize:
                return None
            if not out.flags.c_contiguous and not _whole_items(out):
                return None
            if aligned and not aligned_for_stream(out):
                return None
            for x in args:
                if may_share(out, x):
                    return None
            run(args + consts, (out,), False, True)
            return out
        return call, call_out

    def _viewed_fast_call(self, leaf: bool, scalars):
        """fast_call's ``call`` for a plan with output views (no ``call_out``:
        the general path handles ``out=``, through the inverse views)."""
        inner = self._fast_call(False, scalars)[0]
        steps = [self.views.get(k) for k in range(len(self._out_specs))]
        if leaf:
            view = steps[0]
            return (lambda args: view(inner(args)[0])), None

        def call(args):
            return [o if v is None else v(o) for o, v in zip(inner(args), steps)]
        return call, None

    def native_out_specs(self) -> list[tuple]:
        """The C call path's output specs: (shape, dtype), or for an output
        returned as a view (shape, dtype, kernel output shape, byte
        strides): the path allocates the array with those strides and runs
        the plan on it seen with the kernel output's C-contiguous shape."""
        specs = []
        for k, (shape, dtype) in enumerate(self._out_specs):
            view = self.views.get(k)
            if view is None:
                specs.append((shape, dtype))
            else:
                specs.append((view.shape, dtype, shape, view.strides(dtype.itemsize)))
        return specs

    def timings(self) -> list[float]:
        return list(self.plan.last_timings())


def _empty(nbytes: int) -> np.ndarray:
    """``nbytes`` of uninitialised memory at a 16-byte aligned address, as
    streaming stores need (numpy's allocator gives that; a custom one may not)."""
    mem = np.empty(nbytes, np.uint8)
    if mem.ctypes.data % ALIGN == 0:
        return mem
    mem = np.empty(nbytes + ALIGN, np.uint8)
    start = -mem.ctypes.data % ALIGN
    return mem[start:start + nbytes]


def _has_zero_size(graph: Graph) -> bool:
    return any(n.aval.size == 0 for n in graph.nodes)


def codegen_graph(graph: Graph, target) -> Graph:
    """The graph the Halide backend partitions and compiles for ``target``
    (an hl.Target): on CPUs, matmuls with a short K expanded into
    elementwise products and sums, those of a few rows and a ragged width
    split into two column parts and those with a long K cut into chunks
    (passes/matmul.py), full reductions of a short last axis read through
    a 2-D reshape (passes/flatten.py) and cheap values read after a full
    reduction of them recomputed (passes/recompute.py). The executor and
    ``dump`` both start here."""
    if target.has_gpu_feature():
        return graph
    graph = split_long_matmuls(split_ragged_columns(expand_short_matmuls(graph)))
    graph = flatten_col_reductions(flatten_full_reductions(graph))
    return recompute_after_full_reductions(graph)


def build_halide_executor(graph: Graph, target_str: str, autoscheduler=None):
    """The executor of an optimized graph at opt_level 3 on the Halide backend."""
    from ..api import NumpyExecutor
    from .compile import host_target
    if _has_zero_size(graph):
        # Zero-size arrays need no kernels; the reference backend is exact.
        _log("graph has zero-size arrays: running it with the numpy backend")
        return NumpyExecutor(graph, 2)
    target = host_target(target_str)
    t0 = time.perf_counter()
    graph = codegen_graph(graph, target)
    views = {}
    if not target.has_gpu_feature():
        graph, views = peel_output_views(sink_output_transposes(graph))
    graph = strip_copies(graph, keep_outputs=False)
    groups = partition(graph, siblings=not target.has_gpu_feature())
    kernels = compile_kernels(groups, target, autoscheduler)
    ex = HalideExecutor(graph, target, kernels, views)
    ex.build_seconds = time.perf_counter() - t0
    return ex
