"""The pairs workload (node pairs in rounds, to find the slow node), declared in one place: its
options, its rule against the decided plan and its spec, which fabbench.catalog registers by
this module's name. The ranks' tournament (the communicator, the timing engine) is
pairs.tournament, imported only when a rank runs it (the spec's ``entry``); its console line is
pairs.pair_line; its record is the results contract's ``pairs`` kind
(fabbench.results.records.Pairs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabbench.comm import primitives
from fabbench.errors import UsageError
from fabbench.option_fields import TEXT, option, validate
from fabbench.workload_spec import WorkloadFloors, WorkloadSpec

__all__ = ["PAIR_SCHEDULES", "SPEC", "PairsConfig"]

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


def check(plan: Any) -> None:
    """Pairs exchange point to point: a primitive without point-to-point messages (on the
    plan's device) cannot run them."""
    spec = primitives.get(plan.primitive)
    if not spec.point_to_point_on(plan.device):
        *some, last = [n for n in primitives.PRIMITIVES
                       if primitives.get(n).point_to_point_on(plan.device)]
        able = f"{', '.join(some)} or {last}" if some else last
        on = f" on {plan.device} buffers" if spec.point_to_point else ""
        raise UsageError(f"--workload pairs needs point-to-point messages, which "
                         f"{plan.primitive} does not have{on}: use --primitive {able}")


SPEC = WorkloadSpec(
    name="pairs", summary="node pairs in rounds: finds the slow node",
    entry="fabbench.workloads.pairs.tournament:WORKLOAD", record="pairs", section=PairsConfig,
    check=check,
    floors=WorkloadFloors(metrics=("bw", "time"), baseline="bw", ops=("sendrecv",),
                          rule_size=True))
