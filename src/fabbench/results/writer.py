"""Append records to a JSON Lines file, each checked against the schema, then flushed and
fsynced before the next measurement."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import TypeVar

from fabbench.errors import InvalidRecord, UsageError
from fabbench.results.claim import Claim, claim
from fabbench.results.records import Record

R = TypeVar("R", bound=Record)


class ResultWriter:
    """Appends typed records; never truncates what is written: a file that already holds
    records is only added to, and a record the file system takes only part of (a full disk) is
    taken back whole. A record that does not satisfy the schema is refused (InvalidRecord) and
    nothing of it is written. With ``claim``, the file is claimed for this run
    (results/claim.py) when it is opened: a file another run writes, or one that already holds
    records, is refused."""

    def __init__(self, path: str | os.PathLike[str], *, claim: bool = False) -> None:
        self.path = Path(path)
        self._claim_it = claim
        self._claim: Claim | None = None
        self._lock = threading.Lock()  # the watchdog may write the summary from its thread
        self._fd: int | None = None  # opened at the first record: a run that never started
        self._closed = False         # leaves no file behind
        self.counts: dict[str, int] = {}

    def _open(self) -> int:
        if self._fd is None and self._claim_it:
            self._claim = claim(self.path)
            self._fd = self._claim.fd
        if self._fd is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            except OSError as exc:
                raise UsageError(f"cannot write results to {self.path}: {exc.strerror}") from None
        return self._fd

    def open(self) -> None:
        """Open (and claim) the file now rather than at the first record."""
        with self._lock:
            self._open()

    def write(self, record: R) -> R:
        """Append one record (its JSON object checked against the schema first); returns the
        record."""
        if not isinstance(record, Record):
            raise InvalidRecord(f"refused to write a {type(record).__name__}: results are "
                                "written as typed records (fabbench.results.records)")
        data = record.to_json()  # checked now: a nested dict may have changed since it was made
        line = (json.dumps(data, separators=(",", ":"), allow_nan=False) + "\n").encode()
        with self._lock:
            if self._closed:
                return record
            fd = self._open()
            end = os.lseek(fd, 0, os.SEEK_END)
            rest = memoryview(line)
            try:
                while rest:  # a full disk writes part of a line, then refuses the rest
                    rest = rest[os.write(fd, rest):]
            except OSError:
                os.ftruncate(fd, end)  # a record is written whole or not at all
                raise
            os.fsync(fd)
            self.counts[record.kind] = self.counts.get(record.kind, 0) + 1
        return record

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._claim is not None:
                self._claim.release()  # a claimed file that got no record is removed
            elif self._fd is not None:
                os.close(self._fd)
            self._fd = None
