"""What a scheduler is, and the registry that knows them by name.

A scheduler gives fabbench its nodes and starts ranks on them: this host alone, a Slurm
allocation, a Kubernetes MPIJob, a Kubernetes Indexed Job. One class each, registered with
``@register``; what the rest of fabbench asks of a scheduler is a method or attribute of the
base class, whose defaults say "it cannot": a scheduler overrides only what it does. It owns

- its rendering: the template `fabbench render` fills for it (``template``; ``templates``, the
  folder of a scheduler's own, searched before fabbench's), the command that renders it
  (``renders``) and, there, the ranks it is chosen for (``families``, the launchers'
  render_family); ``step``, the words before a rendered benchmark that start its ranks;
- its launch line: ``launch``, a study cell's ranks started inside its allocation, and the
  variables they get;
- its discovery: ``place``, its allocation recognised from a process's environment (the nodes
  a study runs on), tried in ``order``; and what a study asks of the place (``starts``,
  ``needs_mpirun``, ``where``).

Callers look schedulers up by name (a study manifest's place names its scheduler) or ask the
registry (``discover``, ``rendered``); none branches on a scheduler's name.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from fabbench.by_name import ByName
from fabbench.errors import UsageError
from fabbench.launch import ports
from fabbench.launch.launchers import Launcher


@dataclass(frozen=True, kw_only=True)
class Place:
    """What a study runs on: the scheduler whose allocation it is, and its nodes."""

    scheduler: str        # a registered scheduler's name (local, slurm, mpijob, ...)
    nodes: int            # nodes the cells may use
    hostnames: tuple[str, ...] = ()
    job_id: str | None = None
    master_addr: str | None = None  # the first node's address (rendezvous of gloo/nccl)
    hostfile: str | None = None     # mpijob: the operator's hostfile of the workers

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "hostnames": list(self.hostnames)}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> Place:
        """The place a study manifest names (its schema requires scheduler and nodes)."""
        return cls(scheduler=data["scheduler"], nodes=data["nodes"],
                   hostnames=tuple(data.get("hostnames", ())), job_id=data.get("job_id"),
                   master_addr=data.get("master_addr"), hostfile=data.get("hostfile"))


class Scheduler:
    """A scheduler; the defaults say what one that overrides nothing does: fabbench renders no
    job for it, recognises no allocation of it and starts no ranks through it."""

    name: ClassVar[str]
    # -- rendering --
    renders: ClassVar[str | None] = None  # the `fabbench render` command of its jobs (slurm, k8s)
    # the render families (launch.launchers' render_family) whose jobs it is, under `renders`
    families: ClassVar[frozenset[str]] = frozenset()
    template: ClassVar[str | None] = None  # the template of one job (of its benchmarks)
    study_template: ClassVar[str | None] = None  # that of a whole study in one allocation
    templates: ClassVar[Path | None] = None  # a folder of its own templates; None: fabbench's
    # -- discovery, and a study in its allocation --
    order: ClassVar[int] = 100  # place in discovery: lower is tried first
    studies: ClassVar[bool] = True  # a study may run in its allocation (a manifest's place)
    allocates: ClassVar[bool] = True  # its place is an allocation of nodes, not this host

    def place(self, env: Mapping[str, str]) -> Place | None:
        """Its allocation, when ``env`` (a process's environment) is inside one."""
        return None

    def starts(self, launcher: Launcher) -> bool:
        """Can it start a study cell's ranks of ``launcher``'s kind?"""
        return launcher.render_family is not None

    def needs_mpirun(self, launcher: Launcher) -> bool:
        """Does a cell of ``launcher``'s ranks need Open MPI's mpirun on this host?"""
        return False

    def where(self, place: Place) -> str:
        """Its place's nodes, in a study's reason to skip a cell that needs more."""
        return f"the allocation has {place.nodes} node(s)"

    def port(self, place: Place, index: int) -> int:
        """The rendezvous port of the ``index``-th launch in ``place``: launch.ports' rule from
        its job's number (no job: 0), so that two jobs sharing a node differ. A scheduler whose
        job ids are not numbers says its own."""
        return ports.rendezvous_port(int(place.job_id or 0), index)

    def step(self, launcher: Launcher, nodes: int, per_node: int) -> list[str]:
        """The words (before the program) that start a rendered benchmark's ranks of
        ``launcher``'s kind, ``per_node`` on each of ``nodes`` nodes."""
        raise UsageError(f"{self.name} starts no job steps")

    def task(self) -> list[str]:
        """The words (before the program) of one task on the first node (the acceptance
        step after a rendered job's benchmarks)."""
        raise UsageError(f"{self.name} starts no single task")

    def launch(self, place: Place, launcher: Launcher, *, nodes: int, per_node: int,
               program: Sequence[str], port: int,
               forward: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        """A study cell's ranks of ``launcher``'s kind in ``place``, ``per_node`` on each of
        ``nodes`` nodes, each running ``program``; and the environment the launch adds: the
        rendezvous of spawned ranks at the place's first node and ``port``, then ``forward``,
        variables every rank gets."""
        raise UsageError(f"a study does not run in {self.name}'s allocation")

    def meet(self, place: Place, launcher: Launcher, port: int,
             forward: Mapping[str, str]) -> dict[str, str]:
        """What a launch in ``place`` adds to its ranks' environment: the rendezvous of
        spawned ranks at the place's first node (else this host) and ``port``, then
        ``forward``. UsageError for a launcher it cannot start (horovodrun)."""
        if not self.starts(launcher):
            raise UsageError(f"{launcher.name} has its own rendezvous: {self.name} cannot start "
                             "it")
        return {**launcher.rendezvous(place.master_addr or socket.gethostname(), port),
                **forward}


S = TypeVar("S", bound=type[Scheduler])


REGISTRY: ByName[Scheduler] = ByName("scheduler")  # a test's own: REGISTRY.scoped()


def register(cls: S) -> S:
    """Class decorator: registers one instance of the scheduler ``cls`` under ``cls.name``."""
    REGISTRY.add(cls())
    return cls


def get(name: str) -> Scheduler:
    """The scheduler of this name (UsageError naming the known ones)."""
    return REGISTRY.get(name)
