"""What a library writes to stderr while it starts is captured (the transport report), and never
lost: not when the block raises, not when the library ends the process (MPI_Init's exit())."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import os, sys
from fabbench.comm.base import captured_stderr
mode = sys.argv[1]
with captured_stderr(died="fabbench: error: the library ended this process") as got:
    os.write(2, b"library: direct launched using srun, but no PMI support\\n")
    if mode == "exit":
        os._exit(1)  # what a C library's exit()/abort() does: no Python cleanup
print("kept:", got[0].strip())
"""


def run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True,
                          timeout=60, check=False)


def test_a_process_ended_inside_the_capture_still_shows_the_library_message():
    p = run("exit")
    assert p.returncode == 1
    assert p.stderr.splitlines() == ["library: direct launched using srun, but no PMI support",
                                     "fabbench: error: the library ended this process"]


def test_a_capture_that_ends_normally_is_kept_quiet():
    p = run("ok")
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.strip() == "kept: library: direct launched using srun, but no PMI support"
