"""The records a run holds by the million (a 1,024-node health check's pairs: one per pair and
size), read as columns by an embedded engine, DuckDB, instead of one Python object each.

A workload registers its kind here (``columnar``) with the columns its analysis reads. The
loader (results.reader) then reads each line of that kind only as far as to count it for its
run; DuckDB reads the same lines in native code into a table of those columns, checking every
record against the kind's schema (``checks``, made from the schema: SQL on the typed values,
and one pattern on each line's text for what a typed read cannot see: a value of the wrong JSON
type, NaN and Infinity, a required field that may be null but is missing). A line a check flags
is checked again by the schema walk (results.records.problem), whose message, with the file and
line, is the one a user sees, as for every other record: the checks may flag more than the
schema refuses, never less. A run's records
of the kind are then a :class:`ColumnRecords`: a Sequence whose length is known, whose analysis
runs as SQL and numpy over the table (the workload's own module), and which makes Python records
of its lines only if something iterates it.

DuckDB's memory is bounded by FABBENCH_MEMORY_LIMIT (bytes, or a Kubernetes quantity: the chart
passes its container's limit), spilling to a temporary folder removed at exit; its threads are
the CPUs this process may run on."""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from fabbench.errors import RunError, UsageError

if TYPE_CHECKING:
    import duckdb

    from fabbench.results.records import Record

__all__ = ["COLUMNAR", "Column", "ColumnRecords", "Table", "checks", "columnar", "engine",
           "memory_limit"]

# the DuckDB types a column may be read as
TYPES = ("BIGINT", "DOUBLE", "VARCHAR", "BOOLEAN")


@dataclass(frozen=True)
class Column:
    """One column of a kind's table: a field of the record (``a.b``: field b of object a)."""

    path: str
    type: str  # one of TYPES

    @property
    def name(self) -> str:
        return self.path.replace(".", "_")


@dataclass(frozen=True)
class Columnar:
    """A kind read as columns: the columns its analysis reads, and the line prefix a writer's
    record of it starts with (the loader counts such a line without parsing it)."""

    kind: str
    columns: tuple[Column, ...]

    @property
    def prefix(self) -> bytes:
        return b'{"kind":' + json.dumps(self.kind).encode() + b","


COLUMNAR: dict[str, Columnar] = {}


def columnar(kind: str, columns: Sequence[Column]) -> None:
    """Read records of ``kind`` as columns (the workload's package calls this beside its
    record's registration). The kind's schema must be one ``checks`` can make SQL of."""
    for c in columns:
        if c.type not in TYPES:
            raise ValueError(f"column {c.path} of kind {kind!r}: type {c.type} is not one of "
                             f"{', '.join(TYPES)}")
    COLUMNAR[kind] = Columnar(kind, tuple(columns))


# -- the engine ------------------------------------------------------------------------------

_UNITS = {"": 1, "k": 1000, "K": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4,
          "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4}
_QUANTITY = re.compile(r"([0-9]+)(Ki|Mi|Gi|Ti|k|K|M|G|T)?")


def memory_limit(text: str | None = None) -> int | None:
    """FABBENCH_MEMORY_LIMIT in bytes (a byte count or a Kubernetes quantity such as 1536Mi);
    None when unset or 0 (no limit)."""
    text = os.environ.get("FABBENCH_MEMORY_LIMIT", "") if text is None else text
    if not text.strip():
        return None
    found = _QUANTITY.fullmatch(text.strip())
    if found is None:
        raise UsageError(f"FABBENCH_MEMORY_LIMIT={text!r} is not a memory size (bytes, or a "
                         "quantity such as 1536Mi or 2Gi)")
    value = int(found.group(1)) * _UNITS[found.group(2) or ""]
    return value or None


# the limit where FABBENCH_MEMORY_LIMIT sets none: what a results file of any size is read in
# (DuckDB spills its tables to disk beyond its share)
DEFAULT_LIMIT = 1 << 30
# DuckDB's share of the limit: the rest is this Python process's own (the records of the other
# kinds, the analysis' arrays, the output)
ENGINE_SHARE = 0.5


@functools.cache
def engine() -> duckdb.DuckDBPyConnection:
    """The process's one DuckDB connection (in memory), made the first time a file holds a
    columnar kind."""
    import duckdb

    limit = memory_limit() or DEFAULT_LIMIT
    # made by DuckDB only when it spills, removed at exit (and a dead process's, at start)
    top = Path(tempfile.gettempdir())
    for old in top.glob("fabbench-duckdb-*-*"):
        if not _alive(old.name.split("-")[2]):
            shutil.rmtree(old, ignore_errors=True)
    spill = top / f"fabbench-duckdb-{os.getpid()}-{os.urandom(4).hex()}"
    atexit.register(shutil.rmtree, spill, True)
    config: dict[str, Any] = {"threads": max(1, len(os.sched_getaffinity(0))),
                              "temp_directory": str(spill), "preserve_insertion_order": True,
                              # JSON is built in; nothing is fetched from the network
                              "autoinstall_known_extensions": False,
                              "autoload_known_extensions": False}
    config["memory_limit"] = f"{max(64 << 20, int(limit * ENGINE_SHARE)) >> 20}MB"
    con = duckdb.connect(":memory:", config=config)
    con.execute("SET enable_progress_bar = false")
    return con


def private() -> Path:
    """This process's own folder (DuckDB's spill folder, made here if it has not spilled yet):
    removed at exit, as it is."""
    row = engine().execute("SELECT current_setting('temp_directory')").fetchone()
    assert row is not None
    spill = Path(row[0])
    spill.mkdir(mode=0o700, exist_ok=True)
    return spill


def _alive(pid: str) -> bool:
    """Is process ``pid`` (a spill folder's owner) running?"""
    return pid.isdigit() and Path(f"/proc/{pid}").exists()


# -- the checks: a kind's schema as SQL ------------------------------------------------------
#
# Two kinds of check, on each line of the kind. Its text: a regular expression (RE2, one pass)
# finds a field whose value is of a JSON type its schema does not allow, from the characters
# after its key (a number's field followed by a quote, say: DuckDB's typed read would take
# "8" as 8), NaN and Infinity anywhere, and a required field that may be null but is missing.
# Its values, read typed (read_json): the bounds, the enums, the lengths, a required field
# missing or null, a number that is not finite.

# the keywords a check is made of; "additionalProperties" is a writer's rule (a reader ignores
# fields it does not know), and annotations say nothing of a value
_KNOWN = frozenset({"type", "enum", "const", "minimum", "maximum", "exclusiveMinimum",
                    "exclusiveMaximum", "minLength", "maxLength", "properties", "required",
                    "items", "additionalProperties", "description", "title", "$comment"})
# the first character of a JSON value of each type
_STARTS = {"string": '"', "integer": "-0-9", "number": "-0-9", "boolean": "tf", "null": "n",
           "object": "{", "array": "\\["}
_DUCK = {"string": "VARCHAR", "integer": "BIGINT", "number": "DOUBLE", "boolean": "BOOLEAN"}


def _sql(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    if not ref.startswith("#/$defs/") or len(schema) != 1:
        raise ValueError(f"a columnar kind's schema may use only plain '#/$defs/' references, "
                         f"not {schema}")
    return _resolve(root["$defs"][ref.removeprefix("#/$defs/")], root)


def _types(s: Mapping[str, Any]) -> set[str]:
    """The JSON types a schema allows (every type where it names none)."""
    if "type" in s:
        named = s["type"]
        return set(named if isinstance(named, list) else [named])
    if "const" in s or "enum" in s:
        values = [s["const"]] if "const" in s else s["enum"]
        return {"null" if v is None else "string" for v in values}
    return set(_STARTS)


class _Kind:
    """What checks() gathers while it walks a kind's schema."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.keys: dict[str, str] = {}  # key -> the characters its value may start with
        self.text: list[str] = []       # RE2 patterns of a line that may break the schema
        self.values: list[str] = []     # SQL true where a typed value may break it
        self.present: list[str] = []    # required keys that may be null (no typed check)

    def field(self, key: str, s: Mapping[str, Any], value: str, required: bool) -> str:
        """Walk one field (``value``: its typed SQL); the DuckDB type it is read as."""
        s = _resolve(s, self.root)
        unknown = set(s) - _KNOWN
        if unknown:
            raise ValueError(f"field {key} of a columnar kind uses {', '.join(sorted(unknown))}"
                             ", which results.columns does not make SQL of")
        types = _types(s)
        starts = "".join(dict.fromkeys(_STARTS[t] for t in sorted(types)))
        if self.keys.setdefault(key, starts) != starts:
            raise ValueError(f"key {key} holds values of two kinds in a columnar kind's schema")
        k = re.escape(json.dumps(key))
        self.text.append(f"{k}:[^{starts}]")
        if "null" in types and required:
            self.present.append(key)
        if "integer" in types and "number" not in types:
            self.text.append(f"{k}:-?[0-9]+[.eE]")  # 2.0 flagged: the walk accepts it
        if required and "null" not in types:
            self.values.append(f"{value} IS NULL")
        if "properties" in s:
            return self._object(key, s, value)
        if "items" in s:
            return self._array(key, s)
        scalar = types - {"null"}
        if len(scalar) != 1 or next(iter(scalar)) not in _DUCK:
            raise ValueError(f"field {key} of a columnar kind is not of one scalar type: {s}")
        (one,) = scalar
        checks = []
        if one == "number":
            checks.append(f"NOT isfinite({value})")
        if one in ("integer", "number"):
            checks += [f"{value} {op} {float(s[w])!r}" for w, op in (
                ("minimum", "<"), ("maximum", ">"), ("exclusiveMinimum", "<="),
                ("exclusiveMaximum", ">=")) if w in s]
        if "const" in s or "enum" in s:
            values = [s["const"]] if "const" in s else s["enum"]
            if any(v is not None and not isinstance(v, str) for v in values):
                raise ValueError(f"field {key} of a columnar kind: an enum of strings only")
            checks.append(f"{value} NOT IN ({', '.join(_sql(v) for v in values if v)})")
        if "minLength" in s:  # characters (grapheme clusters: never more than code points)
            checks.append(f"length({value}) < {int(s['minLength'])}")
        if "maxLength" in s:  # bytes: never fewer than code points
            checks.append(f"strlen({value}) > {int(s['maxLength'])}")
        self.values += [f"coalesce({c}, FALSE)" for c in checks]
        return _DUCK[one]

    def _object(self, key: str, s: Mapping[str, Any], value: str) -> str:
        if _types(s) != {"object"}:
            raise ValueError(f"field {key} of a columnar kind is an object or not: {s}")
        required = set(s.get("required", ()))
        if required - set(s.get("properties", {})) or "properties" not in s:
            raise ValueError(f"field {key} of a columnar kind: an object lists its fields")
        inner = [f"{_quoted(name)} "
                 + self.field(name, sub, f"{value}.{_quoted(name)}", name in required)
                 for name, sub in s.get("properties", {}).items()]
        return f"STRUCT({', '.join(inner)})"

    def _array(self, key: str, s: Mapping[str, Any]) -> str:
        """An array of numbers: read as JSON (no analysis reads it), its text checked."""
        items = _resolve(s["items"], self.root)
        types = _types(items)
        if not types <= {"integer", "number"} or set(items) - {"type", "description"} \
                or _types(s) - {"array", "null"}:
            raise ValueError(f"field {key} of a columnar kind: arrays of numbers only, not {s}")
        k = re.escape(json.dumps(key))
        chars = "-0-9.eE+," if "number" in types else "-0-9,"
        self.text.append(f"{k}:\\[[^\\]]*[^{chars}\\]]")  # an item that is no number
        if "number" in types:  # an exponent of 3 digits may overflow to Infinity
            self.text.append(f"{k}:\\[[^\\]]*[eE][-+]?[0-9]{{3}}")
        return "JSON"


@dataclass(frozen=True)
class Checks:
    """A kind's checks: the DuckDB type each field is read as, the pattern (RE2, and Python's
    re alike) of a line that may break the schema, the keys a line must hold, and the SQL true
    where a typed value may."""

    fields: dict[str, str]
    pattern: str
    present: tuple[str, ...]
    values: str


@functools.cache
def checks(kind: str, version: str) -> Checks:
    """The checks of ``kind``'s records in schema ``version`` (its $defs entry, or a workload
    package's own schema), and ``kind``/``run_id`` as every record has them."""
    from fabbench.results import records

    root = records._own_schema(kind) if kind in records.OWN_SCHEMAS else \
        records._schema(version)
    own = root["allOf"][0] if kind in records.OWN_SCHEMAS else root["$defs"][kind]
    own = _resolve(own, root)
    props = {**{k: v for k, v in own.get("properties", {}).items() if v},
             **root["properties"]}
    required = set(own.get("required", ())) | set(root.get("required", ()))
    walk = _Kind(root)
    fields = {name: walk.field(name, props.get(name, {}), _quoted(name), name in required)
              for name in dict.fromkeys([*root["properties"], *own.get("properties", {})])}
    # a line not in a writer's form (a space after a key or a comma) is checked the slow way;
    # and JSON that DuckDB's reader takes and Python's refuses: a trailing comma, and nan or
    # inf as a bare value (NaN and Infinity in any case)
    spaced = ['":\\s', '"\\s+:', ',\\s+"', "\\{\\s"]
    lenient = [",\\s*[}\\]]", "[\\[:,]\\s*-?(?i:nan|inf)"]
    return Checks(fields, "|".join([*walk.text, *spaced, *lenient, "NaN", "Infinity"]),
                  tuple(walk.present), " OR ".join(walk.values) or "FALSE")


# -- a file's table and its runs -------------------------------------------------------------

@dataclass
class Table:
    """The records of one columnar kind in one file, as a DuckDB table (or a view of the
    columns kept by an earlier read): one row per record in file order (``rowid``), with
    ``run_id``, the kind's columns and ``bad``."""

    path: Path
    kind: str
    name: str
    text_flagged: int = 0  # lines whose text the pattern flagged (Table.suspect finds them)
    view: bool = False  # a view of kept columns (results.column_cache), not a table

    def flagged(self, limit: int = 1000) -> list[int]:
        """The rows a check flagged, in file order (the first ``limit``)."""
        rows = engine().execute(f"SELECT rowid FROM {self.name} WHERE bad ORDER BY rowid "
                                f"LIMIT {int(limit)}").fetchall()
        return [int(r[0]) for r in rows]

    def suspect(self, line: bytes) -> bool:
        """Does the pattern (or a missing key) flag this line of the kind?"""
        check = self._checks
        return bool(check[0].search(line)) or not all(k in line for k in check[1])

    @functools.cached_property
    def _checks(self) -> tuple[re.Pattern[bytes], tuple[bytes, ...]]:
        from fabbench.results import SCHEMA

        check = checks(self.kind, SCHEMA)
        return (re.compile(check.pattern.encode()),
                tuple(json.dumps(k).encode() + b":" for k in check.present))

    def counts(self) -> dict[str, int]:
        """Rows per run id."""
        rows = engine().execute(f"SELECT run_id, count(*) FROM {self.name} GROUP BY run_id")
        return {str(r): int(n) for r, n in rows.fetchall()}

    def drop(self) -> None:
        engine().execute(f"DROP {'VIEW' if self.view else 'TABLE'} IF EXISTS {self.name}")


_TABLES = iter(range(1 << 62))
# the longest line DuckDB reads (a pairs line is about 1 KB; its buffers are a few of these)
LINE = 4 << 20


def table_name(kind: str) -> str:
    """A new table's name, for the kind's records of one file."""
    return f"fb_{kind}_{next(_TABLES)}"


def load(path: Path, kind: str, version: str) -> Table:
    """The kind's records of a file as a table (DuckDB reads every line, those of the kind
    typed), checked: see Table.flagged. A line DuckDB cannot read (not JSON, a value no cast
    makes of its type, longer than LINE) raises duckdb's InvalidInputException or
    ConversionException: the caller reads the file the Python way for its message. Any other
    DuckDB error (out of memory, say) is a RunError naming the file, with DuckDB's message."""
    spec, check = COLUMNAR[kind], checks(kind, version)
    name = table_name(kind)
    try:
        return _load(path, kind, spec, check, name)
    except duckdb_input_errors():
        raise
    except Exception as exc:
        import duckdb

        if isinstance(exc, duckdb.Error):
            raise RunError(f"{path}: DuckDB could not read it: {str(exc).splitlines()[0]} "
                           "(FABBENCH_MEMORY_LIMIT bounds its memory)") from None
        raise


class Loading:
    """load() run in a thread beside the caller's own pass over the file (DuckDB's work
    releases the GIL): ``result()`` is its table or raises its error; ``cancel()`` stops it and
    drops what it made. The engine and the kind's checks are made here, in the caller's thread:
    an error making them is the caller's."""

    def __init__(self, path: Path, kind: str, version: str) -> None:
        engine()
        checks(kind, version)
        self._got: list[Table | BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(path, kind, version),
                                        name="fabbench-load", daemon=True)
        self._thread.start()

    def _run(self, path: Path, kind: str, version: str) -> None:
        try:
            self._got.append(load(path, kind, version))
        except BaseException as exc:  # raised by result(), in the caller's thread
            self._got.append(exc)

    def result(self) -> Table:
        self._thread.join()
        (got,) = self._got
        if isinstance(got, BaseException):
            raise got
        return got

    def cancel(self) -> None:
        while self._thread.is_alive():
            engine().interrupt()  # again until it stops: the first may come before the read
            self._thread.join(0.05)
        if self._got and isinstance(self._got[0], Table):
            self._got[0].drop()


def duckdb_input_errors() -> tuple[type[Exception], ...]:
    """What DuckDB raises for a line it cannot read as the kind: the Python way says why."""
    import duckdb

    return (duckdb.InvalidInputException, duckdb.ConversionException)


def _load(path: Path, kind: str, spec: Columnar, check: Checks, name: str) -> Table:
    """The typed read into the table and the text check's count, two reads of the file that
    run at once (the typed read inserts in file order, which leaves cores idle)."""
    read = "{" + ", ".join(f"{_quoted(f)}: {_sql(t)}" for f, t in check.fields.items()
                           if t != "JSON") + "}"  # an array of numbers: its text is checked
    values = ", ".join(f"{_value(c)} AS {_quoted(c.name)}" for c in spec.columns)
    present = "".join(f" OR NOT contains(line, {_sql(json.dumps(k) + ':')})"
                      for k in check.present)
    con = engine()
    text = con.cursor()
    found: list[Any] = []

    def count() -> None:
        try:
            found.append(text.execute(
                f"SELECT count(*) FILTER (WHERE regexp_matches(line, {_sql(check.pattern)})"
                f"{present}) FROM read_csv(?, columns={{'line': 'VARCHAR'}}, delim=chr(31), "
                f"quote='', escape='', header=false, auto_detect=false, max_line_size={LINE}, "
                f"buffer_size={4 * LINE}) WHERE starts_with(line, "
                f"{_sql(spec.prefix.decode())})", [str(path)]).fetchone())
        except Exception as exc:  # raised below, in the caller's thread
            found.append(exc)

    worker = threading.Thread(target=count, name="fabbench-text-check")
    worker.start()
    try:
        con.execute(
            f"CREATE TEMP TABLE {name} AS SELECT run_id, {values}, ({check.values}) AS bad "
            f"FROM read_json(?, format='newline_delimited', columns={read}, "
            f"maximum_object_size={LINE}) WHERE kind = {_sql(kind)}", [str(path)])
    except BaseException:
        text.interrupt()
        raise
    finally:
        worker.join()
        text.close()
    (got,) = found
    if isinstance(got, Exception):
        con.execute(f"DROP TABLE IF EXISTS {name}")
        raise got
    return Table(path, kind, name, text_flagged=int(got[0]) if got else 0)


def _value(c: Column) -> str:
    return ".".join(_quoted(p) for p in c.path.split("."))


class ColumnRecords(Sequence["Record"]):
    """One run's records of a columnar kind: its rows of a file's table. ``len`` is known;
    iterating makes the Python records of the run's lines of that kind (slow: a workload's
    analysis reads the columns instead, through ``sql``)."""

    def __init__(self, table: Table, run_id: str, count: int,
                 lines: Callable[[], Iterable[Record]]):
        self.table = table
        self.run_id = run_id
        self._count = count
        self._lines = lines  # () -> the run's records of the kind, read the Python way
        self._made: list[Record] | None = None
        # what a workload's analysis made of the columns, kept for its next reader
        self.derived: dict[str, object] = {}

    def __len__(self) -> int:
        return self._count

    def _records(self) -> list[Record]:
        if self._made is None:
            self._made = list(self._lines())
        return self._made

    @overload
    def __getitem__(self, index: int) -> Record: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Record]: ...

    def __getitem__(self, index: int | slice) -> Record | Sequence[Record]:
        return self._records()[index]

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records())

    @property
    def rows(self) -> str:
        """The run's rows, as a SQL relation (``rowid`` as ``i``: file order)."""
        return f"(SELECT rowid AS i, * FROM {self.table.name} WHERE run_id = {_sql(self.run_id)})"

    def sql(self, query: str, params: Sequence[Any] = ()) -> duckdb.DuckDBPyConnection:
        """Run ``query`` with ``{rows}`` standing for the run's rows."""
        return engine().execute(query.replace("{rows}", self.rows), list(params))
