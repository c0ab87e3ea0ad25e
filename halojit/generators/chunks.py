"""How a reduction's per-lane partials are cut into parallel chunks: shape
logic only, without Halide, so that choosing a default schedule (a new
process loading cached kernels) does not import the lowering.
"""

from __future__ import annotations

import numpy as np

# A reduction over the last axis of at least this many elements keeps
# per-lane partial results (a pure dimension, vectorizable without atomics,
# which strict_float floats and NaN-aware max cannot use), then combines
# them: GPU_ROW_LANES of them for GPU targets, one native float32 vector (at
# most LANES) for CPU targets (lowering.partial_lanes).
LANES = 16
SPLIT_MIN = 4 * LANES
CHUNKS = 64
# Chunks of the last axis (a full 1-D reduction) need that many elements in
# all (smaller inputs are compiled for one core: build.SERIAL_MAX_ELEMENTS)
# and at least LAST_CHUNK_VECTORS vectors each; chunks of another reduced
# axis need it OUTER_CHUNKS_MIN long.
LAST_CHUNK_MIN = 1 << 15
LAST_CHUNK_VECTORS = 1024
LAST_CHUNKS = 16
# A reduction over the last axis on a GPU keeps GPU_ROW_LANES partials per
# row, a thread each. H100, bench/ sizes, ms a call, 16 -> 64 lanes:
# softmax (16384, 1024) 0.34 -> 0.21, layernorm 0.47 -> 0.26, row sum
# (4096, 4096) 0.26 -> 0.16.
GPU_ROW_LANES = 64
# A full reduction on a GPU: chunks of GPU_LANES lanes, a thread block each,
# combined in shared memory before the chunks are (lowering.lower_reduce).
GPU_LANES = 256
GPU_CHUNKS = 256
OUTER_CHUNKS_MIN = 16


def chunking(in_shape, axes, out_shape):
    """How lower_reduce cuts a reduction into parallel chunks: ("outer", axis)
    chunks another reduced axis, ("last", None) the last axis itself (a full
    1-D reduction; only when the output is too small to give the cores work),
    (None, None) none (one partial per lane)."""
    last = len(in_shape) - 1
    n = in_shape[last] if in_shape else 0
    if not axes or last not in axes or n < SPLIT_MIN:
        return None, None
    outer = [a for a in axes if a != last]
    # the longest other reduced axis (the outermost of equals)
    o = max(outer, key=lambda a: (in_shape[a], -a)) if outer else None
    if outer and in_shape[o] >= OUTER_CHUNKS_MIN:
        return "outer", o
    out_size = int(np.prod(out_shape, dtype=np.int64))
    if out_size < CHUNKS and n >= LAST_CHUNK_MIN:
        return "last", None
    return ("outer", o) if outer else (None, None)
