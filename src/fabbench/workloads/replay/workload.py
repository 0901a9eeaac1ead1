"""The replay as a workload: what it declares (its options, record, metric), its rules against
the plan (replay.rules: the trace read and checked before any rank starts), the trace's path
made absolute for the ranks, a study cell's row and what a run's record says (replay.findings).
The replay itself (torch.distributed) is replay.run, imported by ``run`` only."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from fabbench.workload_base import Workload, register
from fabbench.workload_spec import Findings, StudyMetric, StudyRow
from fabbench.workloads.replay import rules
from fabbench.workloads.replay.findings import findings as findings_of
from fabbench.workloads.replay.line import HEADER
from fabbench.workloads.replay.line import line as line_of
from fabbench.workloads.replay.record import Replay
from fabbench.workloads.replay.section import ReplayConfig

if TYPE_CHECKING:
    from fabbench.plan import Plan
    from fabbench.results.records import Run
    from fabbench.workloads.interface import RankContext


@register
class ReplayWorkload(Workload[Replay]):
    """One record per run: the trace's steps replayed, per step and per operation;
    `fabbench report` says what the communication costs the step (``findings``)."""

    name = "replay"
    summary = "a recorded job's communication (--trace), replayed"
    record = "replay"
    section = ReplayConfig
    metric = StudyMetric(name="step time", unit="µs", value="step_us.p50",
                         throughput="bytes per step / step time (GB/s)",
                         throughput_short="GB/s")
    report_lines = True

    def run(self, ctx: RankContext) -> Iterator[Replay]:
        from fabbench.workloads.replay.run import run_replay  # torch: on a rank that runs it

        yield run_replay(ctx.comm, ctx.plan, ctx.transport, ctx.arm)

    def header(self, run: Run) -> str:
        return HEADER

    def line(self, record: Replay) -> str:
        return line_of(record)

    def check(self, plan: Plan) -> None:
        """The trace read and checked against the plan (replay.rules)."""
        rules.check(plan)

    def points(self, plan: Plan) -> int:
        """One replay."""
        return 1

    def decide(self, section: ReplayConfig, emulated: bool) -> tuple[ReplayConfig, str | None]:
        """The trace's path made absolute: the ranks read it from wherever they start."""
        if not section.trace or os.path.isabs(section.trace):
            return section, None
        return dataclasses.replace(section, trace=os.path.abspath(section.trace)), None

    def study(self, records: Sequence[Replay]) -> StudyRow | None:
        """The cell's last record: its step time over the steps it timed, its bytes per step
        over that time, and the step's exposed communication share."""
        if not records:
            return None
        rec = records[-1]
        t = rec.step_us.p50
        return StudyRow(median=t, samples=list(rec.step_samples_us),
                        throughput=rec.bytes_per_step / (t * 1e3) if t > 0 else None,
                        comm_share=rec.exposed_share, transport=rec.transport or "?")

    def findings(self, records: Sequence[Replay]) -> Findings | None:
        """What the communication costs the step, of the run's last replay."""
        return findings_of(records[-1]) if records else None
