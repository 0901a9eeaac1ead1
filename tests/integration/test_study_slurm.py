"""The `quick` study through a real one-host Slurm, in one allocation: `fabbench render slurm
--study FILE` submitted with sbatch; every cell an srun step (srun --mpi=pmix for MPI, a TCP
rendezvous for Gloo); then `fabbench report` answers it. The study is the shipped `quick` on its
Ethernet fabric only (6 cells of its 12: each primitive and workload under srun once; the shm
half adds nothing Slurm does, and test_study runs the whole study)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import fabbench
from fabbench.study.spec import BUILTIN_DIR as STUDIES
from integration.test_slurm import one_host, submit_and_wait  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.integration, pytest.mark.needs_root]

FABBENCH = str(Path(sys.executable).parent / "fabbench")
DEADLINE_S = 1200


@pytest.mark.timeout(DEADLINE_S + 120)
def test_quick_study_in_one_allocation(one_host, tmp_path):  # noqa: F811
    shipped = (STUDIES / "quick.toml").read_text()
    line = 'fabric = ["ethernet", "shm"]'
    assert line in shipped, "the quick study's fabrics changed: update this test"
    study = tmp_path / "quick.toml"
    assert "\n[run]\n" in shipped
    # its ranks on loopback: the one-host cluster's default route is the machine's own network
    study.write_text(shipped.replace(line, 'fabric = ["ethernet"]')
                     .replace("\n[run]\n", '\n[run]\niface = "lo"\n'))
    p = fabbench("render", "slurm", "--study", str(study), "--results-dir", str(tmp_path / "res"),
                 "--fabbench-command", FABBENCH, "--name", "fb-study", timeout=60)
    assert p.returncode == 0, p.stderr
    fields = submit_and_wait(p.stdout, tmp_path, one_host, deadline_s=DEADLINE_S)
    job = fields["id"]
    out = tmp_path / "res" / f"{job}-study-quick"
    assert fields["JobState"] == "COMPLETED" and fields["ExitCode"] == "0:0", (
        fields["log"] + "".join(f"\n--- {f.name}\n{f.read_text(errors='replace')[-3000:]}"
                                for f in sorted(out.glob("**/*.log"))))
    doc = json.loads((out / "study.json").read_text())
    assert doc["place"]["scheduler"] == "slurm" and doc["place"]["job_id"] == job
    statuses = {c["id"]: c["status"] for c in doc["cells"]}
    ran = [c for c in doc["cells"] if c["status"] == "ok"]
    assert len(ran) == 6, statuses
    for c in ran:  # each cell an srun step of this allocation
        assert c["argv"][0] == "srun"
        assert ("--mpi=pmix" in c["argv"]) == (c["axes"]["primitive"] == "mpi")
    r = fabbench("report", str(out), "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert {g["what"] for g in answer["groups"]} == {"gpt-tiny", "halo", "allreduce 1M"}
    assert len(answer["headline"]) == 3
