"""The one loader of results files: every supported schema version, each line checked against its
version's schema, old field names renamed to the current ones, NaN and Infinity refused, a
truncated last line reported (not fatal). Everything that reads results reads through here.

It returns the typed records the writer writes (``Record.read``). An older file is never
upgraded with made-up values: a field its version did not record is None (hence ``| None`` on
such fields), and only what the line itself holds is derived (DERIVED). A field this fabbench
does not know (a newer writer's) is kept in the record's ``extra``; no reader here relies on it."""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, overload

from fabbench.errors import UsageError
from fabbench.results import RENAMED, SUPPORTED_SCHEMAS
from fabbench.results.records import Record, kind_of, problem
from fabbench.timing.stats import STABLE_RULE, is_stable, median_ci95_rel

R = TypeVar("R", bound=Record)


@dataclass
class ResultsFile:
    path: Path
    records: list[Record]  # typed, current field names, whatever version the file is
    warnings: list[str] = field(default_factory=list)

    @overload
    def of_kind(self, kind: type[R]) -> list[R]: ...
    @overload
    def of_kind(self, kind: str) -> list[Record]: ...

    def of_kind(self, kind: type[R] | str) -> list[R] | list[Record]:
        """The records of one kind, by class (typed) or by name, in file order."""
        cls = kind_of(kind) if isinstance(kind, str) else kind
        if cls is None:
            raise KeyError(kind)
        return [r for r in self.records if isinstance(r, cls)]


def _rename(record: dict[str, Any], renames: dict[str, str]) -> dict[str, Any]:
    """Apply RENAMED entries ("a", "a.b", "a[].b") to a record loaded from an older version."""
    for old, new in renames.items():
        *outer, last = old.split(".")
        holders: list[Any] = [record]
        for part in outer:
            nxt: list[Any] = []
            for h in holders:
                value = h.get(part.removesuffix("[]")) if isinstance(h, dict) else None
                if part.endswith("[]"):
                    nxt += value if isinstance(value, list) else []
                elif value is not None:
                    nxt.append(value)
            holders = nxt
        for h in holders:
            if isinstance(h, dict) and last in h:
                h[new] = h.pop(last)
    return record


def _judged_collective(record: dict[str, Any]) -> dict[str, Any]:
    """A fabbench/1 collective point with what fabbench/2 records beside it: how many samples
    it holds, the half-width of its median's 95 % interval and its verdict by the one stability
    rule, computed from its samples as the writer does."""
    samples = record.get("samples_us") or []
    record.setdefault("samples", len(samples))
    record["median_ci95_rel"] = median_ci95_rel(samples)
    record["stable"] = is_stable(record["median_ci95_rel"])
    record["stable_rule"] = STABLE_RULE
    return record


# schema version -> kind -> the fields a later version records, derived on load
DERIVED = {"fabbench/1": {"collective": _judged_collective}}


class _Constant(Exception):
    """NaN, Infinity or -Infinity in a line (JSON has no such numbers)."""


def _refuse(constant: str) -> Any:
    raise _Constant(constant)


# one decoder for every line (json.loads with an argument makes one per call)
_DECODER = json.JSONDecoder(parse_constant=_refuse)


def _parse(path: Path, number: int, line: str) -> dict[str, Any]:
    try:
        record = _DECODER.decode(line)
    except _Constant as exc:
        raise UsageError(f"{path}:{number}: {exc} is not a number fabbench accepts "
                         "(NaN and Infinity are refused)") from None
    except json.JSONDecodeError:
        raise UsageError(f"{path}:{number}: not a fabbench results file "
                         "(a line is not JSON)") from None
    if not isinstance(record, dict) or "kind" not in record:
        raise UsageError(f"{path}:{number}: not a fabbench results record (no 'kind')")
    return record


def _lines(path: Path) -> Iterator[tuple[int, str, bool]]:
    """A file's lines, one at a time (a file is never held whole): each one's number, text,
    and whether it is a last line without its newline (a writer killed in the middle)."""
    try:
        with path.open("rb") as f:
            for number, raw in enumerate(f, 1):
                yield number, raw.decode(errors="replace"), not raw.endswith(b"\n")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while a file is read, or while what reads it works on
    its records (the report, compare, verify and the model do). Records hold no cycles, and
    each line makes dozens of new containers: the collector would walk every record read so
    far again and again (a third of the time of reading 100,000 records, and half a second
    more of the report's)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_results(path: str | Path) -> ResultsFile:
    path = Path(path)
    warnings: list[str] = []
    with collector_paused():
        records = list(_records(path, warnings))
    if not records:
        raise UsageError(f"{path}: no results records (empty file)")
    return ResultsFile(path, records, warnings)


def _records(path: Path, warnings: list[str]) -> Iterator[Record]:
    """The file's records, checked, in file order; a truncated last line is a warning."""
    version: str | None = None  # the schema of the run record the lines below belong to
    for number, line, truncated in _lines(path):
        if not line or line.isspace():
            continue
        try:
            record = _parse(path, number, line)
        except UsageError:
            if truncated:
                warnings.append(f"{path}:{number}: last line is truncated (killed run?); ignored")
                continue
            raise
        if record["kind"] == "run":
            version = record.get("schema")
            if version not in SUPPORTED_SCHEMAS:
                raise UsageError(f"{path}:{number}: schema {version!r} is not one this fabbench "
                                 f"reads ({', '.join(SUPPORTED_SCHEMAS)}); upgrade fabbench")
        if version is None:
            raise UsageError(f"{path}: the first record is not a 'run' record")
        why = problem(record, version, unknown_fields=True)
        if why is not None:
            raise UsageError(f"{path}:{number}: {why}")
        record = _rename(record, RENAMED.get(version, {}).get(record["kind"], {}))
        derive = DERIVED.get(version, {}).get(record["kind"])
        cls = kind_of(record["kind"])
        assert cls is not None  # problem() refuses a kind no package declares
        yield cls.read(derive(record) if derive else record)


def salvage(path: str | Path) -> list[dict[str, Any]]:
    """The complete lines of a file whose writer was killed, unchecked and as written (JSON
    objects, not records: a line here may not satisfy any schema): what closing an unfinished
    run needs to count (never shown to a user as results)."""
    records = []
    for line in Path(path).read_bytes().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "kind" in record:
            records.append(record)
    return records
