"""Rendered sbatch scripts on a 4-node emulated Slurm (.ci/slurm/start.sh four): one slurmd per
emulated node, each in its own network namespace with its own address and hostname, so
`srun --mpi=pmix -N 4` (mpi, Horovod over MPI) and the Gloo rendezvous run across 4 nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import fabbench, horovod_available
from fabbench.results.reader import read_results
from integration.test_slurm import FABBENCH, slurm_cluster, submit_and_wait

pytestmark = [pytest.mark.integration, pytest.mark.needs_root]

TINY = ["--sizes", "8,64K", "--ops", "allreduce", "--budget", "0.05", "--timeout", "60",
        "--iface", "fbnet0", "--fabbench-command", FABBENCH, "--nodes", "4"]


@pytest.fixture(scope="module")
def four_nodes():
    yield from slurm_cluster("four", FABBENCH=FABBENCH)


@pytest.mark.parametrize("primitive,transport", [
    ("mpi", "ob1/tcp"), ("gloo", "gloo/tcp"),
    pytest.param("horovod", "ob1/tcp", marks=pytest.mark.skipif(
        not horovod_available(), reason="Horovod is not installed"))])
def test_rendered_job_runs_across_four_nodes(four_nodes, tmp_path, primitive, transport):
    p = fabbench("render", "slurm", "--fabric", "ethernet", "--primitive", primitive, *TINY,
                 "--results-dir", str(tmp_path / "results"), "--name", f"fb4-{primitive}",
                 timeout=60)
    assert p.returncode == 0, p.stderr
    script = p.stdout
    if primitive != "gloo":
        assert "--mpi=pmix" in script and "--nodes=4" in script
    job = submit_and_wait(script, tmp_path, four_nodes)
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", job["log"]
    assert job["NodeList"] == "node[0-3]"
    results = read_results(Path(tmp_path / "results" / f"{job['id']}-collectives.jsonl"))
    run, summary = results.records[0], results.records[-1]
    assert run.ranks == 4 and run.nodes == 4 and run.transport == transport
    assert run.interface == "fbnet0"
    assert summary.ok is True
    ceilings = results.of_kind("ceiling")  # the ranks span hosts: measured in the job
    assert {c.mode for c in ceilings} == {"one-way", "bidir"}
    assert all(c.error is None for c in ceilings), ceilings
