"""The replay workload (workloads/replay): its options' refusals, the trace checked against the
plan before any rank starts (one line, exit code 2), the record made of every rank's times, its
schema, the console line, the report's findings and a study cell's row."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from conftest import fabbench
from fabbench.config import RunConfig
from fabbench.errors import UsageError
from fabbench.plan import Plan
from fabbench.results.records import Times
from fabbench.trace.document import TraceOp
from fabbench.workloads.replay.findings import findings
from fabbench.workloads.replay.line import HEADER, line
from fabbench.workloads.replay.record import Replay, ReplayOp
from fabbench.workloads.replay.run import busbw, in_flight, key_of, replay_record
from fabbench.workloads.replay.section import ReplayConfig
from fabbench.workloads.replay.workload import ReplayWorkload
from replay_traces import two_groups


def plan_of(trace: Path | str, *, ranks: int = 2, primitive: str = "gloo",
            more: tuple[str, ...] = ()) -> Plan:
    args = ["--workload", "replay", "--trace", str(trace), *more]
    return Plan.of(RunConfig.from_argv(args), fabric="ethernet", primitive=primitive,
                   device="cpu", ranks=ranks, iface=None, out="r.jsonl", run_id="r")


def written(tmp_path: Path, data: dict | str, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_the_options_refuse_what_they_do_not_take():
    with pytest.raises(UsageError, match=r"^--replay-mode takes gaps, back-to-back, not 'x'$"):
        ReplayConfig(replay_mode="x")
    with pytest.raises(UsageError, match=r"^--replay-steps must be at least 1, not 0$"):
        ReplayConfig(replay_steps=0)
    with pytest.raises(UsageError, match=r"^--replay-warmup must be at least 0, not -1$"):
        ReplayConfig(replay_warmup=-1)


def test_a_good_trace_plans(tmp_path):
    path = tmp_path / "t.json"
    two_groups().write(path)
    plan = plan_of(path, more=("--replay-mode", "back-to-back"))
    assert plan.replay.trace == str(path) and plan.replay.replay_mode == "back-to-back"


def test_the_plan_refuses_a_replay_it_cannot_run(tmp_path):
    path = tmp_path / "t.json"
    two_groups().write(path)
    with pytest.raises(UsageError, match=r"^--workload replay needs --trace PATH"):
        Plan.of(RunConfig.from_argv(["--workload", "replay"]), fabric="ethernet",
                primitive="gloo", device="cpu", ranks=2, iface=None, out="r.jsonl", run_id="r")
    with pytest.raises(UsageError, match=r"is of 2 ranks and the run has 4: .* --ranks 2"):
        plan_of(path, ranks=4)
    for primitive in ("mpi", "horovod"):
        with pytest.raises(UsageError, match=rf"torch.distributed, which {primitive} is not"):
            plan_of(path, primitive=primitive)
    with pytest.raises(UsageError, match=r"^cannot read trace .*nowhere.json: No such file"):
        plan_of(tmp_path / "nowhere.json")


def _doc(**changes) -> dict:
    doc = two_groups().to_json()
    doc.update(changes)
    return doc


def _with_op(rank: int, index: int, **changes) -> dict:
    doc = two_groups().to_json()
    doc["ranks"][rank]["steps"][0]["ops"][index].update(changes)
    return doc


@pytest.mark.parametrize(("doc", "says"), [
    (_with_op(1, 1, bytes=1), r"step 1: ranks 0 and 1 issue different collectives on group 1 "
                              r"\(the replay would hang\)"),
    (_with_op(0, 4, bytes=1), r"step 1: 0 -> 1 \(\d+ bytes\): a send without its receive"),
    (_with_op(0, 4, peer=0), r"rank 0's send names peer 0, itself"),
    (_with_op(0, 3, peer=2), r"a broadcast on group 1 names root 2, which the group has not"),
    (_doc(groups=[{"id": 0, "ranks": [0, 1]}, {"id": 1, "ranks": [1]}]) | {"ranks": [
        {"rank": r, "steps": [{"ops": [{"op": "allreduce", "group": 1, "bytes": 8}]}]}
        for r in range(2)]}, r"rank 0 issues allreduce on group 1, which it is not in"),
    (_doc(ranks=[{"rank": 0, "steps": []}, {"rank": 1, "steps": []}]),
     r"every rank needs the same number of steps, at least one"),
])
def test_a_trace_that_would_hang_is_refused_when_planned(tmp_path, doc, says):
    with pytest.raises(UsageError, match=r"^trace .*t\.json: " + says):
        plan_of(written(tmp_path, doc))


@pytest.mark.parametrize(("text", "says"), [
    ("{\"format\": \"fabbench-trace/1\", \"world\": 2, \"gro", r"is not JSON \(truncated\?\)"),
    (json.dumps(_with_op(0, 0, op="allreduce_coalesced")),
     r"unknown operation 'allreduce_coalesced'"),
    (json.dumps(_doc(world=3)), r"groups\[0\] must hold every rank of the world"),
])
def test_a_bad_trace_is_one_line_and_exit_code_2_before_any_rank_starts(tmp_path, text, says):
    path = written(tmp_path, text)
    out = fabbench("run", "--workload", "replay", "--trace", str(path), "--primitive", "gloo",
                   "--ranks", "2", "--out", str(tmp_path / "r.jsonl"), timeout=120)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert re.search(says, out.stderr), out.stderr
    assert not (tmp_path / "r.jsonl").exists()


# ---- the record of every rank's times ----

KEY_AR = key_of(TraceOp(op="allreduce", group=0, bytes=1 << 20, async_op=True))
KEY_SEND = key_of(TraceOp(op="send", group=0, bytes=1000, peer=1))
KEY_RECV = key_of(TraceOp(op="recv", group=0, bytes=1000, peer=0))


def test_the_record_takes_the_slowest_rank_per_step_and_per_occurrence(tmp_path):
    path = tmp_path / "t.json"
    two_groups(steps=1).write(path)
    plan = plan_of(path, more=("--replay-steps", "2"))
    # per rank: (step, compute, comm) seconds per timed step, and each op's times
    every = [([(0.010, 0.006, 0.005), (0.020, 0.006, 0.015)],
              {KEY_AR: [0.001, 0.002], KEY_SEND: [0.0005, 0.0005]}),
             ([(0.012, 0.004, 0.009), (0.011, 0.007, 0.005)],
              {KEY_AR: [0.003, 0.001], KEY_RECV: [0.0004, 0.0006]})]
    rec = replay_record(plan, two_groups(steps=1), "a" * 64, "gloo/tcp", every)
    assert rec.step_samples_us == [12000.0, 20000.0]  # rank 1's first step, rank 0's second
    assert rec.exposed_samples_us == [8000.0, 14000.0]  # each step less its compute
    assert rec.compute_us.p50 == pytest.approx(5000.0)
    assert rec.comm_us.p50 == pytest.approx(12000.0)
    assert rec.exposed_share == pytest.approx((8 / 12 + 14 / 20) / 2)
    ops = {(o.op, o.peer): o for o in rec.ops}
    assert ops[("allreduce", None)].time_us.max == pytest.approx(3000.0)  # max per occurrence
    assert ops[("allreduce", None)].time_us.min == pytest.approx(2000.0)
    assert ops[("allreduce", None)].ranks == 2 and ops[("allreduce", None)].calls == 2
    assert ops[("allreduce", None)].per_step == 1.0
    assert ops[("send", 1)].ranks == 1 and ops[("recv", 0)].ranks == 1
    assert ops[("allreduce", None)].recorded_us is None  # the trace's 1 MiB allreduce has none
    assert rec.recorded_step_us == 8000.0 and rec.recorded_comm_us == 2000.0
    assert rec.bytes_per_step == 1605632 and rec.ops_per_step == 6.0
    assert rec.link_gbit_s is None and rec.trace_world == 2 and rec.trace_steps == 1
    assert Replay.read(json.loads(json.dumps(rec.to_json()))).to_json() == rec.to_json()


def test_the_record_refuses_an_exposed_share_outside_0_to_1():
    rec = _record()
    with pytest.raises(Exception, match="exposed_share"):
        dataclasses.replace(rec, exposed_share=1.5)


def test_busbw_follows_nccl_tests_per_group():
    # allreduce of S over n: S/t x 2(n-1)/n; allgather's whole array is n times the rank's part
    assert busbw("allreduce", 10**9, 4, 1e6) == pytest.approx(1.5)
    assert busbw("allgather", 10**9, 4, 1e6) == pytest.approx(3.0)
    assert busbw("reduce_scatter", 10**9, 2, 1e6) == pytest.approx(1.0)
    assert busbw("broadcast", 10**9, 8, 1e6) == busbw("reduce", 10**9, 8, 1e6) == 1.0
    assert busbw("send", 10**9, 2, 1e6) == pytest.approx(1.0)
    assert busbw("barrier", 0, 2, 5.0) is None and busbw("allreduce", 8, 1, 5.0) is None


# ---- the line, the findings, a study cell's row ----

def _op(op: str, nbytes: int, p50: float, per_step: float = 1.0,
        bw: float | None = 0.05) -> ReplayOp:
    t = Times(min=p50, p50=p50, mean=p50, p99=p50, max=p50)
    return ReplayOp(op=op, group=0, group_size=2, bytes=nbytes, dtype="float32", peer=None,
                    async_op=op == "allreduce", ranks=2, per_step=per_step, calls=10,
                    time_us=t, busbw_gbyte_s=bw, recorded_us=None)


def _record(**changes) -> Replay:
    t = Times(min=1.0, p50=1000.0, mean=1000.0, p99=1000.0, max=1000.0)
    base = Replay(run_id="r", trace="/t/ddp.json", trace_sha256="0" * 64, trace_world=2,
                  trace_steps=1, groups=1, mode="gaps", ranks=2, steps=10, warmup=2,
                  transport="gloo/tcp", ops_per_step=2.0, bytes_per_step=2 << 20,
                  step_us=dataclasses.replace(t, p50=10000.0),
                  compute_us=dataclasses.replace(t, p50=7500.0),
                  comm_us=dataclasses.replace(t, p50=4000.0),
                  exposed_us=dataclasses.replace(t, p50=2500.0), exposed_share=0.25,
                  step_samples_us=[10000.0] * 10, exposed_samples_us=[2500.0] * 10,
                  recorded_step_us=9000.0, recorded_comm_us=None, link_gbit_s=None,
                  ops=[_op("allgather", 1 << 20, 500.0, 2.0), _op("allreduce", 1 << 20, 3000.0),
                       _op("barrier", 0, 100.0, bw=None)])
    return dataclasses.replace(base, **changes)


def test_the_line_shows_the_step_its_compute_and_exposed_share():
    shown = line(_record())
    assert shown.split() == ["gaps", "10", "10000.0", "7500.0", "2500.0", "25.0%", "4000.0",
                             "2.0", "gloo/tcp"]
    assert HEADER.split()[1:3] == ["mode", "steps"]


def test_the_findings_name_the_largest_operation_and_the_exposed_share():
    f = findings(_record())
    rows = f.table.splitlines()
    assert rows[1].split()[0] == "allreduce" and rows[2].split()[0] == "allgather"  # per step
    assert rows[1].split()[-2:] == ["73.2%", "0.050"]  # 3000 of the step's 4100 us
    assert "waited on communication beyond its 7.50 ms of compute" in f.text[0]
    assert "2.50 ms (25%)" in f.text[0] and "the job's own step took 9.00 ms" in f.text[0]
    assert f.text[1].startswith("the largest: allreduce of 1M on group 0 (2 ranks), 3.00 ms")
    assert len(f.text) == 2 and "% link" not in rows[0]  # no link: nothing said of one


def test_the_findings_set_the_operations_against_an_emulated_link():
    # 0.05 GB/s of busbw on a 1 Gbit/s link: 40 % of it; at the line rate the operations'
    # 4000 us (with a busbw) take 1600
    f = findings(_record(link_gbit_s=1.0))
    assert f.table.splitlines()[0].split()[-2:] == ["%", "link"]
    assert f.table.splitlines()[1].split()[-1] == "40.0%"
    assert "(1 Gbit/s) these operations would take 1.60 ms a step; they took 4.10 ms" in f.text[2]
    assert f.text[0].startswith("on the 1 Gbit/s link, the step took 10.00 ms")  # a study's cells


def test_a_study_cell_ranks_by_step_time_with_the_exposed_share():
    row = ReplayWorkload().study([_record()])
    assert row is not None and row.median == 10000.0 and row.comm_share == 0.25
    assert row.samples == [10000.0] * 10 and row.throughput == pytest.approx(0.2097152)
    assert ReplayWorkload().study([]) is None


def test_a_study_cell_of_kind_replay_takes_trace_and_mode(tmp_path):
    from fabbench.study.spec import load_study

    path = tmp_path / "t.json"
    two_groups().write(path)
    study = tmp_path / "s.toml"
    study.write_text(f"""name = "replayed"
description = "one trace, two modes"
[matrix]
fabric = ["ethernet"]
primitive = ["gloo"]
workload = ["gaps", "alone"]
[run]
ranks_per_node = 2
[workload.gaps]
kind = "replay"
trace = "{path}"
[workload.alone]
kind = "replay"
trace = "{path}"
mode = "back-to-back"
replay_steps = 4
""")
    cells = {c.id: c for c in load_study(str(study)).cells}
    assert cells["alone-ethernet-gloo-n1"].run_args()[-6:] == [
        "--trace", str(path), "--replay-mode", "back-to-back", "--replay-steps", "4"]
    assert cells["gaps-ethernet-gloo-n1"].run_args()[-2:] == ["--trace", str(path)]


def test_communication_in_flight_counts_overlapping_operations_once():
    # two async buckets in flight together (0-3 and 1-2.5), a gap, a blocking op (4-5)
    assert in_flight([(4.0, 1.0), (0.0, 3.0), (1.0, 1.5)]) == pytest.approx(4.0)
    assert in_flight([(0.0, 1.0), (1.0, 1.0)]) == pytest.approx(2.0)  # end to end
    assert in_flight([]) == 0.0
