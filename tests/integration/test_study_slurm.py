"""The `quick` study through a real one-host Slurm, in one allocation: `fabbench render slurm
--study quick` submitted with sbatch; every cell an srun step (srun --mpi=pmix for MPI, a TCP
rendezvous for Gloo); then `fabbench report` answers it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from conftest import fabbench
from integration.test_slurm import _job_fields, _log, one_host  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.integration, pytest.mark.needs_root]

FABBENCH = str(Path(sys.executable).parent / "fabbench")
DEADLINE_S = 1200


@pytest.mark.timeout(DEADLINE_S + 120)
def test_quick_study_in_one_allocation(one_host, tmp_path):  # noqa: F811
    import subprocess

    p = fabbench("render", "slurm", "--study", "quick", "--results-dir", str(tmp_path / "res"),
                 "--fabbench-command", FABBENCH, "--name", "fb-study", timeout=60)
    assert p.returncode == 0, p.stderr
    script = tmp_path / "study.sbatch"
    script.write_text(p.stdout)
    sub = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True,
                         timeout=30, env=one_host, cwd=tmp_path, check=False)
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip().split(";")[0]
    end = time.monotonic() + DEADLINE_S
    while True:
        fields = _job_fields(job, one_host)
        if fields.get("JobState") not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING",
                                          None):
            break
        if time.monotonic() > end:
            subprocess.run(["scancel", job], timeout=30, env=one_host, check=False)
            pytest.fail(f"job {job} still running after {DEADLINE_S} s; cancelled. Log:\n"
                        f"{_log(tmp_path, job)}")
        time.sleep(2)
    log = _log(tmp_path, job)
    assert fields["JobState"] == "COMPLETED" and fields["ExitCode"] == "0:0", log
    out = tmp_path / "res" / f"{job}-study-quick"
    doc = json.loads((out / "study.json").read_text())
    assert doc["place"]["scheduler"] == "slurm" and doc["place"]["job_id"] == job
    statuses = {c["id"]: c["status"] for c in doc["cells"]}
    ran = [c for c in doc["cells"] if c["status"] == "ok"]
    assert len(ran) == 12, statuses
    for c in ran:  # each cell an srun step of this allocation
        assert c["argv"][0] == "srun"
        assert ("--mpi=pmix" in c["argv"]) == (c["axes"]["primitive"] == "mpi")
    r = fabbench("report", str(out), "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert {g["what"] for g in answer["groups"]} == {"gpt-tiny", "halo", "allreduce 1M"}
    assert len(answer["headline"]) == 3
