"""torchrun: RANK / WORLD_SIZE / LOCAL_RANK in each rank; in a pod of a Kubernetes Indexed Job it
starts the pod's ranks (its node rank and the rendezvous from the pod's environment)."""

from __future__ import annotations

from fabbench.launch.launchers.launcher import Launcher, RankVars, register
from fabbench.launch.words import Line, Shell, fill

# torchrun starting {per_node} ranks of one of {nodes} pods of an Indexed Job (its node rank and
# the rendezvous from the pod's environment, Kubernetes' $(VAR)); the rank command follows
LINE: Line = (
    "torchrun", "--no-python", "--nnodes={nodes}", "--nproc-per-node={per_node}",
    Shell("--node-rank=$(FABBENCH_NODE_RANK)"), Shell("--master-addr=$(MASTER_ADDR)"),
    Shell("--master-port=$(MASTER_PORT)"))


@register
class Torchrun(Launcher):
    name = "torchrun"
    # RANK alone is too common a name to mean anything; torchrun sets WORLD_SIZE with it
    rank_vars = RankVars("RANK", "WORLD_SIZE", "LOCAL_RANK", distinctive=False)
    order = 50
    # it starts its workers in sessions of their own: killed, it leaves them measuring, unseen
    orphans_ranks = True

    @staticmethod
    def argv(nodes: int, per_node: int) -> list[str]:
        """LINE filled in."""
        return fill(LINE, {"nodes": nodes, "per_node": per_node})
