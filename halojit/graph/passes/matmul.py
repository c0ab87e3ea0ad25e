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

from ..ir import Graph, Node
from ..ops import REGISTRY
from .rewrite import rebuild

# Packed-B bytes per panel column that still fit L2 next to A's rows: K up
# to 4096 float32 (16 KiB per column, 1 MiB per 64-column panel) runs at
# numpy's speed, 8192 at two-thirds of it.
MAX_CHUNK_BYTES = 16 << 10
# below this many flops the matmul runs serially anyway (templates.SERIAL_MAX_FLOPS)
MIN_FLOPS = 1 << 21


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
    """Every 2-D float32/float64 matmul whose K is too long for a packed
    panel becomes a batched matmul over K chunks and a sum of the chunks."""
    def split(n: Node):
        if n.op != "matmul":
            return None
        a, b = n.inputs
        if a.aval.ndim != 2 or b.aval.ndim != 2 or n.dtype.kind != "f" or n.dtype.itemsize < 4:
            return None
        (m, k), nn = a.shape, b.shape[1]
        chunks = chunk_count(m, k, nn, n.dtype.itemsize)
        if chunks == 1:
            return None
        kc = k // chunks

        def node(op, inputs, **params):
            aval = REGISTRY[op].infer([i.aval for i in inputs], params, n.loc)
            return Node(op, inputs, params, aval, n.loc)
        a3 = node("reshape", (a,), shape=(m, chunks, kc))
        at = node("transpose", (a3,), perm=(1, 0, 2))
        b3 = node("reshape", (b,), shape=(chunks, kc, nn))
        return node("sum", (node("matmul", (at, b3)),), axes=(0,), keepdims=False)
    return rebuild(graph, split)
