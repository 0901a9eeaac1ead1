"""The schedulers (launch.schedulers): each one's launch of a study cell's ranks in its
allocation, the place discovery finds in an environment (in the schedulers' order), the
scheduler a rendered Kubernetes job is, and those a study manifest's place may name."""

from __future__ import annotations

import os
import sys

import pytest

from fabbench.emulate.cluster_spec import make_emulation
from fabbench.emulate.site import SITE_ENV, Site
from fabbench.errors import UsageError
from fabbench.launch import launchers, schedulers
from fabbench.launch.schedulers import Place

ROOT = ["--allow-run-as-root"] if os.geteuid() == 0 else []
PROGRAM = [sys.executable, "-m", "fabbench", "run"]
SLURM = Place(scheduler="slurm", nodes=2, master_addr="n1")
MPIJOB = Place(scheduler="mpijob", nodes=2, master_addr="w0", hostfile="/etc/mpi/hostfile")


def _launch(place: Place, launcher: str, nodes: int, per_node: int, port: int,
            forward: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    return schedulers.get(place.scheduler).launch(
        place, launchers.get(launcher), nodes=nodes, per_node=per_node, program=PROGRAM,
        port=port, forward=forward or {})


def test_slurm_and_the_mpijob_launch_a_cells_ranks():
    argv, env = _launch(SLURM, "mpirun", 2, 4, 20011)
    assert argv == ["srun", "--kill-on-bad-exit=1", "--nodes=2", "--ntasks-per-node=4",
                    "--mpi=pmix", *PROGRAM] and env == {}
    argv, env = _launch(SLURM, "spawn", 2, 1, 20011)
    assert argv == ["srun", "--kill-on-bad-exit=1", "--nodes=2", "--ntasks-per-node=1",
                    *PROGRAM]
    assert env == {"MASTER_ADDR": "n1", "MASTER_PORT": "20011"}
    argv, env = _launch(MPIJOB, "spawn", 2, 2, 20000)
    assert argv == ["mpirun", "--hostfile", "/etc/mpi/hostfile", "-np", "4", "--map-by",
                    "ppr:2:node", "--bind-to", "none", *ROOT, "-x", "MASTER_ADDR",
                    "-x", "MASTER_PORT", *PROGRAM]
    # what every rank gets besides (the image's reference): mpirun exports it to the workers
    argv, env = _launch(MPIJOB, "mpirun", 2, 1, 20000, {"FABBENCH_IMAGE_REF": "r/fabbench:1"})
    assert argv == ["mpirun", "--hostfile", "/etc/mpi/hostfile", "-np", "2", "--map-by",
                    "ppr:1:node", "--bind-to", "none", *ROOT, "-x", "FABBENCH_IMAGE_REF",
                    *PROGRAM]
    assert env == {"FABBENCH_IMAGE_REF": "r/fabbench:1"}
    with pytest.raises(UsageError, match="horovodrun has its own rendezvous: slurm cannot"):
        _launch(SLURM, "horovodrun", 1, 1, 1)
    with pytest.raises(UsageError, match="needs the operator's hostfile"):
        _launch(Place(scheduler="mpijob", nodes=1), "mpirun", 1, 1, 1)
    with pytest.raises(UsageError, match="a study does not run in indexed-job's allocation"):
        _launch(Place(scheduler="indexed-job", nodes=1), "spawn", 1, 1, 1)


def test_this_host_starts_any_launchers_ranks_itself():
    local = schedulers.get("local")
    argv, env = _launch(Place(scheduler="local", nodes=1), "horovodrun", 1, 3, 1)
    assert argv == [*PROGRAM, "--ranks", "3"] and env == {}
    assert local.needs_mpirun(launchers.get("mpirun"))
    assert not local.needs_mpirun(launchers.get("spawn"))
    assert schedulers.get("mpijob").needs_mpirun(launchers.get("spawn"))
    assert not schedulers.get("slurm").needs_mpirun(launchers.get("mpirun"))


def test_discovery_in_the_schedulers_order(tmp_path):
    assert schedulers.discover({}) == Place(scheduler="local", nodes=1)
    slurm = {"SLURM_JOB_ID": "7", "SLURM_NNODES": "3"}  # no node list: scontrol is not asked
    assert schedulers.discover(slurm) == Place(scheduler="slurm", nodes=3, job_id="7")
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("# the operator's\nw0 slots=1\nw1 slots=1\n")
    mpijob = {"OMPI_MCA_orte_default_hostfile": str(hostfile)}
    assert schedulers.discover(mpijob) == Place(
        scheduler="mpijob", nodes=2, hostnames=("w0", "w1"), master_addr="w0",
        hostfile=str(hostfile))
    assert schedulers.discover({**slurm, **mpijob}).scheduler == "slurm"  # slurm's order first
    # an emulated site's nodes are this host's, even inside an allocation (emulate on a node)
    site = {SITE_ENV: Site(emulation=make_emulation(nodes=4, link="1gbit")).to_json(), **slurm}
    assert schedulers.discover(site) == Place(
        scheduler="local", nodes=4, hostnames=("node0", "node1", "node2", "node3"))


def test_the_scheduler_of_a_rendered_job_and_of_a_study():
    assert schedulers.rendered("k8s", "mpi").name == "mpijob"
    assert schedulers.rendered("k8s", "rendezvous").name == "indexed-job"
    assert schedulers.rendered("slurm", "mpi").name == "slurm"
    with pytest.raises(UsageError, match="no scheduler runs pmi ranks in a job of fabbench "
                                         "render k8s"):
        schedulers.rendered("k8s", "pmi")
    assert sorted(schedulers.studied()) == ["local", "mpijob", "slurm"]
    with pytest.raises(UsageError, match="unknown scheduler 'pbs' \\(known: "):
        schedulers.get("pbs")
