"""Fault injection for the fault tests: FABBENCH_FAULT=<kind>:<rank>[:<op>[:<bytes>]].

kind is ``corrupt`` (one element of the checked result is changed), ``kill`` (the rank sends
itself SIGKILL when it reaches the point), or ``stop`` (SIGSTOP: a hung rank). Without op/bytes,
kill and stop fire at the first point. Never set outside tests.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

KINDS = ("corrupt", "kill", "stop")


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int
    op: str | None = None
    nbytes: int | None = None

    @classmethod
    def from_env(cls) -> Fault | None:
        spec = os.environ.get("FABBENCH_FAULT", "")
        parts = spec.split(":")
        if len(parts) < 2 or parts[0] not in KINDS or not parts[1].isdigit():
            return None
        op = parts[2] if len(parts) > 2 and parts[2] else None
        nbytes = int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else None
        return cls(parts[0], int(parts[1]), op, nbytes)

    def corrupts(self, rank: int) -> bool:
        return self.kind == "corrupt" and rank == self.rank

    def at_point(self, rank: int, op: str, nbytes: int) -> None:
        """Called by every rank before it measures a point."""
        if self.kind == "corrupt" or rank != self.rank:
            return
        if (self.op is None or self.op == op) and (self.nbytes is None or self.nbytes == nbytes):
            os.kill(os.getpid(), signal.SIGKILL if self.kind == "kill" else signal.SIGSTOP)
