"""``np.einsum`` on traced arrays, reduced to transpose, reshape, sum and
``matmul`` (pairwise, left to right). An ellipsis stands for letters of its
own (right-aligned across operands, size-1 dimensions broadcast, as numpy
does); a letter's size-1 dimension broadcasts against the other operands'
too; a letter repeated within one operand takes that operand's diagonal
first (``'ii->'`` is a trace, ``'ii->i'`` the diagonal). Operands are cast
to ``dtype=`` (or their common dtype) under numpy's ``casting=`` rule.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError, UnsupportedError, format_loc
from .tracer import TracedArray, user_loc


def _parse(subscripts: str, ops, loc):
    """(operand terms, output term, operands): ellipses replaced by letters
    unused elsewhere, their operands broadcast over them as numpy does."""
    s = subscripts.replace(" ", "")
    lhs, arrow, rhs = s.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(ops):
        raise ShapeError(f"np.einsum: {subscripts!r} names {len(ins)} operands, {len(ops)} were "
                         f"given{format_loc(loc)}.")
    for term in ins + ([rhs] if arrow else []):
        bare = term.replace("...", "", 1)
        if not (bare.isalpha() or not bare) or "." in bare:
            raise ShapeError(f"np.einsum: invalid subscripts {subscripts!r}{format_loc(loc)}.")
    ops = list(ops)
    if "..." in s:
        spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                 if c not in s]
        widths = [np.ndim(x) - len(t.replace("...", "")) if "..." in t else 0
                  for t, x in zip(ins, ops)]
        if min(widths) < 0:
            raise ShapeError(f"np.einsum: an operand has fewer dimensions than {subscripts!r} "
                             f"names{format_loc(loc)}.")
        shapes = []
        for t, x, w in zip(ins, ops, widths):
            start = t.index("...") if "..." in t else 0
            shapes.append(np.shape(x)[start:start + w])
        try:
            full = np.broadcast_shapes(*shapes)
        except ValueError:
            raise ShapeError(f"np.einsum: the dimensions under '...' do not broadcast: "
                             f"{shapes}{format_loc(loc)}.") from None
        letters = "".join(spare[:len(full)])
        for i, (t, x, w) in enumerate(zip(ins, ops, widths)):
            if "..." not in t:
                continue
            start = t.index("...")
            mine = letters[len(full) - w:]
            shape = np.shape(x)
            want = shape[:start] + full[len(full) - w:] + shape[start + w:]
            if want != shape:
                ops[i] = np.broadcast_to(x, want)
            ins[i] = t.replace("...", mine)
        if arrow and full and "..." not in rhs:
            raise ShapeError(f"np.einsum: {subscripts!r}: the output has no '...' for the "
                             f"{len(full)} dimension(s) under the operands' '...'"
                             f"{format_loc(loc)}.")
        if arrow:
            rhs = rhs.replace("...", letters)
    if not arrow:
        counts = {}
        for term in ins:
            for c in term:
                counts[c] = counts.get(c, 0) + 1
        ell = letters if "..." in s else ""
        rhs = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    if len(set(rhs)) != len(rhs):
        raise ShapeError(f"np.einsum: output subscripts {rhs!r} repeat a letter"
                         f"{format_loc(loc)}.")
    return ins, rhs, ops


def _diagonals(x, term):
    """(x, term) with every letter repeated in ``term`` taken once: the
    diagonal over its axes (np.diagonal puts it last)."""
    while len(set(term)) != len(term):
        c = next(c for c in term if term.count(c) > 1)
        p = term.index(c)
        q = term.index(c, p + 1)
        x = np.diagonal(x, 0, p, q)
        term = term[:p] + term[p + 1:q] + term[q + 1:] + c
    return x, term


def _sum_out(x, term, keep):
    axes = tuple(i for i, c in enumerate(term) if c not in keep)
    if axes:
        x = np.sum(x, axis=axes, dtype=x.dtype)  # einsum keeps the dtype (int8, bool: or)
        term = "".join(c for c in term if c in keep)
    return x, term


def _permute(x, term, order):
    if term != order:
        x = np.transpose(x, [term.index(c) for c in order])
    return x


def _contract(a, ta, b, tb, keep, sizes):
    batch = [c for c in ta if c in tb and c in keep]
    contracted = [c for c in ta if c in tb and c not in keep]
    m = [c for c in ta if c not in tb]
    n = [c for c in tb if c not in ta]
    a = _permute(a, ta, "".join(batch + m + contracted))
    if not (m or n) or not contracted:
        # a dot product per batch element ('ij,ij->i') or an outer product
        # ('i,j->ij'): a matmul of 1-row or K=1 matrices would be a batched
        # matmul of tiny blocks (einsum('ij,ij->i') of (2048, 256) float32:
        # 1.09 ms that way, numpy 0.08); as a product and a sum it fuses
        b = _permute(b, tb, "".join(batch + n + contracted))
        nb, nm = len(batch), len(m)
        a = np.reshape(a, np.shape(a)[:nb + nm] + (1,) * len(n) + np.shape(a)[nb + nm:])
        b = np.reshape(b, np.shape(b)[:nb] + (1,) * nm + np.shape(b)[nb:])
        prod = a * b
        if contracted:
            prod = np.sum(prod, axis=tuple(range(nb + nm + len(n), prod.ndim)), dtype=prod.dtype)
        return prod, "".join(batch + m + n)
    b = _permute(b, tb, "".join(batch + contracted + n))

    def size(cs):
        return int(np.prod([sizes[c] for c in cs], dtype=np.int64))

    bshape = tuple(sizes[c] for c in batch)
    a = np.reshape(a, bshape + (size(m), size(contracted)))
    b = np.reshape(b, bshape + (size(contracted), size(n)))
    r = np.matmul(a, b)
    r = np.reshape(r, bshape + tuple(sizes[c] for c in m + n))
    return r, "".join(batch + m + n)


_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def einsum(subscripts, operands, dtype=None, casting="safe"):
    loc = user_loc()
    if casting not in _CASTINGS:
        raise ValueError(f"np.einsum: casting must be one of {_CASTINGS}, got {casting!r}"
                         f"{format_loc(loc)}.")
    if not isinstance(subscripts, str):
        raise UnsupportedError(f"np.einsum: only the string form is supported{format_loc(loc)}.")
    ins, rhs, ops = _parse(subscripts, operands, loc)
    sizes: dict[str, int] = {}
    for i, (term, x) in enumerate(zip(ins, ops)):
        if np.ndim(x) != len(term):
            raise ShapeError(f"np.einsum: operand with shape {np.shape(x)} does not match "
                             f"subscripts {term!r}{format_loc(loc)}.")
        mine: dict[str, int] = {}
        for c, d in zip(term, np.shape(x)):
            if mine.setdefault(c, d) != d:  # a diagonal: no broadcasting within an operand
                raise ShapeError(f"np.einsum: index {c!r} repeats in operand {i} with sizes "
                                 f"{mine[c]} and {d}; expected equal sizes{format_loc(loc)}.")
        for c, d in mine.items():
            if sizes.get(c, 1) == 1:
                sizes[c] = d
            elif d not in (1, sizes[c]):
                raise ShapeError(f"np.einsum: index {c!r} has sizes {sizes[c]} and {d}; expected "
                                 f"equal sizes or 1 (which broadcasts){format_loc(loc)}.")
    for i, (term, x) in enumerate(zip(ins, ops)):
        want = tuple(sizes[c] for c in term)
        if np.shape(x) != want:  # a size-1 dimension broadcasts across operands, as numpy
            x = np.broadcast_to(x, want)
        ops[i], ins[i] = _diagonals(x, term)
    for c in rhs:
        if c not in sizes:
            raise ShapeError(f"np.einsum: output index {c!r} is not in any operand"
                             f"{format_loc(loc)}.")
    # numpy casts every operand to dtype= or the common dtype before any product,
    # under the casting rule (float64 to dtype=float32 is not 'safe')
    dts = [o.dtype if isinstance(o, TracedArray) else np.asarray(o).dtype for o in ops]
    target = np.result_type(*dts) if dtype is None else np.dtype(dtype)
    for i, d in enumerate(dts):
        if not np.can_cast(d, target, casting):
            raise DTypeError(f"np.einsum: operand {i} cannot be cast from {d} to {target} "
                             f"according to the rule {casting!r}{format_loc(loc)}; expected a "
                             "dtype= it casts to that way, or casting='same_kind' or 'unsafe'.")
    if dtype is None and any(d != target for d in dts):
        dtype = target
    if dtype is not None:
        ops = [np.asarray(o).astype(dtype) if not isinstance(o, TracedArray) else o.astype(dtype)
               for o in ops]
    # Sum away letters used by one operand only and absent from the output.
    acc, term = None, None
    for i, (t, x) in enumerate(zip(ins, ops)):
        later = set(rhs).union(*[set(u) for j, u in enumerate(ins) if j != i])
        x, t = _sum_out(x, t, later)
        if acc is None:
            acc, term = x, t
            continue
        keep = set(rhs).union(*[set(u) for u in ins[i + 1:]])
        acc, term = _contract(acc, term, x, t, keep, sizes)
    acc, term = _sum_out(acc, term, set(rhs))
    return _permute(acc, term, rhs)
