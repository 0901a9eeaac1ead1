"""A large file's checked columns kept for its next read (report, then floors verify, then
floors baseline of one health check read the same million pairs records three times): a Parquet
file of the table results.columns made, which the next read scans instead of reading and
checking the file again.

It is kept only for a file of at least MIN_ROWS records of the kind whose every line passed the
checks, and served only for the same file unchanged: its key is the file's device, inode, size,
modification time and status-change time (ctime, which every write and every change of the
modification time sets, and no user can set back), with the kind's schema version and checks,
recorded in the Parquet file and compared before it is read. A file changed within a second
before its read began is not kept (two writes in one tick of the clock that stamps it leave the
same times).

Kept columns are read unchecked: only a kept file owned by the reading user or by the results
file's owner, and writable by no one else, is read (another user able to write the folder could
plant one); any other is said not to be, and the file is read again.

A read of the kept columns reads nothing else of the file but its few other lines (a run's
record, its summary), whose places the read that kept them noted beside them; it reads a copy
of them made for this process (another read may replace them while this one works).

FABBENCH_KEEP_COLUMNS=0 turns it off: nothing is kept or read (reads that must write nothing).

Where: beside the file, ``.NAME.fabbench-columns.parquet`` (remove it at will); where the file's
folder is not writable, in $FABBENCH_CACHE/columns (named by the file's absolute path); with
neither, nowhere, and the read says so."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from fabbench.errors import UsageError
from fabbench.results import columns

__all__ = ["MIN_ROWS", "Kept", "enabled", "kept", "same", "where"]

MIN_ROWS = 100_000  # a smaller file is read in a second or less: nothing is kept
SUFFIX = ".fabbench-columns.parquet"
_SETTLED_NS = 1_000_000_000  # a file last changed this long before its read began is kept


def enabled() -> bool:
    """FABBENCH_KEEP_COLUMNS: 1 (the default) keeps a large file's checked columns and reads
    them; 0, for a site whose reads must write nothing, neither."""
    text = os.environ.get("FABBENCH_KEEP_COLUMNS", "1").strip()
    if text not in ("0", "1"):
        raise UsageError(f"FABBENCH_KEEP_COLUMNS={text!r} is neither 1 (keep a large results "
                         "file's checked columns for its next read) nor 0 (never)")
    return text == "1"


def where(path: Path) -> Path | None:
    """Where the columns of ``path`` are kept: beside it, or under $FABBENCH_CACHE, or None."""
    if os.access(path.parent, os.W_OK):
        return path.parent / f".{path.name}{SUFFIX}"
    top = os.environ.get("FABBENCH_CACHE")
    if not top:
        return None
    name = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32]
    return Path(top) / "columns" / f"{name}{SUFFIX}"


def _file(stat: os.stat_result) -> tuple[int, ...]:
    """What says a file is the same file, unchanged (its access time does not)."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _key(stat: os.stat_result, kind: str, version: str) -> str:
    check = columns.checks(kind, version)
    return json.dumps({"file": _file(stat),
                       "kind": kind, "version": version,
                       "columns": [[c.path, c.type] for c in columns.COLUMNAR[kind].columns],
                       "checks": [check.pattern, check.values, list(check.present)]})


@dataclass
class Kept:
    """The kept columns of one file and kind: ``table()`` reads them where they are this file's,
    ``keep(table)`` writes them after a read of the file."""

    path: Path
    kind: str
    version: str
    at: Path | None
    stat: os.stat_result  # the file's, when its read began
    began_ns: int
    warning: str | None = None  # why kept columns found were not read
    # the file's other lines that the read keeping the columns noted (reader._Tally.others),
    # and the kind's lines after the last; None where it noted none
    others: list[tuple[int, int, int]] | None = None
    tail: int = 0

    @property
    def file(self) -> tuple[int, ...]:
        return _file(self.stat)

    def table(self) -> columns.Table | None:
        """The kept table (a view of this process's copy of it), where it is this file's as it
        is now and trusted (``distrusted``), with ``others`` and ``tail`` where they were noted;
        else None."""
        if self.at is None or not self.at.is_file():
            return None
        self.warning = self.distrusted()
        if self.warning is not None:
            return None
        con = columns.engine()
        name = columns.table_name(self.kind)
        try:
            copy = columns.private() / f"{name}.parquet"
            shutil.copyfile(self.at, copy)
            found = dict(con.execute("SELECT decode(key), decode(value) FROM "
                                     "parquet_kv_metadata(?)", [str(copy)]).fetchall())
            if found.get("fabbench") != _key(self.stat, self.kind, self.version):
                copy.unlink()
                return None
            con.execute(f"CREATE TEMP VIEW {name} AS SELECT file_row_number AS rowid, * "
                        f"EXCLUDE (file_row_number) FROM read_parquet({columns._sql(str(copy))}, "
                        "file_row_number = true)")
        except Exception as exc:
            import duckdb

            if not isinstance(exc, OSError | duckdb.Error):
                raise
            self.warning = (f"{self.path}: its kept columns {self.at} could not be read "
                            f"({str(exc).splitlines()[0]}); the file is read again")
            return None
        if "fabbench_lines" in found:
            noted = json.loads(found["fabbench_lines"])
            self.others, self.tail = [tuple(n) for n in noted["others"]], noted["tail"]
        return columns.Table(self.path, self.kind, name, view=True)

    def distrusted(self) -> str | None:
        """Why the kept file is not read, where it is not trusted: kept columns are read
        unchecked, so only a file owned by this user or by the results file's owner, and
        writable by no one else, is (another user able to write the folder could plant one)."""
        assert self.at is not None
        found = os.stat(self.at)
        if found.st_uid not in (os.getuid(), self.stat.st_uid):
            why = f"owned by uid {found.st_uid}, neither you nor the owner of the file"
        elif found.st_mode & 0o022:
            why = "writable by others"
        else:
            return None
        return (f"{self.path}: its kept columns {self.at} are not read ({why}); the file is "
                "read again")

    def keep(self, table: columns.Table, others: list[tuple[int, int, int]] | None = None,
             tail: int = 0) -> str | None:
        """Keep the table of a read whose every line passed the checks, with the places of
        the file's other lines where they were noted (``others``, ``tail``: Kept's); a warning
        where it is not kept (no place for it, or the place refused it)."""
        if self.began_ns - self.stat.st_ctime_ns < _SETTLED_NS \
                or _file(os.stat(self.path)) != _file(self.stat):
            return None  # changed while (or just before) it was read: its next read reads it
        if not enabled():
            return None
        if self.at is None:
            return (f"{self.path}: its checked columns are not kept for the next read (its "
                    "folder is not writable and FABBENCH_CACHE is not set)")
        part = self.at.with_name(f"{self.at.name}.{os.getpid()}")
        key = columns._sql(_key(self.stat, self.kind, self.version))
        noted = "" if others is None else \
            f", fabbench_lines: {columns._sql(json.dumps({'others': others, 'tail': tail}))}"
        try:
            self.at.parent.mkdir(parents=True, exist_ok=True)
            # in file order without a sort: the engine preserves the order rows were inserted
            # in (a table's rowid, a view's file order) where a query does not set one
            columns.engine().execute(
                f"COPY (SELECT *{' EXCLUDE (rowid)' if table.view else ''} FROM {table.name}) "
                f"TO {columns._sql(str(part))} "
                f"(FORMAT parquet, KV_METADATA {{fabbench: {key}{noted}}})")
            part.chmod(0o644)  # writable by its owner alone: see distrusted()
            os.replace(part, self.at)
        except Exception as exc:
            import duckdb

            if not isinstance(exc, OSError | duckdb.Error):
                raise
            return (f"{self.path}: its checked columns could not be kept in {self.at} "
                    f"({str(exc).splitlines()[0]}); the next read reads the file again")
        finally:
            part.unlink(missing_ok=True)
        return None


def same(stat: os.stat_result, kept: Kept) -> bool:
    """Is the file of ``stat`` the one (unchanged) whose kept columns ``kept`` read?"""
    return _file(stat) == kept.file


def kept(path: Path, kind: str, version: str) -> Kept:
    """The kept columns of ``path`` (what its read looks for and writes)."""
    return Kept(path, kind, version, where(path) if enabled() else None, os.stat(path),
                time.time_ns())
