"""Replaying a function that uses ``halojit.exclude_from_trace``.

Its body runs at every call: the excluded blocks must. The traced code
around them is recorded lazily, as in a symbolic trace, and computed only
when Python needs a value (an excluded block converting an array, a
``float(x)``, the function's results): the nodes recorded since the last
such point become one *segment*, a graph whose inputs are the function's
arguments, values computed by earlier segments and arrays the Python code
made (an excluded block's results). Segments are keyed by structure. One
seen for the first time runs with the numpy references; seen again, it is
compiled like any traced function (fused Halide kernels at opt_level 3)
and reused. A segment that changes at every call (a Python number from a
block baked into it as a constant) thus keeps running in numpy instead of
compiling at every call.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .graph import tracer as _tracer
from .graph.interpret import interpret
from .graph.ir import Node, make_graph, toposort
from .graph.passes import optimize

# compiled segments kept per function, and structures remembered as seen once
MAX_SEGMENTS = 64
MAX_SEEN = 4096


class Segments:
    """The compiled segments of one replayed TracedFunction."""

    def __init__(self, tf):
        self.tf = tf
        self.built: OrderedDict = OrderedDict()
        self.seen: set = set()
        self.lock = threading.Lock()

    def new_call(self, values, avals) -> tuple:
        """(a lazy trace context for one call, the traced arguments)."""
        tf = self.tf
        call = _Call(self)
        ctx = _tracer.TraceContext(tf.fn, symbolic=True, capture_as_const=tf.capture_as_const,
                                   lazy=call.value)
        call.ctx = ctx
        return call, [ctx.add_input(a, v) for v, a in zip(values, avals)]

    def execute(self, graph, values) -> tuple[list, bool]:
        """(outputs of ``graph`` for ``values``, whether an already compiled
        segment ran: False for the numpy references or a compile)."""
        tf = self.tf
        key = (tuple(o.key for o in graph.outputs), tf.opt_level, tf.backend, tf.target)
        with self.lock:
            ex = self.built.get(key)
            if ex is not None:
                self.built.move_to_end(key)
            elif key not in self.seen:
                if len(self.seen) >= MAX_SEEN:
                    self.seen.clear()
                self.seen.add(key)
                ex = False
        if ex is False:  # first sighting: the numpy references, as an eager trace
            return interpret(graph, values), False
        hit = ex is not None
        if not hit:
            ex = tf._build(optimize(graph, tf.opt_level), tf.target)
            with self.lock:
                self.built[key] = ex
                while len(self.built) > MAX_SEGMENTS:
                    self.built.popitem(last=False)
                tf._stats["compiles"] += getattr(ex, "kernel_count", 0)
        return ex(values), hit


class _Call:
    """One call's lazy values: ``value(node)`` runs the segment it needs."""

    def __init__(self, segments: Segments):
        self.segments = segments
        self.ctx = None
        self.checked = 0  # ctx.checks before this index have run
        self.hit = True  # every segment so far ran an already compiled one

    def value(self, node: Node):
        if node not in self.ctx.values:
            self.materialize([node])
        return self.ctx.values[node]

    def materialize(self, nodes) -> None:
        """Compute every node of ``nodes`` not known yet, and run the checks
        recorded so far (numpy's errors from values) before handing any out."""
        ctx = self.ctx
        need = list(dict.fromkeys(n for n in nodes if n not in ctx.values))
        checks = ctx.checks[self.checked:]
        if not need and not checks:
            return
        outputs = need + [n for n, _ in checks]
        graph, sources = _cut(outputs, ctx.values)
        results, hit = self.segments.execute(graph, [ctx.values[s] for s in sources])
        self.hit = self.hit and hit
        for (_, check), v in zip(checks, results[len(need):]):
            check(v)
        self.checked += len(checks)
        for n, v in zip(need, results):
            ctx.values[n] = v


def _cut(outputs, known) -> tuple:
    """(a graph computing ``outputs`` from the nodes whose values are
    ``known``, which become its inputs in order, those source nodes)."""
    order = toposort(outputs, stop=lambda n: n in known)
    mapping, inputs, sources = {}, [], []
    for n in order:
        if n in known:
            new = Node("input", (), {"index": len(inputs)}, n.aval, None)
            inputs.append(new)
            sources.append(n)
        else:
            new = Node(n.op, [mapping[i] for i in n.inputs], n.params, n.aval, n.loc)
        mapping[n] = new
    return make_graph(inputs, [mapping[o] for o in outputs]), sources
