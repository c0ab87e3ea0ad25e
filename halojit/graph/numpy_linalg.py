"""np.linalg's solvers on stacks of small matrices: ``det``, ``slogdet``,
``inv``, ``solve`` and ``cholesky`` of (..., n, n) arrays with n up to
MAX_N, and ``multi_dot``.

A factorization is traced as LAPACK's getrf does it for one matrix, unrolled:
for each column k, the row with the largest magnitude in the column at or
below the diagonal (the first of equals) is swapped up, and the rows below
subtract multiples of it (the multiplier a_ik * (1 / a_kk)). A zero pivot
leaves its column as it is, as getrf does. Every matrix element is its own
traced value, one per matrix of the stack (``a[..., i, j]``): the whole
factorization is elementwise over the stack, and fuses into one kernel
whose lanes are matrices (the Elementwise template reads the elements with a
constant stride, templates.channel_pick). solve and inv then substitute
backwards, as getrs does. float32 stays float32; integer and bool matrices
are factored in float64, as numpy's.

Measured (2-core Zen 4 VM, float32, (100000, n, n) random matrices,
medians of 7 interleaved calls; numpy loops over the stack in C, one LAPACK
call per matrix): det of 2x2 / 3x3 / 4x4 0.04 / 0.14 / 0.41 ms (numpy 9.2 /
14.2 / 20.9), inv 0.10 / 0.26 / 1.6 ms (numpy 32 / 41 / 47); kernel
compiles 0.2-1.6 s. The traced graph grows with n**3 (a 4x4 inv is 335
ops); 5x5 took 10-30 s to compile, so larger matrices are refused with an
UnsupportedError that says so.

Where numpy raises LinAlgError for a singular matrix (inv, solve), a trace
cannot (the error depends on values): the result holds inf or NaN instead.
det and slogdet of a singular matrix are 0 and (0, -inf), as numpy's.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import ShapeError, UnsupportedError, format_loc
from .numpy_api import _array, implements
from .numpy_composite import _traced
from .tracer import TracedArray, user_loc

# The largest n of the n x n matrices traced (see the module docstring).
MAX_N = 4
# Right-hand sides of solve with at most this many elements per matrix (n x
# k) are stacked as single columns (templates.SHORT_MATRIX); wider ones keep
# B's rows whole.
COLUMN_ELEMENTS = 16


def _float_dtype(*dts) -> np.dtype:
    """The dtype numpy's linalg computes ``dts`` in (its _commonType): float32
    if all are float32, else float64 (bool and integer arrays count as
    float64, so float32 beside int8 is float64)."""
    for dt in dts:
        if np.dtype(dt) == np.float16:
            raise TypeError("array type float16 is unsupported in linalg")
    single = all(np.dtype(dt) == np.float32 for dt in dts)
    return np.dtype(np.float32 if single else np.float64)


def _square(a, fname: str) -> TracedArray:
    """``a`` as a traced stack of square matrices, checked as numpy checks it."""
    a = _traced(_array(a))
    if a.ndim < 2:
        raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be at "
                                    "least two-dimensional")
    if a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError(f"Last 2 dimensions of the array must be square (np.linalg."
                                    f"{fname} was given shape {a.shape})")
    if np.dtype(a.dtype).kind not in "biuf":
        raise TypeError(f"np.linalg.{fname}: unsupported dtype {a.dtype}")
    n = a.shape[-1]
    if n > MAX_N:
        raise UnsupportedError(
            f"np.linalg.{fname} of {n}x{n} matrices is not supported inside @halojit.trace"
            f"{format_loc(user_loc())}: halojit factors matrices up to {MAX_N}x{MAX_N} (each "
            "element a traced value, the stack of matrices vectorized). Compute it outside "
            "the traced function or in a `with halojit.exclude_from_trace():` block.")
    return a


def _elements(a, dt) -> list[list]:
    """The matrix elements ``a[..., i, j]`` in dtype ``dt``, row by row."""
    n = a.shape[-1]
    return [[a[..., i, j].astype(dt, copy=False) for j in range(n)] for i in range(n)]


class _LU(NamedTuple):
    u: list          # u[i][j]: the upper triangle (j >= i) of the factored rows
    rhs: list | None  # the right-hand rows with the same swaps and eliminations
    pivots: list     # u[k][k]
    sign: object     # +1 / -1 per matrix (a traced value), None when n < 2


def _lu(el: list, rhs: list | None = None) -> _LU:
    """LU with partial pivoting of the element rows ``el`` (n lists of n
    values), applying its row swaps and eliminations to ``rhs`` (n rows,
    each a list of values of B's columns or one value of B's whole row)."""
    n = len(el)
    el = [list(r) for r in el]
    rhs = None if rhs is None else [list(r) for r in rhs]
    sign, pivots = None, []
    for k in range(n):
        if k + 1 < n:
            best, at = np.abs(el[k][k]), None
            for i in range(k + 1, n):
                mag = np.abs(el[i][k])
                better = mag > best  # strict: the first of equal magnitudes stays
                best = np.where(better, mag, best)
                at = np.where(better, i, k if at is None else at)
            hits = [at == i for i in range(k + 1, n)]
            for rows in (el, rhs) if rhs is not None else (el,):
                top = list(rows[k])
                for i, hit in zip(range(k + 1, n), hits):
                    top = [np.where(_col(hit, v), v, t) for v, t in zip(rows[i], top)]
                    rows[i] = [np.where(_col(hit, v), t, v) for v, t in zip(rows[i], rows[k])]
                rows[k] = top
            flip = at != k
            sign = np.where(flip, -1, 1) if sign is None else np.where(flip, -sign, sign)
        pivot = el[k][k]
        pivots.append(pivot)
        if k + 1 < n:
            inverse, zero = 1 / pivot, pivot == 0
            for i in range(k + 1, n):
                m = np.where(zero, 0, el[i][k] * inverse)  # a zero column stays as it is
                el[i] = [v - m * el[k][j] if j > k else v for j, v in enumerate(el[i])]
                if rhs is not None:
                    rhs[i] = [v - _col(m, v) * w for v, w in zip(rhs[i], rhs[k])]
    return _LU(el, rhs, pivots, sign)


def _col(per_matrix, value):
    """A per-matrix value (...,) against ``value``: as it is, or as (..., 1)
    where ``value`` is a whole row of B (..., k)."""
    return per_matrix if np.ndim(value) == np.ndim(per_matrix) else per_matrix[..., None]


def _back_substitute(lu: _LU) -> list:
    """The solution rows of U x = rhs, last row first, as getrs's triangular
    solve: each solved row is divided by its pivot, then taken from the rows
    above it."""
    n = len(lu.u)
    rows = [list(r) for r in lu.rhs]
    x = [None] * n
    for k in range(n - 1, -1, -1):
        x[k] = [v / _col(lu.u[k][k], v) for v in rows[k]]
        for i in range(k):
            rows[i] = [v - _col(lu.u[i][k], v) * w for v, w in zip(rows[i], x[k])]
    return x


def _product(values):
    out = values[0]
    for v in values[1:]:
        out = out * v
    return out


@implements(np.linalg.det)
def det(a):
    a = _square(a, "det")
    dt = _float_dtype(a.dtype)
    n = a.shape[-1]
    if n == 0:
        return np.ones_like(a, dtype=dt, shape=a.shape[:-2])
    lu = _lu(_elements(a, dt))
    d = _product(lu.pivots)
    return d if lu.sign is None else (d * lu.sign).astype(dt, copy=False)


class _SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


# numpy's own result type where it has one (numpy 2), so that results compare
# and print as numpy's
SlogdetResult = getattr(getattr(np.linalg, "_linalg", None), "SlogdetResult", _SlogdetResult)


@implements(np.linalg.slogdet)
def slogdet(a):
    a = _square(a, "slogdet")
    dt = _float_dtype(a.dtype)
    n = a.shape[-1]
    if n == 0:
        one = np.ones_like(a, dtype=dt, shape=a.shape[:-2])
        return SlogdetResult(one, one - one)
    lu = _lu(_elements(a, dt))
    sign = _product([np.sign(p) for p in lu.pivots])
    if lu.sign is not None:
        sign = (sign * lu.sign).astype(dt, copy=False)
    logabs = sum(np.log(np.abs(p)) for p in lu.pivots[1:]) if n > 1 else None
    first = np.log(np.abs(lu.pivots[0]))
    return SlogdetResult(sign, first if logabs is None else first + logabs)


def _solve(a, b_rows, dt, columns: int | None, out_shape) -> TracedArray:
    """Solve a x = b for the stacked matrices ``a`` and B given as rows
    (``b_rows[i]``: a list of ``columns`` single-column values, or one value
    holding B's whole row when ``columns`` is None), reshaped to ``out_shape``."""
    lu = _lu(_elements(a, dt), b_rows)
    x = _back_substitute(lu)
    if columns is None:  # whole rows (..., k): stacked along the rows' axis
        return np.stack([r[0] for r in x], axis=-2).reshape(out_shape)
    flat = [v for row in x for v in row]  # single columns side by side, then the shape
    return np.stack(flat, axis=-1).reshape(out_shape)


@implements(np.linalg.inv)
def inv(a):
    a = _square(a, "inv")
    dt = _float_dtype(a.dtype)
    n = a.shape[-1]
    if n == 0:
        return np.zeros_like(a, dtype=dt)
    one = np.ones_like(a, dtype=dt, shape=a.shape[:-2])
    zero = one - one
    eye = [[one if i == j else zero for j in range(n)] for i in range(n)]
    return _solve(a, eye, dt, n, a.shape)


@implements(np.linalg.solve)
def solve(a, b):
    a = _square(a, "solve")
    b = _traced(_array(b))
    if np.dtype(b.dtype).kind not in "biuf":
        raise TypeError(f"np.linalg.solve: unsupported dtype {b.dtype}")
    dt = _float_dtype(a.dtype, b.dtype)
    n = a.shape[-1]
    if b.ndim == 1:  # numpy 2: a vector only when b is 1-D
        if b.shape[0] != n:
            raise ShapeError(_mismatch(b.shape[0], n, "(m,m),(m)->(m)", user_loc()))
        batch = a.shape[:-2]
        b = np.broadcast_to(b, batch + (n,))
        k, vector = 1, True
    else:
        if b.shape[-2] != n:
            raise ShapeError(_mismatch(b.shape[-2], n, "(m,m),(m,n)->(m,n)", user_loc()))
        try:
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise ShapeError(f"np.linalg.solve: the stacks of a {a.shape} and b {b.shape} do "
                             f"not broadcast{format_loc(user_loc())}.") from None
        k, vector = b.shape[-1], False
        a = np.broadcast_to(a, batch + (n, n))
        b = np.broadcast_to(b, batch + (n, k))
    out_shape = batch + ((n,) if vector else (n, k))
    if n == 0 or k == 0 or 0 in batch:
        return np.zeros_like(b, dtype=dt, shape=out_shape)
    b = b.astype(dt, copy=False)
    if vector:
        rows = [[b[..., i]] for i in range(n)]
        return _solve(a, rows, dt, 1, out_shape)
    if n * k <= COLUMN_ELEMENTS:
        rows = [[b[..., i, c] for c in range(k)] for i in range(n)]
        return _solve(a, rows, dt, k, out_shape)
    rows = [[b[..., i, :]] for i in range(n)]
    return _solve(a, rows, dt, None, out_shape)


def _mismatch(got: int, n: int, signature: str, loc) -> str:
    return (f"solve: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
            f"signature {signature} (size {got} is different from {n}){format_loc(loc)}.")


@implements(np.linalg.cholesky)
def cholesky(a, /, *, upper=False):
    """The Cholesky factor from the lower triangle of ``a`` (the upper one,
    and U with a = U^T U, for ``upper=True``), column by column as LAPACK's
    potf2: the diagonal the square root of what the earlier columns leave,
    the column below it scaled by its reciprocal. A matrix that is not
    positive definite gives NaN where numpy raises LinAlgError."""
    a = _square(a, "cholesky")
    dt = _float_dtype(a.dtype)
    n = a.shape[-1]
    if n == 0:
        return np.zeros_like(a, dtype=dt)
    if upper:
        a = np.swapaxes(a, -1, -2)
    el = _elements(a, dt)
    low = [[None] * n for _ in range(n)]
    for j in range(n):
        d = el[j][j]
        for k in range(j):
            d = d - low[j][k] * low[j][k]
        low[j][j] = np.sqrt(d)
        inverse = 1 / low[j][j]
        for i in range(j + 1, n):
            v = el[i][j]
            for k in range(j):
                v = v - low[i][k] * low[j][k]
            low[i][j] = v * inverse
    zero = np.zeros_like(el[0][0])
    at = (lambda i, j: low[j][i]) if upper else (lambda i, j: low[i][j])
    flat = [at(i, j) if (j <= i if not upper else i <= j) else zero
            for i in range(n) for j in range(n)]
    return np.stack(flat, axis=-1).reshape(a.shape)


@implements(np.linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    """numpy's multi_dot: 1-D ends as a row and a column vector, the
    product in numpy's order (the cheapest parenthesization), the ends'
    axes dropped again."""
    arrays = [_traced(_array(x)) for x in arrays]
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")
    if len(arrays) == 2:
        return np.dot(arrays[0], arrays[1])
    first, last = arrays[0].ndim == 1, arrays[-1].ndim == 1
    if first:
        arrays[0] = arrays[0][None, :]
    if last:
        arrays[-1] = arrays[-1][:, None]
    for x in arrays:
        if x.ndim != 2:
            raise np.linalg.LinAlgError(f"{x.ndim}-dimensional array given. Array must be "
                                        "two-dimensional")
    result = _chain(arrays, _chain_order([x.shape for x in arrays]), 0, len(arrays) - 1)
    if first and last:
        return result[0, 0]
    if first:
        return result[0]
    if last:
        return result[:, 0]
    return result


def _chain_order(shapes) -> list[list[int]]:
    """The matrix-chain split points: split[i][j] is where the cheapest product
    of matrices i..j divides (dynamic programming over scalar multiplications)."""
    n = len(shapes)
    dims = [shapes[0][0]] + [s[1] for s in shapes]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s
    return split


def _chain(arrays, split, i: int, j: int):
    if i == j:
        return arrays[i]
    s = split[i][j]
    return np.dot(_chain(arrays, split, i, s), _chain(arrays, split, s + 1, j))
