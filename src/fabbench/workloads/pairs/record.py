"""The pairs workload's record: the results contract's ``pairs`` kind (its fields are
schema.json's ``$defs/pairs``, the published contract; a unit test compares the two), the share
below which a pair is slow, and the better figure of a rechecked pair. Registered when the
workload's package is loaded, as fabbench.catalog loads it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from fabbench.results.columns import Column, columnar
from fabbench.results.records import Measured, kind

__all__ = ["SLOW_SHARE", "Pairs", "best_pairs"]


@kind("pairs")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Pairs(Measured):
    """One pair of a round-robin tournament of nodes (or ranks): bidirectional sendrecv."""

    op: str
    # "rounds": a round's pairs at once; "serial": one pair at a time
    schedule: str | None = "rounds"
    round: int
    rounds: int | None
    unit: str          # "node" or "rank"
    units: int | None
    a: int
    b: int
    a_rank: int
    b_rank: int
    a_host: str
    b_host: str
    bytes: int
    dtype: str
    transport: str
    iters: int | None
    bw_gbyte_s: float
    correct: bool | None
    # measured again after the rounds, one pair at a time, because its first figure at the
    # largest size was below SLOW_SHARE of every pair's median (workloads/pairs/tournament.py)
    recheck: bool | None = False


# a health check's pairs are read as columns (results.columns): these are what its analysis
# reads (workloads/pairs/frame.py)
columnar("pairs", [Column("a", "BIGINT"), Column("b", "BIGINT"), Column("a_rank", "BIGINT"),
                   Column("b_rank", "BIGINT"), Column("a_host", "VARCHAR"),
                   Column("b_host", "VARCHAR"), Column("bytes", "BIGINT"),
                   Column("dtype", "VARCHAR"), Column("transport", "VARCHAR"),
                   Column("unit", "VARCHAR"), Column("bw_gbyte_s", "DOUBLE"),
                   Column("time_us.p50", "DOUBLE"), Column("recheck", "BOOLEAN")])


# a pair below this share of the others is slow (the rechecks' trigger; the rule of
# workloads/pairs/slow_node.py)
SLOW_SHARE = 0.75


def best_pairs(records: Iterable[Pairs]) -> list[Pairs]:
    """One record per pair, size and dtype: the faster of its first measurement and its
    recheck. Noise and passing traffic only ever slow a pair down; a bad link is slow both
    times, so the better figure is the pair's."""
    best: dict[tuple[int, int, int, str], Pairs] = {}
    for r in records:
        key = (r.a, r.b, r.bytes, r.dtype)
        if key not in best or r.bw_gbyte_s > best[key].bw_gbyte_s:
            best[key] = r
    return list(best.values())
