"""Results files and directories as runs: every file read by the one loader (results.reader:
any supported schema version, current field names, typed records), one Series per run record
with the records that follow it split by kind, and a warning for a run without a summary or
whose summary says it failed. The report, compare, the scaling model and studies read runs
through here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar, overload

from fabbench.errors import UsageError
from fabbench.results.columns import ColumnRecords
from fabbench.results.reader import read_results
from fabbench.results.records import Ceiling, Record, Run, Summary

R = TypeVar("R", bound=Record)


@dataclass
class Series:
    """One run: its run record, measurements and summary, and a short label for plots."""

    path: Path
    run: Run
    # each list holds the records of the kind its metadata names; the collectives' are
    # fabbench.workloads.collectives.record.Collective (a layer above)
    collectives: list[Any] = field(default_factory=list, metadata={"kind": "collective"})
    ceilings: list[Ceiling] = field(default_factory=list, metadata={"kind": "ceiling"})
    # the records of the kinds that have no list above (of a workload declared in a package
    # of its own), by kind; of_kind reads every kind. A kind read as columns (a health
    # check's pairs, results.columns) is a ColumnRecords: its analysis reads the columns.
    others: dict[str, Sequence[Record]] = field(default_factory=dict)
    summary: Summary | None = None
    warnings: list[str] = field(default_factory=list)
    label: str = ""

    @overload
    def of_kind(self, kind: type[R]) -> list[R]: ...
    @overload
    def of_kind(self, kind: str) -> Sequence[Record]: ...

    def of_kind(self, kind: type[R] | str) -> list[R] | Sequence[Record]:
        """The run's records of one kind, by its name or, typed, by its class (train's
        ``Train``), in file order."""
        if not isinstance(kind, str):
            return [r for r in self.of_kind(kind.kind) if isinstance(r, kind)]
        name = _LISTS.get(kind)
        if name is not None:
            return list(getattr(self, name))
        found = self.others.get(kind, ())
        return found if isinstance(found, ColumnRecords) else list(found)

    @property
    def base_label(self) -> str:
        """fabric/primitive (+ wire, transport): what a scaling curve over ranks groups by."""
        r = self.run
        text = f"{Path(r.fabric).stem}/{r.primitive}"
        if r.horovod_over:
            text += f"-{r.horovod_over}"
        if r.wire not in (None, "native"):  # None: a fabbench/1 run that did not say
            text += f" ({r.wire} wire)"
        return text

    @property
    def host(self) -> str:
        return self.run.provenance.host or "?"

    @property
    def transport(self) -> str:
        found = sorted({c.transport for c in self.collectives})
        return ", ".join(found) or self.run.transport or "?"


# the list of a Series each kind of record goes to, by kind
_LISTS: dict[str, str] = {f.metadata["kind"]: f.name for f in fields(Series)
                          if "kind" in f.metadata}


def expand(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given; a directory stands for the *.jsonl files under it (sorted)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.rglob("*.jsonl"))
            if not found:
                raise UsageError(f"{p}: no results files (*.jsonl) in this directory")
            files += found
        elif p.exists():
            files.append(p)
        else:
            raise UsageError(f"{p}: no such file or directory")
    if not files:
        raise UsageError("no results files given")
    return files


def split_runs(path: Path) -> list[Series]:
    """A file's records as runs: each `run` record starts one (a file normally holds one)."""
    results = read_results(path, columnar=True)
    series: list[Series] = []
    for record in results.records:
        if isinstance(record, Run):
            series.append(Series(path=path, run=record))
            if results.columns:
                series[-1].others.update(results.columns[len(series) - 1])
        elif isinstance(record, Summary):
            series[-1].summary = record
        else:
            name = _LISTS.get(record.kind)
            if name is None:
                listed = series[-1].others.setdefault(record.kind, [])
                assert isinstance(listed, list)  # a columnar kind's lines are all columns
                listed.append(record)
            else:
                getattr(series[-1], name).append(record)
    for s in series:
        s.warnings += results.warnings
        if s.summary is None:
            s.warnings.append(f"{path}: run {s.run.run_id} has no summary record "
                              "(still running, or killed)")
        elif not s.summary.ok:
            s.warnings.append(f"{path}: run {s.run.run_id} failed: {s.summary.error}")
    return series


def load(paths: Iterable[str | Path]) -> list[Series]:
    """Every run in the given files/directories, labelled uniquely for legends and tables."""
    series = [s for path in expand(paths) for s in split_runs(path)]
    _label(series)
    return series


def _label(series: list[Series]) -> None:
    hosts = {s.host for s in series}
    ranks = {s.run.ranks for s in series}
    seen: dict[str, int] = {}
    for s in series:
        label = s.base_label
        if len(hosts) > 1:
            label = f"{s.host}: {label}"
        if len(ranks) > 1:
            label += f" ×{s.run.ranks}"
        seen[label] = seen.get(label, 0) + 1
        s.label = label if seen[label] == 1 else f"{label} #{seen[label]}"
