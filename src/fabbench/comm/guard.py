"""What a rank shows of a library's start-up output when the start fails.

A rank captures fd 2 around a library's initialisation (Open MPI's selection report is read from
it). When the initialisation fails, or ends the process (MPI_Init calls exit() or abort() when
it cannot start: srun without PMI, a fabric that is not there), the library's own words must
still reach the user: the capture without the verbosity fabbench itself turned on, and the
error and warning lines of the logs the library was told to write to a private file (UCX's).

`python -I -S .../guard.py FD PID NOTE QUIET [LOG ...]` is the guard of process PID (standard
library only, so that it starts in a few milliseconds): it holds the capture file and waits for
"ok" on its stdin; if PID dies first, it writes what PID would have shown, then NOTE, and
removes the logs' folder. It writes to the stderr both inherited, unless fabbench's own
launcher waits for it on this host: then to a file in the run's directory (RUNDIR_ENV), which
the launcher shows. mpirun stops relaying a rank's stderr once it has seen a rank die, often
before that rank's guard has written: there, the library's words were lost.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

# the run's directory that fabbench's launcher shares with its ranks (fabbench.launch.rundir);
# in it, a guard that is waiting marks itself (MARK), and writes what it shows to SAID
RUNDIR_ENV = "FABBENCH_RUNDIR"
MARK = "guard-{pid}"
SAID = "said-{pid}"

# the levels of a library's log line worth showing when its start failed (UCX: "UCX  ERROR")
LOG_LEVELS = re.compile(r"\b(ERROR|FATAL|WARN)\b")


def shown(captured: str, quiet: str, logs: Sequence[str]) -> str:
    """The capture without the lines that match QUIET, then the logs' error and warning lines."""
    keep = [ln for ln in captured.splitlines() if not (quiet and re.search(quiet, ln))]
    for log in logs:
        try:
            text = Path(log).read_text(errors="replace")
        except OSError:
            continue
        keep += [ln for ln in text.splitlines() if LOG_LEVELS.search(ln)]
    return "".join(f"{ln}\n" for ln in keep)


def mark_of(pid: int) -> Path | None:
    """The mark of a guard of process ``pid`` in the launcher's run directory on this host
    (None: no launcher of fabbench's waits here)."""
    folder = os.environ.get(RUNDIR_ENV)
    return Path(folder, MARK.format(pid=pid)) if folder and os.path.isdir(folder) else None


def _leave(mark: Path, parent: int, text: bytes) -> bool:
    """Leave ``text`` for the launcher, whole or not at all; False when it cannot (the run's
    directory gone with its launcher)."""
    said = mark.with_name(SAID.format(pid=parent))
    part = said.with_name("." + said.name)
    try:
        part.write_bytes(text)
        part.rename(said)
    except OSError:
        return False
    return True


def main(argv: Sequence[str]) -> None:
    fd, parent, note, quiet, logs = int(argv[0]), int(argv[1]), argv[2], argv[3], argv[4:]
    mark = mark_of(parent)
    try:
        if sys.stdin.buffer.read() == b"ok":  # the parent came through: the capture is its own
            return
        data, at = b"", 0
        while chunk := os.pread(fd, 1 << 20, at):
            data, at = data + chunk, at + len(chunk)
        text = (shown(data.decode(errors="replace"), quiet, logs) + note + "\n").encode()
        if not (mark is not None and mark.exists() and _leave(mark, parent, text)):
            os.write(2, text)
        for folder in {str(Path(log).parent) for log in logs}:
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        if mark is not None:
            mark.unlink(missing_ok=True)


if __name__ == "__main__":
    main(sys.argv[1:])
