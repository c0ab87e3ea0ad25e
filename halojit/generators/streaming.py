"""Streaming (non-temporal) stores for large kernel outputs on x86-64, and
software prefetches for the large inputs of some templates (``add_prefetch``).

A plain store to a line that is not in cache first reads the line
(read-for-ownership), so writing a 64 MiB output moves 128 MiB. A
non-temporal store skips that read and the cache. Halide 21 cannot emit one,
so a kernel with a large output is compiled to LLVM bitcode, its stores into
that output get LLVM's ``!nontemporal`` metadata, and llvmlite's LLVM
generates the object (Halide's own object path is left for every other
kernel).

Measured on the 2-core AVX2 VM (AMD EPYC, 32 MiB L3), relu(x + b) with x
(N, 1024) float32 into a preallocated output, min of 50-60 interleaved
calls, two runs:

    N        output    plain stores   streaming
    2048      8 MiB    0.26 ms        0.37-0.42 ms
    4096     16 MiB    0.64-0.74 ms   0.80-0.82 ms
    6144     24 MiB    1.45 ms        1.22-1.26 ms
    8192     32 MiB    1.95-2.14 ms   1.74 ms
    16384    64 MiB    4.8-4.9 ms     3.84 ms (4.18 unaligned, see below)

While input and output fit in the L3 together the output is still in cache
for its reader and plain stores win, so only outputs of at least
``stream_min_bytes`` (HALOJIT_STREAM_STORES; by default 3/4 of the L3, the
fraction glibc's memcpy also switches to non-temporal stores at) stream.

Alignment: LLVM splits a non-temporal store that is not aligned to its
width into aligned pieces, down to 8-byte ``movnti`` from general
registers. Knowing 16 bytes gives two ``vmovntdq`` per 8 floats (3.84 ms
above) instead of eight ``movnti`` (4.18 ms). A streamed output therefore
asks for a 16-byte aligned host pointer and outer strides that are
multiples of 16 bytes (Halide asserts both; the executor hands a kernel
only such arrays, copying through an aligned one for any other ``out=``).
32-byte alignment would allow ``vmovntps`` on the whole vector, but numpy's
large arrays sit 16 bytes past a page.

Rows that are not 16-byte multiples were slower: the 4096x4096 blur
(output rows of 4094 floats, 8 bytes off every other row) ran 6.2-7.2 ms
where inputs 4098-4162 wide (output rows 16-byte multiples) ran 4.8-5.7
ms per 4096 columns (same process, 2-core AVX2 VM). Tried and dropped:
splitting each vector store at run time by its address (``movnti`` up
to the next 16-byte boundary, aligned 16-byte stores after it, inlined
through llvmlite's always-inliner): 6.2-7.4 ms, no gain; plain stores on
the unaligned rows: 7.0-7.2 ms. What works is shifting whole rows so that
every vector store is aligned (``row_shift``): the Stencil template's
output is then one update whose vector loop starts at each row's first
16-byte boundary (lowering.Lowerer._define_shifted), and its vector
stores are marked 16-byte aligned here (``mark_nontemporal``'s
``realign``). The 4096x4096 blur on the 2-core AVX-512 VM, ``out=``,
``halojit bench`` medians, old and new trees in turn, two rounds: 5.41 ->
4.81 and 5.04 -> 4.19 ms (inputs 4098 wide, whose output rows are 16-byte
multiples, took 4.0-4.4 in a script's runs).
"""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path

import halide as hl
import numpy as np

from ..config import get_config
from ..graph.ir import Graph

# Halide's LLVM major version (halide==21.* wheels): llvmlite must read its bitcode.
HALIDE_LLVM_MAJOR = 21
ALIGN = 16  # bytes: the widest alignment every numpy array of this size has


@lru_cache(maxsize=1)
def _installed() -> bool:
    """Whether llvmlite is installed, without importing it (60 ms) or reading
    its version (importlib.metadata, 23 ms): a new process running cached
    kernels must pay neither. One too old is found when a kernel is built
    (``_llvm``), which then keeps plain stores."""
    return importlib.util.find_spec("llvmlite") is not None


@lru_cache(maxsize=1)
def _llvm():
    """llvmlite's binding module, initialised for x86, or None when missing or too old."""
    try:
        import llvmlite.binding as llvm
    except ImportError:
        return None
    if llvm.llvm_version_info[0] < HALIDE_LLVM_MAJOR:
        return None
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


def _large(nodes, target) -> tuple[int, ...]:
    """Indices of ``nodes`` (graph inputs or outputs) of at least the
    configured size, on x86-64 CPU targets with llvmlite installed."""
    min_bytes = get_config().stream_min_bytes
    if not min_bytes or target is None:
        return ()
    found = tuple(k for k, o in enumerate(nodes) if o.aval.size * o.dtype.itemsize >= min_bytes)
    if (not found or target.has_gpu_feature() or target.arch != hl.TargetArch.X86
            or target.bits != 64 or not _installed()):
        return ()
    return found


# Templates whose outputs keep plain stores: Transpose writes each output
# row a block (8 floats, half a cache line) at a time, 8 rows interleaved,
# so its streaming stores left partial lines in the write-combining
# buffers. x.T + y, 2-core Intel Xeon (Sapphire Rapids class) KVM VM under
# load, medians of 7: (3000, 3000) 57.6 -> 39.1 ms plain, (4000, 4000) 127
# -> 68 (numpy 41-44, 78).
PLAIN_STORE_TEMPLATES = ("Transpose",)


def stream_outputs(local: Graph, target, spec=None) -> tuple[int, ...]:
    """Indices of ``local``'s outputs a kernel for ``target`` scheduled by
    ``spec`` writes with streaming stores: on x86-64 CPU targets with
    llvmlite installed, the outputs of at least the configured size whose
    rows are 16-byte multiples (``alignable``), or whose rows the kernel
    shifts to 16-byte boundaries (``shifted_rows``).

    Other rows stream as 8-byte ``movnti`` with partial lines at every row's
    ends, which a 2-core Intel Xeon (Sapphire Rapids class) KVM VM pays for
    dearly: relu(x + b) on 16M float32 elements into out=, rows 1023, 1021,
    4094 and 333 wide, 21-40 ms streamed against 10-17 ms with plain stores
    (1024-wide rows: 14-17 ms either way). On the 2-core AMD VM they gained
    little over plain stores (the 4096x4096 blur's 4094-wide rows: 6.2-7.2
    against 7.0-7.2 ms, see above)."""
    if spec is not None and spec.name in PLAIN_STORE_TEMPLATES:
        return ()
    found = []
    for k in _large(local.outputs, target):
        out = local.outputs[k]
        if not alignable(out.shape, out.dtype.itemsize):
            if k:
                continue
            if shifted_rows(local, spec) is None:
                continue
        found.append(k)
    return tuple(found)


# Shifted rows (Lowerer.shift_rows) for rows of at least this many vectors:
# a row's leftover columns (up to a vector and 3) take per-lane loads and
# scalar stores, a few vectors' time; on the 4096x4096 blur (63 body
# vectors of 64 lanes a row) the aligned stores save 10-20% of the kernel
# (2-core AVX-512 VM), so rows a fraction as long would gain nothing.
SHIFT_MIN_BLOCKS = 16
# ... and blocks of at most this many lanes: the leftover columns' block
# compiles lane by lane (the 4096x4096 blur's kernel, 64 lanes: 0.77 s to
# compile, 32: 0.24, 16: 0.17; run times alike, 4.2-4.5 ms with out=)
SHIFT_MAX_LANES = 32


def shifted_rows(graph: Graph, spec) -> tuple[int, int, int] | None:
    """lowering.Lowerer.shift_rows for ``graph``'s first output under ``spec`` when
    that output streams: the Stencil template (whole rows, no x tiles) on
    rows that are not 16-byte multiples (streaming.row_shift) and at least
    SHIFT_MIN_BLOCKS vectors long; else None."""
    if spec is None or spec.name != "Stencil":
        return None
    from ..schedules.templates import stencil_fits, stencil_rows, stencil_vector
    out = graph.outputs[0]
    params = dict(spec.params)
    a = row_shift(out.shape, out.dtype.itemsize)
    vector = min(SHIFT_MAX_LANES, stencil_vector(params, out.shape[-1]))
    if a and stencil_fits(graph) and str(params.get("tile_x", "0")) == "0" \
            and vector % a == 0 and out.shape[-1] >= SHIFT_MIN_BLOCKS * vector:
        return a, vector, stencil_rows(params, out.shape[0])
    return None


def prefetch_inputs(local: Graph, target) -> tuple[int, ...]:
    """Indices of ``local``'s inputs whose loads may get software prefetches
    (``add_prefetch``), when the schedule template asks for them: the inputs
    of at least the streaming size, on the same targets. An input that fits
    in the L3 gains nothing: layernorm and the blur at 4 MiB ran 10-30%
    slower with them (0.23 -> 0.25-0.30 ms, 0.19 -> 0.21-0.22)."""
    return _large(local.inputs, target)


def alignable(shape, itemsize: int) -> bool:
    """Whether a streamed output of this shape asks for 16-byte alignment:
    when its rows are whole multiples of 16 bytes, so that every contiguous
    array of the shape has it. Others stream only with their rows shifted
    to 16-byte boundaries (``row_shift``; see ``stream_outputs``)."""
    return len(shape) < 2 or shape[-1] * itemsize % ALIGN == 0


def row_shift(shape, itemsize: int) -> int:
    """For a streamed 2-D output whose rows are not whole multiples of
    ALIGN bytes: the elements per ALIGN bytes, which a kernel shifts each
    row's vector loop by (lowering.Lowerer.shift_rows) so that its stores
    are aligned; else 0."""
    if len(shape) != 2 or alignable(shape, itemsize) or ALIGN % itemsize or shape[-1] < ALIGN:
        return 0
    return ALIGN // itemsize


def prepare_output(func, shape) -> str:
    """Declare streamed output ``func``'s buffer 16-byte aligned and, when
    its shape allows (``alignable``), its outer strides (of the dims longer
    than 1) multiples of 16 bytes, so Halide marks its vector stores
    aligned. (The host alignment alone serves shifted rows, ``row_shift``.)
    Returns the buffer's name."""
    buf = func.output_buffer()
    itemsize = func.type().bytes()
    buf.set_host_alignment(ALIGN)
    if alignable(shape, itemsize):
        step = ALIGN // itemsize
        for d, extent in enumerate(reversed(shape)):
            if d and extent > 1:
                stride = buf.dim(d).stride()
                buf.dim(d).set_stride((stride // step) * step)
    return buf.name()


def aligned_for_stream(a: np.ndarray) -> bool:
    """True when ``a`` meets what a streamed output's kernel asserts
    (``prepare_output``): a 16-byte aligned address and, where its shape
    is ``alignable``, 16-byte multiple outer strides."""
    if a.ctypes.data % ALIGN:
        return False
    if not alignable(a.shape, a.itemsize):
        return True
    return all(s % ALIGN == 0 for s, e in zip(a.strides[:-1], a.shape[:-1]) if e > 1)


_META = re.compile(r"^(!\d+) = !\{(.*)\}$", re.M)
_VECTOR_STORE = re.compile(r"^\s*store <\d+ x ")
_STORE_ALIGN = re.compile(r", align (\d+),")


def _tbaa_tags(text: str, names) -> dict[str, set[str]]:
    """Per buffer name, the TBAA access tags of its loads and stores.

    Halide tags every buffer access: a type node ``!{!"name", !root, i64 0}``,
    nested nodes for known index ranges under it, and access tags
    ``!{!type, !type, i64 0}``."""
    parent, label, tags = {}, {}, {}
    for node, body in _META.findall(text):
        m = re.fullmatch(r'!"([^"]*)", (!\d+), i64 0', body)
        if m:
            label[node], parent[node] = m.group(1), m.group(2)
            continue
        m = re.fullmatch(r"(!\d+), (!\d+), i64 0", body)
        if m and m.group(1) == m.group(2):
            tags[node] = m.group(1)

    def owner(node):
        for _ in range(64):  # up a chain of nested index-range nodes
            if node not in label:
                return None
            if label[node] in names:
                return label[node]
            node = parent[node]
        return None

    found: dict[str, set[str]] = {name: set() for name in names}
    for tag, node in tags.items():
        name = owner(node)
        if name is not None:
            found[name].add(tag)
    return found


def mark_nontemporal(text: str, names, realign=()) -> tuple[str, list[str]]:
    """LLVM IR ``text`` with ``!nontemporal`` on every store into the buffers
    ``names`` that the module never loads from (an output read back, by an
    update stage or a later stage, keeps plain stores), and an ``sfence``
    before each return of a function that has such stores, so the data is
    visible to any thread once the kernel (or a parallel task) returns.
    Vector stores into the streamed buffers named in ``realign`` (written
    with shifted rows, ``row_shift``: every one starts at a 16-byte
    boundary) are marked ALIGN-byte aligned, which Halide cannot prove;
    their scalar stores (the leftover columns at both ends of each row,
    written per lane after the row's body, some lanes repeating the last
    column) stay plain. Streamed, those few stores per row (partial lines,
    revisited after the body's stores to the same lines) cost the 4096x4096
    blur half its speed on a 2-core Intel Xeon (Sapphire Rapids class) KVM
    VM: out= 16.2-21.4 ms, 1.6-2.1x a streamed copy of the input in the same
    process; plain, 9.7-13.4 ms, 0.96-1.25x the copy (2-core AMD VM: no
    such cost seen). Also returns the names streamed."""
    by_name = _tbaa_tags(text, set(names))
    loaded = set(re.findall(r"= load [^\n]*!tbaa (!\d+)", text))
    tags, streamed, aligned = set(), [], set()
    for name, found in by_name.items():
        if found and not found & loaded:
            tags |= found
            streamed.append(name)
            if name in realign:
                aligned |= found
    if not tags:
        return text, []
    ids = [int(n) for n in re.findall(r"^!(\d+) = ", text, re.M)]
    nt = f"!{max(ids, default=0) + 1}"

    def store(m):
        line = m.group(0)
        if m.group(1) in tags and "!nontemporal" not in line and " atomic " not in line:
            if m.group(1) in aligned:
                if not _VECTOR_STORE.match(line):
                    return line  # a shifted row's leftover columns: plain (see above)
                line = _STORE_ALIGN.sub(
                    lambda a: f", align {max(ALIGN, int(a.group(1)))},", line, count=1)
            return f"{line}, !nontemporal {nt}"
        return line
    body = re.sub(r"^\s*store [^\n]*!tbaa (!\d+)[^\n]*$", store, text, flags=re.M)

    def fence(m):
        fn = m.group(0)
        if "!nontemporal" not in fn:
            return fn
        return re.sub(r"^(\s*)ret ", r"\1call void @llvm.x86.sse.sfence()\n\1ret ", fn, flags=re.M)
    body = re.sub(r"^define [^\n]*\{\n.*?^\}$", fence, body, flags=re.M | re.S)
    if "declare void @llvm.x86.sse.sfence()" not in body:
        body += "\ndeclare void @llvm.x86.sse.sfence()\n"
    return body + f"\n{nt} = !{{i32 1}}\n", streamed


def _module_flag(text: str, key: str) -> str:
    m = re.search(rf'!\{{i32 \d+, !"{key}", !"([^"]*)"\}}', text)
    return m.group(1) if m else ""


_VECTOR_LOAD = re.compile(r"^(\s*)%[\w.]+ = load <\d+ x \w+>, ptr (%[\w.]+), align \d+[^\n]*"
                          r"!tbaa (!\d+)[^\n]*$", re.M)


def add_prefetch(text: str, distances: dict[str, int]) -> tuple[str, list[str]]:
    """LLVM IR ``text`` with a software prefetch (``prefetcht0``) of the
    address ``distances[name]`` bytes ahead before every dense vector load
    from the input buffer ``name``; also returns the names prefetched (those
    with such loads), in ``distances``' order.

    For the schedule templates whose tasks alternate between reading new
    rows from memory and computing on rows in L1 (RowReduce: a block's
    reductions, then its compute passes; Stencil: a new input row, then the
    row's arithmetic), so that the next block's (row's) loads are in flight
    while the current one computes. The hardware prefetcher alone leaves
    the memory idle in the compute phases: out of cache these kernels took
    about the sum of their in-cache time and a copy's. Prefetching past a
    buffer's end is harmless (a prefetch never faults).

    2-core AVX2 VM (AMD EPYC), float32, ``out=``, min of 21 interleaved
    calls, one process, two runs, no prefetch -> prefetch one block (row)
    and at least 16 KiB ahead: softmax (16384, 1024) 10.4 -> 9.1 and 11.2
    -> 9.8 ms, layernorm 6.7 -> 5.4 and 7.1 -> 6.1, blur3x3 (4096, 4096)
    7.0 -> 6.5 and 7.8 -> 7.1 (a copy: 3.8-4.3). 8 KiB ahead helped less
    (softmax 10.0, layernorm 6.0), 24-64 KiB the same or less; prefetcht1
    the same as prefetcht0. Not used elsewhere: elementwise kernels
    (GELU, the chain, bias+relu) changed within noise, and the row and
    full sums (read-only streams) ran 0-20% slower."""
    tags = {t: name for name, found in _tbaa_tags(text, set(distances)).items() for t in found}
    count, found = 0, set()

    def load(m):
        nonlocal count
        name = tags.get(m.group(3))
        if name is None:
            return m.group(0)
        count += 1
        found.add(name)
        indent, ptr, ahead = m.group(1), m.group(2), f"%hj.prefetch.{count}"
        return (f"{indent}{ahead} = getelementptr i8, ptr {ptr}, i64 {distances[name]}\n"
                f"{indent}call void @llvm.prefetch.p0(ptr {ahead}, i32 0, i32 3, i32 1)\n"
                + m.group(0))
    text = _VECTOR_LOAD.sub(load, text)
    if count and "declare void @llvm.prefetch.p0(" not in text:
        text += "\ndeclare void @llvm.prefetch.p0(ptr, i32, i32, i32)\n"
    return text, [name for name in distances if name in found]


def streamed_object(bitcode: Path, names, obj: Path, asm: Path | None = None,
                    prefetch: dict[str, int] | None = None,
                    realign=()) -> tuple[list[str], list[str]]:
    """Write the object code of Halide ``bitcode`` to ``obj`` (and its
    assembly to ``asm``) with streaming stores into the output buffers
    ``names`` and the software prefetches ``prefetch`` (input buffer name
    -> bytes ahead, ``add_prefetch``), the vector stores into ``realign``
    marked aligned (``mark_nontemporal``); returns the names streamed (none
    when every one is read back: the object then has plain stores) and the
    input names prefetched."""
    llvm = _llvm()
    if llvm is None:
        raise RuntimeError("streaming stores and prefetches need llvmlite with LLVM "
                           f">= {HALIDE_LLVM_MAJOR}: pip install 'llvmlite>=0.50'")
    module = llvm.parse_bitcode(bitcode.read_bytes())
    text, streamed = mark_nontemporal(str(module), names, realign)
    text, prefetched = add_prefetch(text, prefetch) if prefetch else (text, [])
    if streamed or prefetched:
        module = llvm.parse_assembly(text)
        module.verify()
    triple = module.triple or llvm.get_default_triple()
    machine = llvm.Target.from_triple(triple).create_target_machine(
        cpu=_module_flag(text, "halide_mcpu_target"), features=_module_flag(text, "halide_mattrs"),
        opt=3, reloc="pic", codemodel="default")
    obj.write_bytes(machine.emit_object(module))
    if asm is not None:
        asm.write_text(machine.emit_assembly(module))
    return streamed, prefetched
