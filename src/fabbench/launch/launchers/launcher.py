"""What a launcher is, and the registry that knows them by name.

A launcher is a program that starts ranks (mpirun, srun, torchrun, horovodrun, a Kubernetes
pod, fabbench's own spawn). One class each, registered with ``@register``; what the rest of
fabbench asks of a launcher is a method or attribute of the base class, whose defaults say "it
cannot": a launcher overrides only what it does. Callers look launchers up by name (the
primitive's launcher, comm.primitives; the origin of a rank) or iterate the registry; none
branches on a launcher's name.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, TypeVar

from fabbench.by_name import ByName
from fabbench.errors import UsageError
from fabbench.launch.words import Line
from fabbench.plan import PLAN_ENV, STATE_ENV

if TYPE_CHECKING:
    from fabbench.emulate.cluster import Cluster
    from fabbench.launch.settings import Resolved
    from fabbench.plan import Plan

# runs a tool: (argv) -> (exit code, output), or None when it cannot be run (procs.run_tool)
Runner = Callable[[list[str]], "tuple[int, str] | None"]


@dataclass
class LaunchSpec:
    """What will be run: one command per process group, each with its environment additions."""

    commands: list[list[str]]
    env: list[dict[str, str]] = field(default_factory=list)
    # what a launcher puts before each line of a rank's stdout (horovodrun's "[0]<stdout>:"),
    # taken off so that the user reads the table as a directly started rank prints it
    stdout_prefix: str | None = None

    def describe(self) -> str:
        lines = []
        for argv, env in zip(self.commands, self.env, strict=True):
            shown = {k: v for k, v in env.items() if k not in (PLAN_ENV, STATE_ENV)}
            prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(shown.items()))
            lines.append(f"{prefix} {shlex.join(argv)}".strip())
        return "\n".join(lines)


@dataclass(frozen=True, kw_only=True)
class Where:
    """Where fabbench starts ranks itself: this host (cluster None) or an emulated cluster."""

    cluster: Cluster | None = None


@dataclass(frozen=True)
class RankVars:
    """The variables a launcher sets in each rank: its rank, the world size, the local rank.
    ``distinctive``: the rank variable alone says "this launcher started me" (RANK does not)."""

    rank: str
    size: str
    local: str
    distinctive: bool = True


@dataclass(frozen=True, kw_only=True)
class PodLaunch:
    """The line a pod runs before the program ({hostfile}, {ranks}, {nodes}, {per_node}, the
    lists ``mca`` and ``exports``); ``bare_when_one``: a pod of one rank runs the program
    itself."""

    line: Line
    bare_when_one: bool = False


@dataclass(frozen=True)
class Ready:
    """A launcher's doctor check outside a job: can fabbench start local ranks with it?"""

    ok: bool
    what: str
    fix: str | None = None


class Launcher:
    """A launcher; the defaults say what one that overrides nothing does: it sets no variables
    fabbench reads, and fabbench cannot start ranks with it."""

    name: ClassVar[str]
    # -- a rank it started --
    rank_vars: ClassVar[RankVars | None] = None
    # place in rank discovery when launchers nest (torchrun inside an srun step): the innermost
    # launcher's variables say which world a process is in; lower is checked first
    order: ClassVar[int] = 100
    # (variable, what it is): the node count it announces to its ranks, the first one set
    node_vars: ClassVar[tuple[tuple[str, str], ...]] = ()
    node_name_var: ClassVar[str | None] = None  # its name for a rank's node, when it has one
    # its ranks do not end with their parent by its doing (a rank asks the kernel for it)
    orphans_ranks: ClassVar[bool] = False
    # -- ranks fabbench starts with it --
    mpi: ClassVar[bool] = False  # its ranks meet through the MPI library's process manager
    # how a scheduler starts ranks of its kind: "mpi" (srun --mpi=pmix, an MPIJob) or
    # "rendezvous" (a TCP rendezvous at the first node); None: no scheduler can start them
    render_family: ClassVar[str | None] = None
    pod: ClassVar[PodLaunch | None] = None  # what a Kubernetes pod runs to start them

    def placed(self, env: Mapping[str, str]) -> bool:
        """Its rank variable in ``env`` really means a rank it started (see Srun)."""
        return True

    def local(self, plan: Plan, resolved: Resolved, where: Where, program: Sequence[str],
              payload: Mapping[str, str]) -> LaunchSpec:
        """The ranks of ``plan`` (with ``resolved``, its profile's settings) on this host or
        an emulated cluster, each running ``program`` with ``payload`` in its environment."""
        raise UsageError(f"fabbench cannot start ranks with {self.name}")

    def across(self, cluster: Cluster, program: Sequence[str],
               env: Mapping[str, str]) -> LaunchSpec:
        """``program`` in every slot of ``cluster``, started from this host with ``env`` and no
        profile of fabbench's (emulate's containerised ranks)."""
        raise UsageError(f"{self.name} cannot start ranks across an emulated cluster from "
                         "outside its own rendezvous")

    def slurm(self, nodes: int, per_node: int) -> list[str]:
        """The srun step (before the program) that starts ranks of its kind in an
        allocation."""
        raise UsageError(f"{self.name} has its own rendezvous: Slurm cannot start it")

    def rendezvous(self, addr: str, port: int) -> dict[str, str]:
        """What a scheduler adds to the ranks' environment for them to meet."""
        return {}

    def ready(self, run: Runner) -> Ready:
        """Outside a job: can fabbench start local ranks with it?"""
        return Ready(True, "not inside a job: fabbench starts local ranks itself")


L = TypeVar("L", bound=type[Launcher])


class LauncherRegistry(ByName[Launcher]):
    """Launchers by name, in registration order; a second launcher of one name is refused."""

    def __init__(self) -> None:
        super().__init__("launcher")


REGISTRY = LauncherRegistry()


def register(cls: L) -> L:
    """Class decorator: registers one instance of the launcher ``cls`` under ``cls.name``."""
    REGISTRY.add(cls())
    return cls


def get(name: str) -> Launcher:
    """The launcher of this name (UsageError naming the known ones)."""
    return REGISTRY.get(name)
