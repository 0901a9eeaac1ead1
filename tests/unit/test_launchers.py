"""launch.launchers: every launcher × where gives the argv and environment fabbench composed
before the launchers had classes (the literals below are what local.py, nodes.py, study/run.py,
the Slurm and Kubernetes templates wrote), the port rule in Python and in bash agree, and a
launcher a scheduler cannot start is refused with one line."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field

import pytest

from fabbench.emulate.cluster import Cluster, Node
from fabbench.emulate.cluster_spec import Link
from fabbench.errors import UsageError
from fabbench.launch import launchers, ports
from fabbench.launch.launchers import Where
from fabbench.launch.launchers.pod import Pod
from fabbench.launch.launchers.torchrun import Torchrun
from fabbench.launch.words import Shell, fill
from fabbench.workloads.collectives import Sweep

ROOT = ["--allow-run-as-root"] if os.geteuid() == 0 else []
PROGRAM = ["prog", "--flag"]


@dataclass(frozen=True)
class _Settings:
    mca: dict = field(default_factory=lambda: {"pml": "ob1", "btl": "tcp,self"})
    env: dict = field(default_factory=lambda: {"UCX_TLS": "tcp", "NCCL_X": "1"})


@dataclass(frozen=True)
class _Resolved:
    """What a launcher reads of a resolved run (launch.settings.Resolved)."""

    settings: _Settings = field(default_factory=_Settings)

    def env(self) -> dict[str, str]:
        return {**self.settings.env, "GLOO_SOCKET_IFNAME": "lo"}


@dataclass(frozen=True)
class _Plan:
    """What a launcher reads of a plan."""

    launcher: str
    ranks: int = 2
    timeout_s: float = 30.0
    iface: str | None = None



# what hands each rank its plan and run state (plan.rank_env), passed through as it is
PAYLOAD = {"FABBENCH_PLAN": '{"ranks": 2}', "FABBENCH_RUN_STATE": '{"claimed": true}'}


def _cluster(tmp_path, rpn=1) -> Cluster:
    nodes = tuple(Node(index=i, hostname=f"node{i}", netns=f"fabbench-7-node{i}",
                       address=f"198.18.0.{i + 1}", veth=f"fbv7n{i}", link=Link(rate_bit_s=10**9))
                  for i in range(2))
    return Cluster(owner_pid=1, subnet="198.18.0.0/24", bridge="fbbr7",
                   bridge_address="198.18.0.254", nodes=nodes, ranks_per_node=rpn,
                   state_dir=str(tmp_path))


def _build(launcher: str, where: Where, ranks: int = 2, iface: str | None = None):
    plan = _Plan(launcher=launcher, ranks=ranks, iface=iface)
    return launchers.get(launcher).local(plan, _Resolved(), where, PROGRAM, PAYLOAD), plan


MPIRUN_SETTINGS = [*ROOT, "--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                   "-x", "FABBENCH_PLAN", "-x", "FABBENCH_RUN_STATE", "-x", "NCCL_X",
                   "-x", "UCX_TLS"]


def test_mpirun_on_this_host():
    spec, plan = _build("mpirun", Where())
    assert spec.commands == [["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none",
                              *MPIRUN_SETTINGS, *PROGRAM]]
    assert spec.env == [{"UCX_TLS": "tcp", "NCCL_X": "1", **PAYLOAD}]
    assert spec.stdout_prefix is None


def test_mpirun_across_emulated_nodes(tmp_path):
    c = _cluster(tmp_path)
    spec, _ = _build("mpirun", Where(cluster=c))
    argv = ["mpirun", "-np", "2", "--hostfile", str(c.hostfile), "--bind-to", "none",
            "--oversubscribe", "--mca", "plm_rsh_agent", str(c.agent),
            "--mca", "plm_rsh_no_tree_spawn", "1", "--mca", "oob_tcp_if_include", "fbnet0",
            "--mca", "mpi_yield_when_idle", "1", *MPIRUN_SETTINGS, *PROGRAM]
    assert spec.commands == [c.on(0, argv)]


def test_spawn_on_this_host(monkeypatch):
    monkeypatch.setattr(launchers.spawn, "free_port", lambda: 4242)
    spec, plan = _build("spawn", Where(), ranks=3)
    assert spec.commands == [PROGRAM] * 3
    for rank, env in enumerate(spec.env):
        assert env == {**_Resolved().env(), **PAYLOAD,
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "4242", "RANK": str(rank),
                       "WORLD_SIZE": "3", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "3"}


def test_spawn_across_emulated_nodes(tmp_path, monkeypatch):
    monkeypatch.setattr(launchers.spawn, "free_port", lambda: 4242)
    c = _cluster(tmp_path, rpn=2)
    spec, _ = _build("spawn", Where(cluster=c), ranks=4)
    assert spec.commands == [c.on(0, PROGRAM), c.on(0, PROGRAM), c.on(1, PROGRAM),
                             c.on(1, PROGRAM)]
    assert [(e["MASTER_ADDR"], e["RANK"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"])
            for e in spec.env] == [("198.18.0.1", "0", "0", "2"), ("198.18.0.1", "1", "1", "2"),
                                   ("198.18.0.1", "2", "0", "2"), ("198.18.0.1", "3", "1", "2")]
    assert {e["WORLD_SIZE"] for e in spec.env} == {"4"}


def test_horovodrun_here_and_across(tmp_path):
    hvd = launchers.horovodrun.COMMAND
    spec, plan = _build("horovodrun", Where(), iface="eth9")
    assert spec.commands == [[*hvd, "--gloo", "-np", "2", "-H", "localhost:2", "--start-timeout",
                              "30", "--network-interfaces", "eth9", *PROGRAM]]
    assert spec.env == [{**_Resolved().env(), **PAYLOAD}]
    assert spec.stdout_prefix == launchers.horovodrun.PREFIX
    c = _cluster(tmp_path)
    spec, _ = _build("horovodrun", Where(cluster=c))
    assert spec.commands == [c.on(0, [*hvd, "--gloo", "-np", "2", "-H",
                                      "198.18.0.1:1,198.18.0.2:1", "--start-timeout", "30",
                                      "--network-interfaces", "fbnet0", *PROGRAM])]
    assert spec.env[0]["PATH"].startswith(f"{c.agent.parent}:")


@pytest.mark.parametrize("primitive", ["mpi", "gloo"])
def test_launch_spec_forwards_variables_to_every_rank(primitive, tmp_path, monkeypatch):
    """launch_spec(forward=...): every rank's environment has them, and mpirun exports them
    with -x (ranks on other nodes, emulated ones too), beside the plan and run state."""
    from fabbench import emulate
    from fabbench.launch.settings import resolve
    from fabbench.plan import PLAN_ENV, STATE_ENV, Plan

    plan = Plan(fabric="ethernet", primitive=primitive, workload="collectives",
                collectives=Sweep(ops=("allreduce",), sizes=(8,)), out="r.jsonl", run_id="r",
                argv=("fabbench", "run"))
    forward = {"FABBENCH_LOOP_DEVICE": "cpu", "FABBENCH_LOOP_BATCH_S": "0.005"}
    for cluster in (None, _cluster(tmp_path)):
        monkeypatch.setattr(emulate, "current", lambda c=cluster: c)
        spec = launchers.launch_spec(plan, resolve(plan), PROGRAM, forward=forward)
        assert spec.env and all(env.items() >= forward.items() for env in spec.env)
        if primitive == "mpi":
            [argv] = spec.commands
            exported = {argv[i + 1] for i, w in enumerate(argv) if w == "-x"}
            assert exported >= {*forward, PLAN_ENV, STATE_ENV}


def test_every_primitive_launcher_has_an_entry():
    from fabbench.comm import primitives

    for name in primitives.PRIMITIVES:
        for launcher in primitives.get(name).launchers.values():
            assert launcher in launchers.REGISTRY
    with pytest.raises(UsageError, match="unknown launcher 'ssh'"):
        launchers.get("ssh")
    assert [launchers.schedulable(k) for k in ("mpirun", "spawn", "horovodrun")] == \
        [True, True, False]


@pytest.mark.parametrize("job", [0, 1, 3999, 4000, 123456789])
def test_port_rule_in_python_and_in_bash_agree(job):
    base = subprocess.run(["bash", "-c", f"job_id={job}; echo $(( "
                           f"{ports.rendezvous_port_shell('job_id')} ))"],
                          capture_output=True, text=True, check=True).stdout
    for index in range(ports.PORTS_PER_JOB):
        assert ports.rendezvous_port(job, index) == int(base) + index
        assert 1024 < ports.rendezvous_port(job, index) < 65536


def test_mpirun_over_the_operators_hostfile_and_torchrun():
    assert launchers.mpirun.over_hostfile("/etc/mpi/hostfile", 4, mca={"pml": "ucx"},
                                          exports=["A"]) == \
        ["mpirun", "--hostfile", "/etc/mpi/hostfile", "-np", "4", "--bind-to", "none",
         "--mca", "pml", "ucx", "-x", "A"]
    assert Torchrun.argv(2, 4) == [
        "torchrun", "--no-python", "--nnodes=2", "--nproc-per-node=4",
        "--node-rank=$(FABBENCH_NODE_RANK)", "--master-addr=$(MASTER_ADDR)",
        "--master-port=$(MASTER_PORT)"]
    assert all(isinstance(w, Shell) for w in Torchrun.argv(2, 4)[4:])


def test_pod_launch_fills_the_lines_the_chart_reads():
    """Pod.lines() is what files/launchers.yaml holds: mpirun over the operator's hostfile
    with the MCA parameters and exports in name order, torchrun for a pod of several ranks and
    the program alone for a pod of one."""
    program = ["fabbench", "run"]
    assert Pod.launch("mpi", nodes=2, per_node=1, program=program,
                      mca={"pml": "ucx", "btl": "^openib"}, exports=["UCX_TLS", "A"]) == \
        ["mpirun", "--hostfile", "/etc/mpi/hostfile", "-np", "2", "--bind-to", "none",
         "--mca", "btl", "^openib", "--mca", "pml", "ucx", "-x", "A", "-x", "UCX_TLS", *program]
    assert Pod.launch("rendezvous", nodes=3, per_node=4, program=program,
                      mca={"pml": "ucx"}) == [*Torchrun.argv(3, 4), *program]
    assert Pod.launch("rendezvous", nodes=3, per_node=1, program=program) == program
    assert set(Pod.lines()) == {"mpi", "rendezvous"}
    line = launchers.mpirun.hostfile_line()
    assert fill(line, {"hostfile": "h", "ranks": 4}, {"mca": [], "exports": []}) == \
        ["mpirun", "--hostfile", "h", "-np", "4", "--bind-to", "none"]
