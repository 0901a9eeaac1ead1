"""The fault matrix of issue 36 under other launchers (docs/faults-launchers.md): srun on the
emulated Slurm cluster (a rank killed, the slurmd of rank 1's node killed, the job cancelled),
torchrun (a rank killed, torchrun sent SIGTERM, sent SIGKILL) and the study runner (sent
SIGTERM, sent SIGKILL, then --resume). Each row: the right exit code within its bound of the
fault, the headline, the records before the fault intact with a summary that says why, and
nothing of the run left running. The rows are defined once, in faults_on_launchers.py
(bench/fault_launchers.py runs them repeatedly for the page's figures); horovodrun's rows are
test_fault_matrix's (the horovod-gloo column)."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from conftest import fabbench
from fabbench.study import manifest
from integration.faults_on_launchers import CELL, ROWS, Row, run_row, slurm_four
from integration.faults_on_wire import problems

pytestmark = [pytest.mark.integration, pytest.mark.needs_root]


def _rows(launcher: str) -> list[Row]:
    return [r for r in ROWS if r.launcher == launcher]


def _check(outcome, row: Row) -> None:
    found = problems(outcome, row.expect)
    assert not found, f"{found}\n--- stderr\n{outcome.stderr[-3000:]}"


@pytest.fixture(scope="module")
def slurm():
    if os.geteuid() != 0:
        pytest.skip("the Slurm daemons and network namespaces need root")
    if not all(shutil.which(d) for d in ("slurmctld", "slurmd", "munged", "srun")):
        pytest.skip("slurm-wlm and munge are not installed (.ci/apt-packages.txt)")
    with slurm_four() as cluster:
        yield cluster


@pytest.mark.timeout(300)
@pytest.mark.parametrize("row", _rows("srun"), ids=lambda r: r.name)
def test_srun_row(slurm, tmp_path, row: Row):
    try:
        outcome, scene = run_row(row, tmp_path, slurm)
    finally:
        if row.name == "slurmd-kill" and slurm.slurmd_pid("node1") is None:
            slurm.start_slurmd("node1")  # the cluster stays usable for the next row
    _check(outcome, row)
    assert scene.seen.get("node1") == "node1", scene.seen


@pytest.mark.timeout(180)
@pytest.mark.parametrize("row", _rows("torchrun"), ids=lambda r: r.name)
def test_torchrun_row(tmp_path, row: Row):
    if shutil.which("torchrun", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("torchrun is not installed (torch)")
    outcome, _ = run_row(row, tmp_path)
    _check(outcome, row)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("row", _rows("study"), ids=lambda r: r.name)
def test_study_row_then_resume(tmp_path, row: Row):
    outcome, _ = run_row(row, tmp_path)
    _check(outcome, row)
    directory = tmp_path / "out"
    doc = manifest.read(directory)  # a sound manifest: read and validated against its schema
    (entry,) = doc.cells
    # SIGTERM: the study records the cell failed; SIGKILL: no code of the study ran after it
    assert entry.status == ("failed" if row.name == "launcher-term" else "running"), entry
    p = fabbench("study", "run", str(tmp_path / "faults.toml"), "--out", str(directory),
                 "--resume", timeout=200)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    (cell,) = json.loads((directory / "study.json").read_text())["cells"]
    assert cell["status"] == "ok" and cell["attempts"] == 2, cell
    kept = directory / "cells" / f"{CELL}.jsonl.attempt-1"
    assert kept.is_file()  # the stopped attempt's records, beside the new file
