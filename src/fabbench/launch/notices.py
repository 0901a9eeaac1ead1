"""What a launcher itself says about the rank or daemon it lost, read from its stderr.

When a rank on another node dies, only its launcher knows which one and how: mpirun prints
"mpirun noticed that process rank 1 with PID 812 on node n2 exited on signal 9 (Killed)", or that
it lost a daemon, and ends the job with the rank's code. fabbench's own launcher sees no more
than mpirun's exit code (it watches the pids of its own host only), so its headline said "the
ranks exited with code 137" and left the rank, the node and the signal to a line above it. The
launcher copies each process's stderr through (``Tail``), keeping its last lines, and ``notice``
turns what the launcher said into one sentence for the headline. Its words are quoted as the
launcher wrote them (its own message is never replaced, only summarised beside it).

Open MPI 4.1's texts (help-orterun.txt and help-errmgr-base.txt, /usr/share/openmpi):
  [orterun:proc-aborted-strsignal]  %s noticed that process rank %lu with PID %lu on node %s
                                    exited on signal %d (%s).   ([orterun:proc-aborted]: no (%s))
  [orterun:non-zero-exit]           %s detected that one or more processes exited with non-zero
                                    status, ... The first process to do so was: Process name: %s
                                    Exit code: %d
  [node-died]                       ORTE has lost communication with a remote daemon. HNP
                                    daemon: %s on node %s  Remote daemon: %s on node %s
horovodrun's (horovod/runner/gloo_run.py), as launch/horovodrun_main.py prints it in one line:
"Horovod detected that one or more processes exited with non-zero status, ... Process name: 1 Exit
code: 137" (the process name is the rank)
The help texts are wrapped over lines and framed by dashes, so the patterns read the tail as one
line with its whitespace folded.
"""

from __future__ import annotations

import collections
import contextlib
import re
import sys
import threading
from typing import IO

TAIL_LINES = 200  # the launcher's last lines kept: its notices come at the end

_SIGNALLED = re.compile(r"(?P<who>\S+) noticed that process rank (?P<rank>\d+) with PID "
                        r"(?P<pid>\d+) on node (?P<node>\S+) exited on signal (?P<sig>\d+)"
                        r"(?: \((?P<name>[^)]*)\))?")
_FAILED = re.compile(r"(?P<who>\S+) detected that one or more processes exited with non-zero "
                     r"status.*?Process name: (?:\[\[\d+,\d+\],)?(?P<rank>\d+)\]? Exit "
                     r"code: (?P<code>-?\d+)")
_DAEMON = re.compile(r"ORTE has lost communication with a remote daemon\. .*?Remote daemon: "
                     r"\S+ on node (?P<node>\S+)")


def notice(text: str) -> str:
    """One sentence on the rank or daemon the launcher says it lost first, or '' when its text
    says nothing of the kind."""
    flat = " ".join(text.split())
    found: list[tuple[int, str]] = []
    if m := _SIGNALLED.search(flat):
        name = f" ({m['name']})" if m["name"] else ""
        found.append((m.start(), f"{m['who']} says rank {m['rank']} (pid {m['pid']}) on node "
                                 f"{m['node']} exited on signal {m['sig']}{name}"))
    if m := _FAILED.search(flat):
        found.append((m.start(), f"{m['who']} says rank {m['rank']} exited first, with code "
                                 f"{m['code']}"))
    if m := _DAEMON.search(flat):
        found.append((m.start(), f"mpirun lost its daemon on node {m['node']} (it died, or the "
                                 "node or its link did)"))
    return min(found)[1] if found else ""


class Tail:
    """Copies a process's stream to ours as it comes, line by line, keeping the last lines:
    stderr to our stderr (the default), or stdout to our stdout without the launcher's line
    prefix (``strip``, a pattern: Slurm's or horovodrun's rank tag)."""

    def __init__(self, stream: IO[bytes], *, stdout: bool = False,
                 strip: str | None = None) -> None:
        self._lines: collections.deque[bytes] = collections.deque(maxlen=TAIL_LINES)
        self._lock = threading.Lock()
        self._to = "stdout" if stdout else "stderr"
        self._strip = re.compile(strip.encode()) if strip else None
        self._thread = threading.Thread(target=self._copy, args=(stream,), daemon=True,
                                        name="fabbench-stdout" if stdout else "fabbench-stderr")
        self._thread.start()

    def _copy(self, stream: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in iter(stream.readline, b""):
                if self._strip is not None:
                    line = self._strip.sub(b"", line, count=1)
                _write(self._to, line)
                with self._lock:
                    self._lines.append(line)

    def join(self, timeout_s: float) -> None:
        """Wait until the stream ends (its last writer closed it), at most ``timeout_s``."""
        self._thread.join(timeout=timeout_s)

    def text(self) -> str:
        with self._lock:
            return b"".join(self._lines).decode(errors="replace")


def _write(to: str, line: bytes) -> None:
    """To our ``to`` ("stdout", "stderr") as it is now (a test may have put a text stream
    there)."""
    stream = getattr(sys, to)
    out = getattr(stream, "buffer", None)
    if out is not None:
        out.write(line)
    else:
        stream.write(line.decode(errors="replace"))
    stream.flush()
