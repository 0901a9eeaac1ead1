"""fabbench.workload_names and workloads.registry: names, the one sequence ("all"), loading by
name, refusals."""

from __future__ import annotations

import pytest

from fabbench import workload_names as names
from fabbench.errors import UsageError
from fabbench.workloads import registry


def test_names_and_parts():
    assert names.NAMES == ("collectives", "train", "halo", "pairs", "all")
    assert names.parts("all") == ("collectives", "train")
    assert names.parts("halo") == ("halo",)
    assert names.runs("all", "train") and not names.runs("halo", "train")
    with pytest.raises(UsageError, match="unknown workload 'nope'"):
        names.parts("nope")


def test_load_gives_each_part_in_order():
    loaded = registry.load("all")
    assert [w.name for w in loaded] == ["collectives", "train"]
    for name in ("collectives", "train", "halo", "pairs"):
        (workload,) = registry.load(name)
        assert workload.name == name
        for method in ("prepare", "run", "header", "line", "wrong"):
            assert callable(getattr(workload, method))


def test_the_registry_imports_no_workload_until_asked():
    import subprocess
    import sys

    code = ("import sys, fabbench.workloads.registry; "
            "print([m for m in ('fabbench.workloads.train', 'fabbench.workloads.halo', 'torch') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.strip() == "[]"
