"""This host alone, or the emulated site a study runs in (`fabbench emulate ... -- study run`):
fabbench starts a cell's ranks itself (`fabbench run --ranks N`, with the launcher its
primitive names); no job is rendered for it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fabbench.emulate.site import SITE_ENV, Site
from fabbench.launch.launchers import Launcher
from fabbench.launch.schedulers.scheduler import Place, Scheduler, register


@register
class Local(Scheduler):
    name = "local"
    # tried first: an emulated site's nodes are this host's, whatever allocation emulate runs in
    order = 0
    allocates = False

    def place(self, env: Mapping[str, str]) -> Place | None:
        """The emulated site's nodes (node0, node1, ...); None outside one."""
        text = env.get(SITE_ENV)
        if not text:
            return None
        nodes = Site.from_json(text).nodes
        return Place(scheduler=self.name, nodes=nodes,
                     hostnames=tuple(f"node{i}" for i in range(nodes)))

    @classmethod
    def alone(cls) -> Place:
        """This host, one node: where a process that no scheduler places runs."""
        return Place(scheduler=cls.name, nodes=1)

    def starts(self, launcher: Launcher) -> bool:
        return True  # fabbench run starts its ranks with any launcher

    def needs_mpirun(self, launcher: Launcher) -> bool:
        return launcher.mpi

    def where(self, place: Place) -> str:
        return "this host is one node"

    def launch(self, place: Place, launcher: Launcher, *, nodes: int, per_node: int,
               program: Sequence[str], port: int,
               forward: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        """``program`` (`fabbench run ...`) told how many ranks to start; it adds nothing to
        their environment (the cell inherits the study's)."""
        return [*program, "--ranks", str(nodes * per_node)], {}
