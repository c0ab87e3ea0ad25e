"""The Concat template: a group whose one output is a concatenation or a
pad along its last axis (``np.concatenate([a, b], axis=-1)``, ``np.hstack``,
``np.roll(x, k, axis=-1)``, ``np.pad(x, 2, mode="reflect")``), of values
computed elementwise from the inputs and slices of them.

Written as one definition, such an output selects its piece per element:
each vector loads from every piece through a clamped, data-dependent index
(per-lane gathers), and Halide's loop partitioning finds no steady state
common to the pieces' clamps. Here the output is undefined as a whole and
each piece is an update over its own columns (lowering.concat_pieces): its
loads are plain vector loads at an offset. Each update is a parallel pass
over tasks of rows, its columns vectorized; the pieces' passes write
disjoint columns, so the output moves through memory once in all.

Measured on the 2-core AVX-512 KVM VM, float32 (2048, 2048), Halide JIT,
two threads, best of 30: ``np.roll(x, 5, axis=1)`` as one select 1.89 ms,
as two updates 0.38 (a plain copy 0.39; numpy 1.05); ``np.concatenate([a,
b], axis=1)`` 3.6 -> 1.7 ms. Computing the pieces per strip of rows into
a scratch buffer and copying that out (one pass) took 0.88 ms for the roll.
"""

from __future__ import annotations

import halide as hl

from ..graph.ops import inlines

CONCAT = ({"vector": "64", "task_kib": "1024", "parallel": "1"},
          "a concatenation or pad along the last axis as the group's output: one "
          "update per piece over its own columns (plain vector loads, vector lanes "
          "wide), each in parallel tasks of about task_kib KiB of output rows (one "
          "serial task with parallel=0)")

# the output's last axis must be at least this wide (narrower ones, such as
# np.stack of channels, take the Elementwise template's fused axes)
MIN_WIDTH = 16


def concat_fits(graph) -> bool:
    """One output, a concatenation along its last axis or a pad of it,
    computed from inputs by elementwise ops, broadcasts, slices and
    reshapes by axes of length 1 (every value inlines into the pieces), no
    array of size 0."""
    if len(graph.outputs) != 1:
        return False
    out = graph.outputs[0]
    if out.aval.ndim < 1 or out.shape[-1] < MIN_WIDTH:
        return False
    from .templates import stacked_columns
    # 16 single columns side by side: the Elementwise template's unrolled
    # columns (np.linalg.inv of (100000, 4, 4) float32: 23 ms here, 1.6 there)
    if stacked_columns(out) and all(x.shape[-1] == 1 for x in out.inputs):
        return False
    if out.op == "concatenate":
        if out.params["axis"] != out.aval.ndim - 1:
            return False
    elif out.op != "pad" or tuple(out.params["pad_width"][-1]) == (0, 0):
        return False
    return all(n.aval.size > 0 and (n is out or n.op in ("input", "constant", "slice")
                                    or inlines(n) or unit_reshape(n)) for n in graph.nodes)


def unit_reshape(node) -> bool:
    """A reshape that only inserts or drops axes of length 1 (``x[None]``,
    np.tile's leading axes): its lowering renames indices."""
    if node.op != "reshape":
        return False
    keep = lambda shape: tuple(d for d in shape if d != 1)  # noqa: E731
    return keep(node.shape) == keep(node.inputs[0].shape)


def apply_concat(lowered, params) -> str:
    from .templates import fuse_loops, inline_stages, task_params, trig_fast_paths
    vector, task_kib, parallel = task_params(lowered, params)
    out = lowered.outputs[0]
    node = lowered.graph.outputs[0]
    shape = node.shape
    width = shape[-1]
    n_rows = node.aval.size // width
    per_task = max(vector, task_kib * 1024 // max(1, node.dtype.itemsize))
    guard = hl.TailStrategy.GuardWithIf
    inline_stages(lowered)
    lines = []
    tasks = parallel and node.aval.size >= 2 * per_task
    name = out.name()
    for u, (rdom, extent) in enumerate(lowered.piece_rdoms):
        stage = out.update(u)
        r = rdom.x
        line = f"{name}.update({u})"
        outer = out.args()[1:]  # Halide order, the pure Vars of the rows
        if tasks and outer:
            row = fuse_loops(stage, outer[0], list(outer[1:]), f"row{u}_")
            rows = max(1, min(n_rows, per_task // width))
            ro, ri = hl.Var(f"ro{u}"), hl.Var(f"ri{u}")
            stage.split(row, ro, ri, rows, guard).parallel(ro)
            line += f".split(rows, ro, ri, {rows}).parallel(ro)"
        elif tasks:
            ro, ri = hl.RVar(f"r{u}o"), hl.RVar(f"r{u}t")
            stage.split(r, ro, ri, per_task // vector * vector, guard).parallel(ro)
            line += f".split(r, ro, ri, {per_task // vector * vector}).parallel(ro)"
            r = ri
        lanes = vector
        while lanes > 8 and lanes > extent:  # a narrow piece: one short vector
            lanes //= 2
        if n_rows == 1 and not tasks and extent < lanes:
            # one vector of exactly the piece's width: a predicated tail at
            # constant indices may run backwards from index 0 (np.pad(a, 3,
            # mode="reflect")), which Halide 21 cannot generate (see
            # Lowerer._define_pieces)
            stage.vectorize(r)
            line += ".vectorize(r)"
        else:
            ro, ri = hl.RVar(f"r{u}v"), hl.RVar(f"r{u}i")
            stage.split(r, ro, ri, lanes, guard).vectorize(ri)
            line += f".vectorize(r, {lanes})"
        lines.append(f"{line}  # piece {u}: {extent} columns")
    return "\n".join(lines + trig_fast_paths(lowered, [out]))
