"""What a rank shows of a library's start-up output when the start fails.

A rank captures fd 2 around a library's initialisation (Open MPI's selection report is read from
it). When the initialisation fails, or ends the process (MPI_Init calls exit() or abort() when
it cannot start: srun without PMI, a fabric that is not there), the library's own words must
still reach the user: the capture without the verbosity fabbench itself turned on, and the
error and warning lines of the logs the library was told to write to a private file (UCX's).

`python -I -S .../guard.py FD NOTE QUIET [LOG ...]` is the guard process (standard library
only, so that it starts in a few milliseconds): it holds the
capture file and waits for "ok" on its stdin; if its parent dies first, it writes what the
parent would have shown, then NOTE, to the stderr both inherited, and removes the logs' folder.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

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


def main(argv: Sequence[str]) -> None:
    fd, note, quiet, logs = int(argv[0]), argv[1], argv[2], argv[3:]
    if sys.stdin.buffer.read() == b"ok":  # the parent came through: the capture is its own
        return
    data, at = b"", 0
    while chunk := os.pread(fd, 1 << 20, at):
        data, at = data + chunk, at + len(chunk)
    os.write(2, (shown(data.decode(errors="replace"), quiet, logs) + note + "\n").encode())
    for folder in {str(Path(log).parent) for log in logs}:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
