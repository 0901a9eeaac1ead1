"""The pairs (node pairs in rounds, to find the slow node) as a workload: what it declares (its
options, record, floors, the collectives' fields it runs by and its sizes), the schedule it
decides, its rule against the decided plan, its point count, the acceptance floors' figures
(pairs.floors) and which node is slow (pairs.slow_node). The ranks' tournament (the
communicator, the timing engine) is pairs.tournament, imported by ``run`` only."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from fabbench.comm import primitives
from fabbench.errors import UsageError
from fabbench.workload_base import Workload, register
from fabbench.workload_spec import Findings, FloorFigures, WorkloadFloors
from fabbench.workloads.collectives.workload import CollectivesWorkload
from fabbench.workloads.pairs.line import HEADER
from fabbench.workloads.pairs.line import line as line_of
from fabbench.workloads.pairs.record import Pairs
from fabbench.workloads.pairs.section import PairsConfig

if TYPE_CHECKING:
    from fabbench.plan import Plan
    from fabbench.results.records import Run
    from fabbench.workloads.interface import RankContext


@register
class PairsWorkload(Workload[Pairs]):
    """One record per pair, size and dtype, round by round, then one per pair measured again
    (pairs.tournament); `fabbench report` shows which node is slow (``findings``), not the
    records one by one."""

    name = "pairs"
    summary = "node pairs in rounds: finds the slow node"
    record = "pairs"
    section = PairsConfig
    # sendrecv timed as the collectives time theirs, over their sizes, dtypes and budget: their
    # section, by name (the fields it lends: CollectivesConfig.SHARED), read as plan.collectives
    shares = (CollectivesWorkload.name,)
    sizes = "8,1M"  # the latency at the smallest size, the bandwidth at the largest
    floors = WorkloadFloors(metrics=("bw", "time"), baseline="bw", ops=("sendrecv",),
                            rule_size=True, per_node=True)
    report_lines = False

    def run(self, ctx: RankContext) -> Iterator[Pairs]:
        from fabbench.workloads.pairs.tournament import run_pairs  # on a rank that runs it

        return run_pairs(ctx.comm, ctx.plan, ctx.transport, list(ctx.hosts), ctx.arm,
                         ctx.fault)

    def header(self, run: Run) -> str:
        return HEADER

    def line(self, record: Pairs) -> str:
        return line_of(record)

    def decide(self, section: PairsConfig, emulated: bool) -> tuple[PairsConfig, str | None]:
        """`auto`: one pair at a time on an emulated cluster, whose nodes share this host's
        CPUs (two pairs at once would contend for them, not for their links); disjoint pairs at
        once, in rounds, on real nodes."""
        if section.pair_schedule != "auto":
            return section, None
        schedule = "serial" if emulated else "rounds"
        why = "the emulated nodes share this host's CPUs" if emulated else \
            "disjoint pairs at once"
        return (dataclasses.replace(section, pair_schedule=schedule),
                f"pair_schedule={schedule} ({why})")

    def check(self, plan: Plan) -> None:
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

    def points(self, plan: Plan) -> int:
        """At most one round per rank (a bye with an odd number), each of every size and
        dtype."""
        return plan.ranks * len(plan.collectives.dtypes) * len(plan.collectives.sizes)

    def floor_points(self, records: Sequence[Pairs]) -> Iterable[FloorFigures]:
        from fabbench.workloads.pairs.floors import floor_figures  # numpy: with records only

        return floor_figures(records)

    def findings(self, records: Sequence[Pairs]) -> Findings | None:
        """Which node is slow (pairs.slow_node), over one run's pairs records."""
        from fabbench.workloads.pairs import slow_node  # with the records: read already

        v = slow_node.analyse(records)
        if v is None:
            return None
        return Findings(heading=f"pairs, {v.pairs} pairs of {len(v.nodes)} {v.unit}s, "
                                f"bandwidth at {v.bw_bytes} B",
                        table=slow_node.table(v), text=tuple(v.text),
                        slow=tuple(n.host for n in v.slow), json=v.to_json())
