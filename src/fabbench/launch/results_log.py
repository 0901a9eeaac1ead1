"""Results through a log: where a run's results file is gone with its pod (the chart's results
volume an emptyDir, gone when the Job completes; kubectl cannot exec into a completed pod),
rank 0 writes the finished file to its stdout between two marker lines, and `fabbench from-log`
reads it back out of `kubectl logs`, every record checked by the results reader.

    -----BEGIN FABBENCH RESULTS fabbench-results/1 name=<file name>-----
    |fb| <each line of the results file, as written>
    -----END FABBENCH RESULTS lines=<N> sha256=<of the lines, each with its \\n> name=<...>-----

Rank 0 does this when FABBENCH_RESULTS_TO_LOG is 1 (the chart and `fabbench render k8s` set it
when the results volume is an emptyDir), once its file is closed, a failed run's too. In an
MPIJob rank 0 runs on a worker and mpirun carries its output to the launcher's log. The lines of
a block may carry a prefix the log added (kubectl logs --prefix, mpirun --tag-output): the
begin line's, the same on every line of the block. Each line of the file is marked (|fb| ), so
that the lines other processes write into the same log meanwhile (the other ranks, mpirun, ssh:
mpirun forwards them all) are told from the block's own and passed over. The end line's count
and checksum tell a block cut short (the kubelet rotated the log, rank 0 was killed) or a line
broken by other output.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from fabbench.errors import UsageError
from fabbench.results import output_files

ENV = "FABBENCH_RESULTS_TO_LOG"
FORMAT = "fabbench-results/1"
_BEGIN = "-----BEGIN FABBENCH RESULTS "
_MARK = "|fb| "  # on each line of the file in the block
_END = "-----END FABBENCH RESULTS "
_BEGIN_LINE = re.compile(r"^(?P<prefix>.*?)-----BEGIN FABBENCH RESULTS (?P<format>\S+) "
                         r"name=(?P<name>.+)-----$")
_END_LINE = re.compile(r"^-----END FABBENCH RESULTS lines=(?P<lines>\d+) "
                       r"sha256=(?P<sha>[0-9a-f]{64}) name=(?P<name>.+)-----$")


def wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether rank 0 writes its results to the log (FABBENCH_RESULTS_TO_LOG=1)."""
    value = (os.environ if env is None else env).get(ENV, "")
    if value not in ("", "0", "1"):
        raise UsageError(f"{ENV} takes 1 (write the results file to the log) or 0, "
                         f"not {value!r}")
    return value == "1"


def _digest(lines: Iterable[str]) -> str:
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode() + b"\n")
    return h.hexdigest()


def emit(path: str | os.PathLike[str], stream: TextIO | None = None) -> int:
    """Write the results file between the markers; the number of its lines."""
    stream = sys.stdout if stream is None else stream
    name = Path(path).name
    lines = Path(path).read_text(errors="replace").splitlines()
    text = [f"{_BEGIN}{FORMAT} name={name}-----", *(_MARK + line for line in lines),
            f"{_END}lines={len(lines)} sha256={_digest(lines)} name={name}-----"]
    stream.write("\n".join(text) + "\n")
    stream.flush()
    return len(lines)


@dataclass(frozen=True)
class LoggedFile:
    """One results file found in a log: its name, its lines, where it began (1-based)."""

    name: str
    lines: tuple[str, ...]
    at: int


def blocks(text: str) -> list[LoggedFile]:
    """Every complete block of the log, in order; UsageError (one line) for a block cut short,
    mixed with other output, or of a format this fabbench does not read."""
    found: list[LoggedFile] = []
    log = text.splitlines()
    number = 0
    while number < len(log):
        begin = _BEGIN_LINE.match(log[number])
        number += 1
        if begin is None:
            continue
        at, prefix, name = number, begin["prefix"], begin["name"]
        if begin["format"] != FORMAT:
            raise UsageError(f"log line {at}: results block in format {begin['format']!r}; this "
                             f"fabbench reads {FORMAT}")
        body: list[str] = []
        while True:
            if number >= len(log):
                raise UsageError(f"log line {at}: the results block of {name} has no end line "
                                 "(the log was cut: rank 0 stopped, or the kubelet rotated the "
                                 "log)")
            line = log[number]
            number += 1
            if not line.startswith(prefix):
                continue  # another process's line (another tag): not this block's
            line = line[len(prefix):]
            if line.startswith(_MARK):
                body.append(line[len(_MARK):])
                continue
            if line.startswith(_BEGIN):
                raise UsageError(f"log line {number}: the results block of {name} is "
                                 "broken by another marker line")
            end = _END_LINE.match(line)
            if end is None:
                continue  # a line another process wrote meanwhile: not the file's
            if end["name"] != name or int(end["lines"]) != len(body) \
                    or end["sha"] != _digest(body):
                raise UsageError(
                    f"log line {at}: the results block of {name} holds {len(body)} lines that "
                    f"do not match its end line ({end['lines']} lines, its checksum): lines were "
                    "lost or mixed with other output")
            found.append(LoggedFile(name, tuple(body), at))
            break
    return found


def _destination(found: list[LoggedFile], out: Path | None) -> list[Path]:
    """Where each block goes: ``out`` for one block (a directory: the block's name in it),
    else each block's name in ``out`` (a directory) or the working directory."""
    names = [b.name for b in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"the log holds the results file {twice[0]} twice (the logs of several "
                         "pods or runs?): give the log of one run")
    for name in names:
        if "/" in name or name in (".", ".."):
            raise UsageError(f"the log names a results file {name!r}: not a file name")
    if out is not None and out.is_dir():
        return [out / n for n in names]
    if len(found) == 1:
        return [out or Path(found[0].name)]
    if out is not None:
        raise UsageError(f"the log holds {len(found)} results files ({', '.join(names)}): "
                         f"--out must be a directory, and {out} is not one")
    return [Path(n) for n in names]


def from_log(text: str, out: Path | None = None,
             inputs: Iterable[str | Path] = ()) -> list[tuple[Path, int]]:
    """Write every results file of the log (see _destination), each checked record by record
    by the results reader before any is in place, each a new file (results.output_files: never
    over a file, nor over ``inputs``, the log); (path, records) of each."""
    found = blocks(text)
    if not found:
        raise UsageError(
            "no fabbench results in the log (no '-----BEGIN FABBENCH RESULTS' line): rank 0 "
            f"writes them there when {ENV}=1 (the chart: results on an emptyDir); take the "
            "log of rank 0's pod or the MPIJob's launcher, and all of it (kubectl logs -l ... "
            "shows 10 lines unless --tail=-1)")
    flag = "--out" if out is not None else "the log's file (no --out)"
    targets = output_files.check_all([(flag, p) for p in _destination(found, out)], inputs)
    bodies = ["".join(line + "\n" for line in block.lines) for block in found]
    counts = [_records(block, body) for block, body in zip(found, bodies, strict=True)]
    written = output_files.write_all(list(zip(targets, bodies, strict=True)))
    return list(zip(written, counts, strict=True))


def _records(block: LoggedFile, body: str) -> int:
    """The records of a block, each checked by the results reader (UsageError naming the
    log's line otherwise)."""
    from fabbench.results.reader import read_results

    with tempfile.TemporaryDirectory(prefix="fabbench-from-log-") as folder:
        tmp = os.path.join(folder, block.name)
        with open(tmp, "w") as f:
            f.write(body)
        try:
            return len(read_results(tmp).records)
        except UsageError as exc:
            raise UsageError(_relocated(str(exc), tmp, block)) from None


def _relocated(message: str, tmp: str, block: LoggedFile) -> str:
    """The reader's message about the temporary file, about the log's lines instead."""
    m = re.match(rf"^{re.escape(tmp)}:(\d+): (.*)$", message)
    if m:
        return (f"log line {block.at + int(m.group(1))}: results file {block.name}, record "
                f"{m.group(1)}: {m.group(2)}")
    return f"results file {block.name} (log line {block.at}): " + message.replace(tmp, "it")
