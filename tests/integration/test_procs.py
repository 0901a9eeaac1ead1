"""stop_groups: the first signal to each child's process group, SIGKILL to what outlives the
grace; the grandchildren go with their group. dies_with_this_process: a child in a session of
its own still ends when the process that started it is killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from fabbench.procs import stop_groups

pytestmark = pytest.mark.integration

# a child that starts a grandchild in its group, reports both pids, and ignores SIGTERM or not
CHILD = """
import os, signal, subprocess, sys, time
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(os.getpid(), grandchild.pid, flush=True)
time.sleep(60)
"""


def _start(kind: str) -> tuple[subprocess.Popen, int]:
    p = subprocess.Popen([sys.executable, "-c", CHILD, kind], stdout=subprocess.PIPE,
                         text=True, start_new_session=True)
    _, grandchild = map(int, p.stdout.readline().split())
    return p, grandchild


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie is gone too (its parent, not us, would reap it)
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1].startswith("Z")


def _wait_gone(pid: int, within_s: float = 5.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


def test_polite_group_stops_on_the_first_signal():
    p, grandchild = _start("polite")
    start = time.monotonic()
    stop_groups([p], signal.SIGTERM, grace_s=10.0)
    assert p.returncode == -signal.SIGTERM
    assert time.monotonic() - start < 5.0  # did not wait out the grace
    assert _wait_gone(grandchild)


def test_stubborn_group_is_killed_after_the_grace_and_none_is_skipped():
    stubborn, grandchild = _start("stubborn")
    polite, _ = _start("polite")
    start = time.monotonic()
    stop_groups([stubborn, None, polite], signal.SIGTERM, grace_s=0.5, kill_grace_s=5.0)
    assert stubborn.returncode == -signal.SIGKILL and polite.returncode == -signal.SIGTERM
    assert 0.4 < time.monotonic() - start < 6.0
    assert _wait_gone(grandchild)


def test_nothing_to_stop_returns_at_once():
    done = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    done.wait(timeout=30)
    start = time.monotonic()
    stop_groups([done, None])
    assert time.monotonic() - start < 0.5


# a launcher that starts a child in its own session, as fabbench's does, reports its pid, waits
LAUNCHER = """
import subprocess, sys, time
from fabbench.procs import dies_with_this_process
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         start_new_session=True, preexec_fn=dies_with_this_process())
print(child.pid, flush=True)
time.sleep(60)
"""


def test_a_child_in_its_own_session_ends_with_its_killed_launcher():
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE,
                                text=True)
    child = int(launcher.stdout.readline())
    assert not _gone(child)
    launcher.kill()  # no finally of the launcher's runs
    launcher.wait(timeout=30)
    assert _wait_gone(child)
