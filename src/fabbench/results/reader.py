"""The one loader of results files: every supported schema version, each line checked against its
version's schema, old field names renamed to the current ones, NaN and Infinity refused, a
truncated last line reported (not fatal). Everything that reads results reads through here.

It returns the typed records the writer writes (``Record.read``). An older file is never
upgraded with made-up values: a field its version did not record is None (hence ``| None`` on
such fields), and only what the line itself holds is derived (DERIVED). A field this fabbench
does not know (a newer writer's) is kept in the record's ``extra``; no reader here relies on it."""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import orjson

from fabbench.errors import UsageError
from fabbench.results import RENAMED, SCHEMA, SUPPORTED_SCHEMAS
from fabbench.results.records import Record, Run, kind_of, problem
from fabbench.timing.stats import STABLE_RULE, is_stable, median_ci95_rel

if TYPE_CHECKING:
    from fabbench.results import column_cache
    from fabbench.results.columns import ColumnRecords, Table

R = TypeVar("R", bound=Record)


@dataclass
class ResultsFile:
    path: Path
    records: list[Record]  # typed, current field names, whatever version the file is
    warnings: list[str] = field(default_factory=list)
    # per run record, in order: its records of each columnar kind (read_results(columnar=True))
    columns: list[dict[str, ColumnRecords]] = field(default_factory=list)

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
# an integer of 19 digits or more (past 64 bits, orjson would make a float of it), looked for
# only in a line with such a run of digits (each made a 0 first: a float's fraction may have it)
_DIGITS, _RUN = bytes.maketrans(b"123456789", b"0" * 9), b"0" * 19
_LONG = re.compile(rb"(?<![.0-9])[0-9]{19,}(?![.eE0-9])")


def _decoded(line: str, raw: bytes) -> tuple[Any, bool]:
    """The line's JSON value (``raw``: its bytes, ``line`` their text): by orjson (twice
    json's rate on a record's samples), which refuses what Python's json refuses and more (NaN,
    Infinity, a number that overflows, a lone surrogate, bytes that are not UTF-8), and parses
    the rest to the same values, but for an integer past 64 bits, which it makes a float: a
    line it refuses, or one with such a number, is read by json, whose value or refusal (and
    message) it is. With it: whether every number in it is finite, as orjson's are."""
    if _RUN not in raw.translate(_DIGITS) or not _LONG.search(raw):
        try:
            return orjson.loads(raw), True
        except orjson.JSONDecodeError:
            pass
    return _DECODER.decode(line), False


def _parse(path: Path, number: int, line: str, raw: bytes) -> tuple[dict[str, Any], bool]:
    """The line's record, and whether its numbers are known to be finite (_decoded)."""
    try:
        record, finite = _decoded(line, raw)
    except _Constant as exc:
        raise UsageError(f"{path}:{number}: {exc} is not a number fabbench accepts "
                         "(NaN and Infinity are refused)") from None
    except json.JSONDecodeError:
        raise UsageError(f"{path}:{number}: not a fabbench results file "
                         "(a line is not JSON)") from None
    if not isinstance(record, dict) or "kind" not in record:
        raise UsageError(f"{path}:{number}: not a fabbench results record (no 'kind')")
    return record, finite


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


def read_results(path: str | Path, *, columnar: bool = False) -> ResultsFile:
    """Every record of a file, checked, in file order. ``columnar``: the records of the kinds
    results.columns reads as columns (a health check's pairs) are not made one by one: each run's
    are a ColumnRecords in ``columns`` (every line still checked, see results.columns)."""
    path = Path(path)
    if columnar:
        from fabbench.results import columns

        if columns.COLUMNAR:
            fast = _columnar(path)
            if fast is not None:
                return fast
    warnings: list[str] = []
    with collector_paused():
        records = list(_records(path, warnings))
    if not records:
        raise UsageError(f"{path}: no results records (empty file)")
    return ResultsFile(path, records, warnings)


def _records(path: Path, warnings: list[str], tally: _Tally | None = None) -> Iterator[Record]:
    """The file's records, checked, in file order; a truncated last line is a warning.
    ``tally``: the lines of its kinds are counted for their run, not read (_Tally.lines)."""
    version: str | None = None  # the schema of the run record the lines below belong to
    for number, raw in _raw_lines(path) if tally is None else tally.lines(path):
        if tally is not None:
            tally.close_run()
        line, truncated = raw.decode(errors="replace"), not raw.endswith(b"\n")
        if not line or line.isspace():
            continue
        try:
            record, finite = _parse(path, number, line, raw)
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
            if tally is not None:
                tally.runs.append({})
                tally.version = version
        if version is None:
            raise UsageError(f"{path}: the first record is not a 'run' record")
        if tally is not None and record["kind"] in tally.kinds:
            raise _NotColumnar  # a line of such a kind that a writer did not write
        yield _checked(path, number, record, version, finite)


def _checked(path: Path, number: int, record: dict[str, Any], version: str,
             finite: bool = False) -> Record:
    """The typed record of a parsed line of schema ``version``, or its one-line refusal
    (``finite``: its numbers are known to be finite, _decoded)."""
    why = problem(record, version, unknown_fields=True, parsed=True, finite=finite)
    if why is not None:
        raise UsageError(f"{path}:{number}: {why}")
    record = _rename(record, RENAMED.get(version, {}).get(record["kind"], {}))
    derive = DERIVED.get(version, {}).get(record["kind"])
    cls = kind_of(record["kind"])
    assert cls is not None  # problem() refuses a kind no package declares
    return cls.read(derive(record) if derive else record)


class _NotColumnar(Exception):
    """A file the columnar reading does not take as it is (an older schema, a truncated line
    of a columnar kind, a record of one written otherwise): it is read the Python way."""


class _Tally:
    """The lines of the columnar kinds, counted per run, never read here: the file is read in
    blocks, and only its other lines are passed on (results.columns checks the kinds' lines)."""

    BLOCK = 1 << 24
    # the most other lines whose places are noted (a health check's file has a few)
    NOTED = 4096

    def __init__(self) -> None:
        from fabbench.results import columns

        self.kinds = frozenset(columns.COLUMNAR)
        (self.kind,) = self.kinds  # one columnar kind today; more: a count per prefix
        self.prefix = columns.COLUMNAR[self.kind].prefix
        self.runs: list[dict[str, int]] = []  # per run record, lines per kind
        self.pending = 0  # lines of the kind not yet given to a run
        self.version: str | None = None  # the schema of the run the lines follow
        # called once, when the first line of the kind has been counted
        self.begin: Callable[[], object] | None = None
        self._other = re.compile(b"\n(?!" + re.escape(self.prefix) + b")[^\n]*")
        # each other line's number, offset and the kind's lines counted before it, and those
        # counted after the last: what a read of the kept columns reads instead of the file
        self.others: list[tuple[int, int, int]] | None = []
        self.tail = 0

    def lines(self, path: Path) -> Iterator[tuple[int, bytes]]:
        """The file's lines that are not of the kind (number, text with its newline), the
        kind's counted in ``pending`` as they pass; a file whose last line has no newline
        (a killed writer's) is not read this way. A block is searched in place: where it holds
        only lines of the kind (a health check's million pairs), they are counted, not walked."""
        number, carry, start, at_block = 0, b"", b"\n" + self.prefix, 0
        try:
            with path.open("rb") as f:
                while block := f.read(self.BLOCK):
                    self._began()
                    base, at_block = at_block, at_block + len(block)  # the block's offset
                    head = block.find(b"\n") + 1  # the line that began in the block before
                    if not head:
                        carry += block
                        continue
                    line, end = carry + block[:head], block.rfind(b"\n") + 1
                    carry, number, began = block[end:], number + 1, base - len(carry)
                    if line.startswith(self.prefix):
                        self.pending += 1
                    else:  # the kind's lines so far were counted before it: _began above
                        self._note(number, began)
                        yield number, line
                    # the block's other lines: each begins after a newline in [head - 1, end - 1)
                    lines = block.count(b"\n", head - 1, end - 1)
                    if lines == block.count(start, head - 1, end):
                        self.pending, number = self.pending + lines, number + lines
                        continue
                    at = head - 1
                    for found in self._other.finditer(block, at, end - 1):
                        self.pending += block.count(start, at, found.start() + 1)
                        number += block.count(b"\n", at, found.start() + 1)
                        at = found.end()
                        self._began()
                        self._note(number, base + found.start() + 1)
                        yield number, found.group()[1:] + b"\n"
                    self.pending += block.count(start, at, end)
                    number += block.count(b"\n", at, end - 1)
                if carry:
                    raise _NotColumnar  # a last line without its newline
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from None
        self._began()
        self.tail = self.pending
        self.close_run()

    def _note(self, number: int, offset: int) -> None:
        """Note where an other line is (none are past NOTED: the file's next read reads it)."""
        if self.others is not None and len(self.others) < self.NOTED:
            self.others.append((number, offset, self.pending))
        else:
            self.others = None

    def _began(self) -> None:
        if self.pending and self.begin is not None:
            begin, self.begin = self.begin, None
            begin()

    def close_run(self) -> None:
        """Give the lines of the kind passed so far to the run they follow."""
        if self.pending:
            if not self.runs or self.version != SCHEMA:
                raise _NotColumnar  # before any run, or in a run of an older schema
            self.runs[-1][self.kind] = self.runs[-1].get(self.kind, 0) + self.pending
            self.pending = 0


class _Noted(_Tally):
    """The file's other lines read where a read that kept its columns noted them
    (column_cache.Kept.others), the kind's lines counted as that read counted them: the
    file's millions of lines of the kind are not passed over again. The file opened must be the
    one the kept columns are of (a file replaced since is read again, the Python way)."""

    def __init__(self, kept: column_cache.Kept) -> None:
        super().__init__()
        assert kept.others is not None
        self.kept, self.noted = kept, kept.others

    def lines(self, path: Path) -> Iterator[tuple[int, bytes]]:
        from fabbench.results import column_cache

        try:
            with path.open("rb") as f:
                if not column_cache.same(os.fstat(f.fileno()), self.kept):
                    raise _NotColumnar
                for number, offset, counted in self.noted:
                    f.seek(offset)
                    self.pending += counted
                    yield number, f.readline()
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from None
        self.pending += self.kept.tail
        self.close_run()


def _raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        with path.open("rb") as f:
            yield from enumerate(f, 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def _columnar(path: Path) -> ResultsFile | None:
    """The file read with its columnar kinds as columns; None where it must be read the Python
    way (see _NotColumnar, and a file DuckDB cannot read: the Python way says why)."""
    from fabbench.results import column_cache, columns

    tally, warnings = _Tally(), list[str]()
    loading: dict[str, columns.Loading] = {}
    # the file's kept columns, looked for before its read (DuckDB starts only where there are
    # some), and their table where they are this file's, unchanged
    kept = {tally.kind: column_cache.kept(path, tally.kind, SCHEMA)}
    ready: dict[str, columns.Table] = {}
    found = kept[tally.kind].table()
    if found is not None:
        ready[tally.kind] = found
        if kept[tally.kind].others is not None:  # the other lines' places noted: no pass
            tally = _Noted(kept[tally.kind])

    def begin() -> None:  # else DuckDB reads the kind's lines while this thread reads the others
        if tally.kind not in ready:
            loading[tally.kind] = columns.Loading(path, tally.kind, SCHEMA)

    tally.begin = begin
    try:
        with collector_paused():
            records = list(_records(path, warnings, tally))
        if not records:
            raise UsageError(f"{path}: no results records (empty file)")
    except BaseException as exc:
        for load in loading.values():
            load.cancel()
        for made_table in ready.values():
            made_table.drop()
        if isinstance(exc, _NotColumnar):
            return None
        raise
    kinds = {k for run in tally.runs for k in run}
    runs = [r for r in records if isinstance(r, Run)]
    if not kinds:
        return ResultsFile(path, records, warnings, columns=[{} for _ in runs])
    tables: dict[str, columns.Table] = {}
    try:
        for kind in sorted(kinds):
            tables[kind] = table = ready[kind] if kind in ready else loading[kind].result()
            _first_refused(path, table)
            counted = [(r.run_id, n[kind]) for r, n in zip(runs, tally.runs, strict=True)
                       if n.get(kind)]
            if len({r for r, _ in counted}) != len(counted) or table.counts() != dict(counted):
                raise _NotColumnar  # a record under another run's id: read by position
    except (_NotColumnar, *columns.duckdb_input_errors()):  # type: ignore[misc]
        for t in tables.values():
            t.drop()
        return None
    warnings += [k.warning for k in kept.values() if k.warning is not None]
    for kind, table in tables.items():  # a large file's columns, every line passed: kept
        # (kept again where an older fabbench kept them without the other lines' places)
        if kind not in ready and not table.text_flagged and not table.flagged(1) \
                and sum(n.get(kind, 0) for n in tally.runs) >= column_cache.MIN_ROWS \
                or kind in ready and kept[kind].others is None and tally.others is not None:
            warning = kept[kind].keep(table, tally.others, tally.tail)
            if warning is not None:
                warnings.append(warning)
    made = ResultsFile(path, records, warnings)
    for index, (run, kinds_of) in enumerate(zip(runs, tally.runs, strict=True)):
        made.columns.append({
            kind: columns.ColumnRecords(tables[kind], run.run_id, n,
                                        functools.partial(_run_records, path, index, kind))
            for kind, n in kinds_of.items()})
    return made


def _first_refused(path: Path, table: Table) -> None:
    """The message of the first line of the table's kind that its checks flagged and that the
    schema refuses (a check may flag a line the schema accepts: that one is read on)."""
    from fabbench.results import columns

    flagged = table.flagged()
    if not flagged and not table.text_flagged:
        return
    if len(flagged) == 1000:  # more flagged than listed: the Python way decides
        raise _NotColumnar
    wanted, seen = set(flagged), -1
    prefix = columns.COLUMNAR[table.kind].prefix
    for number, raw in _raw_lines(path):
        if raw.startswith(prefix):
            seen += 1
            if seen in wanted or (table.text_flagged and table.suspect(raw)):
                record, finite = _parse(path, number, raw.decode(errors="replace"), raw)
                _checked(path, number, record, SCHEMA, finite)


@functools.lru_cache(maxsize=4)
def _plain(path: Path) -> ResultsFile:
    return read_results(path)


def _run_records(path: Path, index: int, kind: str) -> list[Record]:
    """The records of ``kind`` of the file's ``index``-th run, read the Python way."""
    out: list[Record] = []
    run = -1
    for record in _plain(path).records:
        if isinstance(record, Run):
            run += 1
        elif run == index and record.kind == kind:
            out.append(record)
    return out


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
