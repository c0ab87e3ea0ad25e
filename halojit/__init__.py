"""halojit: trace numpy functions into fused, auto-scheduled Halide kernels."""


def _find_installed_native_parts():
    """Scripts run from a source checkout import this source tree, which has
    no compiled parts (``_rt``, ``lib/``, ``include/``); borrow them from an
    installed halojit further down ``sys.path`` (``pip install .``)."""
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    if any(name.startswith("_rt.") for name in os.listdir(here)):
        return
    for entry in sys.path:
        other = os.path.join(os.path.abspath(entry or "."), "halojit")
        if os.path.realpath(other) != os.path.realpath(here) and os.path.isdir(other) and any(
                name.startswith("_rt.") for name in os.listdir(other)):
            __path__.append(other)
            return


_find_installed_native_parts()

from . import cuda, errors
from .api import TracedFunction, trace
from .config import get_config as config
from .errors import (ArtifactError, AxisError, CompileError, DeviceError, DomainError, DTypeError,
                     HalojitError, IndexOutOfBoundsError, IndexShapeError, IndexTypeError,
                     ShapeError, TraceError, TraceWarning, UnsupportedError)
from .graph.tracer import exclude_from_trace

__version__ = "0.1.0"


def load(path, level=None):
    """Load an artifact written by ``TracedFunction.dump``: a callable whose
    outputs have the original function's structure. ``level`` picks a CPU
    feature level ("avx512", "avx2", "sse41"); by default the best this CPU
    runs (or ``$HALOJIT_ARTIFACT_LEVEL``)."""
    from .runtime.artifact import load as _load
    return _load(path, level)


__all__ = [
    "trace", "load", "exclude_from_trace", "config", "TracedFunction", "errors",
    "HalojitError", "TraceError", "TraceWarning", "ShapeError", "DTypeError",
    "UnsupportedError", "CompileError", "ArtifactError", "DomainError", "IndexOutOfBoundsError",
    "IndexShapeError", "IndexTypeError", "AxisError", "__version__",
]
