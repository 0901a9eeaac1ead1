"""The collectives' spec, which fabbench.catalog registers by the package's name: what the sweep
declares about itself (its options section, record kind, the floors it may be judged by, with
its records' figures, and what a study ranks its cells by)."""

from __future__ import annotations

from fabbench.comm.primitives import ALL_OPS
from fabbench.workload_spec import StudyMetric, WorkloadFloors, WorkloadSpec
from fabbench.workloads.collectives.floors import floor_figures
from fabbench.workloads.collectives.section import CollectivesConfig

__all__ = ["SPEC"]

SPEC = WorkloadSpec(
    name="collectives", summary="a size sweep of the collective operations",
    entry="fabbench.workloads.collectives.run:WORKLOAD", record="collective",
    section=CollectivesConfig,
    floors=WorkloadFloors(metrics=("busbw", "algbw", "time"), baseline="busbw",
                          ops=(*ALL_OPS, "reduce"), rule_size=True, points=floor_figures),
    metric=StudyMetric(name="time", unit="µs", value="time_us.p50", throughput="busbw GB/s",
                       throughput_short="busbw GB/s"))
