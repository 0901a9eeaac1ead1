"""A directory the local launcher shares with its ranks, to tell afterwards who failed how.

Each rank writes ``rank-N.pid`` when it starts, ``rank-N.timeout`` (what it waited for) when its
watchdog fires and ``rank-N.ended`` when it ends by itself (with or without an error). The
launcher watches the pids while the run lasts, so it can say which rank died first, which ranks
waited and which never arrived. A rank that a communication library ends while it starts leaves
the library's words here (fabbench.comm.guard), for the launcher to show.
Inside a job started by someone else (srun, torchrun) FABBENCH_RUNDIR is unset and this is idle.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from fabbench.comm import guard

ENV = guard.RUNDIR_ENV
SAID_WAIT_S = 2.0  # how long the launcher waits for a guard still writing


def _dir() -> Path | None:
    value = os.environ.get(ENV)
    return Path(value) if value else None


def _write(name: str, text: str) -> None:
    d = _dir()
    if d is not None:
        # a report aid only: when it cannot be written, the rank's own stderr still tells
        with contextlib.suppress(OSError):
            (d / name).write_text(text)


def mark_started(rank: int) -> None:
    _write(f"rank-{rank}.pid", f"{os.getpid()} {socket.gethostname()}")


def mark_timeout(rank: int, what: str) -> None:
    _write(f"rank-{rank}.timeout", what)


def mark_ended(rank: int) -> None:
    """The rank ends by itself (successfully or with an error it reported)."""
    _write(f"rank-{rank}.ended", "")


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (nor dead, waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@dataclass
class Watch:
    """What the launcher learns by watching the directory while the ranks run."""

    path: Path
    pids: dict[int, int] = field(default_factory=dict)
    died: list[tuple[int, int, float]] = field(default_factory=list)  # (rank, pid, when)
    first_timeout: float | None = None  # when the first watchdog report was seen

    def poll(self) -> None:
        if self.first_timeout is None and any(self.path.glob("rank-*.timeout")):
            self.first_timeout = time.monotonic()
        host = socket.gethostname()
        for entry in self.path.glob("rank-*.pid"):
            rank = int(entry.name[5:-4])
            if rank not in self.pids:
                try:
                    pid_text, where = entry.read_text().split()
                except (OSError, ValueError):
                    continue
                if where == host:
                    self.pids[rank] = int(pid_text)
        for rank, pid in self.pids.items():
            if any(r == rank for r, _, _ in self.died) or (self.path / f"rank-{rank}.ended"
                                                           ).exists():
                continue
            if not alive(pid):
                self.died.append((rank, pid, time.monotonic()))

    @property
    def first_fault(self) -> float | None:
        """When a rank first showed a fault: its watchdog's report, or its death (a rank of
        this host gone without saying it ended); None while none has."""
        seen = [t for t in (self.first_timeout, *(when for _, _, when in self.died))
                if t is not None]
        return min(seen, default=None)

    def timeouts(self) -> dict[int, str]:
        out = {}
        for entry in self.path.glob("rank-*.timeout"):
            try:
                out[int(entry.name[5:-8])] = entry.read_text()
            except (OSError, ValueError):
                continue
        return out

    def said(self, wait_s: float = SAID_WAIT_S) -> str:
        """What the guards of ranks a library ended while they started wrote (the library's
        own words, then fabbench's line), once no guard of this host is still writing or
        ``wait_s`` has passed; '' when none wrote."""
        end = time.monotonic() + wait_s
        while any(self.path.glob(guard.MARK.format(pid="*"))) and time.monotonic() < end:
            time.sleep(0.05)
        texts = []
        for entry in sorted(self.path.glob(guard.SAID.format(pid="*"))):
            with contextlib.suppress(OSError):
                texts.append(entry.read_text(errors="replace"))
        return "".join(texts)

    def explain(self, ranks: int) -> str:
        """One sentence on who failed, or '' when nothing is known."""
        parts = []
        waited = self.timeouts()
        # a rank that died after the others timed out was stopped by the launcher, not first
        first_dead = [r for r, _, when in self.died if r not in waited
                      and (self.first_timeout is None or when < self.first_timeout)]
        if first_dead:
            r = first_dead[0]
            parts.append(f"rank {r} (pid {self.pids[r]}) died first")
        if waited:
            what = next(iter(waited.values()))
            missing = sorted(set(range(ranks)) - set(waited))
            parts.append(f"rank(s) {','.join(map(str, sorted(waited)))} timed out in {what}")
            if missing:
                parts.append(f"rank(s) {','.join(map(str, missing))} did not arrive")
        never = sorted(set(range(ranks)) - set(self.pids))
        if never and len(never) < ranks:
            parts.append(f"rank(s) {','.join(map(str, never))} never started")
        return "; ".join(parts)
