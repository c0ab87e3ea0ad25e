"""Autoscheduler drivers: named plugins, validated parameters, estimates.

Halide 21 aborts the whole process (std::terminate) on an unknown
autoscheduler parameter, so every key is checked here first; autoscheduling
itself runs in a worker process (see ``generators/worker.py``).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from types import SimpleNamespace

from ..errors import HalojitError

# name -> (plugin file stem, {param: default}); from Halide 21's ParamParser users.
SCHEDULERS = {
    "Adams2019": ("adams2019", {
        "parallelism": "16", "beam_size": "32", "random_dropout": "100",
        "random_dropout_seed": "0", "weights_path": "", "disable_subtiling": "0",
        "disable_memoized_features": "0", "disable_memoized_blocks": "0",
        "memory_limit": "-1",
    }),
    "Li2018": ("li2018", {"parallelism": "16"}),
    "Mullapudi2016": ("mullapudi2016", {
        "parallelism": "16", "last_level_cache_size": "16777216", "balance": "40",
        "experimental_gpu_schedule": "0",
    }),
    "Anderson2021": ("anderson2021", {
        "parallelism": "16", "beam_size": "32", "random_dropout": "100",
        "random_dropout_seed": "0", "weights_path": "", "randomize_tilings": "0",
        "search_space_options": "1111", "freeze_inline_compute_root": "0",
        "partial_schedule_path": "", "num_passes": "0", "stack_factor": "0.95",
        "shared_memory_limit_kb": "48", "shared_memory_sm_limit_kb": "96",
        "active_block_limit": "32", "active_warp_limit": "64",
    }),
}
NO_SCHEDULE = "none"  # Halide's default: inline everything, reductions at root


@dataclass(frozen=True)
class ScheduleSpec:
    """A recipe: an autoscheduler name with parameters, or a template."""

    name: str
    params: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        return self.name + "".join(f";{k}={v}" for k, v in self.params)

    def __str__(self):
        return self.key


def default_parallelism() -> int:
    # Adams2019's "parallelism" is the minimum parallelism to expose, not a
    # thread count (HALIDE_NOTES c); 8x the cores is the measured sweet spot.
    return 8 * (os.cpu_count() or 2)


def make_spec(name: str, params: dict | None = None) -> ScheduleSpec:
    """A validated spec; unknown schedulers or keys raise listing valid ones."""
    if name == NO_SCHEDULE:
        if params:
            raise HalojitError(f"schedule {NO_SCHEDULE!r} takes no parameters, got {sorted(params)}.")
        return ScheduleSpec(NO_SCHEDULE)
    from .gpu import GPU_TEMPLATES
    from .templates import TEMPLATES
    if name in TEMPLATES or name in GPU_TEMPLATES:
        allowed = (TEMPLATES.get(name) or GPU_TEMPLATES[name])[0]
        params = dict(allowed, **{k: str(v) for k, v in (params or {}).items()})
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise HalojitError(f"template {name}: unknown parameter(s) {unknown}; valid keys "
                               f"are {sorted(allowed)}.")
        if name == "Sort":  # values that choose the algorithm: checked here, not at compile
            from .sort import radix_params
            radix_params(params)
        return ScheduleSpec(name, tuple(sorted(params.items())))
    if name not in SCHEDULERS:
        raise HalojitError(
            f"unknown autoscheduler {name!r}; expected one of {sorted(SCHEDULERS)}, a template "
            f"({', '.join(sorted([*TEMPLATES, *GPU_TEMPLATES]))}) or {NO_SCHEDULE!r}.")
    allowed = SCHEDULERS[name][1]
    params = dict(params or {})
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise HalojitError(
            f"autoscheduler {name}: unknown parameter(s) {unknown}; valid keys are {sorted(allowed)}.")
    if name != "Anderson2021" and "parallelism" not in params:
        params["parallelism"] = str(default_parallelism())
    return ScheduleSpec(name, tuple(sorted((k, str(v)) for k, v in params.items())))


def parse_autoscheduler(value) -> ScheduleSpec | None:
    """The ``trace(autoscheduler=...)`` argument: None, a name, the printed
    form "Name;key=value;...", (name, params), {"name": ..., **params} or a
    ScheduleSpec."""
    if value is None or isinstance(value, ScheduleSpec):
        return value
    if isinstance(value, str):
        if ";" not in value:
            return make_spec(value)
        # the form halojit prints (ScheduleSpec.key: f.lower()'s groups,
        # the tuning table, HALOJIT_LOG): "RowReduce;block=8;vector=32"
        name, *pairs = value.split(";")
        params = {}
        for pair in filter(None, pairs):
            k, eq, v = pair.partition("=")
            if not eq or not k:
                raise HalojitError(f"autoscheduler {value!r}: {pair!r} is not key=value; expected "
                                   "'Name;key=value;...', e.g. 'RowReduce;block=8'.")
            params[k.strip()] = v.strip()
        return make_spec(name.strip(), params)
    if isinstance(value, tuple) and len(value) == 2:
        return make_spec(value[0], value[1])
    if isinstance(value, dict):
        params = dict(value)
        name = params.pop("name", None)
        if name is None:
            raise HalojitError("autoscheduler dict needs a 'name' key, e.g. {'name': 'Adams2019'}.")
        return make_spec(name, params)
    raise HalojitError(f"autoscheduler must be a name, 'Name;key=value;...', (name, params) or a "
                       f"dict; got {value!r}.")


def fallback_chain(spec: ScheduleSpec, target=None) -> list[ScheduleSpec]:
    """Schedulers to try in order when one fails (GPU ones on a CUDA target)."""
    if target is not None and target.has_gpu_feature():
        from .gpu import gpu_fallback_chain
        return gpu_fallback_chain(spec)
    chain = [spec]
    for name in ("Adams2019", "Mullapudi2016", "Li2018"):
        if spec.name != name:
            chain.append(make_spec(name))
    chain.append(ScheduleSpec(NO_SCHEDULE))
    return chain


_loaded: set[str] = set()


def load_plugin(name: str) -> None:
    import halide as hl
    stem = SCHEDULERS[name][0]
    if stem in _loaded:
        return
    path = os.path.join(os.path.dirname(hl.__file__), "lib64", f"libautoschedule_{stem}.so")
    if not os.path.exists(path):
        raise HalojitError(f"autoscheduler plugin {path} is missing from the halide wheel.")
    hl.load_plugin(path)
    _loaded.add(stem)


def set_estimates(params, outputs, input_shapes, output_shapes) -> None:
    """Estimates equal to the real extents (Halide order: last numpy axis first)."""
    import halide as hl
    for p, shape in zip(params, input_shapes):
        p.set_estimates([hl.Range(0, d) for d in reversed(shape)])
    for f, shape in zip(outputs, output_shapes):
        f.set_estimates([hl.Range(0, d) for d in reversed(shape)])


def autoschedules(spec: ScheduleSpec | None) -> bool:
    """Whether ``spec`` names an autoscheduler plugin (not a CPU or GPU
    template, nor Halide's default schedule)."""
    from .gpu import APPLY as GPU_APPLY
    from .templates import TEMPLATES
    return spec is not None and spec.name != NO_SCHEDULE and spec.name not in GPU_APPLY \
        and spec.name not in TEMPLATES


def apply_schedule(lowered, target, spec: ScheduleSpec):
    """Schedule a lowered group: (AutoSchedulerResults or None, template text or None)."""
    import halide as hl

    from .gpu import APPLY as GPU_APPLY
    from .templates import TEMPLATES, apply_template
    if spec.name == NO_SCHEDULE:
        return None, "Halide's default schedule"
    if spec.name in GPU_APPLY:
        if not target.has_gpu_feature():
            raise HalojitError(f"template {spec.name} schedules GPU kernels; the target {target} "
                               "has no GPU feature (use 'host-cuda').")
        return None, GPU_APPLY[spec.name](lowered, dict(spec.params))
    if spec.name in TEMPLATES:
        return None, apply_template(lowered, spec.name, dict(spec.params))
    load_plugin(spec.name)
    results = lowered.pipeline.apply_autoscheduler(
        target, hl.AutoschedulerParams(spec.name, dict(spec.params)))
    if not target.has_gpu_feature():  # GPU Funcs store at blocks and compute at threads
        unslide(lowered.pipeline, results)
    if getattr(lowered, "trig_ok", None) is not None:
        # every value holding a sin/cos/tan fast/exact select is inlined into the
        # outputs (lowering.lower_group): a copy of each for checked arguments
        for out in lowered.outputs:
            out.specialize(lowered.trig_ok)
    return results, None


@functools.cache
def _patterns() -> SimpleNamespace:
    """The schedule-source patterns of ``unslide``, compiled on first use (3 ms
    of every new process's first call otherwise, where kernels load from disk)."""
    return SimpleNamespace(
        func_decl=re.compile(r"^\s*Func (\w+) = pipeline\.get_func\((\d+)\);$", re.M),
        var_decl=re.compile(
            r'^\s*Var (\w+)\((?:"(\w+)"|\w+\.get_schedule\(\)\.dims\(\)\[\d+\]\.var)\);$', re.M),
        func_block=re.compile(r"^[ \t]*(\w+)\n((?:[ \t]*\..*\n)+)", re.M),
        compute_at=re.compile(r"\.compute_at\((\w+), (\w+)\)"),
        store_at=re.compile(r"\.store_at\((\w+), (\w+)\)"),
        reorder=re.compile(r"\.reorder\(\{([^}]*)\}\)"),
        parallel=re.compile(r"\.parallel\((\w+)"))


def _parallel_between(consumer_body: str, inner: str, outer: str | None) -> bool:
    """Whether a parallel loop of the consumer lies from ``inner`` (included)
    out to ``outer`` (excluded; None: the root), where Halide does not slide;
    unknown loop orders count as parallel when any loop is."""
    pat = _patterns()
    parallel = set(pat.parallel.findall(consumer_body))
    order = pat.reorder.search(consumer_body)
    if not parallel:
        return False
    if order is None:
        return True
    loops = [v.strip() for v in order.group(1).split(",")]
    if inner not in loops or (outer is not None and outer not in loops):
        return True
    return bool(parallel & set(loops[loops.index(inner):loops.index(outer) if outer else None]))


def _source_funcs(pipeline, decls) -> dict:
    """The Funcs a schedule source declares (``Func name =
    pipeline.get_func(k)``), found by name: the source's indices count the
    Funcs before scheduling, and Mullapudi2016 inlines trivial ones (an input's
    wrapper) into their callers, which drops them from the pipeline's order
    (``get_func(3)`` of the row sum's 3 Funcs raised, and every Mullapudi2016
    candidate of the group failed). Names are matched as the source spells them
    (``sum_1$1`` as ``sum_1_1``); an index is the fallback."""
    current, k = {}, 0
    while True:
        try:
            func = pipeline.get_func(k)
        except Exception:  # past the last Func: Halide has no count of them
            break
        current[re.sub(r"\W", "_", func.name())] = func
        k += 1
    return {name: current[name] if name in current else pipeline.get_func(int(index))
            for name, index in decls if name in current or int(index) < k}


def unslide(pipeline, results) -> list[str]:
    """Compute every Func an autoscheduler stored outside its compute level
    (``store_at``/``store_root`` above ``compute_at``) at its store level
    instead: no sliding window, no storage folding. Returns the changed
    Funcs' names and notes the change in ``results.schedule_source``.

    Halide 21's sliding window is wrong where the producer's region at one
    iteration is a point that moves with the loop joined to a block that
    does not (halide/Halide#8140 is another open case). Adams2019 chose it
    for ``t = x * 2; t[:, None] + t`` of 65-181 elements (parallelism=1):
    ``t.compute_at(out, v0i).store_at(out, v1)`` read uninitialized memory
    at 13460 of 16641 outputs (3.6e35 where 4.0 was due). Computed at the
    store level, a Func fills the region sliding would have filled by the
    end of the loop, once; storage folding is lost, so a Func placed on the
    stack moves to Halide's choice (the heap when large). Of 12639
    Adams2019 schedules in the test and fuzz caches, 227 slid."""
    import halide as hl
    pat = _patterns()
    source = results.schedule_source
    funcs = _source_funcs(pipeline, pat.func_decl.findall(source))
    var_names = {ident: literal or ident for ident, literal in pat.var_decl.findall(source)}
    blocks = dict(pat.func_block.findall(source))
    changed = []
    for name, body in blocks.items():
        compute, store = pat.compute_at.search(body), pat.store_at.search(body)
        if compute is None or (store is None and ".store_root()" not in body):
            continue
        if store is not None and store.groups() == compute.groups():
            continue
        func = funcs.get(name)
        if func is None or (store is not None and (store.group(1) != compute.group(1)
                                                   or store.group(1) not in funcs
                                                   or store.group(2) not in var_names)):
            continue  # a form this parser does not know: keep the schedule
        if _parallel_between(blocks.get(compute.group(1), ""), compute.group(2),
                             store.group(2) if store is not None else None):
            continue  # not slid: computed per parallel iteration, kept so
        if store is None:
            func.compute_root()
        else:
            func.compute_at(funcs[store.group(1)], hl.Var(var_names[store.group(2)]))
        if ".store_in(MemoryType::Stack)" in body:
            func.store_in(hl.MemoryType.Auto)
        changed.append(name)
    if changed:
        results.schedule_source = source + (
            f"\n// halojit: {', '.join(changed)} computed at the store level"
            " (autoschedule.unslide: no sliding window)\n")
    return changed
