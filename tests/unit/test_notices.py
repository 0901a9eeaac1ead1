"""launch.notices: the sentence made of what a launcher says it lost, and the stderr copier."""

from __future__ import annotations

import io
import os
import sys

import pytest

from fabbench.launch import notices

DASHES = "-" * 74
# Open MPI 4.1.4's texts as mpirun printed them on 2 emulated nodes (docs/faults.md's rows)
SIGNALLED = f"""{DASHES}
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
{DASHES}
{DASHES}
mpirun noticed that process rank 1 with PID 0 on node 198.18.0.2 exited on signal 9 (Killed).
{DASHES}
"""
NON_ZERO = f"""{DASHES}
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[40563,1],1]
  Exit code:    3
{DASHES}
"""
DAEMON = f"""{DASHES}
ORTE has lost communication with a remote daemon.

  HNP daemon   : [[40563,0],0] on node host-a
  Remote daemon: [[40563,0],1] on node 198.18.0.2

This is usually due to either a failure of the TCP network
connection to the node, or possibly an internal failure of
the daemon itself. We cannot recover from this failure, and
therefore will terminate the job.
{DASHES}
"""


def test_a_rank_killed_by_a_signal_is_named_with_its_node_and_signal():
    assert notices.notice(SIGNALLED) == \
        "mpirun says rank 1 (pid 0) on node 198.18.0.2 exited on signal 9 (Killed)"


def test_the_signal_without_its_name():
    text = "mpirun noticed that process rank 3 with PID 77 on node n4 exited on signal 6."
    assert notices.notice(text) == "mpirun says rank 3 (pid 77) on node n4 exited on signal 6"


def test_a_rank_with_a_non_zero_exit():
    assert notices.notice(NON_ZERO) == "mpirun says rank 1 exited first, with code 3"


def test_horovodruns_failed_rank():
    text = ("horovodrun: error: Horovod detected that one or more processes exited with non-zero "
            "status, thus causing the job to be terminated. The first process to do so was: "
            "Process name: 1 Exit code: 137")
    assert notices.notice(text) == "Horovod says rank 1 exited first, with code 137"


def test_a_lost_daemon_names_its_node():
    assert notices.notice(DAEMON) == ("mpirun lost its daemon on node 198.18.0.2 (it died, or "
                                      "the node or its link did)")


def test_the_first_thing_said_wins():
    assert notices.notice(DAEMON + SIGNALLED).startswith("mpirun lost its daemon")
    assert notices.notice(SIGNALLED + DAEMON).startswith("mpirun says rank 1")


@pytest.mark.parametrize("text", ["", "rank 0: timed out in allreduce", DASHES,
                                  "noticed that process rank x with PID 1 on node n"])
def test_nothing_said_of_a_lost_rank(text):
    assert notices.notice(text) == ""


def test_tail_copies_through_and_keeps_the_last_lines(monkeypatch):
    read, write = os.pipe()
    sink = io.BytesIO()
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(sink, write_through=True))
    with os.fdopen(read, "rb") as stream:
        tail = notices.Tail(stream)
        with os.fdopen(write, "wb") as w:
            for i in range(notices.TAIL_LINES + 5):
                w.write(b"line %d\n" % i)
            w.write(SIGNALLED.encode())
        tail.join(timeout_s=10)
    copied = sink.getvalue().decode()
    assert copied.startswith("line 0\n") and copied.endswith(SIGNALLED)
    kept = tail.text()
    assert "line 0\n" not in kept and len(kept.splitlines()) == notices.TAIL_LINES
    assert notices.notice(kept).startswith("mpirun says rank 1")


def test_tail_writes_to_a_text_stderr(monkeypatch):
    read, write = os.pipe()
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with os.fdopen(read, "rb") as stream:
        tail = notices.Tail(stream)
        with os.fdopen(write, "wb") as w:
            w.write(b"fabbench: error: rank 0: caf\xc3\xa9\n")
        tail.join(timeout_s=10)
        assert sys.stderr.getvalue() == "fabbench: error: rank 0: café\n"


def test_tail_copies_a_launchers_stdout_without_its_prefix(monkeypatch):
    read, write = os.pipe()
    sink = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(sink, write_through=True))
    with os.fdopen(read, "rb") as stream:
        tail = notices.Tail(stream, stdout=True, strip=r"^\[\d+\]<stdout>:")
        with os.fdopen(write, "wb") as w:
            w.write(b"[0]<stdout>:#  allreduce 1048576 [1]<stdout>: stays\nplain\n")
        tail.join(timeout_s=10)
    assert sink.getvalue() == b"#  allreduce 1048576 [1]<stdout>: stays\nplain\n"
    assert tail.text().endswith("plain\n")
