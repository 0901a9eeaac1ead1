"""Which node is slow and which rank is late, on real local ranks (each rank plays a node).

The delay hook (FABBENCH_FAULT=delay:<rank>:::<ms>) holds one rank back before every timed
operation: in the pairs workload its pairs are all slow; in a collective the others wait for it.
The emulated-network version (a node's link shaped slower) is bench/pairs_slow_node.py.
"""

from __future__ import annotations

import json
import statistics

import pytest

from conftest import fabbench, needs_mpirun
from fabbench.report.runs_report import findings_json, make_report
from fabbench.results.reader import read_results
from fabbench.results.runs import load

pytestmark = [pytest.mark.integration, needs_mpirun]

QUICK = ["--budget", "0.03", "--timeout", "20"]


def findings(path) -> dict:
    (found,) = findings_json(load([path]))
    return found


@pytest.mark.parametrize("primitive,schedule", [("mpi", "auto"), ("gloo", "auto"),
                                                ("mpi", "serial")])
def test_pairs_names_the_held_back_rank(tmp_path, primitive, schedule):
    out = tmp_path / "pairs.jsonl"
    p = fabbench("run", "--fabric", "ethernet", "--primitive", primitive, "--ranks", "4",
                 "--workload", "pairs", "--sizes", "8,256K", "--check", *QUICK, "--out",
                 str(out), "--pair-schedule", schedule, env={"FABBENCH_FAULT": "delay:3:::20"},
                 timeout=150)
    assert p.returncode == 0, p.stderr[-2000:]
    recs = read_results(out).of_kind("pairs")
    first = [r for r in recs if not r.recheck]
    # auto: rounds, on one host that is not an emulated cluster
    assert {r.schedule for r in first} == {"rounds" if schedule == "auto" else schedule}
    assert len(first) == 12  # 3 rounds x 2 pairs x 2 sizes, every node meeting every other
    assert sorted({(r.a, r.b) for r in first}) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3),
                                                         (2, 3)]
    # after the rounds, rank 3's pairs (below 75 % of the median at 256K) once more, one at a
    # time, and slow again: the hook holds rank 3 back every time
    again = [r for r in recs if r.recheck]
    assert sorted((r.a, r.b) for r in again) == [(0, 3), (1, 3), (2, 3)]
    assert all(r.bytes == 256 << 10 and r.schedule == "serial" for r in again)
    assert all(r.bw_gbyte_s < 0.75 * statistics.median(x.bw_gbyte_s for x in first
                                                        if x.bytes == r.bytes) for r in again)
    assert all(r.correct is True and r.unit == "rank" for r in recs)
    assert "slow rank: rank 3" in p.stdout  # the run's own summary
    report = fabbench("report", str(out), "--json")
    assert report.returncode == 0, report.stderr[-2000:]
    (found,) = json.loads(report.stdout)["findings"]
    assert found["pairs"]["slow"] == [3]
    three = next(n for n in found["pairs"]["nodes"] if n["unit"] == 3)
    assert three["share_max"] < 0.75 and three["pairs"] == 3
    assert found["pairs"]["rechecked"] == [[0, 3], [1, 3], [2, 3]]
    assert found["pairs"]["recovered"] == []
    text = make_report([out]).text
    assert "# slow rank: rank 3" in text and "the median of the pairs without it" in text


@pytest.mark.parametrize("primitive", ["mpi", "gloo"])
def test_late_rank_named_from_the_collective_records(tmp_path, primitive):
    out = tmp_path / "late.jsonl"
    p = fabbench("run", "--fabric", "ethernet", "--primitive", primitive, "--ranks", "4",
                 "--ops", "allreduce", "--sizes", "8:4K:8", *QUICK, "--out", str(out),
                 env={"FABBENCH_FAULT": "delay:2:::20"}, timeout=150)
    assert p.returncode == 0, p.stderr[-2000:]
    recs = read_results(out).of_kind("collective")
    assert all(len(r.rank_samples_us) == 4 for r in recs)
    assert all(len(xs) == r.samples for r in recs for xs in r.rank_samples_us)
    # the slowest rank's time holds the wait (20 ms per operation)
    assert all(r.time_us.p50 > 20000 for r in recs)
    found = findings(out)
    assert [r["rank"] for r in found["late_ranks"]] == [2]
    assert found["late_ranks"][0]["wait_us"] > 10000
    text = fabbench("report", str(out)).stdout
    assert "late rank: rank 2 on host" in text and "waited for it" in text


def test_without_a_hook_no_rank_is_late(tmp_path):
    out = tmp_path / "even.jsonl"
    p = fabbench("run", "--fabric", "ethernet", "--primitive", "gloo", "--ranks", "3",
                 "--ops", "allreduce", "--sizes", "64K:1M:4", *QUICK, "--out", str(out),
                 timeout=150)
    assert p.returncode == 0, p.stderr[-2000:]
    found = findings(out)
    assert found["late_ranks"] == [] and found["late_points_judged"] == 3


def test_a_bad_pair_schedule_is_one_line(tmp_path):
    p = fabbench("run", "--fabric", "ethernet", "--primitive", "gloo", "--workload", "pairs",
                 "--pair-schedule", "sometimes", "--out", str(tmp_path / "p.jsonl"))
    assert p.returncode == 2 and not (tmp_path / "p.jsonl").exists()
    assert p.stderr.strip().splitlines() == [
        "fabbench: error: --pair-schedule takes auto, rounds, serial, not 'sometimes'"]


def test_pairs_over_horovod_is_refused_in_one_line(tmp_path):
    p = fabbench("run", "--fabric", "ethernet", "--primitive", "horovod", "--workload",
                 "pairs", "--out", str(tmp_path / "h.jsonl"))
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "fabbench: error: --workload pairs needs point-to-point messages, which horovod does "
        "not have: use --primitive mpi or gloo"]  # on host buffers: nccl moves GPU buffers only
