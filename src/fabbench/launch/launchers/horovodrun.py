"""horovodrun --gloo, through fabbench.launch.horovodrun_main (a failed rank said in one line, not a
traceback of horovodrun's): on this host and on emulated nodes only (its own rendezvous: no
scheduler can start it)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from fabbench.launch.launchers.launcher import Launcher, LaunchSpec, RankVars, Where, register

if TYPE_CHECKING:
    from fabbench.launch.settings import Resolved
    from fabbench.plan import Plan

# horovodrun --gloo prefixes every line of rank N's stdout with "[N]<stdout>:"; it has no
# option to turn that off
PREFIX = r"^\[\d+\]<stdout>:"
COMMAND = (sys.executable, "-m", "fabbench.launch.horovodrun_main")


def argv(plan: Plan, hosts: str, iface: str | None, program: Sequence[str]) -> list[str]:
    """horovodrun --gloo starting ``program`` on HOSTS (host:slots,...)."""
    words = [*COMMAND, "--gloo", "-np", str(plan.ranks), "-H", hosts,
             "--start-timeout", str(int(plan.timeout_s))]
    if iface:
        words += ["--network-interfaces", iface]
    return [*words, *program]


@register
class Horovodrun(Launcher):
    name = "horovodrun"
    rank_vars = RankVars("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK")
    order = 40
    # a rank's parent is the shell its ssh session runs it in (horovodrun has no daemon on
    # the node and waits for every rank)
    orphans_ranks = True

    def local(self, plan: Plan, resolved: Resolved, where: Where, program: Sequence[str],
              payload: Mapping[str, str]) -> LaunchSpec:
        env = {**resolved.env(), **payload}
        cluster = where.cluster
        if cluster is None:
            return LaunchSpec([argv(plan, f"localhost:{plan.ranks}", plan.iface, program)],
                              [env], stdout_prefix=PREFIX)
        hosts = ",".join(f"{n.address}:{cluster.ranks_per_node}" for n in cluster.nodes)
        # horovodrun reaches the nodes through the agent, found as its "ssh" on PATH
        path = f"{cluster.agent.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        return LaunchSpec([cluster.on(0, argv(plan, hosts, cluster.iface, program))],
                          [{**env, "PATH": path}], stdout_prefix=PREFIX)
