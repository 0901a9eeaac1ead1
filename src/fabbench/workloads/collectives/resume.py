"""What ``fabbench run --resume`` skips of a collectives sweep: the points the run being resumed
measured already, each named as the sweep names a point (``point_key``)."""

from __future__ import annotations

from collections.abc import Iterable

from fabbench.errors import UsageError
from fabbench.plan import Plan
from fabbench.results.records import Record
from fabbench.workloads.collectives.record import Collective

__all__ = ["measured", "point_key"]


def point_key(op: str, dtype: str, nbytes: int) -> str:
    """How --resume names a measured point."""
    return f"{op}/{dtype}/{nbytes}"


def measured(plan: Plan, records: Iterable[Record]) -> tuple[str, ...]:
    """The points of ``plan``'s run among ``records`` (a results file's, the run's own); a
    UsageError when the run is no collectives sweep (only a sweep's points can be skipped)."""
    if plan.workload != "collectives":  # its workload's name (workload.py, which runs it)
        raise UsageError("--resume continues collectives sweeps only")
    return tuple(point_key(r.op, r.dtype, r.bytes) for r in records
                 if isinstance(r, Collective) and r.run_id == plan.run_id)
