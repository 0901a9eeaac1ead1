"""The pairs workload (node pairs in rounds, to find the slow node), declared in one place: its
options, its rule against the decided plan, the figures the acceptance floors judge of each node,
which node is slow (pairs.slow_node's rule) and its spec, which fabbench.catalog registers by
this module's name. The ranks' tournament
(the communicator, the timing engine) is pairs.tournament, imported only when a rank runs it
(the spec's ``entry``); its console line is pairs.pair_line; its record, the results contract's
``pairs`` kind, is pairs.pair_record, registered by loading this module."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fabbench.comm import primitives
from fabbench.errors import UsageError
from fabbench.option_fields import TEXT, option, validate
from fabbench.workload_spec import Findings, FloorFigures, WorkloadFloors, WorkloadSpec
from fabbench.workloads.collectives import SPEC as SWEEP
from fabbench.workloads.pairs.pair_record import Pairs

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
    the smallest), with each pair's figure in the evidence (the slowest EVIDENCE of them where
    a node has more)."""
    if not records:
        return
    from fabbench.workloads.pairs import frame  # numpy: with pairs records only

    f = frame.frame(records)  # a rechecked pair by its better figure
    assert f is not None
    big = f.sizes[-1]
    bw = _ends(f.big)
    lat = _ends(f.small) if f.small is not None else {}
    for unit, (others, figures) in bw.items():
        metrics = {"bw": frame.median(figures)}
        if unit in lat:
            metrics["time"] = frame.median(lat[unit][1])
        peers = _Peers([f.where[o][0] for o in others.tolist()], figures)
        yield FloorFigures(op="sendrecv", bytes=big, dtype=f.dtype,
                           transport=", ".join(f.transports[unit]), node=f.where[unit][0],
                           metrics=metrics, peers=peers,
                           evidence=f"median of {len(figures)} pairs at {big} B "
                                    f"(GB/s: {peers.listed()})")


# a node's evidence lists this many of its pairs at most (the slowest), not a 4,096-node
# check's 4,095
EVIDENCE = 32


def _ends(rows: Any) -> dict[int, tuple[Any, Any]]:
    """Per unit (in order): the other end and the figure of each of its records, as records
    list them (each record counts for both its ends)."""
    import numpy as np

    from fabbench.workloads.pairs.frame import by_unit

    found = by_unit(np.concatenate([rows.a, rows.b]), np.concatenate([rows.b, rows.a]),
                    np.concatenate([rows.v, rows.v]))
    return {u: (others, values) for u, (others, values) in found.items()}


class _Peers(Mapping[str, float]):
    """A node's figure with each other node (by host; a later record's figure wins), made into
    a dict only when read (the judge reads a failed node's)."""

    def __init__(self, hosts: list[str], figures: Any):
        self._hosts, self._figures = hosts, figures
        self._made: dict[str, float] | None = None

    def _dict(self) -> dict[str, float]:
        if self._made is None:
            self._made = dict(zip(self._hosts, self._figures.tolist(), strict=True))
        return self._made

    def __getitem__(self, host: str) -> float:
        return self._dict()[host]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def listed(self) -> str:
        """Each pair's host and figure, by host; the slowest EVIDENCE where there are more."""
        pairs = list(zip(self._hosts, self._figures.tolist(), strict=True))
        if len(pairs) <= EVIDENCE:
            return ", ".join(f"{host} {v:.3g}" for host, v in sorted(pairs))
        slowest = sorted(sorted(pairs, key=lambda p: p[1])[:EVIDENCE])
        return (f"the slowest {EVIDENCE} of {len(pairs)}: "
                + ", ".join(f"{host} {v:.3g}" for host, v in slowest))


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
    count: int = plan.ranks * len(plan.collectives.dtypes) * len(plan.collectives.sizes)
    return count


SPEC = WorkloadSpec(
    name="pairs", summary="node pairs in rounds: finds the slow node",
    entry="fabbench.workloads.pairs.tournament:WORKLOAD", record="pairs", section=PairsConfig,
    # sendrecv timed as the collectives time theirs, over their sizes, dtypes and budget: the
    # fields of their section it shares (CollectivesConfig.SHARED), read as plan.collectives
    shares=(SWEEP.name,),
    sizes="8,1M",  # the latency at the smallest size, the bandwidth at the largest
    points=points, check=check, findings=findings, decide=decide,
    floors=WorkloadFloors(metrics=("bw", "time"), baseline="bw", ops=("sendrecv",),
                          rule_size=True, per_node=True, points=floor_figures))
