"""What a workload is: one class, generic in the record type it writes (``Workload[R]``), and the
registry that knows the workloads by name (``@register``, as launch/launchers/ registers its
launchers). A workload package's ``workload.py`` subclasses it: class attributes for what it
declares (its name, summary, record kind, option section, study metric, floors, default sizes,
the other sections' fields it runs by), methods for what it does (the rank's loop, its console
line, its rules against the plan, a study cell's row or a study's groups, the floors' figures,
its point count, its findings, what it decides of its section). fabbench.catalog builds every
table the rest of fabbench reads from the registered workloads (docs/architecture.md, "A new
workload").

A method a workload does not override does what its docstring says holds without it, and
``defines`` says which it overrides (the report's findings name only the workloads that have
some, a study cell takes its metric's median where a workload has no row of its own).

This module sits with the vocabulary, below the configuration, the records and the plan, which
take the catalog's tables: it imports none of them, so a plan, a rank's context and a run record
are ``Any`` here, and a subclass (in fabbench.workloads, a layer above) names their types. A
subclass's light module is imported whenever fabbench starts; the rank's loop (torch, the
communicator) only by its ``run``, when a rank runs it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, Literal, TypeVar

from fabbench.by_name import ByName
from fabbench.workload_spec import (
    Findings,
    FloorFigures,
    RankSeries,
    StudyCellRecords,
    StudyGroup,
    StudyMetric,
    StudyRow,
    WorkloadFloors,
)

R = TypeVar("R")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# the methods whose base "nothing" a caller tells from a workload's own (``defines``)
Hook = Literal["check", "study", "study_groups", "floor_points", "points", "findings", "decide"]


class Workload(Generic[R]):
    """One workload, writing records of type ``R``. Every rank calls ``run`` and gets the same
    sequence of records; rank 0 writes each as it comes and shows it with ``line`` (``header``
    once before the first); ``wrong`` says whether a record failed its data check (the run then
    ends with exit code 1)."""

    # the --workload choice and a study's workload kind
    name: str
    # what it measures, in a few words (the --workload help)
    summary: str
    # the kind of record it writes (its record.py registers it with results.records.kind)
    record: str
    # the dataclass of its own options (option_fields.option fields): RunConfig.<name>, the
    # "<Name> workload" panel of `fabbench run --help`, study keys; None: none of its own
    section: type | None = None
    # what a study's report ranks its cells by; None: not ranked
    metric: StudyMetric | None = None
    # what the acceptance floors judge of it (its figures: ``floor_points``); None: nothing
    floors: WorkloadFloors | None = None
    # other workloads' sections it runs by too, by name: a study cell of its kind takes their
    # keys (those the section's class lends in SHARED, where it has one; all without)
    shares: tuple[str, ...] = ()
    # its --sizes when none are given; None: the device's sweep
    sizes: str | None = None
    # `fabbench report` shows its records as the run streamed them (``header``, ``line``);
    # False: a table of its own
    report_lines: bool = True
    # the run launched once per rank count (a RankSeries: train's --scaling); None: one launch
    series: RankSeries | None = None

    def __init__(self) -> None:
        check_declared(type(self).__name__, name=self.name, summary=self.summary,
                       record=self.record, section=self.section)

    # -- on the ranks --

    def prepare(self, plan: Any) -> None:
        """Set what the communication library reads when it starts (before the rank's
        communicator starts); nothing by default."""

    def run(self, ctx: Any) -> Iterator[R]:
        """This rank's loop over the rank's context (workloads.interface.RankContext): the
        records, one per finished measurement. A subclass imports its loop's module here."""
        raise NotImplementedError(f"workload {self.name!r} has no run")

    def header(self, run: Any) -> str | None:
        """The line shown once before its first record, for a run (results.records.Run);
        None: none."""
        return None

    def line(self, record: R) -> str:
        """One record as the console shows it (and `fabbench report`, with ``report_lines``)."""
        raise NotImplementedError(f"workload {self.name!r} has no line")

    def wrong(self, record: R) -> bool:
        """Did the record fail its data check? By default: its ``correct`` is False."""
        return getattr(record, "correct", None) is False

    # -- on the plan --

    def check(self, plan: Any) -> None:
        """Its rules between its options and the decided plan (UsageError); none by default."""

    def points(self, plan: Any) -> int:
        """The most points a run of it measures (the run's deadline allows for them); without
        it, each operation at each size and dtype."""
        raise NotImplementedError(f"workload {self.name!r} does not count its points")

    def decide(self, section: Any, emulated: bool) -> tuple[Any, str | None]:
        """What its section leaves open ("auto") decided for a run (``emulated``: the ranks run
        on an emulated cluster, nodes sharing this host's CPUs): the section the plan holds, and
        a few words for the run's `picked`, or None; without it, nothing is left open."""
        return section, None

    # -- on its records --

    def study(self, records: Sequence[R]) -> StudyRow | None:
        """A study cell's row from the cell's records of its kind (None: no row); without it,
        the median of ``metric.value`` over them, each record a sample."""
        return None

    def study_groups(self, cells: Sequence[StudyCellRecords[R]]) -> list[StudyGroup]:
        """The groups of a study's cells of one workload and node count, each cell with records
        of its kind, where its cells answer questions of their own (the collectives': one per
        operation, at the largest size every cell measured); without it, one group cell by cell
        of ``study`` rows."""
        return []

    def floor_points(self, records: Sequence[R]) -> Iterable[FloorFigures]:
        """The figures the acceptance floors judge, from one run's records of its kind."""
        return ()

    def findings(self, records: Sequence[R]) -> Findings | None:
        """What one run's records of its kind say beyond their figures (which node is slow);
        None: nothing."""
        return None

    def defines(self, hook: Hook) -> bool:
        """Does this workload have ``hook`` of its own, where callers tell it from nothing?"""
        return getattr(type(self), hook) is not getattr(Workload, hook)


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


W = TypeVar("W", bound="type[Workload[Any]]")


class WorkloadRegistry(ByName[Workload[Any]]):
    """Workloads by name, one instance each, in registration order; a second workload of one
    name is refused. fabbench.catalog takes fabbench's own and the installed packages' from it
    by class, in its own order."""

    def __init__(self) -> None:
        super().__init__("workload")

    def of(self, cls: type[Workload[Any]]) -> Workload[Any] | None:
        """The registered instance of ``cls`` (None: the class is not registered)."""
        name = getattr(cls, "name", None)
        found = self._by_name.get(name) if isinstance(name, str) else None
        return found if type(found) is cls else None


REGISTRY = WorkloadRegistry()


def register(cls: W) -> W:
    """Class decorator: registers one instance of the workload ``cls`` under ``cls.name``."""
    REGISTRY.add(cls())
    return cls

