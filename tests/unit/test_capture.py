"""What a library writes to stderr while it starts is captured (the transport report), and never
lost: not when the block raises, not when the library ends the process (MPI_Init's exit()), not
when mpirun stops relaying the rank's stderr (under fabbench's launcher, the guard leaves the
words in the run's directory for the launcher to show)."""

from __future__ import annotations

import os
import subprocess
import sys

from fabbench.launch import rundir

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


def run(mode: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True,
                          timeout=60, check=False, env={**os.environ, **(env or {})})


def test_a_process_ended_inside_the_capture_still_shows_the_library_message():
    p = run("exit")
    assert p.returncode == 1
    assert p.stderr.splitlines() == ["library: direct launched using srun, but no PMI support",
                                     "fabbench: error: the library ended this process"]


def test_a_capture_that_ends_normally_is_kept_quiet():
    p = run("ok")
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.strip() == "kept: library: direct launched using srun, but no PMI support"


def test_under_fabbenchs_launcher_the_words_are_left_for_it_whole(tmp_path):
    p = run("exit", {rundir.ENV: str(tmp_path)})
    assert p.returncode == 1 and p.stderr == ""
    watch = rundir.Watch(tmp_path)
    assert watch.said().splitlines() == [
        "library: direct launched using srun, but no PMI support",
        "fabbench: error: the library ended this process"]
    assert sorted(x.name.split("-")[0] for x in tmp_path.iterdir()) == ["said"]  # no mark left


def test_under_fabbenchs_launcher_a_normal_end_leaves_nothing(tmp_path):
    p = run("ok", {rundir.ENV: str(tmp_path)})
    assert p.returncode == 0 and p.stderr == ""
    assert list(tmp_path.iterdir()) == [] and rundir.Watch(tmp_path).said(wait_s=0) == ""
