"""The halo workload's record: the results contract's ``halo`` kind (its fields are schema.json's
``$defs/halo``, the published contract; a unit test compares the two). Registered when the
workload's package is loaded, as fabbench.catalog loads it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from fabbench.results.records import Record, Times, kind

__all__ = ["Halo"]


@kind("halo")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Halo(Record):
    """A 3-D halo exchange measurement."""

    cells_per_rank: int
    side: int | None
    grid: Sequence[int] | None
    ranks: int
    iterations: int | None
    dtype: str | None
    transport: str | None
    time_us: Times
    exchange_us: Times | None
    samples_us: Sequence[float] | None  # per iteration, the slowest rank's
    compute_us_p50: float | None
    bytes_per_iter: int
    messages_per_iter: int | None
    exchange_gbyte_s: float | None
    correct: bool | None
    wrong: int | None
