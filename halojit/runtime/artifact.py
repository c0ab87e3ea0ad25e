"""Artifacts: ``TracedFunction.dump`` writes one self-contained ``.hjm``
file; ``halojit.load`` runs it through the C++ runtime (``_rt.Artifact``),
the same reader the C ABI (``csrc/include/halojit/halojit.h``) uses.

An artifact holds, for each example's specialization, the execution plan
(kernel steps over input, constant, output and intermediate buffers), the
kernels compiled once per x86 feature level (the loader picks the best one
the CPU has), one Halide runtime built for the lowest level, the constants,
and optional test vectors: example inputs with the numpy reference's
outputs and the tolerances to compare by. The byte layout is described in
``csrc/runtime/artifact.cpp``; the manifest is JSON.
"""

from __future__ import annotations

import collections
import json
import os
import platform
import struct
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..api import _check_out, _returned, convert_arg
from ..errors import ArtifactError, DTypeError, ShapeError

FORMAT = 1
MAGIC = b"\x89HJM\r\n\x1a\n"
HEADER_SIZE = 32
ALIGN = 64


@dataclass(frozen=True)
class Level:
    """A CPU feature level: the Halide target its kernels are built for and
    the CPU features (as the runtime names them) it needs."""

    name: str
    target: str
    requires: tuple[str, ...]


LEVELS = {
    lv.name: lv for lv in (
        Level("avx512", "x86-64-linux-sse41-avx-f16c-fma-avx2-avx512-avx512_skylake",
              ("sse41", "avx", "f16c", "fma", "avx2", "avx512f", "avx512cd", "avx512bw",
               "avx512dq", "avx512vl")),
        Level("avx2", "x86-64-linux-sse41-avx-f16c-fma-avx2", ("sse41", "avx", "f16c", "fma", "avx2")),
        Level("sse41", "x86-64-linux-sse41", ("sse41",)),
    )
}
DEFAULT_LEVELS = ("avx512", "avx2", "sse41")  # best first; the last is the fallback

# Test-vector tolerances (rtol, atol relative to the largest |expected|) by
# dtype: kernels differ from numpy by summation order and by a few ulp in
# transcendentals.
_TOLERANCES = {"float16": (1e-2, 1e-3), "float32": (1e-4, 1e-5), "float64": (1e-9, 1e-12)}


def _tolerance(expected: np.ndarray) -> tuple[float, float]:
    rtol, atol = _TOLERANCES.get(expected.dtype.name, (0.0, 0.0))
    if rtol and expected.size:
        finite = np.abs(expected[np.isfinite(expected)].astype(np.float64))
        atol *= max(1.0, float(finite.max())) if finite.size else 1.0
    return rtol, atol


def _dtype_name(dt) -> str:
    return np.dtype(dt).name


def _tensor(shape, dtype) -> dict:
    return {"shape": [int(e) for e in shape], "dtype": _dtype_name(dtype)}


def _treedef_json(t) -> dict:
    if t.kind == "leaf":
        return {"kind": "leaf"}
    if t.kind == "static":
        try:
            json.dumps(t.meta)
        except TypeError:
            raise ArtifactError(
                f"dump: the function returns {t.meta!r} ({type(t.meta).__name__}) beside its arrays; "
                "an artifact can only keep JSON values (numbers, strings, None) there.") from None
        return {"kind": "static", "value": t.meta}
    out = {"kind": t.kind, "children": [_treedef_json(c) for c in t.children]}
    if t.kind == "namedtuple":  # loaded as a namedtuple class of the same name and fields
        out["name"], out["keys"] = t.meta.__name__, list(t.meta._fields)
    if t.kind == "dict":
        if not all(isinstance(k, str) for k in t.meta):
            raise ArtifactError("dump: dict outputs need string keys in an artifact, got "
                                f"{[k for k in t.meta if not isinstance(k, str)]}.")
        out["keys"] = list(t.meta)
    return out


def _treedef_from_json(d):
    from ..graph.pytree import TreeDef
    kind = d["kind"]
    if kind == "leaf":
        return TreeDef("leaf")
    if kind == "static":
        return TreeDef("static", meta=d["value"])
    children = [_treedef_from_json(c) for c in d["children"]]
    if kind == "namedtuple":
        return TreeDef(kind, children, collections.namedtuple(d["name"], d["keys"]))
    return TreeDef(kind, children, d.get("keys"))


# -- dump ---------------------------------------------------------------------------------
@dataclass
class _Traced:
    graph: object
    treedef: object
    values: list
    avals: list
    out_kinds: tuple = ()  # api.Specialization.out_kinds


def _trace_example(tf, args, static) -> _Traced:
    from ..api import _tracer
    from ..graph.ir import make_graph
    from ..generators.build import codegen_graph
    from ..graph.passes.views import strip_copies
    from ..generators.compile import host_target
    from ..graph.passes import optimize
    converted = tf._convert(list(args))
    values = [v for v, _ in converted]
    avals = [a for _, a in converted]
    name = tf.__name__
    try:
        ctx, nodes, treedef = tf._trace(values, avals, static, not tf.symbolic)
    except _tracer._NeedsReplay:
        ctx = None
    if ctx is None or ctx.uses_exclude:
        raise ArtifactError(f"dump: {name} uses halojit.exclude_from_trace, whose block runs in "
                            "Python on every call; an artifact runs without Python. Move that "
                            "block out of the function to dump it.")
    if ctx.bindings:
        names = ", ".join(repr(b.name) for b in ctx.bindings)
        raise ArtifactError(
            f"dump: {name} reads the global or closure array(s) {names} by reference; an artifact "
            "cannot re-read them. Trace it with halojit.trace(..., capture_as_const=True) to "
            "freeze their current values into the artifact.")
    if not nodes:
        raise ArtifactError(f"dump: {name} returns no arrays (it returned {treedef!r}); an "
                            "artifact needs at least one output.")
    graph = codegen_graph(optimize(make_graph(ctx.inputs, nodes), 3), host_target(tf.target))
    graph = strip_copies(graph, keep_outputs=False)  # an artifact's outputs are all C order
    if any(n.aval.size == 0 for n in graph.nodes):
        raise ArtifactError(
            f"dump: the example ({', '.join(map(str, avals))}) makes zero-size arrays; artifacts "
            "hold compiled kernels, so dump with non-empty example shapes.")
    return _Traced(graph, treedef, values, avals, ctx.out_kinds)


def _leaf_names(treedef) -> list[str]:
    """Default output names: dict keys where the function returns a dict
    (nested parts joined by '_'), else output0, output1, ..."""
    names = []

    def walk(t, prefix):
        if t.kind == "leaf":
            names.append(prefix or "output0")
        elif t.kind in ("dict", "namedtuple"):
            for k, c in zip(t.meta if t.kind == "dict" else t.meta._fields, t.children):
                walk(c, f"{prefix}_{k}" if prefix else str(k))
        elif t.kind in ("tuple", "list"):
            for i, c in enumerate(t.children):
                walk(c, f"{prefix}_{i}" if prefix else f"output{i}")

    walk(treedef, "")
    if len(set(names)) != len(names):
        return [f"output{j}" for j in range(len(names))]
    return names


def _names(given, default, what, n) -> list[str]:
    if given is None:
        return default
    if isinstance(given, str) or not hasattr(given, "__len__"):
        raise ArtifactError(f"dump: {what} must be a list of {n} strings, got {given!r}.")
    names = list(given)
    if len(names) != n:
        raise ArtifactError(f"dump: {what} has {len(names)} names, the function has {n} "
                            f"{'arguments' if what == 'arg_names' else 'outputs'}.")
    bad = [x for x in names if not isinstance(x, str) or not x]
    if bad:
        raise ArtifactError(f"dump: {what} must be non-empty strings, got {bad!r}.")
    if len(set(names)) != n:
        raise ArtifactError(f"dump: {what} has duplicates: {names}.")
    return names


def _with_cuda(levels: list[Level], target: str) -> list[Level]:
    """For a function traced for CUDA: each CPU level's host code plus the
    CUDA kernels for the capability the target names (or the device's; see
    compile.with_cuda_capability). Loading checks the driver and device."""
    from dataclasses import replace

    from ..generators.compile import cuda_capability, host_target, is_cuda
    t = host_target(target)
    if not is_cuda(t):
        return levels
    suffix = f"-cuda-cuda_capability_{cuda_capability(t)}"
    return [replace(lv, target=lv.target + suffix) for lv in levels]


def _resolve_levels(levels) -> list[Level]:
    names = DEFAULT_LEVELS if levels is None else ((levels,) if isinstance(levels, str) else levels)
    out = []
    for name in names:
        if name not in LEVELS:
            raise ArtifactError(f"dump: unknown feature level {name!r}; expected some of "
                                f"{sorted(LEVELS)} (best first).")
        if LEVELS[name] not in out:
            out.append(LEVELS[name])
    if not out:
        raise ArtifactError("dump: levels is empty; name at least one of "
                            f"{list(DEFAULT_LEVELS)}.")
    if platform.machine() not in ("x86_64", "AMD64"):
        raise ArtifactError(f"dump: artifacts are built for x86-64 CPUs; this machine is "
                            f"{platform.machine()}.")
    return out


class _Blobs:
    def __init__(self):
        self.data: list[bytes] = []

    def add(self, data: bytes) -> int:
        self.data.append(bytes(data))
        return len(self.data) - 1

    def array(self, a: np.ndarray) -> dict:
        a = np.asarray(a)  # not ascontiguousarray: it turns 0-d into 1-d
        return dict(_tensor(a.shape, a.dtype), blob=self.add(a.tobytes(order="C")))


def _plan(graph, groups, kernel_of, const_ids, blobs, const_table) -> dict:
    """One specialization's plan in the manifest's terms: the executor's
    buffer layout, plus where each output that no kernel writes comes from."""
    from ..generators.build import plan_dtype, plan_layout
    layout = plan_layout(graph, groups)
    plan_out = {o: j for j, o in enumerate(layout.out_nodes)}
    outputs = []
    first_pos: dict = {}
    for j, o in enumerate(graph.outputs):
        entry = _tensor(o.shape, o.dtype)
        if o in first_pos:
            entry.update(source="output", index=first_pos[o])
        elif o.op == "input":
            entry.update(source="input", index=graph.inputs.index(o))
        elif o in plan_out:
            entry.update(source="plan", index=plan_out[o])
        elif o.op == "constant":
            entry.update(source="constant", index=_constant_id(o, const_ids, blobs, const_table))
        else:
            raise ArtifactError(f"dump: output {j} ({o.op}) is computed by no kernel (internal error).")
        first_pos.setdefault(o, j)
        outputs.append(entry)
    return {"inputs": [_tensor(n.shape, n.dtype) for n in graph.inputs], "outputs": outputs,
            "constants": [_constant_id(x, const_ids, blobs, const_table) for x in layout.consts],
            "plan_outputs": len(layout.out_nodes),
            "buffers": [{"shape": [int(e) for e in o.shape], "dtype": plan_dtype(o.dtype)}
                        for o in layout.intermediates],
            "steps": [{"kernel": kernel_of[k], "buffers": ids} for k, ids in layout.steps]}


def _constant_id(node, const_ids, blobs, const_table) -> int:
    if node not in const_ids:
        value = np.asarray(node.params["value"].value)
        const_ids[node] = len(const_table)
        const_table.append(blobs.array(value))
    return const_ids[node]


def dump(tf, path, example_args, *, arg_names=None, output_names=None, test_vectors=True,
         extra_examples=(), static=None, levels=None) -> Path:
    """Write ``tf``'s artifact to ``path`` (see ``TracedFunction.dump``)."""
    from .. import __version__
    from ..api import _arg_names
    from ..generators.build import compile_kernels
    from ..generators.compile import ensure_runtime, host_target
    from ..generators.worker import _workers as _compile_workers
    from ..graph.fusion import group_graph, group_key, partition
    from ..graph.interpret import interpret
    from .cache import halide_version

    name = tf.__name__
    if not isinstance(path, (str, os.PathLike)):
        raise ArtifactError(f"dump: path must be a str or os.PathLike, got {type(path).__name__}.")
    if isinstance(extra_examples, (str, bytes)) or not hasattr(extra_examples, "__iter__"):
        raise ArtifactError("dump: extra_examples must be a list of argument tuples, got "
                            f"{type(extra_examples).__name__}.")
    examples = [tuple(example_args)]
    for k, ex in enumerate(extra_examples):
        if not isinstance(ex, (tuple, list)):
            raise ArtifactError(f"dump: extra_examples[{k}] must be a tuple of arguments, got "
                                f"{type(ex).__name__}.")
        examples.append(tuple(ex))
    n_args = len(examples[0])
    for k, ex in enumerate(examples[1:]):
        if len(ex) != n_args:
            raise ArtifactError(f"dump: extra_examples[{k}] has {len(ex)} arguments, the first "
                                f"example has {n_args}.")
    chosen = _with_cuda(_resolve_levels(levels), tf.target)

    traced = [_trace_example(tf, ex, dict(static or {})) for ex in examples]
    n_out = len(traced[0].graph.outputs)
    for k, t in enumerate(traced[1:]):
        if repr(t.treedef) != repr(traced[0].treedef):
            raise ArtifactError(f"dump: extra_examples[{k}] returns {t.treedef!r}, the first example "
                                f"returns {traced[0].treedef!r}; every example must give the same "
                                "structure.")
    seen = {}
    for k, t in enumerate(traced):
        key = tuple(t.avals)
        if key in seen:
            raise ArtifactError(f"dump: examples {seen[key]} and {k} have the same shapes and dtypes "
                                f"({', '.join(map(str, key))}).")
        seen[key] = k
    treedef = traced[0].treedef
    default_out = _leaf_names(treedef)
    in_names = _names(arg_names, _arg_names(tf.fn, n_args), "arg_names", n_args)
    out_names = _names(output_names, default_out, "output_names", n_out)

    # Kernels: one per distinct group (by structure and shapes), per level.
    cuda = any("cuda" in lv.target for lv in chosen)
    partitions = [partition(t.graph, siblings=not cuda) for t in traced]
    kernel_index: dict[str, int] = {}
    kernel_groups = []
    kernel_of = []
    for groups in partitions:
        ks = []
        for g in groups:
            key = group_key(group_graph(g))
            if key not in kernel_index:
                kernel_index[key] = len(kernel_groups)
                kernel_groups.append(g)
            ks.append(kernel_index[key])
        kernel_of.append(ks)

    blobs = _Blobs()
    runtime_target = host_target(chosen[-1].target)
    runtime_blob = blobs.add(ensure_runtime(runtime_target).read_bytes())
    # Levels compile side by side (the worker pool is shared and thread-safe).
    with ThreadPoolExecutor(max_workers=max(1, min(len(chosen), _compile_workers()))) as pool:
        per_level = list(pool.map(
            lambda lv: compile_kernels(kernel_groups, host_target(lv.target), tf.autoscheduler),
            chosen))
    level_entries = []
    for lv, infos in zip(chosen, per_level):
        level_entries.append({
            "name": lv.name, "target": str(host_target(lv.target)), "requires": list(lv.requires),
            "kernels": [{"name": info.fn_name, "blob": blobs.add(Path(info.so_path).read_bytes())}
                        for info in infos]})

    const_ids: dict = {}
    const_table: list = []
    specs = [_plan(t.graph, groups, ks, const_ids, blobs, const_table)
             for t, groups, ks in zip(traced, partitions, kernel_of)]

    vectors = []
    if test_vectors:
        for s, t in enumerate(traced):
            expected = [np.asarray(v) for v in interpret(t.graph, t.values)]
            tols = [_tolerance(e) for e in expected]
            vectors.append({
                "specialization": s,
                "inputs": [blobs.array(np.asarray(v)) for v in t.values],
                "expected": [blobs.array(e) for e in expected],
                "rtol": [r for r, _ in tols], "atol": [a for _, a in tols]})

    manifest = {
        "format": FORMAT,
        "producer": {"halojit": __version__, "halide": halide_version(), "numpy": np.__version__},
        "function": name,
        "arch": "x86-64", "os": "linux",
        "inputs": in_names, "outputs": out_names,
        "runtime": {"target": str(runtime_target), "blob": runtime_blob},
        "levels": level_entries,
        "kernels": [{"ops": [n.op for n in g.nodes]} for g in kernel_groups],
        "constants": const_table,
        "specializations": specs,
        "test_vectors": vectors,
        # per output, a 0-d result as a numpy scalar (true), a 0-d ndarray
        # (false), or as positional argument k was passed (k): numpy's rule
        # (api._returned); absent in older artifacts: all scalars
        "python": {"treedef": _treedef_json(treedef), "zero_d": list(traced[0].out_kinds)},
    }
    return _write(Path(path), manifest, blobs.data)


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _write(path: Path, manifest: dict, blobs: list[bytes]) -> Path:
    """Lay out header, manifest and blobs; the manifest names every blob's
    offset, so its size is found by iterating until it stops growing."""
    data_start = _align(HEADER_SIZE + 4096)
    while True:
        offsets, at = [], data_start
        for b in blobs:
            offsets.append(at)
            at = _align(at + len(b))
        file_size = offsets[-1] + len(blobs[-1]) if blobs else data_start
        manifest["blobs"] = [{"offset": o, "size": len(b), "crc32": zlib.crc32(b)}
                             for o, b in zip(offsets, blobs)]
        manifest["file_size"] = file_size
        text = json.dumps(manifest, separators=(",", ":")).encode()
        if HEADER_SIZE + len(text) <= data_start:
            break
        data_start = _align(HEADER_SIZE + len(text) + 1024)
    header = MAGIC + struct.pack("<IIQII", FORMAT, HEADER_SIZE, len(text), zlib.crc32(text), 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header + text)
            for o, b in zip(offsets, blobs):
                f.seek(o)
                f.write(b)
            f.truncate(file_size)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


# -- load ---------------------------------------------------------------------------------
class LoadedFunction:
    """An artifact loaded for running: call it like the traced function
    (positional arrays, ``out=``); its outputs have the same structure."""

    def __init__(self, path, level=None):
        from .. import _rt
        path = Path(os.fspath(path))
        if not path.is_file():
            raise FileNotFoundError(f"halojit.load: no artifact at {str(path)!r}.")
        if level is not None and not isinstance(level, str):
            raise ArtifactError(f"halojit.load: level must be a level name such as 'avx2', got "
                                f"{level!r}.")
        self._art = _rt.Artifact(str(path), level or "")
        self.path = path
        self.manifest = json.loads(self._art.manifest)
        self.__name__ = self.manifest["function"]
        self.inputs = list(self.manifest["inputs"])
        self.outputs = list(self.manifest["outputs"])
        self._treedef = _treedef_from_json(self.manifest.get("python", {}).get(
            "treedef", {"kind": "tuple", "children": [{"kind": "leaf"}] * len(self.outputs)}))
        self._zero_d = tuple(self.manifest.get("python", {}).get("zero_d", ()))
        self._specs = [
            ([(tuple(t["shape"]), np.dtype(t["dtype"])) for t in s["inputs"]],
             [(tuple(t["shape"]), np.dtype(t["dtype"])) for t in s["outputs"]])
            for s in self.manifest["specializations"]]

    @property
    def level(self) -> str:
        """The CPU feature level whose kernels run."""
        return self._art.level

    @property
    def levels(self) -> list[dict]:
        return [{"name": n, "target": t, "requires": r, "supported": s}
                for n, t, r, s in self._art.levels]

    @property
    def specializations(self) -> list[dict]:
        """Input and output (shape, dtype) per specialization."""
        return [{"inputs": dict(zip(self.inputs, ins)), "outputs": dict(zip(self.outputs, outs))}
                for ins, outs in self._specs]

    def _describe(self, specs) -> str:
        return ", ".join(f"{n}: {dt}{list(shape)}" for n, (shape, dt) in zip(self.inputs, specs))

    def _select(self, arrays) -> int:
        for s, (ins, _) in enumerate(self._specs):
            if all(a.shape == shape and a.dtype == dt for a, (shape, dt) in zip(arrays, ins)):
                return s
        given = ", ".join(f"{n}: {a.dtype}{list(a.shape)}" for n, a in zip(self.inputs, arrays))
        have = " or ".join(f"[{self._describe(ins)}]" for ins, _ in self._specs)
        shapes_ok = any(all(a.shape == shape for a, (shape, _) in zip(arrays, ins))
                        for ins, _ in self._specs)
        cls = DTypeError if shapes_ok else ShapeError
        raise cls(f"{self.__name__}: the artifact has no specialization for [{given}]; it has "
                  f"{have}. Dump again with these shapes in extra_examples= to add one.")

    def __call__(self, *args, out=None):
        if len(args) != len(self.inputs):
            raise TypeError(f"{self.__name__}: expected {len(self.inputs)} arguments "
                            f"({', '.join(self.inputs)}), got {len(args)}.")
        arrays = [convert_arg(i, n, a)[0] for i, (n, a) in enumerate(zip(self.inputs, args))]
        s = self._select(arrays)
        out_specs = self._specs[s][1]
        if out is not None:  # checked here, written in place by the runtime
            outs = _check_out(out, [SimpleNamespace(shape=sh, dtype=dt) for sh, dt in out_specs],
                              self.__name__)
        else:
            outs = [np.empty(shape, dt) for shape, dt in out_specs]
        self._art.run(arrays, outs)
        return self._treedef.unflatten(outs if out is not None else
                                       _returned(outs, self._zero_d, args))

    def check(self) -> list[dict]:
        """Run every test vector; one dict per vector and output with
        ``ok`` and, on a mismatch, ``why``."""
        from .. import _rt
        results = []
        for i in range(self._art.num_test_vectors):
            s, ins, expected, rtol, atol = self._art.test_vector(i)
            outs = [np.empty(e.shape, e.dtype) for e in expected]
            self._art.run(ins, outs)
            for k, (o, e) in enumerate(zip(outs, expected)):
                ok, why = _rt.allclose(o, e, rtol[k], atol[k])
                results.append({"vector": i, "specialization": s, "output": self.outputs[k],
                                "ok": bool(ok), "why": why, "rtol": rtol[k], "atol": atol[k]})
        return results

    def __repr__(self):
        return (f"<halojit artifact {self.__name__}({', '.join(self.inputs)}) from {str(self.path)!r}, "
                f"{len(self._specs)} specialization(s), level {self.level}>")


def load(path, level=None) -> LoadedFunction:
    """Load an artifact written by ``TracedFunction.dump``."""
    return LoadedFunction(path, level)


def describe(path, check=False, level=None) -> tuple[str, bool]:
    """``halojit inspect``'s text for the artifact at ``path``, and whether
    every test vector passed (True when not checked)."""
    f = load(path, level)
    m = f.manifest
    size = Path(path).stat().st_size
    lines = [f"{path}: halojit artifact, format {m['format']}, {size / 1e6:.2f} MB",
             f"  function  {m['function']}",
             "  made by   " + ", ".join(f"{k} {v}" for k, v in m["producer"].items())]
    for lv in f.levels:
        mark = "*" if lv["name"] == f.level else " "
        ok = "runs here" if lv["supported"] else "not on this CPU"
        lines.append(f"  level {mark} {lv['name']:<7} {ok:<15} {lv['target']}")
    lines.append(f"  kernels   {len(m['kernels'])} per level: " + "; ".join(
        "+".join(k["ops"][:4]) + ("+..." if len(k["ops"]) > 4 else "") for k in m["kernels"]))
    lines.append(f"  constants {len(m['constants'])}")
    for s, spec in enumerate(f.specializations):
        lines.append(f"  specialization {s}:")
        for n, (shape, dt) in spec["inputs"].items():
            lines.append(f"    input  {n}: {dt} {list(shape)}")
        for n, (shape, dt) in spec["outputs"].items():
            lines.append(f"    output {n}: {dt} {list(shape)}")
    lines.append(f"  test vectors {len(m.get('test_vectors', []))}")
    passed = True
    if check:
        results = f.check()
        if not results:
            lines.append("  check: no test vectors to run (dumped with test_vectors=False)")
        for r in results:
            passed &= r["ok"]
            verdict = "ok" if r["ok"] else f"MISMATCH: {r['why']}"
            lines.append(f"  check vector {r['vector']} output {r['output']}: {verdict} "
                         f"(rtol {r['rtol']:g}, atol {r['atol']:g}, level {f.level})")
    return "\n".join(lines), passed
