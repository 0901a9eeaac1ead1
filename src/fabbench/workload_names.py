"""The workloads, described as data that anything may read without importing a workload: one
``WorkloadSpec`` per workload (its name, the object that implements it as "module:attribute",
loaded by workloads.registry.load, the kind of record it writes, and what a study's report ranks
its cells by), in one registry, ``WORKLOADS``; and the one name that stands for several workloads
run one after the other ("all": collectives, then train), spelled here once and asked of
``parts``/``runs``. The tables that used to repeat these facts (the rank's record counts, a
study's workload kinds, the report's metric, unit and throughput per workload) are derived from
the registry. A module of the vocabulary layer, not of workloads/: the configuration, the plan
and study files check a workload's name below the layer that runs workloads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from fabbench.errors import UsageError

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True, kw_only=True)
class StudyMetric:
    """What a study's report ranks a workload's cells by: the median of the record's samples,
    named (``name``, "step time") in ``unit`` ("ms"), beside a throughput column, headed
    ``throughput`` in the HTML report and ``throughput_short`` on the console."""

    name: str
    unit: str
    throughput: str
    throughput_short: str

    def __post_init__(self) -> None:
        for field_name in ("name", "unit", "throughput", "throughput_short"):
            if not getattr(self, field_name):
                raise ValueError(f"StudyMetric.{field_name} must not be empty")


@dataclass(frozen=True, kw_only=True)
class WorkloadSpec:
    """One workload: ``name`` (the --workload choice and a study's workload kind), ``entry``
    ("module:attribute", imported only when a rank chooses it), ``record`` (the kind of record
    it writes, one of fabbench.results.records.KINDS) and ``metric`` (None: a study's report
    does not rank its cells, as for pairs, which names the slow node instead)."""

    name: str
    entry: str
    record: str
    metric: StudyMetric | None = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"WorkloadSpec.name must match {_NAME.pattern}, not {self.name!r}")
        module, colon, attr = self.entry.partition(":")
        if not (module and colon and attr.isidentifier()):
            raise ValueError(f"WorkloadSpec.entry must be 'module:attribute', not "
                             f"{self.entry!r}")
        if not _NAME.match(self.record):
            raise ValueError(f"WorkloadSpec.record must match {_NAME.pattern}, not "
                             f"{self.record!r}")


def _registry(*specs: WorkloadSpec) -> Mapping[str, WorkloadSpec]:
    """The specs by name, in the order given; a name given twice is refused."""
    out: dict[str, WorkloadSpec] = {}
    for spec in specs:
        if spec.name in out:
            raise ValueError(f"workload {spec.name!r} registered twice")
        out[spec.name] = spec
    return MappingProxyType(out)


WORKLOADS: Mapping[str, WorkloadSpec] = _registry(
    WorkloadSpec(name="collectives", entry="fabbench.workloads.collectives:WORKLOAD",
                 record="collective",
                 metric=StudyMetric(name="time", unit="µs", throughput="busbw GB/s",
                                    throughput_short="busbw GB/s")),
    WorkloadSpec(name="train", entry="fabbench.workloads.train:WORKLOAD", record="train",
                 metric=StudyMetric(name="step time", unit="ms",
                                    throughput="samples/s (all ranks)",
                                    throughput_short="samples/s")),
    WorkloadSpec(name="halo", entry="fabbench.workloads.halo:WORKLOAD", record="halo",
                 metric=StudyMetric(name="iteration time", unit="µs",
                                    throughput="exchange GB/s", throughput_short="GB/s")),
    WorkloadSpec(name="pairs", entry="fabbench.workloads.pairs:WORKLOAD", record="pairs"),
)
ENTRIES: Mapping[str, str] = MappingProxyType({n: w.entry for n, w in WORKLOADS.items()})
#: The record kinds the workloads write, each once, in the registry's order.
RECORDS: tuple[str, ...] = tuple(dict.fromkeys(w.record for w in WORKLOADS.values()))
#: What a study's report ranks each workload's cells by, for the workloads it ranks.
METRICS: Mapping[str, StudyMetric] = MappingProxyType(
    {n: w.metric for n, w in WORKLOADS.items() if w.metric is not None})
SEQUENCES: Mapping[str, tuple[str, ...]] = MappingProxyType({"all": ("collectives", "train")})

NAMES = (*WORKLOADS, *SEQUENCES)


def parts(name: str) -> tuple[str, ...]:
    """The workloads ``name`` runs, in order (UsageError for an unknown name)."""
    if name in SEQUENCES:
        return SEQUENCES[name]
    if name in WORKLOADS:
        return (name,)
    raise UsageError(f"unknown workload {name!r} (known: {', '.join(NAMES)})")


def runs(name: str, part: str) -> bool:
    """Does workload ``name`` run ``part`` (train in "all", ...)?"""
    return part in parts(name)
