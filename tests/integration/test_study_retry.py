"""A study that asks for it (`retry = "transient"` under [run]) runs a cell once more when it
failed from a fault on the wire, and records both attempts; a cell whose fault is not one (a
wrong result) runs once. The faults are injected into the ranks (FABBENCH_FAULT): a stopped
rank, which its peer's deadline names ("timed out in allreduce"), and a corrupted result.
Neither goes away on the second attempt: what is checked is that the retry happens, or not,
and that the manifest and the files keep both attempts."""

from __future__ import annotations

import json

import pytest

from conftest import fabbench, needs_mpirun

pytestmark = [pytest.mark.integration, needs_mpirun, pytest.mark.timeout(600)]

STUDY = """name = "retry"
description = "one cell, retried when a fault on the wire failed it"

[matrix]
fabric = ["ethernet"]
primitive = ["gloo"]
workload = ["allreduce"]
nodes = [1]

[run]
ranks_per_node = 2
timeout = 5
deadline = 120
retry = "transient"

[workload.allreduce]
kind = "collectives"
ops = "allreduce"
sizes = "64K"
budget = 0.05
check = true
"""


@pytest.mark.parametrize("fault,attempts,transient", [
    ("stop:1", 2, True),      # a hung peer: the wire's kind of fault, retried once
    ("corrupt:1", 1, False),  # a wrong result: not the wire's, not retried
])
def test_a_transient_failure_is_retried_once_and_both_attempts_kept(tmp_path, fault,
                                                                     attempts, transient):
    study = tmp_path / "retry.toml"
    study.write_text(STUDY)
    out = tmp_path / "out"
    p = fabbench("study", "run", str(study), "--out", str(out), timeout=500,
                 env={"FABBENCH_FAULT": fault})
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    (cell,) = json.loads((out / "study.json").read_text())["cells"]
    assert cell["status"] == "failed" and cell["attempts"] == attempts, cell
    if transient:
        assert "timed out in allreduce" in cell["error"], cell["error"]
        (first,) = cell["history"]
        assert first["attempt"] == 1 and first["transient"] is True
        assert "timed out in allreduce" in first["error"]
        assert (out / first["file"]).is_file() and first["file"].endswith(".attempt-1")
        assert (out / cell["file"]).is_file()  # the second attempt's, beside the first's
        log = (out / cell["log"]).read_text()
        assert log.count("# 20") == 2  # both launches' command lines, one log
    else:
        assert "history" not in cell and not list((out / "cells").glob("*.attempt-*"))
