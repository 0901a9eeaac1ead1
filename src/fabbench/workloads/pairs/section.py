"""The pairs' options: their section of the configuration (``RunConfig.pairs``, the "Pairs
workload" panel of `fabbench run --help`, a study's keys)."""

from __future__ import annotations

from dataclasses import dataclass

from fabbench.option_fields import TEXT, option, validate

__all__ = ["PAIR_SCHEDULES", "PairsConfig"]

PAIR_SCHEDULES = ("auto", "rounds", "serial")


@dataclass(frozen=True, kw_only=True)
class PairsConfig:
    """``--workload pairs``: node pairs in rounds, to find the slow node."""

    pair_schedule: str = option(
        "auto", TEXT, "--pair-schedule", "Rounds (each round's disjoint pairs at once, as "
        "on a real fleet), serial (one pair at a time, the others wait) or auto (serial on an "
        "emulated cluster, whose nodes share this host's CPUs; rounds otherwise).",
        choices=PAIR_SCHEDULES, refusal="{flag} takes {known}, not {value!r}")

    def __post_init__(self) -> None:
        validate(self)
