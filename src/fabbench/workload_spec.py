"""What a workload declares, as data: the figures a study cell's row, the acceptance floors and
a run's findings take from its records (StudyMetric, StudyRow, FloorFigures, WorkloadFloors,
Findings), which a workload's class (fabbench.workload_base.Workload) names and makes; and,
TRANSITIONAL (issue 61), :class:`WorkloadSpec`, the declaration of a workload not yet converted
to a class (data and hooks, an ``entry`` naming the object that runs it), which the registry
takes through workload_base.FromSpec. This module imports nothing of fabbench's, so a workload
package's light module (imported whenever fabbench starts) may import it."""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_ENTRY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True, kw_only=True)
class StudyMetric:
    """What a study's report ranks a workload's cells by, lower is better: ``value``, the
    field of a record that holds one figure (a dotted path: "time_us.p50"), named (``name``,
    "step time") in ``unit`` ("ms"), beside a throughput column, headed ``throughput`` in the
    HTML report and ``throughput_short`` on the console. fabbench's own kinds are grouped by
    builders of their own (report.study.groups: the median of the record's own samples); a
    package's cells by the median of ``value`` over the cell's records of its kind, each
    record a sample. With ``scaling``, its groups show each cell's scaling efficiency
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
    """One study cell's figures for its group, which a workload's ``study`` hook makes of the
    cell's records of its kind: the ``median`` the group ranks by (in the metric's unit) over
    ``samples``, the group's name ``what`` (a network's; None: the study's workload name), and
    what the report shows beside it."""

    median: float
    samples: Sequence[float]
    what: str | None = None
    throughput: float | None = None
    comm_share: float | None = None  # exposed communication / the median's time
    scaling: float | None = None     # T_n / (n T_1)
    transport: str | None = None


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
    rules do), and ``points``, its records' figures (None: fabbench.floors.points makes them
    itself). A rule's op is checked against ``ops``; with no ``ops`` and ``rule_op``, its op is
    a name of the workload's own (train's: the network's) and any is taken. Without ``sized``
    its figures carry no size, and a rule naming one is refused."""

    metrics: tuple[str, ...]
    baseline: str
    ops: tuple[str, ...] = ()
    rule_op: bool = True
    rule_size: bool = False
    per_node: bool = False
    # TRANSITIONAL: a WorkloadSpec's figures (a Workload makes them in ``floor_points``)
    points: Callable[[Sequence[Any]], Iterable[FloorFigures]] | None = None
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


@dataclass(frozen=True, kw_only=True)
class WorkloadSpec:
    """TRANSITIONAL (issue 61): one workload, as data and hooks, not yet a class of its own
    (fabbench.workload_base.Workload, whose attributes and methods these fields are)."""

    # each field but ``entry`` and ``lines`` is the attribute or method of that name of
    # fabbench.workload_base.Workload, which says what it is; a hook None: what the method
    # does where a class does not override it
    name: str
    summary: str
    # "module:attribute" of the object that runs it (prepare, run, header, line, wrong, as a
    # Workload's methods), imported only when a rank chooses it
    entry: str
    record: str
    section: type | None = None
    # "module:attribute" of the fabbench.results.lines.Lines that shows its records in
    # `fabbench report` (a Workload's header and line, with report_lines); None: a table of
    # its own
    lines: str | None = None
    metric: StudyMetric | None = None
    check: Callable[[Any], None] | None = field(default=None, compare=False)
    study: Callable[[Sequence[Any]], StudyRow | None] | None = field(default=None, compare=False)
    floors: WorkloadFloors | None = None
    shares: tuple[str, ...] = ()
    sizes: str | None = None
    points: Callable[[Any], int] | None = field(default=None, compare=False)
    findings: Callable[[Sequence[Any]], Findings | None] | None = field(default=None,
                                                                       compare=False)
    decide: Callable[[Any, bool], tuple[Any, str | None]] | None = field(default=None,
                                                                         compare=False)
    # the run launched once per rank count (a RankSeries); None: one launch
    series: RankSeries | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_declared("WorkloadSpec", name=self.name, summary=self.summary, record=self.record,
                       section=self.section)
        for what in ("entry", "lines"):
            value = getattr(self, what)
            if (value is not None or what == "entry") and not _ENTRY.fullmatch(value or ""):
                raise ValueError(f"WorkloadSpec {self.name!r}: {what} must be "
                                 f"'module:attribute', not {value!r}")


def check_declared(what: str, *, name: str, summary: str, record: str,
                   section: type | None) -> None:
    """What every workload declares, checked (ValueError naming ``what``, its class): its name
    and record kind words of lower-case letters, digits and '_', a summary, a dataclass for a
    section."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"{what}.name must match {_NAME.pattern}, not {name!r}")
    if not summary.strip():
        raise ValueError(f"{what} {name!r}: summary must not be empty")
    if not _NAME.fullmatch(record):
        raise ValueError(f"{what} {name!r}: record must match {_NAME.pattern}, not {record!r}")
    if section is not None and not (dataclasses.is_dataclass(section)
                                    and isinstance(section, type)):
        raise ValueError(f"{what} {name!r}: section must be a dataclass, not {section!r}")


def load_entry(entry: str) -> Any:
    """The object a "module:attribute" entry names, its module imported now."""
    module, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module), attr)
