"""Stopping what fabbench started: a child is started in its own session (its own process
group), so that it and everything it starts in turn (mpirun's ranks, a launcher's children) go
with one signal to the group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence


def stop_groups(procs: Sequence[subprocess.Popen | None], first: int = signal.SIGTERM,
                grace_s: float = 5.0, kill_grace_s: float = 5.0) -> None:
    """Signal each live process's group with ``first``; SIGKILL the groups of those still alive
    after ``grace_s``. Returns when all have ended or ``kill_grace_s`` more has passed."""
    for sig, grace in ((first, grace_s), (signal.SIGKILL, kill_grace_s)):
        alive = [p for p in procs if p is not None and p.poll() is None]
        if not alive:
            return
        for p in alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, sig)
        end = time.monotonic() + grace
        for p in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.0, end - time.monotonic()))


class Terminated(BaseException):
    """SIGTERM (or SIGHUP) arrived: unwind and tear down."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def signals_unwind() -> Iterator[None]:
    """SIGTERM/SIGHUP raise Terminated (SIGINT already raises KeyboardInterrupt), so every
    `finally` runs. Only the main thread can take signals: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    saved = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
