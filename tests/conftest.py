"""Session fixtures and the opt-level scheme shared by every test.

- ``HALOJIT_CACHE_DIR`` points at one session temp dir (kernels compile once).
- A test that takes an ``opt_level`` argument runs at each level of
  ``helpers.OPT_LEVELS``; ``--opt-levels=0,1`` narrows that, and level-3 tests
  carry the ``level3`` marker (``-m "not level3"`` skips compiled kernels);
  table-driven tests sample level 3 (``--level3-sample=N``, see helpers).
- Hypothesis profiles: ``ci`` (default; 200 examples, no deadline) and
  ``dev`` (fewer examples); pick one with ``--hypothesis-profile``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # `import helpers` from any test dir

import helpers  # noqa: E402
from helpers import OPT_LEVELS  # noqa: E402

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis tests skip themselves
    settings = None

if settings is not None:
    settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True,
                              database=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("dev", max_examples=40, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser):
    parser.addoption("--opt-levels", default=None,
                     help="comma-separated opt levels to run (default: all of "
                          f"helpers.OPT_LEVELS = {OPT_LEVELS})")
    parser.addoption("--level3-sample", type=int, default=None,
                     help="table-driven tests run every Nth case at opt_level 3 (default "
                          f"helpers.LEVEL3_SAMPLE = {helpers.LEVEL3_SAMPLE})")


def pytest_configure(config):
    if config.getoption("--level3-sample"):
        helpers.LEVEL3_SAMPLE = config.getoption("--level3-sample")
    config.addinivalue_line("markers", "level3: runs at opt_level 3 (compiles Halide kernels)")


def _selected_levels(config):
    raw = config.getoption("--opt-levels")
    if not raw:
        return list(OPT_LEVELS)
    return [int(x) for x in raw.split(",") if x.strip()]


def pytest_generate_tests(metafunc):
    if "opt_level" not in metafunc.fixturenames:
        return
    if any(m.name == "parametrize" and "opt_level" in str(m.args[0])
           for m in metafunc.definition.iter_markers()):
        return  # the test parametrizes opt_level itself (table-driven tests)
    metafunc.parametrize("opt_level", OPT_LEVELS, ids=[f"O{lv}" for lv in OPT_LEVELS])


def pytest_collection_modifyitems(config, items):
    levels = set(_selected_levels(config))
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        level = callspec.params.get("opt_level") if callspec else None
        if level is not None and level not in levels:
            drop.append(item)
            continue
        if level is not None and level >= 3:
            item.add_marker(pytest.mark.level3)
        keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session", autouse=True)
def halojit_cache_dir(tmp_path_factory):
    """Every compiled kernel of the session goes to one temp dir."""
    old = os.environ.get("HALOJIT_CACHE_DIR")
    path = tmp_path_factory.mktemp("halojit-cache")
    os.environ["HALOJIT_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("HALOJIT_CACHE_DIR", None)
    else:
        os.environ["HALOJIT_CACHE_DIR"] = old


@pytest.fixture
def clean_env(monkeypatch):
    """No HALOJIT_* variable but the cache dir leaks in from the environment."""
    for name in list(os.environ):
        if name.startswith("HALOJIT_") and name != "HALOJIT_CACHE_DIR":
            monkeypatch.delenv(name)
    return monkeypatch
