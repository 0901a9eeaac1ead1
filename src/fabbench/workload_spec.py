"""What a workload declares about itself, as data: a :class:`WorkloadSpec`. fabbench's own
workloads are declared in fabbench.catalog; a package adds one by declaring a spec and naming it
in its ``fabbench.workloads`` entry point (docs/architecture.md, "A new workload"). Everything
fabbench shows of a workload is derived from its spec: the ``--workload`` choice and its help,
the options of ``fabbench run`` (the section's fields), a study's workload kinds and keys, the
record counts of a run's summary, the lines ``fabbench report`` prints and what a study's report
ranks cells by. This module imports nothing of fabbench's, so a workload package's light module
(imported whenever fabbench starts) may import it."""

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
    """One workload, as data and hooks; each field's comment says what it is, and None where a
    field is optional says what holds without it. docs/architecture.md, "A new workload"."""

    # the --workload choice and a study's workload kind
    name: str
    # what it measures, in a few words (the --workload help)
    summary: str
    # "module:attribute" of the object that runs it (fabbench.workloads.interface.Workload),
    # imported only when a rank chooses it
    entry: str
    # the kind of record it writes (fabbench.results.records', or one its package registers)
    record: str
    # the dataclass of its own options (fabbench.option_fields.option fields): RunConfig.<name>,
    # the "<Name> workload" panel of `fabbench run --help`, study keys; None: none of its own
    section: type | None = None
    # "module:attribute" of the fabbench.results.lines.Lines that shows its records in
    # `fabbench report`; None: a table of its own
    lines: str | None = None
    # what a study's report ranks its cells by; None: not ranked
    metric: StudyMetric | None = None
    # its rules between its options and the decided plan, called with the plan (UsageError)
    check: Callable[[Any], None] | None = field(default=None, compare=False)
    # a study cell's StudyRow from the cell's records of its kind; None: the median of
    # metric.value over them, each record a sample
    study: Callable[[Sequence[Any]], StudyRow | None] | None = field(default=None, compare=False)
    # what the acceptance floors judge of it; None: nothing
    floors: WorkloadFloors | None = None
    # other workloads' sections it runs by too, by name: a study cell of its kind takes their
    # keys (those the section's class lists in SHARED, where it has one)
    shares: tuple[str, ...] = ()
    # its --sizes when none are given; None: the device's sweep
    sizes: str | None = None
    # the most points a run of it measures, from the plan (the run's deadline allows for them);
    # None: each operation at each size and dtype
    points: Callable[[Any], int] | None = field(default=None, compare=False)
    # Findings from one run's records of its kind; None: nothing beyond their figures
    findings: Callable[[Sequence[Any]], Findings | None] | None = field(default=None,
                                                                       compare=False)
    # what its section leaves open ("auto") decided for a run, from the section and whether the
    # ranks run on an emulated cluster (nodes sharing this host's CPUs): the section the plan
    # holds, and a few words for the run's `picked`, or None; None: nothing is left open
    decide: Callable[[Any, bool], tuple[Any, str | None]] | None = field(default=None,
                                                                         compare=False)
    # the run launched once per rank count (a RankSeries); None: one launch
    series: RankSeries | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"WorkloadSpec.name must match {_NAME.pattern}, not {self.name!r}")
        if not self.summary.strip():
            raise ValueError(f"WorkloadSpec {self.name!r}: summary must not be empty")
        for what in ("entry", "lines"):
            value = getattr(self, what)
            if (value is not None or what == "entry") and not _ENTRY.fullmatch(value or ""):
                raise ValueError(f"WorkloadSpec {self.name!r}: {what} must be "
                                 f"'module:attribute', not {value!r}")
        if not _NAME.fullmatch(self.record):
            raise ValueError(f"WorkloadSpec {self.name!r}: record must match {_NAME.pattern}, "
                             f"not {self.record!r}")
        if self.section is not None and not (
                dataclasses.is_dataclass(self.section) and isinstance(self.section, type)):
            raise ValueError(f"WorkloadSpec {self.name!r}: section must be a dataclass, not "
                             f"{self.section!r}")


def load_entry(entry: str) -> Any:
    """The object a "module:attribute" entry names, its module imported now."""
    module, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module), attr)
