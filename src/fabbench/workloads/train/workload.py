"""Training as a workload: what it declares (its options, record, metric, floors and its scaling
series), its console line, and its methods, each made by a module of the package (rules.py,
study.py, scaling.py, floors.py). The training itself (torch, the networks, the communicator) is
train.run, imported by ``run`` only; the settings a library reads at start by ``prepare``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from fabbench.workload_base import Workload, register
from fabbench.workload_spec import FloorFigures, StudyMetric, StudyRow
from fabbench.workloads.train import rules
from fabbench.workloads.train.floors import FLOORS, floor_figures
from fabbench.workloads.train.line import HEADER
from fabbench.workloads.train.line import line as line_of
from fabbench.workloads.train.record import Train
from fabbench.workloads.train.scaling import SERIES
from fabbench.workloads.train.scaling import decide as decide_counts
from fabbench.workloads.train.section import TrainConfig
from fabbench.workloads.train.study import study_row

if TYPE_CHECKING:
    from fabbench.plan import Plan
    from fabbench.results.records import Run
    from fabbench.workloads.interface import RankContext


@register
class TrainWorkload(Workload[Train]):
    """One record per launch (``--scaling``: one launch per rank count, ``series``), wrong when
    the ranks ended with different gradients or parameters, or gradients that are all zero or
    not finite."""

    name = "train"
    summary = "data-parallel training of a network"
    record = "train"
    section = TrainConfig
    floors = FLOORS
    metric = StudyMetric(name="step time", unit="ms", value="step_ms",
                         throughput="samples/s (all ranks)", throughput_short="samples/s",
                         scaling=True)
    series = SERIES

    def prepare(self, plan: Plan) -> None:
        from fabbench.workloads.train.engines import prepare_env  # it imports the plan

        prepare_env(plan)  # settings read when the library starts (Horovod's)

    def run(self, ctx: RankContext) -> Iterator[Train]:
        from fabbench.workloads.train.run import run_train  # torch: on a rank that runs it

        yield run_train(ctx.comm, ctx.plan, ctx.transport, ctx.arm,
                        baseline_samples_per_s=ctx.state.baseline_samples_per_s)

    def header(self, run: Run) -> str:
        return HEADER

    def line(self, record: Train) -> str:
        return line_of(record)

    def wrong(self, record: Train) -> bool:
        return not (record.grads_identical and record.params_identical
                    and record.grads_finite_nonzero)

    def check(self, plan: Plan) -> None:
        rules.check(plan)

    def decide(self, section: TrainConfig, emulated: bool) -> tuple[TrainConfig, str | None]:
        return decide_counts(section, emulated)

    def study(self, records: Sequence[Train]) -> StudyRow | None:
        return study_row(records)

    def floor_points(self, records: Sequence[Train]) -> Iterable[FloorFigures]:
        return floor_figures(records)
