"""What the acceptance floors judge of the train workload: each record's samples/s and step
time, its rules naming the network as their op (no size: a step has none)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from fabbench.workload_spec import FloorFigures, WorkloadFloors
from fabbench.workloads.train.record import Train

__all__ = ["FLOORS", "floor_figures"]


def floor_figures(records: Sequence[Train]) -> Iterator[FloorFigures]:
    """Each record's samples/s and step time (p50 of its steps), its op the network."""
    for t in records:
        yield FloorFigures(metrics={"samples_per_s": t.samples_per_s["p50"],
                                    "step_time": t.step_ms},
                           op=t.model, transport=t.transport, ranks=t.ranks,
                           evidence=f"p50 of {t.steps or '?'} steps")


FLOORS = WorkloadFloors(metrics=("samples_per_s", "step_time"), baseline="samples_per_s",
                        sized=False)
