"""Partition a graph into fusion groups, each of which becomes one kernel.

Greedy, in topological order: a node joins the groups of its producers when
its trait allows (elementwise, movement and reductions fuse with anything
fusible; a matmul starts its own group and takes elementwise consumers as its
epilogue; a sort or a scatter shares its group with no other op that loops
along an axis, so that the Sort or Scatter template schedules it) and the
merge creates no cycle between groups and keeps the group under
``MAX_INPUTS`` external inputs. Scalar constants are inlined; larger
constants become kernel inputs. Then elementwise work read only by a
scatter moves into the scatter's group (_sink_into_scatters).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ir import AbstractArray, Graph, Node, make_graph
from .ops import ELEMENTWISE, LINALG, MOVEMENT, REDUCTION, REGISTRY, SCAN, SCATTER, SORT

MAX_INPUTS = 16
FUSIBLE = (ELEMENTWISE, MOVEMENT, REDUCTION, SCAN, SORT, SCATTER)
# loops over an axis: never a matmul's prologue or epilogue
ALONG_AXIS = (REDUCTION, SCAN, SORT, SCATTER)
# loops that share a group with no other loop along an axis (their templates
# schedule the group around them)
LONE_LOOPS = (SORT, SCATTER)
VIEWS = ("transpose", "reshape")  # a matmul reads these of its operands in place
FULL_REDUCE_MIN = 1 << 12  # see partition's full_reduction


@dataclass(eq=False)
class Group:
    kind: str  # "fused" or "linalg"
    nodes: list[Node] = field(default_factory=list)
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)

    def __repr__(self):
        ops = ", ".join(n.op for n in self.nodes)
        return f"Group({self.kind}: {ops})"


def is_inlined(node: Node) -> bool:
    return node.op == "constant" and node.aval.size == 1


def is_compute(node: Node) -> bool:
    return node.op not in ("input", "constant")


def partition(graph: Graph, max_inputs: int = MAX_INPUTS, siblings: bool = True) -> list[Group]:
    """Greedy fusion of ``graph``'s nodes into groups, in topological order;
    ``siblings``: a large array's min and max share a group (CPU targets,
    _merge_sibling_extrema)."""
    group_of: dict[Node, Group] = {}
    anc: dict[Group, set] = {}  # groups each group depends on, transitively
    order: list[Group] = []
    # per group: how many of its nodes loop along an axis, and whether one of
    # them is a LONE_LOOPS op
    along: dict[Group, tuple[int, bool]] = {}

    def external_inputs(nodes):
        members = set(nodes)
        ext = []
        for n in nodes:
            for i in n.inputs:
                if i not in members and not is_inlined(i) and i not in ext:
                    ext.append(i)
        return ext

    users = graph.users()
    outs = set(graph.outputs)

    def merged_inputs(subset, s, n) -> list[Node]:
        """The external inputs of ``subset``'s groups (the set ``s``) and ``n``
        joined."""
        ext: dict[Node, None] = {}
        for i in [i for g in subset for i in ext_of[g]] + list(n.inputs):
            if group_of.get(i) not in s and i is not n and not is_inlined(i):
                ext[i] = None
        return list(ext)

    # per group: its reductions and its external inputs, kept as groups merge
    # (recomputing them from the members made partition quadratic: 4 s for
    # 20 unrolled RK4 steps, 1900 nodes in one group)
    reductions: dict[Group, list[Node]] = {}
    ext_of: dict[Group, list[Node]] = {}

    def full_reduction(g) -> bool:
        """Whether ``g`` reduces an array of FULL_REDUCE_MIN or more elements
        to one value. Two of them stay apart (``x.max() - x.min()``: the
        subtract joins one): the FullReduce template schedules one
        reduction a group, and Adams2019 took both together on (1024,
        1024) uint8 in 1.70 ms, where the two groups take 0.03 (2-core VM,
        one core, min of 9)."""
        return any(m.aval.size == 1 and m.inputs[0].aval.size >= FULL_REDUCE_MIN
                   for m in reductions[g])

    def after_full(g) -> bool:
        """Whether ``n`` (the node being placed) is a large value that reads
        only one-element values of ``g``, a group reducing a large array to
        one value: ``x - x.mean()`` inside ``x.var()``, ``x > x.min()``. It
        starts a group of its own (a second pass over the data), so that a
        reduction of it is never chained behind the first in one kernel:
        Adams2019 scheduled x / x.std() of 2**20 float32 so that it read
        its input at -8 (a crash), and (x > x.min()).mean() of (1024,
        1024) uint8 took 18.9 ms, numpy 0.60."""
        if n.aval.size < FULL_REDUCE_MIN or not full_reduction(g):
            return False
        return all(i.aval.size == 1 for i in n.inputs if group_of.get(i) is g)

    def reduces_reduced(g) -> bool:
        """Whether ``n`` is a reduction of a value of ``g`` computed from a
        reduction over leading axes in ``g`` of FULL_REDUCE_MIN or more
        elements and smaller than that one's input: the second stage of a
        two-stage reduction (passes/flatten.py's column reductions); not
        ``x.std(axis=0)``'s second sum, of ``x - mean``. It starts a
        group of its own, so that the first stage's group fits a reduction
        template: Adams2019 took the (2**20, 3) float32 column sum as one
        group of both stages in 1.9 ms, ColReduce and a small second group
        0.24 (2-core Zen 4 VM, one core)."""
        if REGISTRY[n.op].trait != REDUCTION or not reductions[g]:
            return False
        for i in n.inputs:
            seen, todo = set(), [i]
            while todo:
                m = todo.pop()
                if m in seen or group_of.get(m) is not g:
                    continue
                seen.add(m)
                if REGISTRY[m.op].trait == REDUCTION:
                    src = m.inputs[0].aval
                    if src.ndim - 1 not in m.params["axes"] and \
                            FULL_REDUCE_MIN <= src.size and i.aval.size < src.size:
                        return True
                todo.extend(m.inputs)
        return False

    def after_small(g) -> bool:
        """Whether ``n`` is a large value that reads only small values of
        ``g``, a group whose reductions all reduce small values (a
        two-stage reduction's second stage): ``x - x.mean(axis=0)`` of
        (2**20, 3) float32. It starts a group of its own, which a template
        schedules, where Adams2019 scheduled the whole as a small group,
        in one thread: 16 ms, against 0.93 apart (2-core Zen 4 VM)."""
        if n.aval.size < FULL_REDUCE_MIN or not reductions[g]:
            return False
        return all(m.inputs[0].aval.size < FULL_REDUCE_MIN for m in reductions[g]) and all(
            i.aval.size < FULL_REDUCE_MIN for i in n.inputs if group_of.get(i) is g)

    def is_prologue(g, n):
        """A reduction-free group read only by ``n``: a matmul absorbs it
        (a transpose or cast of its operand costs nothing inside the loop)."""
        members = set(g.nodes)
        return g.kind == "fused" and all(
            REGISTRY[m.op].trait not in ALONG_AXIS and m not in outs
            and all(u in members or u is n for u in users[m]) for m in g.nodes)

    def only_feeds_matmuls(n):
        return n not in outs and all(
            REGISTRY[u.op].trait == LINALG or (u.op in VIEWS and only_feeds_matmuls(u))
            for u in users[n])

    def feeds_matmul_alone(n, producers):
        """A transpose or reshape read only by matmuls (directly or through
        more of them), of a value whose group cannot be their prologue
        (``z.T @ z`` after column statistics, and its K chunks, see
        passes/matmul.py): it stays out of that group, which then stores
        the value once in its own layout, and becomes part of the matmul's
        prologue (an operand read in place). Joined, the group would also
        store the transposed copy, written down the columns."""
        return n.op in VIEWS and only_feeds_matmuls(n) and \
            any(not is_prologue(g, n) for g in producers)

    for n in graph.nodes:
        if not is_compute(n):
            continue
        trait = REGISTRY[n.op].trait
        n_along = (int(trait in ALONG_AXIS), trait in LONE_LOOPS)
        producers = []
        for i in n.inputs:
            g = group_of.get(i)
            if g is not None and g not in producers:
                producers.append(g)
        deps_all = set(producers)
        for p in producers:
            deps_all |= anc[p]

        def can_join(g):
            if g.kind == "linalg":
                return trait == ELEMENTWISE
            return trait in FUSIBLE

        if trait == LINALG:
            candidates = [g for g in producers if is_prologue(g, n)]
        elif feeds_matmul_alone(n, producers):
            candidates = []
        else:
            candidates = [g for g in producers
                          if can_join(g) and not after_full(g) and not reduces_reduced(g)
                          and not after_small(g)]
        # try joining all candidate groups at once, then each alone, largest first
        subsets = [candidates] if len(candidates) > 1 else []
        subsets += [[c] for c in sorted(candidates, key=lambda g: -len(g.nodes))]
        merged = None
        for subset in subsets:
            if sum(g.kind == "linalg" for g in subset) > 1:
                continue
            if len(subset) > 1 and any(g.kind == "linalg" for g in subset) and any(
                    REGISTRY[m.op].trait in ALONG_AXIS for g in subset for m in g.nodes):
                # an epilogue op reading a reduction (softmax's x - max of a
                # matmul's scores) would pull the reduction into the matmul's
                # group, which then fits no template
                continue
            if len(subset) > 1 and any(g.kind == "linalg" for g in subset) and any(
                    h in anc[g] for g in subset for h in subset if h.kind == "linalg"):
                # a group that reads the matmul's result elsewhere than the
                # epilogue's own element (np.corrcoef's diagonal) would join
                # it too: no template fits that either (Adams2019 took 0.66
                # ms for (64, 1024) float64, the split groups 0.21)
                continue
            loops = n_along[0] + sum(along[g][0] for g in subset)
            if loops > 1 and (n_along[1] or any(along[g][1] for g in subset)):
                continue  # a sort or scatter beside another axis loop: no template fits
            if len(subset) > 1 and sum(map(full_reduction, subset)) > 1:
                continue  # see full_reduction
            s = set(subset)
            outside = (deps_all | set().union(*(anc[g] for g in subset))) - s
            if any(anc[h] & s for h in outside):
                continue  # a path leaves the merged group and comes back: cycle
            if len(merged_inputs(subset, s, n)) > max_inputs:
                continue
            merged = subset
            break
        if merged is None:
            g = Group("linalg" if trait == LINALG else "fused", [n])
            reductions[g] = [n] if trait == REDUCTION else []
            ext_of[g] = external_inputs([n])
            along[g] = n_along
            order.append(g)
            anc[g] = set(deps_all)
            group_of[n] = g
            continue
        s = set(merged)
        target = merged[0]
        if any(g.kind == "linalg" for g in merged):
            target = next(g for g in merged if g.kind == "linalg")
        new_anc = (deps_all | set().union(*(anc[g] for g in merged))) - s
        ext_of[target] = merged_inputs(merged, s, n)
        reductions[target] = [m for g in order if g in s for m in reductions[g]] + (
            [n] if trait == REDUCTION else [])
        for g in order:
            if g in s and g is not target:
                target.nodes.extend(g.nodes)
                for m in g.nodes:
                    group_of[m] = target
        target.nodes.append(n)
        group_of[n] = target
        along[target] = (n_along[0] + sum(along[g][0] for g in merged),
                         n_along[1] or any(along[g][1] for g in merged))
        if trait == LINALG:
            target.kind = "linalg"
        order = [g for g in order if g not in s or g is target]
        anc[target] = new_anc
        for g in order:
            if g is not target and anc[g] & s:
                anc[g] = (anc[g] - s) | {target} | new_anc
    position = {n: k for k, n in enumerate(graph.nodes)}
    order = _sink_into_scatters(order, group_of, users, outs, position)
    if siblings:
        order = _merge_sibling_extrema(order, group_of, max_inputs)
    # nodes in topological order inside each group, then inputs and outputs
    for g in order:
        g.nodes.sort(key=position.__getitem__)
        g.inputs = external_inputs(g.nodes)
        members = set(g.nodes)
        g.outputs = [m for m in g.nodes
                     if m in outs or any(u not in members for u in users[m])]
    order.sort(key=lambda g: position[g.nodes[-1]])
    return _topo_groups(order, group_of)


# Full reductions that read their array in the same loops (lower_reduce's
# chunked partials, one accumulator per lane): siblings of these over one
# array share a group, and the FullReduce template fuses their loops.
SIBLING_REDUCERS = ("max", "min", "nanmax", "nanmin")
# ... of arrays this large (build.SERIAL_MAX_ELEMENTS: smaller groups are
# scheduled serially, where Adams2019 takes groups of several reductions)
SIBLING_MIN = 1 << 15


def same_value(a: Node, b: Node, depth: int = 64) -> bool:
    """Whether two nodes compute the same value by the same ops from the same
    inputs: passes/recompute.py gives each full reduction its own copy of a
    cheap value (``y = x.astype(np.float32)`` read by ``y.min()`` and
    ``y.max()``)."""
    if a is b:
        return True
    if depth == 0 or a.op != b.op or a.op in ("input", "constant") or a.aval != b.aval \
            or len(a.inputs) != len(b.inputs):
        return False
    try:
        if a.params != b.params:
            return False
    except (ValueError, TypeError):  # a parameter holding an array: not compared
        return False
    return all(same_value(x, y, depth - 1) for x, y in zip(a.inputs, b.inputs))


def _merge_sibling_extrema(order, group_of, max_inputs):
    """Put two groups that each reduce one large array to one value with a
    max or min (``x.min()`` beside ``x.max()``: a normalization, a range, a
    histogram's edges) into one group, so the array is read once: the
    FullReduce template computes both partials in one loop. Not where a
    path between them leaves through a third group (a cycle)."""
    def sole_extremum(g):
        loops = [m for m in g.nodes if REGISTRY[m.op].trait in ALONG_AXIS
                 or REGISTRY[m.op].trait == LINALG]
        if g.kind != "fused" or len(loops) != 1:
            return None
        r = loops[0]
        ok = (r.op in SIBLING_REDUCERS and r.aval.size == 1
              and r.inputs[0].aval.size >= SIBLING_MIN)
        return r if ok else None

    def deps(g):
        return {group_of[i] for m in g.nodes for i in m.inputs
                if i in group_of and group_of[i] is not g}

    def reaches(a, b, first):  # a path a -> h -> ... -> b, h not ``first``
        todo, seen = [h for h in deps(a) if h is not first], set()
        while todo:
            h = todo.pop()
            if h is b:
                return True
            if h in seen:
                continue
            seen.add(h)
            todo.extend(deps(h))
        return False

    merged = True
    while merged:
        merged = False
        found = [(g, sole_extremum(g)) for g in order]
        found = [(g, r) for g, r in found if r is not None]
        for k, (g1, r1) in enumerate(found):
            for g2, r2 in found[k + 1:]:
                if r1.params != r2.params or not same_value(r1.inputs[0], r2.inputs[0]):
                    continue
                if reaches(g2, g1, g1) or reaches(g1, g2, g2):
                    continue  # a path through a third group: merged, a cycle
                ext = {i for m in g1.nodes + g2.nodes for i in m.inputs
                       if group_of.get(i) not in (g1, g2) and not is_inlined(i)}
                if len(ext) > max_inputs:
                    continue
                g1.nodes.extend(g2.nodes)
                for m in g2.nodes:
                    group_of[m] = g1
                order = [g for g in order if g is not g2]
                merged = True
                break
            if merged:
                break
    return order


def _sink_into_scatters(order, group_of, users, outs, position):
    """Move elementwise and movement nodes read only by a scatter's group
    (directly or through other such nodes) out of a producer group that
    loops along an axis and into the scatter's group, which computes them
    ahead of its loop, vectorized (the Scatter template). A histogram's bin
    formula reads the data's min and max: greedy fusion puts it beside
    those reductions, where the scatter cannot follow, and Adams2019 took
    276 ms for that group on 2**20 values (the scatter itself 0.7). The
    producer keeps what anything else reads, so no cycle appears: every
    moved node's inputs were already upstream of the scatter."""
    for s in order:
        if not any(REGISTRY[n.op].trait == SCATTER for n in s.nodes):
            continue
        members = set(s.nodes)
        for p in order:
            if p is s or p.kind != "fused" or not any(
                    REGISTRY[m.op].trait in ALONG_AXIS for m in p.nodes):
                continue
            moved = []
            for n in sorted(p.nodes, key=position.__getitem__, reverse=True):
                if n in outs or REGISTRY[n.op].trait not in (ELEMENTWISE, MOVEMENT):
                    continue
                if users[n] and all(u in members for u in users[n]):
                    moved.append(n)
                    members.add(n)
            if not moved:
                continue
            gone = set(moved)
            p.nodes = [m for m in p.nodes if m not in gone]
            s.nodes.extend(moved)
            for m in moved:
                group_of[m] = s
    return [g for g in order if g.nodes]


def _topo_groups(groups, group_of):
    """Groups in an order where every producer group runs first."""
    done, out = set(), []

    def visit(g):
        if g in done:
            return
        done.add(g)
        for i in g.inputs:
            p = group_of.get(i)
            if p is not None and p is not g:
                visit(p)
        out.append(g)
    for g in groups:
        visit(g)
    return out


def group_graph(group: Group) -> Graph:
    """The group as a standalone graph: external values become inputs.

    Equal groups anywhere (in this graph or another) give equal keys, so
    they share one compiled kernel.
    """
    env: dict[Node, Node] = {}
    inputs = []
    for k, x in enumerate(group.inputs):
        aval = AbstractArray(x.shape, x.dtype)
        node = Node("input", (), {"index": k}, aval)
        env[x] = node
        inputs.append(node)
    for n in group.nodes:
        for i in n.inputs:
            if i not in env and is_inlined(i):
                env[i] = Node("constant", (), dict(i.params), AbstractArray(i.shape, i.dtype))
        env[n] = n.replace(inputs=tuple(env[i] for i in n.inputs), loc=None,
                           aval=AbstractArray(n.shape, n.dtype))
    return make_graph(inputs, [env[o] for o in group.outputs])


def group_key(local: Graph) -> str:
    import hashlib
    h = hashlib.blake2b(digest_size=12)
    for i in local.inputs:
        h.update(str(i.aval).encode())
    for o in local.outputs:
        h.update(o.key.encode())
    return h.hexdigest()
