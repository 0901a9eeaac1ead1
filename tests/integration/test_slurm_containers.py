"""The rendered `fabbench render slurm --runtime apptainer` and `--runtime charliecloud` jobs on
4 emulated Slurm nodes (.ci/slurm/start.sh four, in a directory and on a port of its own): srun
--mpi=pmix starts one containerised rank per node; the job must reach COMPLETED and write a
valid file with nodes=4, every rank in the container, and the image the job named in the run's
provenance (the script's FABBENCH_IMAGE_REF, passed by srun and the runtime to the ranks).

Apptainer is .ci/apptainer.sh's (sid's 1.4, as the unprivileged user): an `apptainer` on the
job's PATH enters it. The ranks run as the user and slurmstepd's PMIx server as root (the job's
user here), so PMIx's native uid check would refuse them: the job exports PMIX_MCA_psec=none,
which the server accepts because start.sh names `none` in the slurmds' PMIX_MCA_psec (PMIx
activates its none module only when named), and PMIX_MCA_gds=hash (the server's shared-memory
store is in root's session directory, which the container does not see). docs/containers.md.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import fabbench
from fabbench.results.reader import read_results
from integration.test_apptainer import (  # noqa: F401  (fixtures)
    APPTAINER,
    BUILD_TIMEOUT_S,
    SIF_TIMEOUT_S,
    USER,
    Sif,
    clean_env,
    sif,
    user_dir,
)
from integration.test_charliecloud import ChImage, host_env, image  # noqa: F401  (fixture)
from integration.test_slurm import FABBENCH, slurm_cluster, submit_and_wait

pytestmark = [pytest.mark.integration, pytest.mark.needs_root,
              pytest.mark.timeout(BUILD_TIMEOUT_S + SIF_TIMEOUT_S + 1800)]

# test_slurm_four.py's cluster may run beside it; its PMIx client directories under /tmp, which
# ch-run shares with the host (the containers must reach the step's PMIx files)
OWN = {"FABBENCH_SLURM_DIR": "/tmp/fabbench-slurm-four-containers",
       "FABBENCH_SLURM_PORT": "16857"}
RUN = ["--primitive", "mpi", "--fabric", "ethernet", "--iface", "fbnet0", "--nodes", "4",
       "--tasks-per-node", "1", "--sizes", "8,64K", "--ops", "allreduce", "--budget", "0.05",
       "--timeout", "60"]


@pytest.fixture(scope="module")
def four_nodes() -> Iterator[dict[str, str]]:
    saved = {k: os.environ.get(k) for k in OWN}
    os.environ.update(OWN)  # start.sh and stop.sh read them from the environment
    try:
        yield from slurm_cluster("four", FABBENCH=FABBENCH, **OWN)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def check(path: Path, runtime: str, ref: str) -> None:
    results = read_results(path)  # validated against the schema
    run, summary = results.records[0], results.records[-1]
    assert summary.kind == "summary" and summary.ok is True, summary
    assert run.ranks == 4 and run.nodes == 4, run.rank_hosts
    assert sorted(run.rank_hosts) == ["node0", "node1", "node2", "node3"]
    assert run.transport == "ob1/tcp"
    assert run.rank_containers == [runtime] * 4
    assert run.provenance.image.ref == ref, run.provenance.image
    assert run.provenance.image.ref_source.startswith("FABBENCH_IMAGE_REF")


def test_rendered_charliecloud_job_on_four_nodes(image, four_nodes, tmp_path):  # noqa: F811
    p = fabbench("render", "slurm", "--runtime", "charliecloud", "--image", str(image.dir),
                 "--results-dir", str(tmp_path / "results"), "--name", "fb4-ch", *RUN,
                 timeout=60)
    assert p.returncode == 0, p.stderr
    assert "--mpi=pmix" in p.stdout and "ch-run --set-env" in p.stdout
    job = submit_and_wait(p.stdout, tmp_path, host_env(SLURM_CONF=four_nodes["SLURM_CONF"]),
                          deadline_s=300)
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", job["log"]
    assert job["NodeList"] == "node[0-3]"
    check(tmp_path / "results" / f"{job['id']}-collectives.jsonl", "charliecloud",
          str(image.dir))


def test_rendered_apptainer_job_on_four_nodes(sif: Sif, four_nodes, user_dir,  # noqa: F811
                                              tmp_path):
    shim = tmp_path / "bin" / "apptainer"  # apptainer as a site has it on PATH
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\nexec {APPTAINER} exec --fuse --cwd {user_dir} -- "
                    "apptainer \"$@\"\n")
    shim.chmod(0o755)
    p = fabbench("render", "slurm", "--runtime", "apptainer", "--image", sif.path,
                 "--results-dir", str(user_dir / "results"), "--name", "fb4-app", *RUN,
                 timeout=60)
    assert p.returncode == 0, p.stderr
    assert "--mpi=pmix" in p.stdout and "apptainer exec" in p.stdout
    (user_dir / "results").mkdir()
    shutil.chown(user_dir / "results", USER, USER)
    env = {**clean_env(), "SLURM_CONF": four_nodes["SLURM_CONF"],
           "PATH": f"{shim.parent}:{os.environ['PATH']}",
           # the job is root's, its ranks the user's (above); a site's job needs neither
           "PMIX_MCA_psec": "none", "PMIX_MCA_gds": "hash"}
    job = submit_and_wait(p.stdout, tmp_path, env, deadline_s=300)
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", job["log"]
    assert job["NodeList"] == "node[0-3]"
    check(user_dir / "results" / f"{job['id']}-collectives.jsonl", "apptainer", sif.path)
