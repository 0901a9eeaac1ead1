"""A pod of a Kubernetes job: an Indexed Job's pod is its rank (JOB_COMPLETION_INDEX, the size
from FABBENCH_WORLD_SIZE), or starts several ranks as the primitive's launcher says (its
``pod`` line: an MPIJob's launcher pod runs mpirun over the operator's hostfile, an Indexed
Job's pod torchrun). The chart reads those lines from files/launchers.yaml, which
fabbench.render.chart generates from them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from fabbench.launch.launchers.launcher import REGISTRY, Launcher, PodLaunch, RankVars, register
from fabbench.launch.words import fill, lists

HOSTFILE = "/etc/mpi/hostfile"  # where the MPI operator mounts the hostfile it writes


@register
class Pod(Launcher):
    name = "kubernetes"
    rank_vars = RankVars("JOB_COMPLETION_INDEX", "FABBENCH_WORLD_SIZE", "FABBENCH_LOCAL_RANK")
    order = 80

    @staticmethod
    def lines() -> Mapping[str, PodLaunch]:
        """Render family -> the pod launch of the launchers that have one."""
        return MappingProxyType({launcher.render_family: launcher.pod for launcher in REGISTRY
                                 if launcher.render_family and launcher.pod})

    @classmethod
    def launch(cls, family: str, *, nodes: int, per_node: int, program: Sequence[str],
               mca: Mapping[str, str] = MappingProxyType({}),
               exports: Sequence[str] = ()) -> list[str]:
        """What a pod of a Kubernetes job of render family ``family`` runs: the ranks of
        ``nodes`` pods of ``per_node`` ranks each running ``program``, with ``mca`` parameters
        and ``exports`` passed to every rank, in name order (as the chart's templates range
        over them), where the launcher takes them (mpirun)."""
        pod = cls.lines()[family]
        if pod.bare_when_one and per_node == 1:
            return list(program)
        return [*fill(pod.line, {"hostfile": HOSTFILE, "ranks": nodes * per_node,
                                 "nodes": nodes, "per_node": per_node},
                      lists(dict(sorted(mca.items())), sorted(exports))), *program]
