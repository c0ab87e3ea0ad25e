"""The graph IR, op registry, tracer, interpreter and passes."""
