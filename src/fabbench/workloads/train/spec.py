"""The train workload's spec, which fabbench.catalog registers by the package's name: what it
declares, each hook in a module of its own."""

from __future__ import annotations

from fabbench.workload_spec import StudyMetric, WorkloadSpec
from fabbench.workloads.train import floors, rules, scaling, study
from fabbench.workloads.train.section import TrainConfig

__all__ = ["SPEC"]

SPEC = WorkloadSpec(
    name="train", summary="data-parallel training of a network",
    entry="fabbench.workloads.train.run:WORKLOAD", record="train", section=TrainConfig,
    lines="fabbench.workloads.train.line:LINES",
    floors=floors.FLOORS,
    metric=StudyMetric(name="step time", unit="ms", value="step_ms",
                       throughput="samples/s (all ranks)", throughput_short="samples/s",
                       scaling=True),
    check=rules.check, study=study.study_row, decide=scaling.decide, series=scaling.SERIES)
