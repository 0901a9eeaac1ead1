"""A watchdog that ends a rank whose blocking operation passes its deadline.

A rank stuck inside MPI or Gloo cannot be interrupted from Python, so the watchdog thread reports
what was pending and ends the process; the launcher (mpirun, or fabbench's own) then stops the
other ranks. ``on_expire(what, message)`` lets the rank record the failure (rank 0: in the
results file) before the process ends.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

TIMEOUT_EXIT_CODE = 124
# After its report, a timed-out rank lingers this long before it exits, so that the watchdogs of
# its peers (armed within milliseconds of it) report too before a launcher stops them all:
# who waited and who never arrived is then known.
LINGER_S = 2.0


class Watchdog:
    def __init__(self, rank: int, on_expire: Callable[[str, str], None] | None = None) -> None:
        self._rank = rank
        self._on_expire = on_expire
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._what = ""
        self._closed = False
        self._sleeping_until: float | None = None  # when the watcher will next wake by itself
        self._thread = threading.Thread(target=self._watch, name="fabbench-watchdog", daemon=True)
        self._thread.start()

    def arm(self, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        with self._cond:
            # Wake the watcher only when it would otherwise sleep past the new deadline: arms
            # come before every sample, and a thread switch there would cost the measurement.
            wake = self._sleeping_until is None or deadline < self._sleeping_until
            self._deadline = deadline
            self._what = f"{what} (deadline {seconds:.1f} s)"
            if wake:
                self._cond.notify()

    @property
    def pending(self) -> str:
        """What the rank was last waiting for (kept after disarm, for error messages)."""
        return self._what

    def disarm(self) -> None:
        with self._cond:
            self._deadline = None  # the watcher finds it so when it next wakes

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=1)

    def _watch(self) -> None:
        with self._cond:
            while not self._closed:
                if self._deadline is None:
                    self._sleeping_until = None
                    self._cond.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._sleeping_until = self._deadline
                    self._cond.wait(timeout=left)
                    continue
                what = self._what
                message = (f"rank {self._rank}: timed out in {what}: "
                           "a peer rank did not arrive (died, hung or unreachable)")
                break
            else:
                return
        print(f"fabbench: error: {message}", file=sys.stderr, flush=True)
        if self._on_expire is not None:
            try:
                self._on_expire(what, message)
            except Exception as exc:  # the process ends either way; say why the record is missing
                print(f"fabbench: error: could not record the timeout: {exc}", file=sys.stderr,
                      flush=True)
        time.sleep(LINGER_S)
        os._exit(TIMEOUT_EXIT_CODE)
