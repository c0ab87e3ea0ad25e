"""``halojit tune``: run a tuning run on ``MODULE:FUNCTION`` at given shapes,
list the tuning database, export or import it.

    halojit tune model.py:layer --shapes 4096x1024:float32,1024x1024,1024 --budget 60
    halojit tune --list | --export tuning.json | --import tuning.json
    halojit tune --bench [--size large] [--budget 40] [--only softmax mlp]
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import numpy as np

from ..errors import HalojitError


def add_arguments(p) -> None:
    p.add_argument("function", nargs="?", metavar="MODULE:FUNCTION",
                   help="a module name or a .py path, and a function in it (traced or plain)")
    p.add_argument("--shapes", help="one per positional argument, comma-separated: "
                   "4096x1024:float32 (dtype defaults to float32; 'scalar:float64' for 0-d)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole run (default 60; with --bench, per workload, 40)")
    p.add_argument("--workers", type=int, default=None, help="parallel compiles (default: cores)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random example inputs")
    p.add_argument("--list", action="store_true", help="show the tuning database")
    p.add_argument("--export", metavar="FILE", help="write the tuning database to FILE (JSON)")
    p.add_argument("--import", dest="import_file", metavar="FILE",
                   help="merge FILE (from --export) into the tuning database")
    p.add_argument("--bench", action="store_true",
                   help="tune the benchmark workloads and print the table of their reduction, "
                   "stencil and matmul groups (default vs tuned, recipe)")
    p.add_argument("--size", default="large", choices=("large", "small", "tiny"),
                   help="--bench: workload size")
    p.add_argument("--only", nargs="*", metavar="WORKLOAD", help="--bench: these workloads only")
    p.add_argument("--all-kinds", action="store_true",
                   help="--bench: tune and list elementwise groups too")


def parse_shapes(text: str) -> list[tuple[tuple[int, ...], np.dtype]]:
    """``"4096x1024:float32,1024"`` -> [((4096, 1024), float32), ((1024,), float32)]."""
    out = []
    for item in text.split(","):
        item = item.strip()
        shape_txt, _, dtype_txt = item.partition(":")
        try:
            dtype = np.dtype(dtype_txt.strip() or "float32")
        except TypeError:
            raise HalojitError(f"--shapes: {dtype_txt!r} in {item!r} is not a numpy dtype; "
                               "expected e.g. float32, int64, bool.") from None
        shape_txt = shape_txt.strip().lower()
        if shape_txt in ("", "scalar", "()"):
            out.append(((), dtype))
            continue
        try:
            shape = tuple(int(d) for d in shape_txt.split("x"))
        except ValueError:
            raise HalojitError(f"--shapes: {item!r} is not a shape; expected sizes joined by "
                               "'x' such as 4096x1024:float32.") from None
        if any(d < 0 for d in shape):
            raise HalojitError(f"--shapes: {item!r} has a negative size.")
        out.append((shape, dtype))
    return out


def example_inputs(specs, seed: int = 0) -> list[np.ndarray]:
    """Random arrays of those shapes: normal floats, small integers, booleans."""
    rng = np.random.default_rng(seed)
    arrays = []
    for shape, dt in specs:
        if dt.kind == "f":
            a = rng.standard_normal(shape).astype(dt)
        elif dt.kind == "b":
            a = rng.random(shape) < 0.5
        elif dt.kind == "u":
            a = rng.integers(0, 100, shape).astype(dt)
        else:
            a = rng.integers(-100, 100, shape).astype(dt)
        arrays.append(np.asarray(a))
    return arrays


def load_function(ref: str):
    """``pkg.module:fn`` or ``path/file.py:fn`` -> a TracedFunction."""
    import halojit
    mod_name, sep, fn_name = ref.rpartition(":")
    if not sep or not mod_name or not fn_name:
        raise HalojitError(f"{ref!r}: expected MODULE:FUNCTION, e.g. model.py:layer or "
                           "mypkg.model:layer.")
    if mod_name.endswith(".py") or "/" in mod_name:
        path = Path(mod_name)
        if not path.exists():
            raise HalojitError(f"{ref!r}: no file {path}.")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.resolve().parent))
        spec.loader.exec_module(module)
    else:
        sys.path.insert(0, ".")
        module = importlib.import_module(mod_name)
    fn = getattr(module, fn_name, None)
    if fn is None:
        raise HalojitError(f"{ref!r}: {mod_name} has no attribute {fn_name!r}.")
    if isinstance(fn, halojit.TracedFunction):
        return fn
    if not callable(fn):
        raise HalojitError(f"{ref!r}: {fn_name} is not a function.")
    return halojit.trace(fn)


def cmd_tune(args) -> int:
    from . import tunedb
    try:
        if args.import_file:
            n, kept = tunedb.import_json(args.import_file)
            print(f"imported {n} record(s) from {args.import_file} into {tunedb.db_path()}"
                  + (f"; kept {kept} local record(s) as new or newer" if kept else ""))
        if args.function:
            if not args.shapes:
                raise HalojitError("halojit tune: --shapes is required with MODULE:FUNCTION, "
                                   "e.g. --shapes 4096x1024:float32.")
            tf = load_function(args.function)
            inputs = example_inputs(parse_shapes(args.shapes), args.seed)
            budget = 60.0 if args.budget is None else args.budget
            report = tf.tune(*inputs, budget_s=budget, workers=args.workers)
            print(report)
        if args.bench:
            from .tune_table import bench_table
            budget = 40.0 if args.budget is None else args.budget
            print(bench_table(args.size, budget, args.only, args.all_kinds, args.workers))
        if args.export:
            n = tunedb.export_json(args.export)
            print(f"exported {n} record(s) from {tunedb.db_path()} to {args.export}")
        if args.list or not (args.function or args.export or args.import_file or args.bench):
            print(tunedb.format_records(tunedb.load_all()))
    except HalojitError as e:
        print(f"halojit tune: {e}", file=sys.stderr)
        return 2
    return 0
