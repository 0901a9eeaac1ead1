"""Launch ranks across the nodes of an emulated cluster, each primitive through its real
launcher, started on node 0 as a user would start it on a cluster's first node:

- mpi (and Horovod over MPI): mpirun with a hostfile of the node addresses, an rsh agent that
  enters a node's namespace under its hostname, out-of-band and btl tcp traffic on the node
  interface, ranks yielding when idle (more ranks than cores);
- gloo and nccl: one process per rank on its node, rendezvous over TCP at node 0's address;
- Horovod over Gloo: horovodrun --gloo with the node addresses as hosts and the agent as its ssh.
"""

from __future__ import annotations

import os

from fabbench.emulate.cluster import Cluster
from fabbench.launch.local import (
    HOROVODRUN_PREFIX,
    RANK_MODULE,
    LaunchSpec,
    free_port,
    horovodrun,
    mpirun_settings,
)
from fabbench.launch.settings import Resolved
from fabbench.plan import Plan


def build_across(plan: Plan, resolved: Resolved, cluster: Cluster,
                 program: list[str] = RANK_MODULE) -> LaunchSpec:
    """The ranks of ``plan`` across ``cluster``'s nodes, each running ``program`` (see
    local.build)."""
    base = {"FABBENCH_PLAN": plan.to_json()}
    rpn = cluster.ranks_per_node
    if plan.launcher == "mpirun":
        argv = ["mpirun", "-np", str(plan.ranks), "--hostfile", str(cluster.hostfile),
                "--bind-to", "none", "--oversubscribe",
                "--mca", "plm_rsh_agent", str(cluster.agent),
                "--mca", "plm_rsh_no_tree_spawn", "1",
                "--mca", "oob_tcp_if_include", cluster.iface,
                "--mca", "mpi_yield_when_idle", "1"]
        return LaunchSpec([cluster.on(0, argv + mpirun_settings(resolved) + program)],
                          [{**resolved.settings.env, **base}])
    env = resolved.env()
    if plan.launcher == "horovodrun":
        hosts = ",".join(f"{n.address}:{rpn}" for n in cluster.nodes)
        path = f"{cluster.agent.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        return LaunchSpec([cluster.on(0, horovodrun(plan, hosts, cluster.iface, program))],
                          [{**env, **base, "PATH": path}], stdout_prefix=HOROVODRUN_PREFIX)
    port = str(free_port())
    commands, envs = [], []
    for rank in range(plan.ranks):
        node = cluster.node_of_rank(rank)
        commands.append(cluster.on(node.index, list(program)))
        envs.append({**env, **base, "MASTER_ADDR": cluster.nodes[0].address,
                     "MASTER_PORT": port, "RANK": str(rank), "WORLD_SIZE": str(plan.ranks),
                     "LOCAL_RANK": str(rank % rpn), "LOCAL_WORLD_SIZE": str(rpn)})
    return LaunchSpec(commands, envs)
