"""Split a matmul's long inner dimension into chunks (a CPU code-generation
pass, run before fusion on the graphs the Halide backend compiles).

The Matmul template packs B one panel of columns at a time and keeps each
register block's accumulators over all of K; once a packed panel (K x 64
float32) no longer fits the core's L2, every block streams it from memory.
A @ B with a long K is computed here as ``sum(A_c @ B_c)`` over ``chunks``
slices of K instead: one batched matmul, (chunks, M, K/chunks) @ (chunks,
K/chunks, N), whose tasks (one per chunk and panel) also give a thin matmul
(a Gram matrix ``x.T @ x`` of a tall x) parallel work, then a sum over the
chunks. The summation order changes, as it does between BLAS libraries;
float results stay within the matmul tests' tolerances.

Measured (2-core AVX-512 VM, float32, medians of 7-9 calls, numpy =
OpenBLAS, same process; with the runtime's block cache, see
csrc/runtime/halide_runtime.cpp): (512, 8192) @ (8192, 512) 24.2 -> 15.1
ms (numpy 15.4); ``x.T @ x`` for x of (100000, 64) 36.0 -> 5.9 ms (numpy
6.8), (65536, 256) 113 -> 41 (numpy 29-33), (20000, 512) 81 -> 43 (numpy
27: OpenBLAS's syrk computes only half of a symmetric product).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..ir import AbstractArray, Const, Graph, Node
from .rewrite import new_node, rebuild

# Packed-B bytes per panel column that still fit L2 next to A's rows: K up
# to 4096 float32 (16 KiB per column, 1 MiB per 64-column panel) runs at
# numpy's speed, 8192 at two-thirds of it.
MAX_CHUNK_BYTES = 16 << 10
# below this many flops the matmul runs serially anyway (templates.SERIAL_MAX_FLOPS)
MIN_FLOPS = 1 << 21
# Matmuls of at most this many rows read B in place without packing it
# (templates._apply_few_rows), and those with a long K split it per task
# inside the kernel (few=2): they stay whole here. Split -> whole (numpy),
# float32, 2-core Zen 4 VM, medians of 9 interleaved: (1, 100000) @
# (100000, 64) 1.47 -> 0.64 ms (1.31), (1, 16384) @ (16384, 1024) 6.8 ->
# 2.3 (2.4-3.0), (1, 65536) @ (65536, 256) 6.4 -> 2.0 (3.8-4.0), M = 2 of
# (16384, 1024) 6.3 -> 4.2 (6.2), M = 4 of (8192, 4096) 13.4 -> 10.4
# (11.5-14). At 5 rows the split won (6.6 against 7.3), at 12 by more
# (4.3 against 7.2).
FEW_ROWS = 4
# ... when their width is a multiple of this: the template reads B in place
# in whole column blocks only (templates.matmul_block: 32 float32 columns
# with AVX-512, 16 with AVX2 or float64). A ragged width is packed, and a
# packed K past the L2 is what the split is for: (1, 16384) @ (16384, 1000)
# 7.0 split, 7.5 whole (numpy 2.7), (4, 8192) @ (8192, 300) 0.45 / 1.41
# (0.53).
IN_PLACE_COLUMNS = 32


def chunk_count(m: int, k: int, n: int, itemsize: int) -> int:
    """How many chunks to cut K into: the fewest whose length fits
    MAX_CHUNK_BYTES, among the divisors of K (1: no split)."""
    if k * itemsize <= MAX_CHUNK_BYTES or 2 * m * n * k < MIN_FLOPS:
        return 1
    need = -(-k * itemsize // MAX_CHUNK_BYTES)
    for chunks in range(need, min(k, 8 * need) + 1):
        if k % chunks == 0:
            return chunks
    return 1


def split_long_matmuls(graph: Graph) -> Graph:
    """Every 2-D float32/float64 matmul whose K is too long for a packed panel
    becomes a batched matmul over K chunks and a sum of the chunks, unless
    the template reads its B in place (FEW_ROWS, IN_PLACE_COLUMNS)."""
    def split(n: Node):
        if n.op != "matmul":
            return None
        a, b = n.inputs
        if a.aval.ndim != 2 or b.aval.ndim != 2 or n.dtype.kind != "f" or n.dtype.itemsize < 4:
            return None
        (m, k), nn = a.shape, b.shape[1]
        if m <= FEW_ROWS and nn % IN_PLACE_COLUMNS == 0:
            return None
        chunks = chunk_count(m, k, nn, n.dtype.itemsize)
        if chunks == 1:
            return None
        kc = k // chunks

        node = partial(new_node, loc=n.loc)
        a3 = node("reshape", (a,), shape=(m, chunks, kc))
        at = node("transpose", (a3,), perm=(1, 0, 2))
        b3 = node("reshape", (b,), shape=(chunks, kc, nn))
        return node("sum", (node("matmul", (at, b3)),), axes=(0,), keepdims=False)
    return rebuild(graph, split)


# A matmul with an inner dimension this short and as few output columns
# becomes elementwise (``expand_short_matmuls``). Measured (2-core AVX-512
# VM, (2**20, K) @ (K, N) float32, best of 21, Matmul template -> expanded,
# numpy): K x N = 3x3 3.98 -> 0.50 ms (2.81), 4x4 3.28 -> 0.85 (1.71),
# 8x4 4.31 -> 2.25 (2.08), 7x3 4.11 -> 1.62 (2.14), 8x1 2.38 -> 1.36
# (1.06), float64 8x3 84 -> 2.2 (6.5); but N of 5-8 ran 1.1-3.3x slower
# expanded (5x8 3.6 -> 10.7 ms, 3x5 3.0 -> 3.8): every product reads A's
# element through a per-lane gather of the short-axis loop.
SHORT_K = 8
SHORT_N = 4

# X @ v with v this short or shorter is traced as an elementwise sum of X's
# columns (numpy_api._vector_product), whose strided channel reads the
# Elementwise template loads as vectors and shuffles (templates.channel_pick).
# Measured against the row reduction of X * v it replaced (2-core Zen 4 VM,
# float32, medians of 11 interleaved with numpy, ms): (2**20, K) for K = 2,
# 3, 4: 0.59 -> 0.18, 0.82 -> 0.65, 1.07 -> 0.95 (numpy 0.23, 1.4-2.0,
# 1.0-1.7); (2**16, K): 0.023 -> 0.010, 0.034 -> 0.013, 0.042 -> 0.019
# (numpy 0.024-0.11); (512, 512, 3) 0.15 -> 0.057 (numpy 0.084). Wider
# rows lose: the shuffles of 5, 7 or 8 lanes apart cost more than the
# reduction (K = 8: 2.1 -> 4.1 ms, numpy 1.3-1.4).
SHORT_CHANNELS = 4


def expand_short_matmuls(graph: Graph) -> Graph:
    """A @ B with K <= SHORT_K and N <= SHORT_N, such as points (n, 3) @ R.T,
    a color transform of an HWC image or a projection (n, 8) @ w of a few
    columns, becomes the elementwise sum
    0 + A[..., :, 0:1] * B[..., 0:1, :] + ... over K, summed in the order
    the matmul lowering sums it (from +0.0, as numpy's matmul, so that
    products of -0.0 give +0.0). Then it fuses with the ops around it and
    takes the Elementwise template for short last axes, where the Matmul
    template vectorized along N (3 of 16 lanes used) and Adams2019 walked
    it serially. float16 (a float32 accumulator rounded once) and bool
    keep the matmul."""
    def expand(n: Node):
        if n.op != "matmul" or n.dtype.kind not in "iuf" or n.dtype == np.float16:
            return None
        a, b = n.inputs
        k, cols = a.shape[-1], b.shape[-1]
        if not 1 <= k <= SHORT_K or cols > SHORT_N or not a.dtype == b.dtype == n.dtype:
            return None

        node = partial(new_node, loc=n.loc)

        def column(x, j, axis):
            """x[..., j:j+1] (axis -1) or x[..., j:j+1, :] (axis -2); through
            a transpose of the last two axes (``R.T``) as a reshape of the
            source's slice, which the Elementwise template inlines."""
            nd = x.aval.ndim
            shape = list(x.shape)
            shape[axis] = 1
            if x.op == "transpose" and x.params["perm"] == (*range(nd - 2), nd - 1, nd - 2):
                part = column(x.inputs[0], j, -3 - axis)  # the other of the last two
                return node("reshape", (part,), shape=tuple(shape))
            starts = [0] * nd
            starts[axis] = j
            return node("slice", (x,), starts=tuple(starts), steps=(1,) * nd, shape=tuple(shape))
        acc = None
        if n.dtype.kind == "f":
            acc = Node("constant", (), {"value": Const(np.zeros((), n.dtype))},
                       AbstractArray((), n.dtype), n.loc)
        for j in range(k):
            p = node("multiply", (column(a, j, -1), column(b, j, -2)))
            acc = p if acc is None else node("add", (acc, p))
        return acc if acc.aval.shape == n.aval.shape and acc.dtype == n.dtype else None
    return rebuild(graph, expand)


def split_ragged_columns(graph: Graph) -> Graph:
    """A matmul of at most FEW_ROWS rows whose width is not a multiple of
    IN_PLACE_COLUMNS: B's widest part that is such a multiple read in place
    as one matmul, the last few columns as another (packed, a few KiB),
    concatenated.
    Whole, the template would pack all of B per call for these few rows.
    x (M, K) @ W (K, N) + b under tanh, float32, 2-core Zen 4 VM, medians
    of 9 interleaved, whole -> split (numpy): (1, 2048) @ (2048, 1000) 0.49
    -> 0.13 ms (0.07-0.09), (1, 16384) @ (16384, 1000) 6.5 -> 2.8 (2.5-3.2),
    (1, 4096) @ (4096, 1500) 2.2 -> 0.82 (0.52-0.58), (2, 4096) @ (4096,
    300) 0.31 -> 0.086 (0.21-0.23), (3, 8192) @ (8192, 100) 0.31 -> 0.19
    (0.17-0.19), (4, 4096) @ (4096, 1000) 1.85 -> 1.64 (1.57-1.67)."""
    def split(n: Node):
        if n.op != "matmul" or n.dtype.kind != "f" or n.dtype.itemsize < 4:
            return None
        a, b = n.inputs
        if a.aval.ndim != 2 or b.aval.ndim != 2:
            return None
        (m, k), cols = a.shape, b.shape[1]
        main = cols // IN_PLACE_COLUMNS * IN_PLACE_COLUMNS
        if m > FEW_ROWS or main in (0, cols) or 2 * m * cols * k < MIN_FLOPS:
            return None

        node = partial(new_node, loc=n.loc)

        def columns(start, count):
            return node("slice", (b,), starts=(0, start), shape=(k, count), steps=(1, 1))
        parts = [node("matmul", (a, columns(0, main))), node("matmul", (a, columns(main, cols - main)))]
        return node("concatenate", parts, axis=1)
    return rebuild(graph, split)
