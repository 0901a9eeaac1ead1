"""What the acceptance floors judge of the collectives' records: each point's bus and
algorithm bandwidth and its time (a world of one rank has no bus: its time only,
fabbench.console.NO_BUS), by operation, size and dtype."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from fabbench.workload_spec import FloorFigures
from fabbench.workloads.collectives.record import Collective

__all__ = ["floor_figures"]


def floor_figures(records: Sequence[Collective]) -> Iterator[FloorFigures]:
    """Each record's figures at its p50."""
    for c in records:
        yield FloorFigures(op=c.op, bytes=c.bytes, dtype=c.dtype, transport=c.transport,
                           ranks=c.ranks,
                           metrics={"time": c.time_us.p50} if c.ranks == 1 else
                           {"busbw": c.busbw_gbyte_s, "algbw": c.algbw_gbyte_s,
                            "time": c.time_us.p50},
                           evidence=f"p50 of {c.samples or len(c.samples_us or ())} samples")
