"""The world a rank got against the one its launcher announced (launch/world.py)."""

from __future__ import annotations

import socket

import pytest

from fabbench.errors import UsageError
from fabbench.launch.discover import discover
from fabbench.launch.world import (
    WorldMismatch,
    announced_nodes,
    check_world,
    host_name,
    node_name,
)


class FakeComm:
    """A communicator's rank and size, and what gather_objects would return on every rank."""

    def __init__(self, rank: int, size: int, gathered: list | None = None) -> None:
        self.rank, self.size, self._gathered = rank, size, gathered

    def gather_objects(self, obj):
        return self._gathered if self._gathered is not None else [obj]


def gathered(hosts: list[str], announced: list[tuple[int, str] | None],
             nodes: list[str] | None = None) -> list[tuple]:
    """What every rank gathers: (rank, hostname, pid, node, what its job announced)."""
    return [(r, h, 100 + r, (nodes or hosts)[r], a)
            for r, (h, a) in enumerate(zip(hosts, announced, strict=True))]


def test_the_right_world_passes():
    me = discover({"PMI_RANK": "1", "PMI_SIZE": "2"})
    check_world(me, "mpi", FakeComm(1, 2, [(0, "h", 10, "h", None), (1, "h", 11, "h", None)]))


def test_singleton_under_a_launcher_of_two():
    me = discover({"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"})
    with pytest.raises(WorldMismatch) as err:
        check_world(me, "mpi", FakeComm(0, 1))
    text = str(err.value)
    assert "announced 2 ranks (SLURM_PROCID=1, SLURM_NTASKS=2 (srun))" in text
    assert "world of 1" in text and "singleton" in text and "--mpi=pmix" in text
    assert "\n" not in text


def test_other_size():
    me = discover({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4"})
    with pytest.raises(WorldMismatch, match="announced 4 ranks.*world of 2"):
        check_world(me, "gloo", FakeComm(0, 2))


def test_two_processes_claim_one_rank():
    me = discover({"PMI_RANK": "0", "PMI_SIZE": "2"})
    with pytest.raises(WorldMismatch) as err:
        check_world(me, "mpi", FakeComm(0, 2, [(0, "a", 10, "a", None), (0, "b", 11, "b", None)]))
    text = str(err.value)
    assert "2 processes claim rank 0 of 2 (PMI_RANK=0: a pid 10, b pid 11)" in text
    assert "none claims rank 1" in text


def test_ranks_numbered_differently():
    me = discover({"PMI_RANK": "1", "PMI_SIZE": "2"})
    with pytest.raises(WorldMismatch, match="rank 0 of the process that hydra/PMI calls rank 1"):
        check_world(me, "mpi", FakeComm(1, 2, [(1, "a", 10, "a", None), (0, "a", 11, "a", None)]))


# ---- the job's nodes against the hosts the ranks came up on ------------------------------------

@pytest.mark.parametrize("env,launcher_env,expected", [
    ({"FABBENCH_EXPECT_NODES": "2"}, {"PMI_RANK": "0", "PMI_SIZE": "2"},
     (2, "FABBENCH_EXPECT_NODES=2, said explicitly")),
    ({"OMPI_MCA_orte_num_nodes": "3"},
     {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4"},
     (3, "OMPI_MCA_orte_num_nodes=3, mpirun's map")),
    ({"SLURM_STEP_NUM_NODES": "2", "SLURM_NNODES": "4", "SLURM_JOB_NUM_NODES": "4"},
     {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"},
     (2, "SLURM_STEP_NUM_NODES=2, the srun step")),
    ({"SLURM_NNODES": "4"}, {"SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_STEP_ID": "0"},
     (4, "SLURM_NNODES=4, the srun step")),
    # an mpirun inside a Slurm allocation: the allocation's size is not mpirun's map
    ({"SLURM_NNODES": "4", "SLURM_JOB_NUM_NODES": "4"},
     {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}, None),
    # the explicit one wins over a launcher's
    ({"FABBENCH_EXPECT_NODES": "1", "OMPI_MCA_orte_num_nodes": "2"},
     {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"},
     (1, "FABBENCH_EXPECT_NODES=1, said explicitly")),
    ({}, {"PMI_RANK": "0", "PMI_SIZE": "2"}, None),
])
def test_announced_nodes(env, launcher_env, expected):
    full = {**launcher_env, **env}
    assert announced_nodes(discover(full), full) == expected


@pytest.mark.parametrize("value", ["two", "0", "-1", "1.5"])
def test_a_bad_expected_node_count_is_bad_input(value):
    with pytest.raises(UsageError, match=f"FABBENCH_EXPECT_NODES={value!r} is not a node count"):
        announced_nodes(None, {"FABBENCH_EXPECT_NODES": value})


def test_two_nodes_announced_both_ranks_on_one_host():
    env = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0",
           "SLURM_STEP_NUM_NODES": "2", "SLURMD_NODENAME": "n1"}
    me = discover(env)
    said = (2, "SLURM_STEP_NUM_NODES=2, the srun step")
    with pytest.raises(WorldMismatch) as err:
        check_world(me, "mpi", FakeComm(1, 2, gathered(["h", "h"], [said, said],
                                                       ["n1", "n1"])), env)
    text = str(err.value)
    assert text.startswith("the job announced 2 nodes (SLURM_STEP_NUM_NODES=2, the srun step) "
                           "but its 2 ranks came up on 1 host (n1)")
    assert "\n" not in text


def test_one_rank_that_sees_the_announcement_decides_for_all():
    """An ssh-started rank may not see the variable: every rank still takes the same decision."""
    me = discover({"PMI_RANK": "0", "PMI_SIZE": "3"})
    with pytest.raises(WorldMismatch, match="announced 3 nodes.*3 ranks came up on 2 hosts"):
        check_world(me, "gloo", FakeComm(0, 3, gathered(
            ["a", "b", "b"], [None, (3, "FABBENCH_EXPECT_NODES=3, said explicitly"), None])),
            {})


@pytest.mark.parametrize("hosts,expected", [
    (["a", "b"], 2),              # one rank per node
    (["a", "a", "b", "b"], 2),    # two per node
    (["a", "b"], 1),              # more hosts than announced is not this check's business
    (["a", "b"], 4),              # 2 ranks cannot fill 4 nodes: one host each is all they can
])
def test_worlds_that_fill_their_nodes_pass(hosts, expected):
    size = len(hosts)
    me = discover({"PMI_RANK": "0", "PMI_SIZE": str(size)})
    said = (expected, f"FABBENCH_EXPECT_NODES={expected}, said explicitly")
    check_world(me, "gloo", FakeComm(0, size, gathered(hosts, [said] * size)), {})


def test_too_few_hosts_for_the_ranks_even_when_more_nodes_are_announced():
    me = discover({"PMI_RANK": "0", "PMI_SIZE": "2"})
    said = (4, "FABBENCH_EXPECT_NODES=4, said explicitly")
    with pytest.raises(WorldMismatch, match="announced 4 nodes.*2 ranks came up on 1 host"):
        check_world(me, "gloo", FakeComm(0, 2, gathered(["a", "a"], [said] * 2)), {})


def test_under_srun_the_node_is_slurms_name_for_it():
    """Two slurmd on one host on purpose (NodeHostname): Slurm placed the step on 2 nodes."""
    me = discover({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"})
    assert node_name(me, {"SLURMD_NODENAME": "n2"}) == "n2"
    other = discover({"PMI_RANK": "0", "PMI_SIZE": "2"})
    assert node_name(other, {"SLURMD_NODENAME": "n2"}) == socket.gethostname()


# ---- the transport check ------------------------------------------------------------------------

def test_the_transport_check_names_the_rank_that_used_another_transport():
    from fabbench.errors import TransportMismatch
    from fabbench.launch.rank import _check_transport

    peers = [("nccl/P2P/CUMEM", "g1", None), ("nccl/Socket", "g1", None)]
    with pytest.raises(TransportMismatch, match="rank 1 on g1 used 'nccl/Socket'"):
        _check_transport(peers, ("nccl/P2P*", "nccl/SHM*"), "shm", "native")
    _check_transport(peers[:1], ("nccl/P2P*",), "shm", "native")  # the one that matches


def test_a_world_of_one_rank_has_no_transport_to_check():
    """One GPU, --fabric shm: NCCL names the network it set up (Socket) and connects nothing."""
    from fabbench.launch.rank import _check_transport

    _check_transport([("nccl/Socket", "g1", None)], ("nccl/P2P*", "nccl/SHM*"), "shm", "native")


def test_the_kubernetes_node_name_wins_over_the_hostname():
    """The chart's pods get spec.nodeName as FABBENCH_NODE_NAME: on the nodes' network every
    pod's hostname was the machine's ("vm"), and the labeller patched no node of that name."""
    me = discover({"PMI_RANK": "0", "PMI_SIZE": "2"})
    env = {"FABBENCH_NODE_NAME": "fb-node-2"}
    assert host_name(env) == "fb-node-2" and node_name(me, env) == "fb-node-2"
    srun = discover({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"})
    assert node_name(srun, {**env, "SLURMD_NODENAME": "n2"}) == "fb-node-2"
    assert host_name({}) == socket.gethostname() == host_name({"FABBENCH_NODE_NAME": ""})
