"""The Select template: a group with one ``select`` (lowering.lower_select:
the values at a few positions of a sorted axis, for np.median and
np.quantile of long rows) and elementwise or movement ops around it.

The keys are computed at root, vectorized and in parallel chunks, with
whatever feeds them inlined. Each radix pass then counts the keys into
its bins in one serial loop over the axis, the positions (``kth``) inside
it and unrolled, so the keys are read once per pass for all of them;
with several rows, rows run in parallel. The bins' sums, the digit and
the rank are tiny and computed at root. The group's outputs read the
selected values.
"""

from __future__ import annotations

from ..errors import HalojitError

SELECT = ({"vector": "16", "parallel": "1"},
          "order statistics of long rows (median, percentile): the keys vectorized "
          "vector lanes wide, in parallel chunks when large (parallel=0: none); each "
          "radix pass one serial count over the row, rows in parallel")

SELECT_STAGES = ("selkey", "selhist0", "selcum0", "selhist", "selcum", "seldigit", "selrank",
                 "selpart", "selnext", "selected")


def select_fits(graph) -> bool:
    """Exactly one select, and no reduction, scan, sort, scatter or matmul
    (fusion keeps them out of its group)."""
    from ..graph.ops.reduce import SELECTS
    from .sort import one_lone_loop
    return one_lone_loop(graph, SELECTS)


def apply_select(lowered, params) -> str:
    from .templates import _int, fix_extents, schedule_rows
    vector = _int(params, "vector")
    parallel = params.get("parallel", "1") != "0"
    fix_extents(lowered)
    stages = [st for st in lowered.stages if st.kind in SELECT_STAGES]
    keys = [st for st in stages if st.kind == "selkey"]
    if len(keys) != 1:
        raise HalojitError("Select does not apply to this group")
    (key,) = keys
    size, n = 1, key.shape[-1]
    for d in key.shape:
        size *= d
    lines = []
    for other in lowered.stages:
        if other.kind not in SELECT_STAGES:
            other.func.compute_inline()
            lines.append(f"{other.func.name()}.compute_inline()")
    key.func.compute_root()
    lines.append(schedule_rows(key.func, size, n, vector, parallel) + ".compute_root()")
    for st in stages:
        if st is key:
            continue
        f = st.func
        f.compute_root()
        args = f.args()
        if st.kind in ("selhist0", "selcum0"):  # the first pass: no positions
            if st.kind == "selhist0":
                upd = f.update()
                rows = args[1:]
                text = f"{f.name()}.compute_root()"
                if parallel and rows:
                    upd.parallel(rows[-1])
                    text += f".update().parallel({rows[-1].name()})"
                lines.append(text)
            else:
                lines.append(f"{f.name()}.compute_root()")
            continue
        j = args[1] if st.kind in ("selhist", "selcum", "selpart") else args[0]
        f.bound(j, 0, st.shape[-1])  # the positions the stage computes
        if st.kind == "selpart":
            # per-lane partials: the row's chunks outside, the positions
            # unrolled inside, the lanes a vector
            upd = f.update()
            upd.reorder(args[0], j, st.rdom.x, *args[2:])
            upd.vectorize(args[0])
            upd.unroll(j)
            f.vectorize(args[0])
            lines.append(f"{f.name()}.compute_root().vectorize(lane).update()"
                         f".reorder(lane, kth, r, rows).vectorize(lane).unroll(kth)")
        elif st.kind == "selhist":
            # the row's loop outside, the positions inside it, unrolled
            upd = f.update()
            rows = args[2:]
            upd.reorder(j, st.rdom.x, *rows)
            upd.unroll(j)
            text = f"{f.name()}.compute_root().update().reorder(kth, r, rows).unroll(kth)"
            if parallel and rows and len(key.shape) > 1:
                outer = rows[-1]
                upd.parallel(outer)
                text += f".parallel({outer.name()})"
            lines.append(text)
        else:
            lines.append(f"{f.name()}.compute_root()")
    for out, node in zip(lowered.outputs, lowered.graph.outputs):
        last = node.shape[-1] if node.shape else 1
        lines.append(schedule_rows(out, node.aval.size, last, vector, parallel))
    return "\n".join(lines)
