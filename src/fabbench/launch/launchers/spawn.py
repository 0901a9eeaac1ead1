"""fabbench's own local launcher: one process per rank, each with torchrun's variables and a
TCP rendezvous at the first node (MASTER_ADDR/PORT); in a Slurm allocation an srun step with
the rendezvous, in a Kubernetes Indexed Job torchrun in a pod of several ranks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from fabbench.launch.launchers.launcher import Launcher, LaunchSpec, PodLaunch, Where, register
from fabbench.launch.launchers.srun import Srun
from fabbench.launch.launchers.torchrun import LINE
from fabbench.launch.ports import free_port

if TYPE_CHECKING:
    from fabbench.emulate.cluster import Cluster
    from fabbench.launch.settings import Resolved
    from fabbench.plan import Plan


def rendezvous_env(*, rank: int, world: int, local_rank: int, local_world: int, addr: str,
                   port: int | str) -> dict[str, str]:
    """The environment of one spawned rank (torchrun's variables)."""
    return {"MASTER_ADDR": addr, "MASTER_PORT": str(port), "RANK": str(rank),
            "WORLD_SIZE": str(world), "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(local_world)}


def spawned(cluster: Cluster | None, ranks: int, program: Sequence[str],
            env: Mapping[str, str]) -> LaunchSpec:
    """One process per rank, each with ``env`` and its rendezvous (node 0, a free port)."""
    port = free_port()
    commands, envs = [], []
    for rank in range(ranks):
        if cluster is None:
            commands.append(list(program))
            local_rank, local_world, addr = rank, ranks, "127.0.0.1"
        else:
            rpn = cluster.ranks_per_node
            commands.append(cluster.on(cluster.node_of_rank(rank).index, list(program)))
            local_rank, local_world, addr = rank % rpn, rpn, cluster.nodes[0].address
        envs.append({**env, **rendezvous_env(rank=rank, world=ranks, local_rank=local_rank,
                                             local_world=local_world, addr=addr, port=port)})
    return LaunchSpec(commands, envs)


@register
class Spawn(Launcher):
    name = "spawn"
    render_family = "rendezvous"
    pod = PodLaunch(line=LINE, bare_when_one=True)

    def local(self, plan: Plan, resolved: Resolved, where: Where, program: Sequence[str],
              payload: Mapping[str, str]) -> LaunchSpec:
        return spawned(where.cluster, plan.ranks, program, {**resolved.env(), **payload})

    def across(self, cluster: Cluster, program: Sequence[str],
               env: Mapping[str, str]) -> LaunchSpec:
        return spawned(cluster, cluster.ranks, program, env)

    def slurm(self, nodes: int, per_node: int) -> list[str]:
        return Srun.step(nodes, per_node)

    def rendezvous(self, addr: str, port: int) -> dict[str, str]:
        return {"MASTER_ADDR": addr, "MASTER_PORT": str(port)}
