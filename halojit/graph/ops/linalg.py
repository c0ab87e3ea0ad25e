"""Linear algebra: ``matmul`` on operands of two or more dimensions with
broadcast batch dimensions. The tracer maps 1-D ``matmul`` operands, ``dot``
and the common ``einsum`` forms onto it.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError, format_loc
from ..ir import AbstractArray
from . import LINALG, OpDef, broadcast_shapes, register


def _matmul_infer(avals, params, loc=None):
    a, b = avals
    if a.ndim < 2 or b.ndim < 2:
        raise ShapeError(f"matmul: operands need at least 2 dimensions, got {a.shape} "
                         f"and {b.shape}{format_loc(loc)}.")
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"matmul: shapes {a.shape} and {b.shape} are not aligned{format_loc(loc)}; "
            f"expected a.shape[-1] ({a.shape[-1]}) == b.shape[-2] ({b.shape[-2]})."
        )
    batch = broadcast_shapes([a.shape[:-2], b.shape[:-2]], "matmul", loc)
    return AbstractArray(batch + (a.shape[-2], b.shape[-1]), a.dtype)


register(OpDef("matmul", LINALG, _matmul_infer,
               lambda arrays, p: np.asarray(np.matmul(*arrays))))
