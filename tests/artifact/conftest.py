"""Artifacts shared by the artifact tests: each is dumped once per session
(compiling kernels for every feature level costs seconds)."""

from __future__ import annotations

import numpy as np
import pytest
from artifact_helpers import RNG, model, model_args, softmax

import halojit


@pytest.fixture(scope="session")
def model_fn():
    return halojit.trace(model, capture_as_const=True)


@pytest.fixture(scope="session")
def model_artifact(model_fn, tmp_path_factory):
    """model at (16, 32) and (5, 32), every default feature level."""
    path = tmp_path_factory.mktemp("artifacts") / "model.hjm"
    model_fn.dump(path, *model_args(16), extra_examples=[model_args(5)],
                  arg_names=["x", "bias", "k"])
    return path


@pytest.fixture(scope="session")
def softmax_artifact(tmp_path_factory):
    path = tmp_path_factory.mktemp("artifacts") / "softmax.hjm"
    x = RNG.standard_normal((8, 64)).astype(np.float32)
    halojit.trace(softmax).dump(path, x, levels=["avx2", "sse41"])
    return path
