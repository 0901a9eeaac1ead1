"""Workloads by name, behind one protocol: a workload takes the rank's context and yields its
records, one per finished measurement.

The workloads are described as data (fabbench.catalog, a layer below: config and plan read it); a
workload's module (and through it torch, the networks, ...) is imported by ``load`` when a rank
chooses it, before its communicator starts, never while it measures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from fabbench import catalog
from fabbench.workload_spec import load_entry

if TYPE_CHECKING:
    from fabbench.comm.base import Communicator
    from fabbench.plan import Plan, RunState
    from fabbench.results import records
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


class Workload(Protocol):
    """The contract of a workload. Every rank calls ``run`` and gets the same sequence of
    records; rank 0 writes each as it comes and shows it with ``line`` (``header`` once before
    the first). ``wrong`` says whether a record failed its data check (the run then ends with
    exit code 1). ``prepare`` sets what the communication library reads when it starts."""

    name: str

    def prepare(self, plan: Plan) -> None: ...

    def run(self, ctx: RankContext) -> Iterator[records.Record]: ...

    def header(self, run: records.Run) -> str | None: ...

    def line(self, record: records.Record) -> str: ...

    def wrong(self, record: records.Record) -> bool: ...


def load(name: str) -> list[Workload]:
    """The workloads ``name`` runs, their modules imported now."""
    return [load_entry(catalog.ENTRIES[part]) for part in catalog.parts(name)]
