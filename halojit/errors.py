"""The halojit error family.

Every message says what was expected, what was given, where (the user's
file:line when known) and what to do.
"""

from __future__ import annotations

import numpy as np


class HalojitError(Exception):
    """Base class of every error halojit raises on purpose."""


class TraceError(HalojitError):
    """The function cannot be captured as a static graph.

    Example: ``if x.sum() > 0:`` inside ``@halojit.trace`` (symbolic=True).
    Fix: make the branch static (a keyword argument), use ``np.where``, or
    trace with ``symbolic=False`` to freeze the first call's path.
    """


class TraceWarning(UserWarning):
    """Tracing succeeded but may not mean what the user expects.

    Example: ``symbolic=False`` freezes value-dependent branches.
    """


class ShapeError(HalojitError, ValueError):
    """Shapes do not broadcast, an axis is out of range, a reshape is invalid.

    Example: ``x + y`` with shapes (3, 4) and (5,).
    Fix: reshape or slice so that trailing dimensions match or are 1.
    """


class IndexShapeError(ShapeError, IndexError):
    """A basic index does not fit the array: an int out of its axis, or more
    indices than axes. A ShapeError (found while tracing, from shapes alone)
    that is also numpy's IndexError, so ``except IndexError`` works as with
    numpy.

    Example: ``x[3]`` for an x of 3 rows; ``x[0, 0, 0]`` for a 2-D x.
    Fix: index within ``[-n, n)``, one index per axis.
    """


class AxisError(IndexShapeError, np.exceptions.AxisError):
    """An ``axis=`` outside the array's dimensions: numpy's own AxisError
    (a ValueError and an IndexError), so ``except np.exceptions.AxisError``
    works as with numpy, and an IndexShapeError.

    Example: ``np.sum(x, axis=2)`` for a 2-D x.
    Fix: pass an axis in ``[-ndim, ndim)``.
    """


class DomainError(HalojitError, ValueError):
    """A value numpy refuses for an operation, known while tracing.

    Example: ``x ** -2`` for an integer array ("Integers to negative
    integer powers are not allowed", numpy's ValueError).
    Fix: use a float array or a non-negative exponent.
    """


class IndexOutOfBoundsError(HalojitError, IndexError):
    """An integer index array points outside the axis it indexes (numpy's
    IndexError for ``x[idx]``, ``np.take``, ``np.take_along_axis``). The
    indices are checked before any kernel runs.

    Example: ``x[np.array([0, 7])]`` for an x of 5 rows.
    Fix: keep indices in ``[-n, n)``, or pass ``mode="wrap"`` or
    ``mode="clip"`` to ``np.take`` (no check, and no per-call cost for it).
    """


class DTypeError(HalojitError, TypeError):
    """An input or operation has a dtype halojit cannot handle.

    Example: a complex or object array as input.
    Fix: convert to a supported real dtype before calling.
    """


class IndexTypeError(DTypeError, IndexError):
    """An index array of a dtype numpy does not index with: a DTypeError that
    is also numpy's IndexError ("arrays used as indices must be of integer
    (or boolean) type"), so ``except IndexError`` works as with numpy.

    Example: ``x[idx.astype(float)]``; ``y[idx * 0.5] = 1``.
    Fix: cast the indices to an integer dtype (``.astype(np.intp)``).
    """


class UnsupportedError(HalojitError, NotImplementedError):
    """A numpy function or argument that halojit does not trace.

    Example: ``np.linalg.svd(x)``. Fix: move it into
    ``with halojit.exclude_from_trace():`` or compute it outside.
    """


class CompileError(HalojitError, RuntimeError):
    """Halide failed to compile a kernel; carries Halide's message."""


class ArtifactError(HalojitError, ValueError):
    """A dumped artifact is corrupt, foreign, newer, or dump got bad arguments."""


class DeviceError(HalojitError, RuntimeError):
    """A CUDA kernel or artifact cannot run here: no NVIDIA driver, no
    device, or a device older than the code was compiled for.

    Fix: run on a machine with an NVIDIA GPU and driver, or trace with
    ``target="host"``; ``f.lower(..., target="host-cuda")`` compiles
    without one.
    """


class InternalError(HalojitError, RuntimeError):
    """A bug in halojit: please report it with the message."""


def format_loc(loc: str | None) -> str:
    return f" (at {loc})" if loc else ""
