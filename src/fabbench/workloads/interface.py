"""What a rank gives a workload, and the workloads a rank runs: a workload
(fabbench.workload_base.Workload) takes the rank's context and yields its records, one per
finished measurement.

The workloads are registered classes (fabbench.catalog, a layer below: config and plan read
it); a workload's loop (and through it torch, the networks, ...) is imported by its ``run`` when
a rank runs it, never by fabbench's start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fabbench import catalog
from fabbench.workload_base import Workload

__all__ = ["RankContext", "Workload", "load"]

if TYPE_CHECKING:
    from fabbench.comm.base import Communicator
    from fabbench.plan import Plan, RunState
    from fabbench.workloads.faults import Fault


@dataclass(frozen=True, kw_only=True)
class RankContext:
    """What a workload gets from its rank: the communicator (every rank's, the same group),
    the plan and its launch's run state, the transport the library reported, every rank's host
    (by rank), the watchdog (``arm(deadline_s, what)`` before each step that may block) and the
    injected fault."""

    comm: Communicator
    plan: Plan
    state: RunState
    transport: str
    hosts: tuple[str, ...]
    arm: Callable[[float, str], None]
    fault: Fault | None = None


def load(name: str) -> list[Workload[Any]]:
    """The workloads ``name`` runs, in order."""
    return [catalog.WORKLOADS[part] for part in catalog.parts(name)]
