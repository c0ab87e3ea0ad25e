"""Candidate schedules for one fusion group in a tuning run, in the order a
budget should try them: the default first, then the families round-robin
(hand templates, Adams2019 random-dropout samples, Adams2019 and
Mullapudi2016 parameter grids, Li2018), so a run cut short has sampled each.

Adams2019 samples follow Halide's autotune loop (HALIDE_NOTES c):
``beam_size=1``, ``random_dropout`` 1-5 (percent of states kept), a
distinct seed each; the seed is part of the recipe. A smaller family keeps
a beam of 4-8 with 25-75% dropout.
"""

from __future__ import annotations

import itertools
import os
import random

from ..graph.ir import Graph
from ..graph.ops import REDUCTION, REGISTRY, SORT
from .autoschedule import ScheduleSpec, default_parallelism, make_spec
from .select import select_fits
from .templates import TEMPLATES, col_reduce_fits, concat_fits, elementwise_fits, full_reduce_fits, matmul_fits, row_arg_fits, row_reduce_fits, scatter_fits, sliced_reads, sort_fits, stencil_fits, transpose_fits

# Random Adams2019 samples planned per group (a budget usually ends sooner).
RANDOM_SAMPLES = 256

# template name -> (fits(graph), {param: values}); each grid starts at the defaults.
TEMPLATE_GRIDS = {
    "RowReduce": (row_reduce_fits, {"block": (4, 2, 8, 16), "rows_per_task": (32, 8, 128),
                                    "vector": (16, 32, 64, 8), "prefetch": (16, 0)}),
    # tile_m: rows of the register block (templates.MAX_BLOCK_ROWS caps it)
    "Matmul": (matmul_fits, {"tile_m": (8, 4, 6, 10, 12, 14), "tile_n": (64, 32, 128, 256, 512),
                             "vector": (16, 8), "unroll_k": (1, 2, 4), "few": (1, 2, 0)}),
    "Stencil": (stencil_fits, {"rows": (32, 16, 64, 128), "tile_x": (0, 1024, 512),
                               "vector": (32, 16, 64), "sliding": (1, 0), "prefetch": (16, 0)}),
    # the chunk count comes from the lowering; interleave: chunks side by side per task (0: auto)
    "FullReduce": (full_reduce_fits, {"interleave": (0, 1, 2, 4, 8)}),
    "ColReduce": (col_reduce_fits, {"chunks": (8, 1, 4, 16, 32), "unroll": (4, 1, 2, 8),
                                    "vector": (16, 32, 8), "inline": (1, 0)}),
    "RowArg": (row_arg_fits, {"unroll": (4, 2, 1, 8), "rows": (16, 32, 64), "parallel": (1, 0)}),
    "Elementwise": (elementwise_fits, {"vector": (64, 32, 128, 16), "task_kib": (1024, 256, 4096)}),
    "Transpose": (transpose_fits, {"tile": (64, 32, 128), "block": (8, 4, 16)}),
    "Concat": (concat_fits, {"vector": (64, 32, 128, 16), "task_kib": (1024, 256, 4096)}),
    "Sort": (sort_fits, {"vector": (16, 8, 32), "tile_kib": (64, 16, 256),
                         "unroll": (32, 16, 64), "parallel": (1, 0), "chunks": (0, 1, 4)}),
    "Scatter": (scatter_fits, {"vector": (16, 8, 32), "parallel": (1, 0)}),
    "Select": (select_fits, {"vector": (16, 8, 32), "parallel": (1, 0)}),
}
assert set(TEMPLATE_GRIDS) == set(TEMPLATES), "every template needs a tuning grid"


def group_kind(local: Graph) -> str:
    """matmul, reduction, sort (a sort, argsort or selection), stencil (one
    value read through two or more slices) or elementwise: the report's
    grouping of results."""
    ops = [n for n in local.nodes if n.op not in ("input", "constant")]
    if any(n.op == "matmul" for n in ops):
        return "matmul"
    if any(REGISTRY[n.op].trait == REDUCTION for n in ops):
        return "reduction"
    if any(REGISTRY[n.op].trait == SORT for n in ops):
        return "sort"
    if sliced_reads(local) >= 2:
        return "stencil"
    return "elementwise"


def _grid(name: str, grid: dict, rng: random.Random) -> list[ScheduleSpec]:
    """Every point of a parameter grid: the first values (defaults) first,
    the rest shuffled, so a short budget samples the grid evenly."""
    keys = sorted(grid)
    points = [dict(zip(keys, vals)) for vals in itertools.product(*(grid[k] for k in keys))]
    head, rest = points[:1], points[1:]
    rng.shuffle(rest)
    return [make_spec(name, p) for p in head + rest]


def adams_sample(rng: random.Random, parallelism: str) -> ScheduleSpec:
    return make_spec("Adams2019", {"beam_size": 1, "random_dropout": rng.randint(1, 5),
                                   "random_dropout_seed": rng.randint(1, 2**31 - 1),
                                   "parallelism": parallelism})


def candidate_specs(local: Graph, default: ScheduleSpec, previous: ScheduleSpec | None = None,
                    seed: int | None = None) -> list[ScheduleSpec]:
    """Every candidate for ``local``, without duplicates, best-first order."""
    rng = random.Random(seed)
    cores = os.cpu_count() or 2
    par = default_parallelism()
    families = []
    for name, (fits, grid) in TEMPLATE_GRIDS.items():
        if fits(local):
            families.append(_grid(name, grid, rng))
    # samples expose the default's parallelism (1 for small groups, see default_spec)
    sample_par = (dict(default.params).get("parallelism", str(par))
                  if default.name == "Adams2019" else str(par))
    samples = [adams_sample(rng, sample_par) for _ in range(RANDOM_SAMPLES)]
    families.append(samples[0::2])
    families.append(_grid("Adams2019", {
        "parallelism": (cores, 4 * par, 2 * cores, 4 * cores, 2 * par), "beam_size": (32, 8),
        "disable_subtiling": (0, 1)}, rng))
    # beam search that drops states at random: between greedy samples and the full beam
    families.append([make_spec("Adams2019", {"beam_size": rng.choice((4, 8)),
                                             "random_dropout": rng.choice((25, 50, 75)),
                                             "random_dropout_seed": rng.randint(1, 2**31 - 1),
                                             "parallelism": sample_par})
                     for _ in range(RANDOM_SAMPLES // 8)])
    families.append(_grid("Mullapudi2016", {
        "parallelism": (par, cores, 4 * cores), "balance": (40, 10, 100),
        "last_level_cache_size": (16 << 20, 1 << 20, 256 << 10)}, rng))
    families.append(samples[1::2])
    families.append([make_spec("Li2018", {"parallelism": p}) for p in (par, cores)])
    ordered = [default] + ([previous] if previous is not None else [])
    for batch in itertools.zip_longest(*families):
        ordered.extend(s for s in batch if s is not None)
    seen, out = set(), []
    for s in ordered:
        if s.key not in seen:
            seen.add(s.key)
            out.append(s)
    return out
