"""Open MPI's mpirun: the profile's MCA parameters on its command line; on this host -np N, on
emulated nodes a hostfile and an rsh agent that enters a node's namespace; in a Kubernetes
MPIJob's launcher pod, over the hostfile the MPI operator writes. Slurm starts its kind of rank
with srun --mpi=pmix (PMIx, no mpirun)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from fabbench.launch.launchers.launcher import (
    Launcher,
    LaunchSpec,
    PodLaunch,
    RankVars,
    Ready,
    Runner,
    Where,
    register,
)
from fabbench.launch.launchers.srun import Srun
from fabbench.launch.words import Each, Line, fill, lists

if TYPE_CHECKING:
    from fabbench.emulate.cluster import Cluster
    from fabbench.launch.settings import Resolved
    from fabbench.plan import Plan


def root_options() -> list[str]:
    """mpirun's permission to run as root, when this process is root."""
    return ["--allow-run-as-root"] if os.geteuid() == 0 else []


def settings(resolved: Resolved, payload: Mapping[str, str]) -> list[str]:
    """mpirun's options that carry the profile: root's permission, MCA parameters, and the
    environment variables exported to every rank: the profile's and the ``payload``'s (the
    plan and run state, and what the caller forwards)."""
    argv = root_options()
    for key, value in resolved.settings.mca.items():
        argv += ["--mca", key, value]
    for key in sorted({*resolved.settings.env, *payload}):
        argv += ["-x", key]
    return argv


def hostfile_line(*, per_node: bool = False, as_root: bool = False) -> Line:
    """mpirun over a hostfile someone else wrote (the MPI operator's): {hostfile}, {ranks},
    with ``per_node`` {per_node} ranks on each host (else as the hostfile's slots say), the
    MCA parameters and the exported variables (-x) in the order given."""
    return ("mpirun", "--hostfile", "{hostfile}", "-np", "{ranks}",
            *(("--map-by", "ppr:{per_node}:node") if per_node else ()), "--bind-to", "none",
            *(root_options() if as_root else ()), Each("mca", ("--mca", "{key}", "{value}")),
            Each("exports", ("-x", "{key}")))


def over_hostfile(hostfile: str, ranks: int, *, per_node: int | None = None,
                  mca: Mapping[str, str] = MappingProxyType({}),
                  exports: Sequence[str] = (), as_root: bool = False) -> list[str]:
    """hostfile_line filled in: ``per_node`` ranks on each host (None: as the hostfile's slots
    say), ``mca`` parameters and ``exports`` (-x) in the order given."""
    return fill(hostfile_line(per_node=per_node is not None, as_root=as_root),
                {"hostfile": hostfile, "ranks": ranks, "per_node": per_node},
                lists(mca, exports))


def over_cluster(cluster: Cluster, ranks: int) -> list[str]:
    """mpirun over an emulated cluster's hostfile, reaching the nodes through its agent (run on
    node 0); also emulate's launch of containerised ranks (launch/containers.py)."""
    return ["mpirun", "-np", str(ranks), "--hostfile", str(cluster.hostfile),
            "--bind-to", "none", "--oversubscribe",
            "--mca", "plm_rsh_agent", str(cluster.agent),
            "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "oob_tcp_if_include", cluster.iface,
            "--mca", "mpi_yield_when_idle", "1"]  # more ranks than cores


@register
class Mpirun(Launcher):
    name = "mpirun"
    rank_vars = RankVars("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                         "OMPI_COMM_WORLD_LOCAL_RANK")
    order = 10
    # the nodes it mapped the ranks onto, from its hostfile, --host list or the allocation
    # (hosts without ranks are not counted)
    node_vars = (("OMPI_MCA_orte_num_nodes", "mpirun's map"),)
    mpi = True
    render_family = "mpi"
    pod = PodLaunch(line=hostfile_line())

    def local(self, plan: Plan, resolved: Resolved, where: Where, program: Sequence[str],
              payload: Mapping[str, str]) -> LaunchSpec:
        env = {**resolved.settings.env, **payload}
        cluster = where.cluster
        if cluster is None:
            argv = ["mpirun", "-np", str(plan.ranks), "--oversubscribe", "--bind-to", "none"]
            return LaunchSpec([[*argv, *settings(resolved, payload), *program]], [env])
        return LaunchSpec([cluster.on(0, [*over_cluster(cluster, plan.ranks),
                                          *settings(resolved, payload), *program])], [env])

    def across(self, cluster: Cluster, program: Sequence[str],
               env: Mapping[str, str]) -> LaunchSpec:
        exports = [w for key in sorted(env) for w in ("-x", key)]
        return LaunchSpec([cluster.on(0, [*over_cluster(cluster, cluster.ranks), *root_options(),
                                          *exports, *program])], [dict(env)])

    def slurm(self, nodes: int, per_node: int) -> list[str]:
        return Srun.step(nodes, per_node, mpi="pmix")

    def ready(self, run: Runner) -> Ready:
        out = run(["mpirun", "--version"])
        if out is None or out[0] != 0:
            return Ready(False, "mpirun is missing or broken",
                         "install openmpi-bin, or launch the ranks with srun")
        first = out[1].strip().splitlines()[0] if out[1].strip() else "mpirun"
        return Ready(True, f"not inside a job: fabbench starts local ranks with {first}")
