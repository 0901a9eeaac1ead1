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

Where: beside the file, ``.NAME.fabbench-columns.parquet`` (remove it at will); where the file's
folder is not writable, in $FABBENCH_CACHE/columns (named by the file's absolute path); with
neither, nowhere, and the read says so."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from fabbench.results import columns

__all__ = ["MIN_ROWS", "Kept", "kept", "where"]

MIN_ROWS = 100_000  # a smaller file is read in a second or less: nothing is kept
SUFFIX = ".fabbench-columns.parquet"
_SETTLED_NS = 1_000_000_000  # a file last changed this long before its read began is kept


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

    def table(self) -> columns.Table | None:
        """The kept table, where it is this file's as it is now; else None."""
        if self.at is None or not self.at.is_file():
            return None
        con = columns.engine()
        try:
            found = con.execute("SELECT value FROM parquet_kv_metadata(?) WHERE key = "
                                "'fabbench'", [str(self.at)]).fetchone()
            if found is None or found[0].decode() != _key(self.stat, self.kind, self.version):
                return None
            name = columns.table_name(self.kind)
            con.execute(f"CREATE TEMP TABLE {name} AS SELECT * FROM read_parquet(?)",
                        [str(self.at)])
        except Exception as exc:
            import duckdb

            if not isinstance(exc, duckdb.Error):
                raise
            self.warning = (f"{self.path}: its kept columns {self.at} could not be read "
                            f"({str(exc).splitlines()[0]}); the file is read again")
            return None
        return columns.Table(self.path, self.kind, name)

    def keep(self, table: columns.Table) -> str | None:
        """Keep the table of a read whose every line passed the checks; a warning where it
        is not kept (no place for it, or the place refused it)."""
        if self.began_ns - self.stat.st_ctime_ns < _SETTLED_NS \
                or _file(os.stat(self.path)) != _file(self.stat):
            return None  # changed while (or just before) it was read: its next read reads it
        if self.at is None:
            return (f"{self.path}: its checked columns are not kept for the next read (its "
                    "folder is not writable and FABBENCH_CACHE is not set)")
        part = self.at.with_name(f"{self.at.name}.{os.getpid()}")
        key = columns._sql(_key(self.stat, self.kind, self.version))
        try:
            self.at.parent.mkdir(parents=True, exist_ok=True)
            columns.engine().execute(
                f"COPY (SELECT * FROM {table.name} ORDER BY rowid) TO {columns._sql(str(part))} "
                f"(FORMAT parquet, KV_METADATA {{fabbench: {key}}})")
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


def kept(path: Path, kind: str, version: str) -> Kept:
    """The kept columns of ``path`` (what its read looks for and writes)."""
    return Kept(path, kind, version, where(path), os.stat(path), time.time_ns())
