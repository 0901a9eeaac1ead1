"""Never hang, never lose a result: real ranks killed, stopped and resumed."""

from __future__ import annotations

import json
import time

import pytest

from conftest import fabbench, needs_mpirun
from fabbench.results.reader import read_results

pytestmark = [pytest.mark.integration, needs_mpirun]

TIMEOUT = 8
SWEEP = ["--ops", "allreduce", "--sizes", "8:16M:4", "--budget", "0.03", "--timeout",
         str(TIMEOUT)]
LARGE = 8 << 20  # the point at which the fault fires: a large allreduce


def kill_run(tmp_path, primitive: str, fault: str, ranks: int = 4):
    out = tmp_path / "r.jsonl"
    start = time.monotonic()
    p = fabbench("run", "--fabric", "ethernet", "--primitive", primitive, "--ranks", str(ranks),
                 *SWEEP, "--out", str(out), env={"FABBENCH_FAULT": fault}, timeout=120)
    return p, out, time.monotonic() - start


def assert_kept_what_finished(out, expect_points: int):
    results = read_results(out)  # schema-valid, every line
    recs = results.of_kind("collective")
    assert len(recs) == expect_points  # every point before the fault, none after
    assert [r.bytes for r in recs] == [8 * 4 ** i for i in range(expect_points)]
    summary = results.records[-1]
    assert summary.kind == "summary" and summary.ok is False
    return summary


@pytest.mark.parametrize("primitive", ["mpi", "gloo"])
def test_killed_rank_during_large_allreduce(tmp_path, primitive):
    p, out, elapsed = kill_run(tmp_path, primitive, f"kill:2:allreduce:{LARGE}")
    assert p.returncode != 0
    assert elapsed < 2 * TIMEOUT + 15  # start-up and the points before the kill included
    assert "rank 2" in p.stderr and "died first" in p.stderr
    assert "Traceback" not in p.stderr
    summary = assert_kept_what_finished(out, 10)
    assert "rank 2" in summary.error or "peer" in summary.error.lower() \
        or "closed" in summary.error.lower()


def test_killed_rank_zero_keeps_records_and_gets_a_summary(tmp_path):
    p, out, _ = kill_run(tmp_path, "gloo", f"kill:0:allreduce:{LARGE}")
    assert p.returncode == 137
    summary = assert_kept_what_finished(out, 10)
    assert "rank 0" in summary.error and "died first" in summary.error


def test_hung_rank_ends_in_bounded_time_naming_it(tmp_path):
    p, out, elapsed = kill_run(tmp_path, "mpi", f"stop:2:allreduce:{LARGE}")
    assert p.returncode == 124
    assert elapsed < 2 * TIMEOUT + 20
    last = p.stderr.strip().splitlines()[-1]
    assert "timed out in allreduce of 8388608 bytes" in last
    assert "rank(s) 2 did not arrive" in last
    summary = assert_kept_what_finished(out, 10)
    assert "timed out in allreduce of 8388608 bytes" in summary.error


def test_resume_completes_the_same_records(tmp_path):
    """--resume after a kill gives the same set of points as an uninterrupted run."""
    full = tmp_path / "full.jsonl"
    p = fabbench("run", "--fabric", "ethernet", "--ranks", "4", *SWEEP, "--out", str(full),
                 timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    p, out, _ = kill_run(tmp_path, "mpi", f"kill:3:allreduce:{LARGE}")
    assert p.returncode != 0
    with open(out, "ab") as f:  # as if the kill had cut a write short
        f.write(b'{"kind": "collective", "op": "allre')
    p = fabbench("run", "--resume", str(out), timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "dropped an incomplete last line" in p.stderr
    results = read_results(out)
    assert not results.warnings
    runs = results.of_kind("run")
    assert len(runs) == 2 and runs[1].resumed and runs[0].run_id == runs[1].run_id
    assert results.records[-1].kind == "summary" and results.records[-1].ok

    def points(path):
        return sorted((r.op, r.dtype, r.bytes)
                      for r in read_results(path).of_kind("collective"))
    assert points(out) == points(full)
    p = fabbench("run", "--resume", str(out), timeout=60)
    assert p.returncode == 2 and "nothing to resume" in p.stderr


@pytest.mark.parametrize("content,needle", [
    ("", "empty"), ("hello\n", "not a fabbench results file"),
    ('{"kind": "run", "run_id": "x", "schema": "fabbench/99"}\n', "fabbench/99"),
])
def test_resume_refuses_what_is_not_a_results_file(tmp_path, content, needle):
    path = tmp_path / "x.jsonl"
    path.write_text(content)
    p = fabbench("run", "--resume", str(path), timeout=60)
    assert p.returncode == 2 and needle in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert path.read_text() == content


def test_wrong_interface_is_refused_before_launch(tmp_path):
    p = fabbench("run", "--fabric", "ethernet", "--iface", "nosuch0", "--out",
                 str(tmp_path / "r.jsonl"), timeout=60)
    assert p.returncode == 2 and "no network interface 'nosuch0'" in p.stderr
    assert not (tmp_path / "r.jsonl").exists()


def test_unreachable_rendezvous_ends_in_bounded_time(tmp_path):
    """A rank inside a job whose MASTER_ADDR does not answer (RFC 2544 test range, no host)."""
    start = time.monotonic()
    p = fabbench("run", "--fabric", "ethernet", "--primitive", "gloo", "--timeout", "5",
                 "--out", str(tmp_path / "r.jsonl"), timeout=120,
                 env={"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                      "MASTER_PORT": "9", "LOCAL_RANK": "1"})
    assert p.returncode != 0
    assert time.monotonic() - start < 30
    assert "rendezvous" in p.stderr


def test_summary_says_complete(tmp_path):
    out = tmp_path / "r.jsonl"
    p = fabbench("run", "--fabric", "shm", "--ops", "broadcast", "--sizes", "8", "--out",
                 str(out), timeout=60)
    assert p.returncode == 0
    last = json.loads(out.read_text().splitlines()[-1])
    assert last["kind"] == "summary" and last["ok"] is True and last["error"] is None
