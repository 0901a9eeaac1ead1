"""nccl-tests' and OSU's output read as points (fabbench.floors.peer_output): each fixture of
tests/fixtures/foreign (README.md there names the source and line of every format) reads into
the points it holds, whatever the file is called; a malformed one is one UsageError line naming
the file and the line."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from fabbench.errors import UsageError
from fabbench.floors.peer_output import read_foreign
from fabbench.floors.points import METRICS, WORKLOAD_METRICS, Point

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "foreign"
GOOD = sorted(p.name for p in FIXTURES.iterdir()
              if p.suffix in (".txt", ".json") and not p.name.startswith("bad-"))


def read(name: str) -> list[Point]:
    return read_foreign(FIXTURES / name)


def by_size(points: list[Point]) -> dict[int | None, Point]:
    return {p.bytes: p for p in points}


def test_nccl_tests_2_13_one_host_eight_ranks():
    points = read("nccl-tests-2.13.9-all_reduce_perf-8gpu.txt")
    assert [p.bytes for p in points] == [2 ** e for e in range(3, 28)]
    assert {(p.source, p.workload, p.op, p.dtype, p.primitive, p.transport, p.ranks, p.nodes)
            for p in points} == {("nccl-tests", "collectives", "allreduce", "float32", "nccl",
                                  None, 8, 1)}
    last = points[-1]
    assert dict(last.metrics) == {"time": 1026.1, "algbw": 130.8, "busbw": 228.91}
    assert "in-place 1032.3 µs" in last.evidence and "#wrong 0" in last.evidence
    assert "told by the file's name" in last.evidence  # 2.13 prints no test name
    assert last.run.endswith(":1 all_reduce_perf")


def test_nccl_tests_2_19_two_hosts_keeps_a_wrong_row_and_says_so():
    points = read("nccl-tests-2.19.6-2node.txt")
    assert len(points) == 25
    assert {(p.op, p.ranks, p.nodes) for p in points} == {("allreduce", 2, 2)}
    rows = by_size(points)
    assert dict(rows[134217728].metrics) == {"time": 5733.83, "algbw": 23.41, "busbw": 23.41}
    assert "out-of-place" in rows[134217728].evidence  # the in-place figures are not the point's
    assert "#wrong 3" in rows[65536].evidence and rows[65536].metrics["busbw"] == 2.64
    assert all("#wrong 0" in p.evidence for p in points if p.bytes != 65536)
    assert points[0].run == "nccl-tests-2.19.6-2node.txt:2 all_reduce_perf"  # after -J's line


def test_nccl_tests_json_holds_the_same_figures_as_the_table():
    text, json = read("nccl-tests-2.19.6-2node.txt"), read("nccl-tests-2.19.6-2node.json")
    assert [p.bytes for p in json] == [p.bytes for p in text]
    for t, j in zip(text, json, strict=True):
        assert (j.op, j.dtype, j.ranks, j.nodes, j.primitive) == (t.op, t.dtype, t.ranks, t.nodes,
                                                                  t.primitive)
        for name in ("time", "algbw", "busbw"):
            assert j.metrics[name] == pytest.approx(t.metrics[name], rel=1e-3, abs=0.006)
    assert "#wrong 3" in by_size(json)[65536].evidence
    assert json[0].run == "nccl-tests-2.19.6-2node.json all_reduce_perf 2026-07-21 09:12:41"


def test_nccl_tests_per_iteration_columns_timestamps_and_no_check():
    points = read("nccl-tests-2.19.6-allgather-periter.txt")
    assert [p.bytes for p in points] == [1024, 4096, 16384, 65536, 262144, 1048576]
    assert {(p.op, p.dtype, p.ranks, p.nodes) for p in points} == {("allgather", "float16", 4, 2)}
    assert dict(points[-1].metrics) == {"time": 61.21, "algbw": 17.13, "busbw": 12.85}
    assert all("#wrong N/A (data not checked)" in p.evidence for p in points)


def test_osu_collective_7_2_and_5_7():
    new, old = read("osu-7.2-allreduce.txt"), read("osu-5.7-allreduce.txt")
    assert [p.bytes for p in new] == [2 ** e for e in range(0, 21)]
    assert [p.bytes for p in old] == [2 ** e for e in range(2, 21)]  # floats, from 4 B
    for points in (new, old):
        assert {(p.source, p.workload, p.op, p.primitive, p.transport, p.ranks, p.nodes)
                for p in points} == {("osu", "collectives", "allreduce", "mpi", None, None, None)}
        assert all(set(p.metrics) == {"time"} for p in points)
    assert {p.dtype for p in new} == {"int8"} and {p.dtype for p in old} == {None}
    assert by_size(new)[1048576].metrics["time"] == 204.98  # Avg Latency(us), not Min or Max
    assert "min 176.28, max 239.83 µs over ranks; 100 iterations" in by_size(new)[1048576].evidence


@pytest.mark.parametrize("name, rows, last", [
    ("osu-7.2-bw.txt", 23, 23.84231), ("osu-7.2-bibw.txt", 23, 46.11583)])
def test_osu_bandwidth_is_gb_per_s_from_its_mb_per_s(name, rows, last):
    points = read(name)
    assert len(points) == rows
    assert {(p.workload, p.op, p.ranks, p.dtype) for p in points} == {
        ("pairs", "sendrecv", 2, "int8")}
    assert points[-1].bytes == 4194304
    assert points[-1].metrics == {"bw": pytest.approx(last)}  # MB/s (1e6 B/s) / 1000
    assert "read as sendrecv" in points[-1].evidence


def test_osu_latency_from_size_zero():
    points = read("osu-7.2-latency.txt")
    assert [p.bytes for p in points] == [0] + [2 ** e for e in range(0, 23)]
    assert points[0].metrics == {"time": 1.59}
    assert "half the round trip" in points[0].evidence


@pytest.mark.parametrize("name", GOOD)
def test_points_carry_known_metrics_of_their_workload(name):
    for p in read(name):
        assert p.metrics and set(p.metrics) <= set(WORKLOAD_METRICS[p.workload]) <= set(METRICS)
        assert p.transport is None and p.file == str(FIXTURES / name)


@pytest.mark.parametrize("name", [n for n in GOOD if "2.13.9" not in n])
@pytest.mark.parametrize("as_name", ["results.log", "out.json", "osu_bw.txt", "noext"])
def test_the_format_is_told_from_the_content_not_the_name(tmp_path, name, as_name):
    copy = tmp_path / as_name
    shutil.copyfile(FIXTURES / name, copy)

    def same(points: list[Point]) -> list[Point]:
        return [dataclasses.replace(p, file="", run=p.run.split(" ", 1)[-1]) for p in points]

    assert same(read_foreign(copy)) == same(read(name))


def test_a_version_that_names_no_test_needs_a_file_that_does(tmp_path):
    copy = tmp_path / "results.log"
    shutil.copyfile(FIXTURES / "nccl-tests-2.13.9-all_reduce_perf-8gpu.txt", copy)
    with pytest.raises(UsageError) as info:
        read_foreign(copy)
    assert str(info.value).startswith(f"{copy}:1: this nccl-tests output does not name its test")
    shutil.copyfile(copy, tmp_path / "alltoallv_perf.log")  # not read as alltoall
    with pytest.raises(UsageError):
        read_foreign(tmp_path / "alltoallv_perf.log")


BAD = {"bad-not-results.txt": 1, "bad-nccl-row.txt": 32, "bad-nccl-empty.txt": 11,
       "bad-nccl-shape.json": 1, "bad-nccl-cut.json": 1, "bad-osu-row.txt": 14,
       "bad-osu-empty.txt": 2, "bad-osu-test.txt": 2}


def test_every_malformed_fixture_is_listed():
    assert sorted(BAD) == sorted(p.name for p in FIXTURES.glob("bad-*"))


@pytest.mark.parametrize("name, line", sorted(BAD.items()))
def test_malformed_input_is_one_line_naming_file_and_line(name, line):
    with pytest.raises(UsageError) as info:
        read(name)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{FIXTURES / name}:{line}: ")
    assert "expected" in message


def test_an_empty_file_and_an_unknown_nccl_test(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(UsageError, match=r"empty.txt:1: empty file; expected"):
        read_foreign(empty)
    gather = tmp_path / "gather.txt"
    gather.write_text((FIXTURES / "nccl-tests-2.19.6-2node.txt").read_text()
                      .replace("starting: all_reduce_perf", "starting: gather_perf"))
    with pytest.raises(UsageError, match=r"gather.txt:3: nccl-tests' gather_perf is not a test"):
        read_foreign(gather)


def test_one_log_with_several_runs_and_nccl_log_lines_between_rows(tmp_path):
    nccl = (FIXTURES / "nccl-tests-2.19.6-2node.txt").read_text().splitlines(keepends=True)
    nccl.insert(14, "node01:51234:51301 [0] NCCL INFO comm 0x55d1c0 rank 0 nranks 2 cudaDev 0 "
                    "nvmlDev 0 busId 18000 commId 0x1f2e3d4c - Init COMPLETE\n")
    nccl.insert(20, "node02:39877:39877 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got "
                    "async event : port error\n")
    log = tmp_path / "job.out"
    log.write_text("Starting job 4242 on node01,node02\n" + "".join(nccl)
                   + (FIXTURES / "osu-7.2-bw.txt").read_text())
    points = read_foreign(log)
    assert [p.source for p in points] == ["nccl-tests"] * 25 + ["osu"] * 23
    assert {p.run for p in points} == {"job.out:3 all_reduce_perf", "job.out:47 osu_bw"}
    assert [p.metrics for p in points[:25]] == [p.metrics
                                               for p in read("nccl-tests-2.19.6-2node.txt")]


def test_a_figure_that_is_not_finite_is_left_out(tmp_path):
    copy = tmp_path / "nan.txt"
    copy.write_text((FIXTURES / "nccl-tests-2.19.6-2node.txt").read_text().replace(
        "   23.41   23.41       0", "   23.41    -nan       0"))
    last = read_foreign(copy)[-1]
    assert set(last.metrics) == {"time", "algbw"} and "busbw nan left out" in last.evidence
