"""train's scaling series (``--scaling 1,2,4``): the same run launched once per rank count,
smallest first, into one results file, the later launches' records carrying their scaling
efficiency T_n / (n T_1) against the 1-rank launch's samples/s. fabbench.runner launches the
series the workload's ``series`` names; ``decide`` gives the plan its counts with 1 among them."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from fabbench.errors import UsageError
from fabbench.workloads.train import section
from fabbench.workloads.train.record import Train
from fabbench.workloads.train.section import TrainConfig

__all__ = ["SERIES", "TrainSeries", "decide"]


def decide(train: TrainConfig, emulated: bool) -> tuple[TrainConfig, str | None]:
    """The section the plan holds: its series' rank counts sorted, 1 added (the baseline)."""
    counts = tuple(sorted({*train.scaling, 1})) if train.scaling else None
    return dataclasses.replace(train, scaling=counts), None


class TrainSeries:
    """The plan's series (its train section's ``scaling``), refused where the run does not
    train; the 1-rank launch's samples/s (p50) is what the later ones compare with."""

    def counts(self, plan: Any) -> tuple[int, ...]:
        counts = section.of(plan).scaling
        if not counts:
            return ()
        from fabbench import catalog  # the registry that loads this package

        if not catalog.runs(plan.workload, "train"):
            raise UsageError("--scaling is for --workload train (or all)")
        return counts

    def baseline(self, records: Sequence[Any]) -> float | None:
        rate = None
        for rec in records:
            if isinstance(rec, Train):
                rate = rec.samples_per_s["p50"]
        return rate


SERIES = TrainSeries()
