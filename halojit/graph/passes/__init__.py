"""Graph -> Graph passes and the pipeline for each opt_level, in order.

Each pass keeps numpy's exact results: no rewrite may change a value, a
dtype, a NaN or the sign of a zero. One reorders float sums that numpy
leaves to its BLAS: diagonal_of_products computes a product's diagonal as
row-wise dot products.
"""

from __future__ import annotations

from typing import Callable

from ..ir import Graph
from ..verify import verify
from .diagonal import diagonal_of_products
from .rewrite import (eliminate_common_subexpressions, eliminate_dead_code, fold_constants,
                      simplify)
from .select import select_sorted_positions
from .slices import push_slices
from .views import strip_copies

Pass = Callable[[Graph], Graph]

# opt_level -> passes, run in this order (2 and 3 add memory planning and
# fusion elsewhere; they share the graph simplification of level 1).
SIMPLIFY: tuple[tuple[str, Pass], ...] = (
    ("strip_copies", strip_copies),
    ("fold_constants", fold_constants),
    ("simplify", simplify),
    ("eliminate_common_subexpressions", eliminate_common_subexpressions),
    ("diagonal_of_products", diagonal_of_products),
    ("push_slices", push_slices),
    ("select_sorted_positions", select_sorted_positions),
    ("simplify", simplify),
    ("eliminate_common_subexpressions", eliminate_common_subexpressions),
    ("fold_constants", fold_constants),
    ("eliminate_dead_code", eliminate_dead_code),
)


def optimize(graph: Graph, opt_level: int, check: bool = False,
             dump: Callable[[str, Graph], None] | None = None) -> Graph:
    """Run the passes of ``opt_level``; ``check`` verifies after each pass."""
    if opt_level < 1:
        return eliminate_dead_code(graph)
    for name, fn in SIMPLIFY:
        graph = fn(graph)
        if check:
            verify(graph)
        if dump:
            dump(name, graph)
    return graph


__all__ = ["optimize", "fold_constants", "simplify", "eliminate_common_subexpressions",
           "eliminate_dead_code", "diagonal_of_products", "push_slices", "select_sorted_positions", "SIMPLIFY"]
