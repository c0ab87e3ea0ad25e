"""Fusion group -> Halide pipeline, and AOT compilation of pipelines (``compile``).

Submodules import ``halide`` (which loads libHalide); nothing is imported here.
"""
