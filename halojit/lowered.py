"""``TracedFunction.lower``: trace, optimize and compile without running."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LoweredGroup:
    """One fusion group: its ops, kernel symbol, schedule source and lowered stmt."""

    ops: list[str]
    kernel: str | None
    schedule: str = ""
    stmt: str = ""
    scheduler: str = ""
    compile_seconds: float = 0.0
    cached: bool = False
    ptx: str = ""  # CUDA device code when compiled for a CUDA target

    def __repr__(self):
        return f"<group {self.kernel}: {', '.join(self.ops)} ({self.scheduler})>"


@dataclass
class Lowered:
    """What ``f.lower(*args)`` returns."""

    graph: str
    groups: list[LoweredGroup] = field(default_factory=list)
    compile_seconds: float = 0.0
    backend: str = "numpy"
    target: str = "host"

    @property
    def kernel_count(self) -> int:
        return len(self.groups)

    def __str__(self):
        lines = [self.graph, f"{self.kernel_count} kernel(s), compiled in {self.compile_seconds:.3f}s"]
        lines += [f"  {g!r}" for g in self.groups]
        return "\n".join(lines)


def describe(spec, backend, target) -> Lowered:
    ex = spec.executor
    groups = []
    for k in getattr(ex, "kernels", []):
        groups.append(LoweredGroup(k.ops, k.fn_name, k.schedule, k.stmt, k.spec,
                                   k.compile_seconds, k.cached, k.ptx))
    annotate = None
    if groups:
        where = {n: g.fn_name for g in ex.kernels for n in g.group.nodes}
        annotate = lambda n: where.get(n)  # noqa: E731
    from .graph.ir import format_graph
    return Lowered(format_graph(spec.graph, annotate), groups, spec.build_seconds, backend, target)


def lower(tf, args, kwargs, target=None) -> Lowered:
    converted = tf._convert(args)
    values = [v for v, _ in converted]
    avals = [a for _, a in converted]
    spec = tf._get_spec(values, avals, kwargs, target)
    if spec is None:
        raise ValueError(f"{tf.__name__} uses exclude_from_trace: it is replayed, not compiled.")
    return describe(spec, tf.backend, target or tf.target)
