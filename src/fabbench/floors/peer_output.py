"""Peer tools' output read as points: nccl-tests (the table it prints, and its ``-J`` JSON since
2.17.3) and the OSU micro-benchmarks (the collectives; osu_bw, osu_bibw, osu_latency as the
``pairs`` workload's ``sendrecv``). The format is told from the content, never the file's name;
one file may hold several runs of either tool (a job's log), and every line read is one the
tool's source prints (tests/fixtures/foreign/README.md names each). Units: time µs (nccl-tests'
out-of-place mean over ranks; OSU's Avg Latency; osu_latency one way), bandwidth GB/s = 1e9
bytes/s (OSU's MB/s converted; osu_bibw counts both directions). Neither tool claims a transport
(``transport`` None). What does not parse is a UsageError naming the file, the line and what
was expected."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from fabbench.errors import UsageError
from fabbench.floors.points import Point
from fabbench.workloads.collectives.workload import CollectivesWorkload

T = TypeVar("T")

EXPECTED = ("fabbench's JSON Lines, nccl-tests' output (what it prints, or its -J JSON file) "
            "or the OSU micro-benchmarks' output")

# nccl-tests' type names (src/common.cu test_typenames; "char" and "int" before NCCL 2) as
# fabbench names them
NCCL_DTYPES = {"int8": "int8", "uint8": "uint8", "int32": "int32", "uint32": "uint32",
               "int64": "int64", "uint64": "uint64", "half": "float16", "float": "float32",
               "double": "float64", "bfloat16": "bfloat16", "f8e4m3": "float8_e4m3",
               "f8e5m2": "float8_e5m2", "char": "int8", "int": "int32"}
# nccl-tests' tests (the binary is <test>_perf) -> fabbench's operation
NCCL_TESTS = {"all_reduce": "allreduce", "all_gather": "allgather",
              "reduce_scatter": "reduce_scatter", "broadcast": "broadcast", "reduce": "reduce",
              "alltoall": "alltoall", "sendrecv": "sendrecv"}
# what a file's name may call a test, for versions that print no test name (unsupported ones
# included, so that "alltoallv" is not read as "alltoall")
_NAMED = {**{t.replace("_", ""): t for t in NCCL_TESTS},
          **{t: t for t in ("alltoallv", "gather", "scatter", "hypercube")}}

# MPI_Type_get_name's names of the datatypes OSU times (MPI_CHAR, the default: one byte)
MPI_DTYPES = {"MPI_CHAR": "int8", "MPI_SIGNED_CHAR": "int8", "MPI_UNSIGNED_CHAR": "uint8",
              "MPI_BYTE": "uint8", "MPI_INT": "int32", "MPI_FLOAT": "float32",
              "MPI_DOUBLE": "float64"}


@dataclass(frozen=True)
class OsuTest:
    binary: str
    workload: str  # collectives or pairs
    op: str
    metric: str    # time (µs) or bw (GB/s, from MB/s)
    how: str       # what its figure is


_COLL = "the mean over ranks of each rank's mean time"
_SWEEP = CollectivesWorkload.name  # the workload whose figures OSU's collective tests are
# OSU's titles, "# OSU MPI%s <name> v<version>" (%s: "-CUDA", "-ROCM", ... or ""), by <name>
OSU_TESTS = {
    "Allreduce Latency Test": OsuTest("osu_allreduce", _SWEEP, "allreduce", "time", _COLL),
    "Allgather Latency Test": OsuTest("osu_allgather", _SWEEP, "allgather", "time", _COLL),
    "Broadcast Latency Test": OsuTest("osu_bcast", _SWEEP, "broadcast", "time", _COLL),
    "Reduce_scatter Latency Test": OsuTest("osu_reduce_scatter", _SWEEP,
                                           "reduce_scatter", "time", _COLL),
    "All-to-All Personalized Exchange Latency Test": OsuTest(
        "osu_alltoall", _SWEEP, "alltoall", "time", _COLL),
    "Reduce Latency Test": OsuTest("osu_reduce", _SWEEP, "reduce", "time", _COLL),
    "Bandwidth Test": OsuTest("osu_bw", "pairs", "sendrecv", "bw",
                              "one direction, a window of messages in flight"),
    "Bi-Directional Bandwidth Test": OsuTest("osu_bibw", "pairs", "sendrecv", "bw",
                                             "both directions together"),
    "Latency Test": OsuTest("osu_latency", "pairs", "sendrecv", "time",
                            "one way: half the round trip"),
}

# nccl-tests' lines (src/util.cu in 2.19.6; src/common.cu before 2.17.3)
_VERSION = re.compile(r"# nccl-tests version (\S+) ")
_STARTING = re.compile(r"# Collective test starting: (\S+)")
_NTHREAD = re.compile(r"# nThread \d+ nGpus \d+ .* iters: (\d+) agg iters: \d+ "
                      r"validation: (\d+)")
_RANK = re.compile(r"#\s+Rank\s+\d+\s+Group\s+(\d+)\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+")
_COLUMNS = re.compile(r"#\s+size\s+count\s+type\s+redop\s+root\s")
_FOOTER = re.compile(r"# Out of bounds values\s*:")
# NCCL's own log lines, which NCCL_DEBUG writes to stdout between the rows (src/debug.cc:
# "%s:%d:%d " host:pid:tid, then "[%d] NCCL INFO ...", "[%d] file:line NCCL WARN ...")
_NCCL_LOG = re.compile(r"(^|\s)[^\s:]+:\d+:\d+ .*\bNCCL (INFO|WARN|TRACE|CALL)\b|^NCCL version ")
_BASE = ["size", "count", "type", "redop", "root"]
_ITER = ["i_min", "i_max", "i_p99", "i_cv%"]

# OSU's lines (c/util/osu_util.c print_header, osu_util_mpi.c print_preamble/print_only_header)
_OSU_TITLE = re.compile(r"# OSU (\S+) (.+?)(?: v(\S+))?\s*$")
_DATATYPE = re.compile(r"# Datatype: (\S+?)\.?\s*$")


def read_foreign(path: Path) -> list[Point]:
    """The points of one nccl-tests or OSU output file (format told from its content)."""
    path = Path(path)
    try:
        text = path.read_bytes().decode(errors="replace")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    if not text.strip():
        raise UsageError(f"{path}:1: empty file; expected {EXPECTED}")
    if text.lstrip().startswith("{"):
        return _nccl_json(path, text)
    return _Reader(path).read(text.split("\n"))


class _Reader:
    """One walk over a text file's lines: each tool's run starts at its first line of its
    own (nccl-tests' header, OSU's title) and ends where the next run starts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.points: list[Point] = []
        self.run: _NcclRun | _OsuRun | None = None

    def read(self, lines: list[str]) -> list[Point]:
        for number, line in enumerate(lines, 1):
            line = line.rstrip()
            title = _OSU_TITLE.match(line)
            if title:
                self._close()
                self.run = _OsuRun.begin(self.path, number, title)
            elif _starts_nccl(line) and not (isinstance(self.run, _NcclRun) and
                                              self.run.continues(line)):
                self._close()
                self.run = _NcclRun(self.path, number)
                self.run.feed(number, line, self.points)
            elif self.run is not None:
                self.run.feed(number, line, self.points)
        self._close()
        if not self.points:
            raise UsageError(f"{self.path}:1: not a results file fabbench reads; "
                             f"expected {EXPECTED}")
        return self.points

    def _close(self) -> None:
        if self.run is not None:
            self.run.close()
        self.run = None


def _starts_nccl(line: str) -> bool:
    return bool(_VERSION.match(line) or _STARTING.match(line) or _NTHREAD.match(line)
                or _COLUMNS.match(line))


def _bad(path: Path, number: int, what: str) -> UsageError:
    return UsageError(f"{path}:{number}: {what}")


def _fields(n: int) -> str:
    return f"{n} field" + ("" if n == 1 else "s")


def _number(path: Path, number: int, token: str, column: str, expected: str) -> float:
    return _parsed(float, "a number", path, number, token, column, expected)


def _integer(path: Path, number: int, token: str, column: str, expected: str) -> int:
    return _parsed(int, "a whole number", path, number, token, column, expected)


def _parsed(kind: Callable[[str], T], what: str, path: Path, number: int, token: str,
            column: str, expected: str) -> T:
    try:
        return kind(token)
    except ValueError:
        raise _bad(path, number, f"{token[:40]!r} in column {column} is not {what}; "
                                 f"expected {expected}") from None


def _metrics(figures: dict[str, float], notes: list[str]) -> dict[str, float]:
    """The finite figures; a NaN or infinite one is left out, and said so."""
    out = {}
    for name, value in figures.items():
        if math.isfinite(value):
            out[name] = value
        else:
            notes.append(f"{name} {value} left out")
    return out


# --- nccl-tests' table ------------------------------------------------------------------------

@dataclass
class _NcclRun:
    path: Path
    start: int                       # the line its header starts at
    version: str | None = None
    program: str | None = None
    program_at: int = 0              # the line that names it
    iters: int | None = None
    ranks: list[tuple[str, str]] = field(default_factory=list)  # (group, host) per rank line
    columns: list[str] | None = None
    header: int = 0                  # the line of the column names
    rows: int = 0
    done: bool = False               # past the footer
    _op: tuple[str, str, str] | None = None  # (operation, test, how it was told)

    def continues(self, line: str) -> bool:
        """Is this header line still this run's (not a new run's first)?"""
        if self.columns is not None:
            return False
        if _VERSION.match(line):
            return self.version is None and self.program is None and self.iters is None
        if _STARTING.match(line):
            return self.program is None and self.iters is None
        if _NTHREAD.match(line):
            return self.iters is None
        return True  # the column names

    def feed(self, number: int, line: str, points: list[Point]) -> None:
        if self.done or not line.strip() or _NCCL_LOG.search(line):
            return
        if self.columns is None:
            self._header(number, line)
        elif line.startswith("#"):
            self.done = bool(_FOOTER.match(line))
        else:
            points.append(self._row(number, line))
            self.rows += 1

    def _header(self, number: int, line: str) -> None:
        if m := _VERSION.match(line):
            self.version = m.group(1)
        elif m := _STARTING.match(line):
            self.program, self.program_at = m.group(1), number
        elif m := _NTHREAD.match(line):
            self.iters = int(m.group(1))
        elif m := _RANK.match(line):
            self.ranks.append((m.group(1), m.group(2)))
        elif _COLUMNS.match(line):
            columns = line[1:].split()
            time = columns[5] if len(columns) > 5 else "time"
            body = [time, "algbw", "busbw", "#wrong"]
            known = [_BASE + body + body, _BASE + body + _ITER + body + _ITER]
            if columns not in known + [k + ["timestamp"] for k in known]:
                raise _bad(self.path, number, "not the column names of nccl-tests' table; "
                           f"expected '# {' '.join(known[0])}' (and, with -I 1, "
                           f"{' '.join(_ITER)} after each #wrong; with -S 1, timestamp)")
            self.columns, self.header = columns, number
        # other header lines ("# Using devices", "# Blocking Enabled", ...) say nothing read here

    def _row(self, number: int, line: str) -> Point:
        assert self.columns is not None
        names = self.columns
        want = len(names) + (1 if names[-1] == "timestamp" else 0)  # its value is "date time"
        expected = f"{want} fields under the column names of line {self.header}"
        tokens = line.split()
        if len(tokens) != want:
            raise _bad(self.path, number, f"a row of nccl-tests' table with "
                                          f"{_fields(len(tokens))}; expected {expected} "
                                          f"({' '.join(names)})")

        def num(i: int) -> float:
            return _number(self.path, number, tokens[i], names[i], expected)

        size = _integer(self.path, number, tokens[0], "size", expected)
        _integer(self.path, number, tokens[1], "count", expected)
        root = _integer(self.path, number, tokens[4], "root", expected)
        in_place = 13 if "i_min" in names else 9
        wrong = [tokens[i] if tokens[i] == "N/A" else f"{num(i):g}" for i in (8, in_place + 3)]
        dtype, redop = tokens[2], tokens[3]
        op, program, told = self._operation()
        notes = [f"nccl-tests{' ' + self.version if self.version else ''} "
                 f"{program}: out-of-place time, algbw, busbw"
                 + (" (time: CPU time, -C 1)" if names[5] == "cputime" else ""),
                 f"in-place {tokens[in_place]} µs, busbw {tokens[in_place + 2]} GB/s"]
        if self.iters:
            notes.append(f"{self.iters} iterations")
        notes.append("#wrong N/A (data not checked)" if wrong[0] == "N/A" else
                     f"#wrong {wrong[0]}")
        if wrong[1] not in ("N/A", "0"):
            notes.append(f"in-place #wrong {wrong[1]}")
        if redop not in ("sum", "none"):
            notes.append(f"redop {redop}")
        if root >= 0:
            notes.append(f"root {root}")
        if told:
            notes.append(told)
        ranks, nodes, split = _world(self.ranks)
        if split:
            notes.append(split)
        metrics = _metrics({"time": num(5), "algbw": num(6), "busbw": num(7)}, notes)
        return Point(source="nccl-tests", file=str(self.path),
                     run=f"{self.path.name}:{self.start} {program}",
                     workload=CollectivesWorkload.name, op=op, bytes=size,
                     dtype=NCCL_DTYPES.get(dtype, dtype), primitive="nccl", ranks=ranks,
                     nodes=nodes, metrics=metrics, evidence="; ".join(notes))

    def _operation(self) -> tuple[str, str, str]:
        if self._op is None:
            self._op = _nccl_operation(self.path, self.program_at or self.start, self.program)
        return self._op

    def close(self) -> None:
        if self.columns is None:
            raise _bad(self.path, self.start, "nccl-tests' header without its table; expected "
                       "'#  size  count  type  redop  root  time ...' and rows after it")
        if self.rows == 0:
            raise _bad(self.path, self.header, "nccl-tests' table without rows; expected a row "
                       "per size after these column names (did the run die?)")


def _nccl_operation(path: Path, number: int, program: str | None) -> tuple[str, str, str]:
    """(fabbench's operation, the test's binary, "" or how it was told) from the test's name,
    else the file's."""
    supported = ", ".join(f"{t}_perf" for t in NCCL_TESTS)
    if program is not None:
        m = re.match(r"([a-z0-9_]+?)_perf", program)
        if not m or m.group(1) not in NCCL_TESTS:
            raise _bad(path, number, f"nccl-tests' {program} is not a test fabbench reads; "
                       f"expected one of {supported}")
        return NCCL_TESTS[m.group(1)], program, ""
    name = re.sub(r"[-_]", "", path.name.lower())
    found = {t for t in _NAMED if t in name}
    found = {t for t in found if not any(t != o and t in o for o in found)}
    if len(found) == 1 and _NAMED[(t := found.pop())] in NCCL_TESTS:
        return (NCCL_TESTS[_NAMED[t]], f"{_NAMED[t]}_perf",
                "the test told by the file's name (this version prints none)")
    raise _bad(path, number, "this nccl-tests output does not name its test (versions before "
               "2.17.4 print no '# Collective test starting:'); expected the file's name to "
               f"name it, e.g. all_reduce_perf.txt (tests read: {supported})")


def _world(ranks: list[tuple[str, str]]) -> tuple[int | None, int | None, str]:
    """(ranks of one communicator, distinct hosts, a note when NCCL_TESTS_SPLIT made groups)
    from the rank lines (group, host); None where the output has none."""
    if not ranks:
        return None, None, ""
    groups = Counter(group for group, _ in ranks)
    nodes = len({host for _, host in ranks})
    note = f"{len(groups)} groups (NCCL_TESTS_SPLIT): ranks of one group" \
        if len(groups) > 1 else ""
    return max(groups.values()), nodes, note


# --- nccl-tests' JSON file --------------------------------------------------------------------

def _nccl_json(path: Path, text: str) -> list[Point]:
    shape = ("expected nccl-tests' -J output (2.17.3 and later): an object with 'args', "
             "'config' and a 'results' list")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _bad(path, exc.lineno, f"not valid JSON ({exc.msg}, column {exc.colno}); "
                   f"{shape}, whole (a killed run leaves it cut short)") from None
    args = doc.get("args") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict) or \
            not isinstance(doc.get("results"), list) or not isinstance(args, list) or \
            not args or not isinstance(args[0], str):
        raise _bad(path, 1, f"not nccl-tests' JSON output; {shape}")
    if not doc["results"]:
        raise _bad(path, 1, "nccl-tests' JSON output without results; expected an entry per "
                            "size in 'results' (did the run die?)")
    run = _JsonRun.of(path, doc, re.split(r"[/\\]", args[0])[-1])
    return [run.point(i, r) for i, r in enumerate(doc["results"])]


@dataclass(frozen=True)
class _JsonRun:
    path: Path
    program: str
    op: str
    label: str
    ranks: int | None
    nodes: int | None
    notes: tuple[str, ...]  # what every point's evidence says after its own figures

    @classmethod
    def of(cls, path: Path, doc: dict[str, Any], program: str) -> _JsonRun:
        op, _, _ = _nccl_operation(path, 1, program)
        config = doc["config"]
        nthreads, ngpus = config.get("nthreads"), config.get("ngpus")
        per_process = nthreads * ngpus if isinstance(nthreads, int) and \
            isinstance(ngpus, int) else 1
        devices = config.get("devices")
        # one entry per process: util.cu parses the first of each process's rank lines
        hosts = [(str(d.get("group")), str(d.get("hostname"))) for d in devices
                 if isinstance(d, dict)] if isinstance(devices, list) else []
        ranks, nodes, split = _world([h for h in hosts for _ in range(per_process)])
        iters = config.get("iterations")
        notes = (f"{iters} iterations" if isinstance(iters, int) else "", split)
        label = f"{path.name} {program}" + \
            (f" {doc['start_time']}" if isinstance(doc.get("start_time"), str) else "")
        version = f" (format {doc['version']})" if "version" in doc else ""
        return cls(path, program, op, label, ranks, nodes,
                   (f"nccl-tests JSON{version} {program}", *(n for n in notes if n)))

    def point(self, i: int, r: Any) -> Point:
        fields = ("expected size, count, type, redop, root and out_of_place {time (or "
                  "cpu_time), alg_bw, bus_bw, nwrong}")
        oop = r.get("out_of_place") if isinstance(r, dict) else None
        if not isinstance(oop, dict) or not isinstance(r.get("size"), int) or \
                isinstance(r.get("size"), bool) or not isinstance(r.get("type"), str):
            raise _bad(self.path, 1, f"results[{i}] is not a nccl-tests result; {fields}")
        time_key = "cpu_time" if "cpu_time" in oop else "time"
        figures = {}
        for name, key in (("time", time_key), ("algbw", "alg_bw"), ("busbw", "bus_bw")):
            value = math.nan if oop.get(key) == "nan" else oop.get(key)  # jsonDouble's NaN
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise _bad(self.path, 1, f"results[{i}].out_of_place.{key} is not a number; "
                                         f"{fields}")
            figures[name] = float(value)
        head, *rest = self.notes
        notes = [f"{head}: out-of-place {time_key}, alg_bw, bus_bw", *rest]
        wrong = oop.get("nwrong")
        notes.append("nwrong null (data not checked)" if wrong is None else
                     f"#wrong {wrong:g}" if isinstance(wrong, int | float) else
                     f"nwrong {wrong!r}")
        if r.get("redop") not in ("sum", "none"):
            notes.append(f"redop {r.get('redop')}")
        root = str(r.get("root", "-1")).strip()
        if root not in ("-1", ""):
            notes.append(f"root {root}")
        metrics = _metrics(figures, notes)
        return Point(source="nccl-tests", file=str(self.path), run=self.label,
                     workload=CollectivesWorkload.name, op=self.op, bytes=r["size"],
                     dtype=NCCL_DTYPES.get(r["type"], r["type"]), primitive="nccl",
                     ranks=self.ranks, nodes=self.nodes, metrics=metrics,
                     evidence="; ".join(notes))


# --- OSU micro-benchmarks ---------------------------------------------------------------------

@dataclass
class _OsuRun:
    path: Path
    start: int
    test: OsuTest
    version: str | None
    accel: str               # "" or the buffers' device ("CUDA", "ROCM", ...)
    dtype: str | None = None
    columns: list[str] | None = None
    header: int = 0
    rows: int = 0
    done: bool = False       # after OSU's "DATA VALIDATION ERROR" line

    @classmethod
    def begin(cls, path: Path, number: int, title: re.Match[str]) -> _OsuRun:
        library, name, version = title.group(1), title.group(2), title.group(3)
        base, _, accel = library.partition("-")
        if name.startswith("MANAGED "):  # "-CUDA MANAGED"
            accel, name = f"{accel} MANAGED", name.removeprefix("MANAGED ")
        if base != "MPI":
            raise _bad(path, number, f"OSU's {library} tests are not read; expected its MPI "
                                     "tests ('# OSU MPI ...')")
        test = OSU_TESTS.get(name)
        if test is None:
            known = ", ".join(t.binary for t in OSU_TESTS.values())
            raise _bad(path, number, f"OSU's {name!r} is not a test fabbench reads; expected "
                                     f"one of {known}")
        return cls(path, number, test, version, accel)

    def feed(self, number: int, line: str, points: list[Point]) -> None:
        if self.done or not line.strip():
            return
        if m := _DATATYPE.match(line):
            self.dtype = m.group(1)
        elif line.startswith("# Size"):
            self.columns, self.header = re.split(r"\s{2,}", line.strip()), number
        elif line.startswith("#"):
            if self.columns is None and re.search(r"Latency ?\(us\)|\(MB/s\)", line):
                raise _bad(self.path, number, "an OSU header without the Size column; expected "
                                              "'# Size' first (sizes shown, OSU's default)")
        elif line.startswith("DATA VALIDATION ERROR"):
            self.done = True
        elif self.columns is not None:
            points.append(self._row(number, line))
            self.rows += 1
        # before the header: another program's line (mpirun's), not OSU's

    def _row(self, number: int, line: str) -> Point:
        assert self.columns is not None
        names = self.columns
        tokens = line.split()
        expected = f"{len(names)} fields under the header of line {self.header} " \
                   f"({'; '.join(names)})"
        if len(tokens) != len(names):
            raise _bad(self.path, number, f"a row of OSU's table with "
                                          f"{_fields(len(tokens))}; expected {expected}")
        size = _integer(self.path, number, tokens[0], "Size", expected)

        def value(name: str) -> float:
            i = names.index(name)
            return _number(self.path, number, tokens[i], name, expected)

        figure = value(names[1])
        test = self.test
        version = f" {self.version}" if self.version else ""
        notes = [f"OSU{version} {test.binary}"
                 + (" between 2 ranks, read as sendrecv" if test.workload == "pairs" else "")
                 + f": {names[1]}"
                 + (f" {tokens[1]} = {figure / 1000:g} GB/s (OSU's MB is 1e6 bytes)"
                    if test.metric == "bw" else "")
                 + f", {test.how}"]
        if "Min Latency(us)" in names and "Max Latency(us)" in names:
            notes.append(f"min {value('Min Latency(us)'):g}, max {value('Max Latency(us)'):g} "
                         "µs over ranks")
        if "Iterations" in names:
            notes.append(f"{tokens[names.index('Iterations')]} iterations")
        if "Validation" in names:
            notes.append(f"validation {tokens[names.index('Validation')]}")
        if self.accel:
            notes.append(f"buffers on {self.accel}")
        metrics = _metrics({test.metric: figure / 1000 if test.metric == "bw" else figure},
                           notes)
        dtype = MPI_DTYPES.get(self.dtype, self.dtype.lower()) if self.dtype else None
        return Point(source="osu", file=str(self.path),
                     run=f"{self.path.name}:{self.start} {test.binary}", workload=test.workload,
                     op=test.op, bytes=size, dtype=dtype, primitive="mpi",
                     ranks=2 if test.workload == "pairs" else None, metrics=metrics,
                     evidence="; ".join(notes))

    def close(self) -> None:
        if self.columns is None:
            raise _bad(self.path, self.start, f"OSU's {self.test.binary} title without its "
                       "table; expected a '# Size ...' header and rows after it")
        if self.rows == 0:
            raise _bad(self.path, self.header, f"OSU's {self.test.binary} table without rows; "
                       "expected a row per size after this header (did the run die?)")
