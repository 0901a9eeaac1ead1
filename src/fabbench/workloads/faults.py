"""Fault injection for the fault tests: FABBENCH_FAULT=<kind>:<rank>[:<op>[:<bytes>[:<ms>]]].

kind is ``corrupt`` (one element of the checked result is changed), ``kill`` (the rank sends
itself SIGKILL when it reaches the point), ``stop`` (SIGSTOP: a hung rank) or ``delay`` (the rank
sleeps ``ms`` milliseconds, default 5, before every timed operation: a rank that arrives late,
or in the pairs workload a slow node). Without op/bytes, kill and stop fire at the first point
and delay holds at every point; an empty field (``delay:2:::20``) is left out. Never set
outside tests.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

KINDS = ("corrupt", "kill", "stop", "delay")
DEFAULT_DELAY_MS = 5.0


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int
    op: str | None = None
    nbytes: int | None = None
    delay_ms: float = DEFAULT_DELAY_MS

    @classmethod
    def from_env(cls) -> Fault | None:
        spec = os.environ.get("FABBENCH_FAULT", "")
        parts = spec.split(":")
        if len(parts) < 2 or parts[0] not in KINDS or not parts[1].isdigit():
            return None
        op = parts[2] if len(parts) > 2 and parts[2] else None
        nbytes = int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else None
        try:
            delay = float(parts[4]) if len(parts) > 4 and parts[4] else DEFAULT_DELAY_MS
        except ValueError:
            delay = DEFAULT_DELAY_MS
        return cls(parts[0], int(parts[1]), op, nbytes, delay)

    def corrupts(self, rank: int) -> bool:
        return self.kind == "corrupt" and rank == self.rank

    def _here(self, rank: int, op: str, nbytes: int) -> bool:
        return rank == self.rank and (self.op is None or self.op == op) and \
            (self.nbytes is None or self.nbytes == nbytes)

    def pause_s(self, rank: int, op: str, nbytes: int) -> float:
        """Seconds this rank sleeps before each timed operation of this point."""
        return self.delay_ms / 1e3 if self.kind == "delay" and self._here(rank, op, nbytes) \
            else 0.0

    def at_point(self, rank: int, op: str, nbytes: int) -> None:
        """Called by every rank before it measures a point."""
        if self.kind in ("kill", "stop") and self._here(rank, op, nbytes):
            os.kill(os.getpid(), signal.SIGKILL if self.kind == "kill" else signal.SIGSTOP)
