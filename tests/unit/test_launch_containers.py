"""`fabbench emulate --image IMG --runtime R -- run ...`: the host launcher's commands around
containerised ranks (launch/containers.py), and the refusals before any node is made."""

from __future__ import annotations

import os

import pytest

from fabbench.emulate.cluster import Cluster, Node
from fabbench.emulate.cluster_spec import Link
from fabbench.errors import UsageError
from fabbench.launch import containers


def _cluster(tmp_path, rpn=1) -> Cluster:
    nodes = tuple(Node(index=i, hostname=f"node{i}", netns=f"fabbench-9-node{i}",
                       address=f"198.18.0.{i + 1}", veth=f"fbv9n{i}", link=Link(rate_bit_s=10**9))
                  for i in range(2))
    return Cluster(owner_pid=os.getpid(), subnet="198.18.0.0/24", bridge="fbbr9",
                   bridge_address="198.18.0.254", nodes=nodes, ranks_per_node=rpn,
                   state_dir=str(tmp_path))


@pytest.fixture
def sif(tmp_path, monkeypatch):
    monkeypatch.setenv("FABBENCH_APPTAINER", "sh -c : apptainer")  # any command on PATH
    monkeypatch.setenv("FABBENCH_CH_RUN", "ch-run-here")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    (tmp_path / "ch-run-here").write_text("#!/bin/sh\n")
    (tmp_path / "ch-run-here").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "fabbench.sif"
    path.write_bytes(b"")
    return str(path)


def test_mpi_ranks_run_in_apptainer_under_the_hosts_mpirun(tmp_path, sif):
    spec = containers.launch_spec(_cluster(tmp_path), "apptainer", sif,
                                  ["run", "--primitive", "mpi", "--fabric", "ethernet"])
    [argv], [env] = spec.commands, spec.env
    assert argv[:7] == ["ip", "netns", "exec", "fabbench-9-node0", "unshare", "--uts", "--"]
    mpirun = argv[argv.index("mpirun"):]
    assert mpirun[:5] == ["mpirun", "-np", "2", "--hostfile", str(tmp_path / "hostfile")]
    rank = mpirun[mpirun.index("sh"):]
    assert rank == ["sh", "-c", ":", "apptainer", "exec", "--bind", str(tmp_path), sif,
                    "env", "-C", str(tmp_path), "fabbench", "run", "--primitive", "mpi",
                    "--fabric", "ethernet"]
    for key in env:
        assert ["-x", key] == mpirun[mpirun.index(key) - 1:mpirun.index(key) + 1]
    assert env["FABBENCH_EXPECT_NODES"] == "2" and env["FABBENCH_EMULATION"] == ""
    assert env["PMIX_MCA_psec"] == "none" and env["PMIX_MCA_gds"] == "hash"


def test_gloo_ranks_in_charliecloud_meet_at_node0(tmp_path, sif):
    spec = containers.launch_spec(_cluster(tmp_path, rpn=2), "charliecloud", sif,
                                  ["run", "--primitive", "gloo"])
    assert len(spec.commands) == 4
    assert [c[3] for c in spec.commands] == ["fabbench-9-node0"] * 2 + ["fabbench-9-node1"] * 2
    rank = spec.commands[3][spec.commands[3].index("ch-run-here"):]
    assert rank == ["ch-run-here", "--set-env", "-b", f"{tmp_path}:/mnt/0", sif, "--",
                    "env", "-C", "/mnt/0", "fabbench", "run", "--primitive", "gloo"]
    assert [e["RANK"] for e in spec.env] == ["0", "1", "2", "3"]
    assert {e["MASTER_ADDR"] for e in spec.env} == {"198.18.0.1"}
    assert [e["LOCAL_RANK"] for e in spec.env] == ["0", "1", "0", "1"]
    assert all("PMIX_MCA_psec" not in e for e in spec.env)


@pytest.mark.parametrize("argv,message", [
    (["env"], "runs the ranks of a `run`"),
    (["run"], "give the run's --primitive"),
    (["run", "--primitive", "mpi", "--ranks", "4"], "the cluster's slots"),
    (["run", "--primitive", "horovod", "--horovod-over", "gloo"], "horovodrun cannot start"),
])
def test_what_cannot_run_in_an_image_is_refused(sif, argv, message):
    with pytest.raises(UsageError, match=message):
        containers.launcher_of("apptainer", sif, argv)


def test_a_missing_runtime_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("FABBENCH_APPTAINER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="`apptainer` is not on PATH .*FABBENCH_APPTAINER"):
        containers.runtime_command("apptainer")
