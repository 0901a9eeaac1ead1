"""procs.run_tool: the one way fabbench runs a short-lived tool; signals_unwind and
signals_deferred, how a rank unwinds on SIGTERM and still writes its summary."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabbench.errors import RunError
from fabbench.launch.rank import _why
from fabbench.procs import Terminated, run_tool, signals_deferred, signals_unwind, stop_marked


def test_a_missing_program_is_none():
    assert run_tool(["no-such-tool-fabbench"], 5) is None
    # looked up on the PATH the tool would run with
    assert run_tool([sys.executable.rsplit("/", 1)[-1], "-V"], 5, env={"PATH": "/nonexistent"}) \
        is None


def test_success_keeps_its_text_apart():
    r = run_tool([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"],
                 10)
    assert r is not None and r.ok and r.returncode == 0
    assert (r.stdout, r.stderr, r.output) == ("out\n", "err\n", "out\nerr\n")
    assert not r.timed_out and r.problem == ""


def test_a_non_zero_exit_is_a_result_with_its_stderr():
    r = run_tool(["sh", "-c", "echo 'no such device' >&2; exit 3"], 10)
    assert r is not None and not r.ok
    assert r.returncode == 3 and r.stderr == "no such device\n" and not r.timed_out


def test_input_and_env_reach_the_tool():
    r = run_tool(["sh", "-c", 'read x; echo "$x $FB_TEST"'], 10, input="hello\n",
                 env={"PATH": os.environ["PATH"], "FB_TEST": "there"})
    assert r is not None and r.stdout == "hello there\n"


def test_a_timeout_returns_in_time_and_kills_the_group(tmp_path):
    pid_file = tmp_path / "pid"
    start = time.monotonic()
    # the shell's child holds the pipes too: only a kill of the whole group ends it
    r = run_tool(["sh", "-c", f"sleep 30 & echo $! > {pid_file}; wait"], 0.5)
    assert time.monotonic() - start < 10
    assert r is not None and r.timed_out and r.returncode is None and not r.ok
    assert "timed out after 0.5 seconds" in r.problem
    pid = int(pid_file.read_text())
    end = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert not _alive(pid), f"the tool's child {pid} outlived its timeout"


def _alive(pid: int) -> bool:
    """Running, not a zombie that nobody reaps yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_stop_marked_stops_what_carries_the_marker_in_another_session_only(tmp_path):
    marker = f"test-{os.getpid()}-{time.monotonic_ns()}"
    mine = subprocess.Popen(["sleep", "30"], env={**os.environ, "FABBENCH_TEST_MARK": marker},
                            start_new_session=True)
    other = subprocess.Popen(["sleep", "30"], env={**os.environ,
                                                   "FABBENCH_TEST_MARK": marker + "-x"},
                             start_new_session=True)
    try:
        stopped = stop_marked("FABBENCH_TEST_MARK", marker, grace_s=5)
        assert stopped == [f"sleep (pid {mine.pid})"]
        assert mine.wait(timeout=5) == -9
        assert other.poll() is None  # a different value is another run's
        assert stop_marked("FABBENCH_TEST_MARK", marker) == []
    finally:
        other.kill()
        other.wait(timeout=5)
        mine.kill()


def test_a_signal_within_signals_deferred_waits_for_its_end():
    done, before = [], signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated) as info, signals_unwind():
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler has run: it held the signal
            done.append("the rest of the block")
        done.append("never: Terminated on leaving")
    assert info.value.signum == signal.SIGTERM and done == ["the rest of the block"]
    assert signal.getsignal(signal.SIGTERM) is before  # both handlers put back


def test_a_held_signal_does_not_replace_the_exception_on_its_way_out():
    written = []
    with pytest.raises(ValueError), signals_unwind():
        try:
            raise ValueError("the rank's own failure")
        finally:  # as a rank writes its summary
            with signals_deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                written.append(repr(sys.exc_info()[1]))
    assert written == ["ValueError(\"the rank's own failure\")"]


def test_signals_deferred_leaves_a_default_action_alone():
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with signals_deferred():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_ranks_summary_names_the_signal_or_the_failure():
    assert _why(Terminated(15), 0) == ("rank 0 was stopped by signal 15 (its launcher or "
                                       "scheduler ended the run)")
    assert _why(RunError("failed in allreduce of 16777216 bytes: reset"), 1) == \
        "failed in allreduce of 16777216 bytes: reset"
    assert _why(None, 0) is None and _why(KeyboardInterrupt(), 0) is None
