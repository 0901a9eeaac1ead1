"""A rank that arrives late, from each rank's own times in the collective records.

Every collective record keeps, besides the slowest rank's time per sample, each rank's own time
(``rank_samples_us``): from the sample's common start to the end of its own batch, per operation.
In a synchronising collective the others wait for a late rank, so their own times hold the wait
and the late rank's does not: its time is the shortest.

The rule: in one measured point of a synchronising op (allreduce, allgather, reduce_scatter,
alltoall; broadcast's root and sendrecv's ring are uneven by design), a rank is late when its
own p50 is below LATE_SHARE (50 %) of the median of the other ranks' p50s. A rank is named when
it is late in more than half of the run's points; the wait is the others' median minus its own.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fabbench.workloads.collectives.record import Collective

LATE_SHARE = 0.5
SYNCHRONISING = ("allreduce", "allgather", "reduce_scatter", "alltoall")


@dataclass(frozen=True, kw_only=True)
class LateRank:
    rank: int
    host: str
    late_points: int
    points: int
    ops: tuple[str, ...]
    own_share: float   # median over its late points of its p50 / the others' median p50
    wait_us: float     # median over its late points of the others' p50 minus its own

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "host": self.host, "late_points": self.late_points,
                "points": self.points, "ops": list(self.ops), "own_share": self.own_share,
                "wait_us": self.wait_us}

    def sentence(self, nodes: int) -> str:
        where = f"host {self.host}" + (" (a node of its own)" if nodes > 1 else "")
        return (f"late rank: rank {self.rank} on {where}: in {self.late_points} of "
                f"{self.points} points ({', '.join(self.ops)}) the other ranks waited for it, "
                f"{self.wait_us:.4g} µs per operation (median); its own time was "
                f"{100 * self.own_share:.0f}% of theirs")


def _median(values: Sequence[float]) -> float:
    """statistics.median's value, without its generality (twice per rank of every point)."""
    ordered = sorted(values)
    half = len(ordered) // 2
    return ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2


def late_ranks(records: Iterable[Collective], hosts: Sequence[str] | None = None
               ) -> tuple[list[LateRank], int]:
    """The late ranks of one run's collective records, and how many points were judged."""
    late: dict[int, list[tuple[str, float, float]]] = {}
    points = 0
    for r in records:
        per_rank = r.rank_samples_us  # None: not recorded (fabbench/1)
        if r.op not in SYNCHRONISING or not per_rank or len(per_rank) < 2 \
                or not all(per_rank):
            continue
        points += 1
        p50 = [_median(xs) for xs in per_rank]
        for rank, mine in enumerate(p50):
            others = _median(p50[:rank] + p50[rank + 1:])
            if others > 0 and mine < LATE_SHARE * others:
                late.setdefault(rank, []).append((r.op, mine / others, others - mine))
    found = []
    for rank, hits in sorted(late.items()):
        if len(hits) * 2 > points:
            host = hosts[rank] if hosts and rank < len(hosts) else "?"
            found.append(LateRank(
                rank=rank, host=host, late_points=len(hits), points=points,
                ops=tuple(dict.fromkeys(op for op, _, _ in hits)),
                own_share=statistics.median(s for _, s, _ in hits),
                wait_us=statistics.median(w for _, _, w in hits)))
    return found, points
