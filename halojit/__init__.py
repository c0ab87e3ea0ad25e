"""halojit: trace numpy functions into fused, auto-scheduled Halide kernels."""

from . import errors
from .api import TracedFunction, trace
from .config import get_config as config
from .errors import (ArtifactError, CompileError, DTypeError, HalojitError, ShapeError,
                     TraceError, TraceWarning, UnsupportedError)
from .graph.tracer import exclude_from_trace

__version__ = "0.1.0"


def load(path):
    """Load an artifact written by ``TracedFunction.dump``."""
    try:
        from .runtime.artifact import load as _load
    except ImportError:
        raise UnsupportedError("halojit.load: artifacts (dump/load and the C++ embedding) are "
                               "not implemented in this version yet.") from None
    return _load(path)


__all__ = [
    "trace", "load", "exclude_from_trace", "config", "TracedFunction", "errors",
    "HalojitError", "TraceError", "TraceWarning", "ShapeError", "DTypeError",
    "UnsupportedError", "CompileError", "ArtifactError", "__version__",
]
