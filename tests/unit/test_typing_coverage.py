"""mypy strict over the whole package (issue 61): pyproject.toml's [tool.mypy] leaves no module
of src/fabbench out of the strict flags, as bench/typing_coverage.py reads the config; and that
reading resolves overrides as mypy does, so its figure can be trusted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def coverage():
    spec = importlib.util.spec_from_file_location("bench_typing_coverage",
                                                  REPO / "bench" / "typing_coverage.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_module_is_strict(coverage):
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    modules = dict(coverage.modules(None))
    assert "fabbench.plan" in modules and "fabbench.workloads.halo" in modules
    loose = [m for m in modules if not all(coverage.flags_for(m, config).values())]
    assert loose == []


def test_overrides_resolve_as_mypy_does(coverage):
    flags = {flag: True for flag in coverage.STRICT_FLAGS}
    config = {"overrides": [
        {"module": "fabbench.a.b", "check_untyped_defs": False},  # the name wins, listed first
        {"module": ["fabbench.a.*"], **flags}]}

    def strict(module):
        return all(coverage.flags_for(module, config).values())

    assert [strict(m) for m in ("fabbench.a", "fabbench.a.c", "fabbench.a.b", "fabbench.z")] \
        == [True, True, False, False]
    config = {"strict": True, "overrides": [{"module": "fabbench.x.*", "warn_return_any": False}]}
    assert [strict(m) for m in ("fabbench.x", "fabbench.x.y", "fabbench.xy")] == \
        [False, False, True]
