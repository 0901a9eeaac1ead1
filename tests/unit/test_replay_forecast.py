"""`fabbench forecast` of a replay (issue 62): the step simulated as the replay runs it (gaps,
blocking and asynchronous operations on one link), the data-parallel groups taken to more
nodes with their whole array kept, the other groups kept at the replay's times, and the model
set beside the measurement at the measured size. The results file is a real 2-rank gloo replay
of tests/fixtures/replay/forecast-trace.json (its trace path and digest rewritten here)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from conftest import cli
from fabbench.scaling import costs, replay_whatif
from fabbench.trace.document import RankTrace, Trace, TraceGroup, TraceOp, TraceStep

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay"
LINK = costs.Params(alpha_s=0.0, beta_s_per_byte=1e-9)  # 1 GB/s, no latency


def _op(op: str, nbytes: int, gap_us: float = 0.0, async_op: bool = False, group: int = 0,
        peer: int | None = None) -> TraceOp:
    return TraceOp(op=op, group=group, bytes=nbytes, gap_us=gap_us, async_op=async_op,
                   peer=peer)


def test_a_step_overlaps_asynchronous_operations_with_the_compute_after_them():
    time_of = {1000: 2e-3, 500: 1e-3}
    ops = [_op("allreduce", 1000, gap_us=1000, async_op=True),   # 1 ms compute, 2 ms on link
           _op("allreduce", 500, gap_us=1000, async_op=True),    # issued at 2, link free at 3
           _op("broadcast", 500, gap_us=500, peer=0)]            # issued at 2.5, waits the link
    step, comm = replay_whatif.step_s(ops, lambda o: time_of[o.bytes])
    # link: 1-3, 3-4, then the blocking broadcast 4-5: the step ends at 5 ms
    assert step == pytest.approx(5e-3) and comm == pytest.approx(4e-3)
    blocking = [dataclasses.replace(o, async_op=False) for o in ops]
    # blocking: 1+2, +1+1, +0.5+1 = 6.5 ms
    assert replay_whatif.step_s(blocking, lambda o: time_of[o.bytes])[0] == pytest.approx(6.5e-3)
    # the tail (the optimizer's compute) starts once every operation is done: 5 + 1.5 ms
    assert replay_whatif.step_s(ops, lambda o: time_of[o.bytes], 1.5e-3)[0] == \
        pytest.approx(6.5e-3)


def _trace(world: int = 4) -> Trace:
    groups = (TraceGroup(0, tuple(range(world)), "world"), TraceGroup(1, (0, 1), "tp"),
              TraceGroup(2, (2, 3), "tp"))
    ranks = []
    for r in range(world):
        tp = 1 if r < 2 else 2
        ops = (_op("allgather", 1 << 20, gap_us=100, group=tp),
               _op("allreduce", 8 << 20, gap_us=2000, async_op=True))
        ranks.append(RankTrace(r, (TraceStep(ops=ops),)))
    return Trace(world=world, groups=groups, ranks=tuple(ranks), source={"kind": "test"})


def _profile(trace: Trace, measured_tp_us: float) -> replay_whatif.ReplayProfile:
    op = trace.ranks[0].steps[0].ops[0]
    keys = {replay_whatif.key_of(trace.ranks[r].steps[0].ops[0]) for r in range(trace.world)}
    assert len(keys) == 2 and op.group == 1  # two tensor-parallel groups, one key each
    return replay_whatif.ReplayProfile(
        trace=trace, path="t.json", mode="gaps", ranks=trace.world, measured_step_s=1.0,
        measured_exposed_s=0.5, measured_us=dict.fromkeys(keys, measured_tp_us))


def test_the_data_parallel_group_scales_and_the_others_keep_their_measured_time():
    profile = _profile(_trace(), measured_tp_us=700.0)
    s = 8 << 20
    for nodes in (2, 16, 64):
        got = replay_whatif.predict(profile, nodes, LINK)
        ring = costs.best("allreduce", nodes, s, LINK)[1]
        # 0.1 ms compute, the allgather as the replay measured it (0.7 ms), 2 ms of compute
        # beside the allreduce issued at 2.8 ms
        assert got.comm_s == pytest.approx(0.7e-3 + ring)
        assert got.overhead_s == pytest.approx(0.7e-3 + ring - 0.0)
        assert got.scaling == pytest.approx(2.1e-3 / (2.1e-3 + 0.7e-3 + ring))
    # the whole array kept: allreduce's time grows to 2S/B, no further
    big = replay_whatif.predict(profile, 1 << 16, LINK)
    assert big.comm_s - 0.7e-3 == pytest.approx(2 * s * 1e-9, rel=1e-4)
    # at the measured size the model times the tensor-parallel allgather too (no measured time)
    at = replay_whatif.predict(profile, 4, LINK, scaled=False)
    allgather = costs.best("allgather", 2, (1 << 20) * 2, LINK)[1]
    assert at.nodes == 4 and at.comm_s == pytest.approx(
        allgather + costs.best("allreduce", 4, s, LINK)[1])


@pytest.fixture
def replayed(tmp_path: Path) -> Path:
    """The fixture run, its record pointing at a copy of its trace."""
    trace = tmp_path / "trace.json"
    shutil.copy(FIXTURES / "forecast-trace.json", trace)
    digest = hashlib.sha256(trace.read_bytes()).hexdigest()
    lines = []
    for line in (FIXTURES / "forecast-run.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["kind"] == "replay":
            rec.update(trace=str(trace), trace_sha256=digest)
        lines.append(json.dumps(rec))
    out = tmp_path / "r.jsonl"
    out.write_text("\n".join(lines) + "\n")
    return out


def test_forecast_of_a_replay_sets_the_model_beside_the_measurement(capsys, replayed):
    code, out, err = cli(capsys, "forecast", "--from", str(replayed), "--nodes", "64",
                         "--bandwidth", "10Gbit", "--json")
    assert code == 0, err
    answer = json.loads(out)
    (replay,) = answer["replay"]
    assert replay["mode"] == "gaps" and replay["ranks"] == 2
    assert replay["measured_step_ms"] > 0 and replay["model_step_ms"] > 0
    assert [p["nodes"] for p in replay["by_nodes"]] == [1, 2, 4, 8, 16, 32, 64]
    comm = [p["comm_ms"] for p in replay["by_nodes"]]
    assert comm[0] == 0 and comm == sorted(comm)  # one node moves nothing; more move more
    by_bw = [p["overhead_ms"] for p in replay["by_bandwidth"]]
    assert by_bw == sorted(by_bw, reverse=True)  # a faster link exposes less
    assert "the model at that size and mode" in replay["notes"][0]
    code, text, _ = cli(capsys, "forecast", "--from", str(replayed), "--nodes", "64",
                        "--bandwidth", "10Gbit")
    assert code == 0 and "replay step vs nodes" in text


def test_a_trace_changed_or_gone_leaves_its_forecast_out_and_says_why(capsys, replayed):
    trace = replayed.parent / "trace.json"
    trace.write_text(trace.read_text().replace('"world"', '"everyone"', 1))
    code, out, err = cli(capsys, "forecast", "--from", str(replayed), "--bandwidth", "1Gbit",
                         "--json")
    answer = json.loads(out)
    assert code == 0 and "replay" not in answer
    assert any("the trace changed since it was replayed" in w for w in answer["warnings"])
    trace.unlink()
    code, out, err = cli(capsys, "forecast", "--from", str(replayed), "--bandwidth", "1Gbit")
    assert code == 0 and "the trace cannot be read" in err


def test_the_compute_of_a_step_holds_its_tail():
    trace = _trace()
    tailed = dataclasses.replace(trace, ranks=tuple(
        RankTrace(r.rank, tuple(dataclasses.replace(s, tail_us=400.0 * (1 + r.rank))
                                for s in r.steps)) for r in trace.ranks))
    # gaps of 100 + 2000 µs on every rank; the slowest rank's tail is rank 3's, 1600 µs
    assert _profile(tailed, 1.0).compute_s == pytest.approx(3.7e-3)
    assert _profile(trace, 1.0).compute_s == pytest.approx(2.1e-3)
