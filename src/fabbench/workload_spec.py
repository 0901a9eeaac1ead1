"""What a workload declares, as data: the figures a study's report, the acceptance floors and a
run's findings take from its records (StudyMetric, StudyRow, StudyCellRecords, StudyGroup,
FloorFigures, WorkloadFloors, Findings) and its run launched once per rank count (RankSeries),
which a workload's class (fabbench.workload_base.Workload) names and makes. This module imports
nothing of fabbench's, so a workload package's light module (imported whenever fabbench starts)
may import it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

R = TypeVar("R")


@dataclass(frozen=True, kw_only=True)
class StudyMetric:
    """What a study's report ranks a workload's cells by, lower is better: ``value``, the
    field of a record that holds one figure (a dotted path: "time_us.p50"), named (``name``,
    "step time") in ``unit`` ("ms"), beside a throughput column, headed ``throughput`` in the
    HTML report and ``throughput_short`` on the console. A workload's cells are grouped by its
    ``study_groups`` (the collectives': per operation and size) or cell by cell by its
    ``study`` rows; without either, by the median of ``value`` over the cell's records of its
    kind, each record a sample. With ``scaling``, its groups show each cell's scaling efficiency
    T_n / (n T_1): the record's own, else from the study's 1-node cell of the same setting."""

    name: str
    unit: str
    value: str
    throughput: str
    throughput_short: str
    scaling: bool = False

    def __post_init__(self) -> None:
        for field_name in ("name", "unit", "value", "throughput", "throughput_short"):
            if not getattr(self, field_name):
                raise ValueError(f"StudyMetric.{field_name} must not be empty")


@dataclass(frozen=True, kw_only=True)
class StudyRow:
    """One study cell's figures for its group, which a workload's ``study`` (or
    ``study_groups``) makes of the cell's records of its kind: the ``median`` the group ranks
    by (in the metric's unit) over ``samples``, the group's name ``what`` (a network's; None:
    the study's workload name), and what the report shows beside it."""

    median: float
    samples: Sequence[float]
    what: str | None = None
    throughput: float | None = None
    comm_share: float | None = None  # exposed communication / the median's time
    scaling: float | None = None     # T_n / (n T_1)
    link_pct: float | None = None    # the throughput as a share of the link, in %
    transport: str | None = None


@dataclass(frozen=True, kw_only=True)
class StudyCellRecords(Generic[R]):
    """One study cell as a workload's ``study_groups`` reads it: its ``id`` (the manifest's),
    its ``records`` of the workload's kind (every run of its results file, in file order) and
    the record of its last run (fabbench.results.records.Run; None: none)."""

    id: str
    records: Sequence[R]
    run: Any = None


@dataclass(frozen=True, kw_only=True)
class StudyGroup:
    """One group of a study's cells that a workload's ``study_groups`` makes: the question they
    answer (``what``: "allreduce 1 MiB") and each cell's row by its id, in the cells' order."""

    what: str
    rows: Mapping[str, StudyRow]


@dataclass(frozen=True, kw_only=True)
class FloorFigures:
    """One figure set of a workload's records for the acceptance floors (fabbench.floors.points
    makes a Point of it with the run's own fields): ``metrics`` by the floors' metric names,
    in their units, and how they were made (``evidence``); ``ranks`` None: the run's. Figures
    of one node (a workload whose floors are ``per_node``) name it (``node``) and may carry
    its figure with each other node (``peers``, by host name)."""

    metrics: Mapping[str, float]
    evidence: str
    op: str | None = None
    bytes: int | None = None
    dtype: str | None = None
    transport: str | None = None
    ranks: int | None = None
    node: str | None = None
    peers: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Findings:
    """What one run's records of a workload say beyond their figures (which node is slow, say),
    which its ``findings`` hook makes of them: a ``heading`` and a ``table`` for
    ``fabbench report``, its sentences (``text``: the run's closing lines, a study's
    headline), the hosts it names ``slow`` and its ``json`` (``fabbench report --json``'s
    findings, under the workload's name)."""

    heading: str
    table: str
    text: Sequence[str]
    slow: Sequence[str] = ()
    json: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class WorkloadFloors:
    """What the acceptance floors judge of a workload: the ``metrics`` its points carry (names
    of fabbench.floors.points.METRICS), the one a ``baseline`` judges, the operations a rule
    may name (``ops``), whether a baseline's rule names the point's op and size, whether its
    figures are each node's (``per_node``: a rule may judge node by node, and a baseline's
    rules do); its records' figures are the workload's ``floor_points``. A rule's op is checked
    against ``ops``; with no ``ops`` and ``rule_op``, its op is a name of the workload's own
    (train's: the network's) and any is taken. Without ``sized`` its figures carry no size, and
    a rule naming one is refused."""

    metrics: tuple[str, ...]
    baseline: str
    ops: tuple[str, ...] = ()
    rule_op: bool = True
    rule_size: bool = False
    per_node: bool = False
    sized: bool = True

    def __post_init__(self) -> None:
        if self.baseline not in self.metrics:
            raise ValueError(f"WorkloadFloors.baseline {self.baseline!r} is not one of its metrics "
                             f"{self.metrics}")


class RankSeries(Protocol):
    """A run launched once per rank count, one after another into the same results file (train's
    ``--scaling``): a workload's ``series`` hook, which fabbench.runner asks of the plan."""

    def counts(self, plan: Any) -> tuple[int, ...]:
        """The rank counts to launch, smallest first (1 among them); () for no series. A
        UsageError where the plan asks for a series its workload does not run."""
        ...

    def baseline(self, records: Sequence[Any]) -> float | None:
        """What the later launches compare with (RunState.baseline_samples_per_s), from the
        1-rank launch's records of the workload's kind."""
        ...

