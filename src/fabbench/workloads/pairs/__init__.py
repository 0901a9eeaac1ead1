"""The pairs workload (node pairs in rounds, to find the slow node), declared in one place: its
options, its rule against the decided plan, the figures the acceptance floors judge of each node,
which node is slow (pairs.slow_node's rule) and its spec, which fabbench.catalog registers by
this module's name. The ranks' tournament
(the communicator, the timing engine) is pairs.tournament, imported only when a rank runs it
(the spec's ``entry``); its console line is pairs.pair_line; its record, the results contract's
``pairs`` kind, is pairs.pair_record, registered by loading this module."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from fabbench.comm import primitives
from fabbench.errors import UsageError
from fabbench.option_fields import TEXT, option, validate
from fabbench.workload_spec import Findings, FloorFigures, WorkloadFloors, WorkloadSpec
from fabbench.workloads.pairs.pair_record import Pairs, best_pairs

__all__ = ["PAIR_SCHEDULES", "SPEC", "PairsConfig", "decide", "findings", "floor_figures"]

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


def decide(section: PairsConfig, emulated: bool) -> tuple[PairsConfig, str | None]:
    """`auto`: one pair at a time on an emulated cluster, whose nodes share this host's CPUs
    (two pairs at once would contend for them, not for their links); disjoint pairs at once, in
    rounds, on real nodes."""
    if section.pair_schedule != "auto":
        return section, None
    schedule = "serial" if emulated else "rounds"
    why = "the emulated nodes share this host's CPUs" if emulated else "disjoint pairs at once"
    return dataclasses.replace(section, pair_schedule=schedule), f"pair_schedule={schedule} ({why})"


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


def floor_figures(records: Sequence[Pairs]) -> Iterator[FloorFigures]:
    """Per node: the median of its pairs' p50 bandwidth at the largest size (and latency at
    the smallest), with each pair's figure in the evidence."""
    if not records:
        return
    records = best_pairs(records)  # a rechecked pair by its better figure
    sizes = sorted({r.bytes for r in records})
    big, small = sizes[-1], sizes[0]
    hosts: dict[int, str] = {}
    bw: dict[int, list[tuple[str, float]]] = {}
    lat: dict[int, list[float]] = {}
    transports: dict[int, set[str]] = {}
    for r in records:
        hosts[r.a], hosts[r.b] = r.a_host, r.b_host
        for me, other in ((r.a, r.b_host), (r.b, r.a_host)):
            transports.setdefault(me, set()).add(r.transport)
            if r.bytes == big:
                bw.setdefault(me, []).append((other, r.bw_gbyte_s))
            if r.bytes == small and len(sizes) > 1:
                lat.setdefault(me, []).append(r.time_us.p50)
    for unit in sorted(bw):
        figures = [v for _, v in bw[unit]]
        metrics = {"bw": statistics.median(figures)}
        if lat.get(unit):
            metrics["time"] = statistics.median(lat[unit])
        pairs = ", ".join(f"{host} {v:.3g}" for host, v in sorted(bw[unit]))
        yield FloorFigures(op="sendrecv", bytes=big, dtype=records[0].dtype,
                           transport=", ".join(sorted(transports[unit])), node=hosts[unit],
                           metrics=metrics, peers=dict(bw[unit]),
                           evidence=f"median of {len(figures)} pairs at {big} B (GB/s: {pairs})")


def findings(records: Sequence[Pairs]) -> Findings | None:
    """Which node is slow (pairs.slow_node), over one run's pairs records."""
    from fabbench.workloads.pairs import slow_node  # with the records: read already

    v = slow_node.analyse(records)
    if v is None:
        return None
    return Findings(heading=f"pairs, {v.pairs} pairs of {len(v.nodes)} {v.unit}s, bandwidth "
                            f"at {v.bw_bytes} B",
                    table=slow_node.table(v), text=tuple(v.text),
                    slow=tuple(n.host for n in v.slow), json=v.to_json())


def points(plan: Any) -> int:
    """At most one round per rank (a bye with an odd number), each of every size and dtype."""
    return plan.ranks * len(plan.dtypes) * len(plan.sizes)


SPEC = WorkloadSpec(
    name="pairs", summary="node pairs in rounds: finds the slow node",
    entry="fabbench.workloads.pairs.tournament:WORKLOAD", record="pairs", section=PairsConfig,
    # sendrecv timed as the collectives time theirs, over their sizes, dtypes and budget
    shares=tuple(f"collectives.{name}" for name in (
        "sizes", "dtypes", "check", "budget_s", "min_samples", "max_samples", "timing",
        "cuda_graph")),
    sizes="8,1M",  # the latency at the smallest size, the bandwidth at the largest
    points=points, check=check, findings=findings, decide=decide,
    floors=WorkloadFloors(metrics=("bw", "time"), baseline="bw", ops=("sendrecv",),
                          rule_size=True, per_node=True, points=floor_figures))
