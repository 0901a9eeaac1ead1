"""`fabbench trace -- COMMAND` waits with a deadline (--max-time): a job past it is stopped,
its whole process group, in one line, and no empty DIR is left; a deadline that is no number of
seconds is refused before DIR is made."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from conftest import cli


def test_a_job_past_max_time_is_stopped_with_its_group(capsys, tmp_path: Path):
    pids = tmp_path / "pids"
    out = tmp_path / "t"
    started = time.monotonic()
    # the shell and a child of its own: both in the job's process group
    code, _, err = cli(capsys, "trace", "--out", str(out), "--max-time", "1", "--", "sh", "-c",
                       f"sleep 60 & echo $$ $! > {pids}; wait")
    assert time.monotonic() - started < 20
    assert code == 1 and err.count("\n") == 1, err
    assert "ran past --max-time 1 s; stopped it (its process group), no trace written" in err
    time.sleep(0.2)
    for pid in map(int, pids.read_text().split()):
        assert not _running(pid), pid
    assert not out.exists()


def _running(pid: int) -> bool:
    """Alive and not a zombie (a child of the shell, reparented, waits for its reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("bad", ["0", "-5", "nan", "inf"])
def test_a_deadline_that_is_no_number_of_seconds_is_refused(capsys, tmp_path: Path, bad: str):
    code, _, err = cli(capsys, "trace", "--out", str(tmp_path / "t"), "--max-time", bad, "--",
                       "true")
    assert code == 2 and err.count("\n") == 1 and "--max-time" in err, err
    assert not (tmp_path / "t").exists()

