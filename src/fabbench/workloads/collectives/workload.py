"""The collectives sweep as a workload: what it declares (its options, record, floors and what a
study ranks its cells by), its console lines, a study's groups and the acceptance floors'
figures. The sweep itself
(the communicator, numpy) is collectives.run, imported by ``run`` only."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from fabbench.comm.primitives import ALL_OPS
from fabbench.workload_base import Workload, register
from fabbench.workload_spec import (
    FloorFigures,
    StudyCellRecords,
    StudyGroup,
    StudyMetric,
    WorkloadFloors,
)
from fabbench.workloads.collectives.floors import floor_figures
from fabbench.workloads.collectives.line import header as header_of
from fabbench.workloads.collectives.line import line as line_of
from fabbench.workloads.collectives.record import Collective
from fabbench.workloads.collectives.section import CollectivesConfig
from fabbench.workloads.collectives.study import study_groups

if TYPE_CHECKING:
    from fabbench.results.records import Run
    from fabbench.workloads.interface import RankContext


@register
class CollectivesWorkload(Workload[Collective]):
    """One record per operation, dtype and size (the points ``--resume`` has not measured);
    wrong where ``--check`` found wrong elements. `fabbench report` shows the records in an
    nccl-tests table of its own, not as the run streamed them."""

    name = "collectives"
    summary = "a size sweep of the collective operations"
    record = "collective"
    section = CollectivesConfig
    floors = WorkloadFloors(metrics=("busbw", "algbw", "time"), baseline="busbw",
                            ops=(*ALL_OPS, "reduce"), rule_size=True)
    metric = StudyMetric(name="time", unit="µs", value="time_us.p50", throughput="busbw GB/s",
                         throughput_short="busbw GB/s")
    report_lines = False

    def run(self, ctx: RankContext) -> Iterator[Collective]:
        from fabbench.workloads.collectives.run import sweep  # on a rank that runs it

        return sweep(ctx.comm, ctx.plan, ctx.transport, ctx.arm, ctx.fault, ctx.state.skip)

    def header(self, run: Run) -> str:
        return header_of(run)

    def line(self, record: Collective) -> str:
        return line_of(record)

    def study_groups(self, cells: Sequence[StudyCellRecords[Collective]]) -> list[StudyGroup]:
        return study_groups(cells)

    def floor_points(self, records: Sequence[Collective]) -> Iterable[FloorFigures]:
        return floor_figures(records)
