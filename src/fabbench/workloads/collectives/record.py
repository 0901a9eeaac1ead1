"""The collectives' record: the results contract's ``collective`` kind, one measured point of
the sweep (its fields are schema.json's ``$defs/collective``, the published contract; a unit
test compares the two). Registered when the workload's package is loaded, as fabbench.catalog
loads it (results.records.kind_of loads the catalog when a file holds one)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from fabbench.results.records import OMITTED, Measured, after, kind

__all__ = ["Collective"]


@kind("collective")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Collective(Measured):
    """One measured point of the collectives sweep (op, dtype, size)."""

    op: str
    bytes: int
    count: int | None
    dtype: str
    ranks: int
    transport: str
    iters: int
    # a sample's operations replayed as one CUDA graph (--cuda-graph); absent: eager calls
    cuda_graph: bool | None = dataclasses.field(default=None,
                                                metadata=after("timing", OMITTED))
    algbw_gbyte_s: float
    busbw_gbyte_s: float
    busbw_mean_gbyte_s: float | None
    correct: bool | None
    wrong: int | None
    wrong_ranks: Sequence[int] | None
    rank_samples_us: Sequence[Sequence[float]] | None  # each rank's own samples
    stable: bool           # by stable_rule (timing.stats.STABLE_RULE)
    stable_rule: str
    median_ci95_rel: float | None  # None: too few samples for the interval

