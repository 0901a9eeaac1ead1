"""PyTorch execution traces read into fabbench-trace/1 (fabbench.trace.et), on traces recorded
here with `fabbench trace` (tests/fixtures/replay: 2 gloo ranks on CPU, gzipped; docs/replay.md
says how they were made): DDP of gpt-tiny, FSDP2 of gpt-tiny, a job of two process groups and
one of point-to-point operations.
Each broken variant of a trace is refused in one line with exit code 2."""

from __future__ import annotations

import functools
import gzip
import json
import shutil
from pathlib import Path

import pytest

from conftest import cli
from fabbench.errors import UsageError
from fabbench.networks import parameter_count
from fabbench.trace import et
from fabbench.trace.document import Trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay"
BYTES = 4 * parameter_count("gpt-tiny")  # float32 gradients, every parameter once


@functools.cache
def _read(job: str, *, groups: bool = True, kineto: bool = True) -> et.Reading:
    files = et.files_in(FIXTURES / job)
    return et.read([et.RankFiles(f.et, f.kineto if kineto else None,
                                 f.groups if groups else None) for f in files])


def test_ddp_allreduces_every_gradient_once_a_step_on_the_default_group():
    reading = _read("ddp")
    trace = reading.trace
    assert reading.warnings == ()
    assert trace.world == 2 and [g.ranks for g in trace.groups] == [(0, 1)]
    assert trace.source["groups"] == "recorded by fabbench trace"
    for rank in trace.ranks:
        assert len(rank.steps) == 2  # recorded with --steps 2
        for step in rank.steps:
            reduced = [o for o in step.ops if o.op == "allreduce"]
            assert sum(o.bytes for o in reduced) == BYTES
            assert all(o.async_op and o.dtype == "float32" and o.group == 0 for o in reduced)
        # DDP's start: its parameters broadcast from rank 0
        first = rank.steps[0].ops
        assert any(o.op == "broadcast" and o.bytes == BYTES and o.peer == 0 for o in first)


def test_fsdp2_gathers_each_shard_and_scatters_each_gradient_shard():
    trace = _read("fsdp").trace
    for rank in trace.ranks:
        (step,) = rank.steps
        names = [o.op for o in step.ops]
        assert set(names) == {"allgather", "reduce_scatter"}
        scattered = sum(o.bytes for o in step.ops if o.op == "reduce_scatter")
        assert scattered == BYTES // 2  # each rank's half of the gradients
        gathered = [o.bytes for o in step.ops if o.op == "allgather"]
        # forward gathers every shard (root, 2 blocks), backward the 2 blocks again
        assert sum(gathered[:3]) == BYTES // 2 and gathered[3:] == gathered[1:3][::-1]


def test_two_groups_each_operation_on_the_group_the_job_used():
    trace = _read("groups").trace
    assert [g.ranks for g in trace.groups] == [(0, 1), (0, 1), (0,), (1,)]
    for rank in trace.ranks:
        last = rank.steps[-1].ops
        metric = [o for o in last if o.bytes == 4096]
        assert [o.group for o in metric] == [2 + rank.rank]  # its own position's group
        assert [(o.op, o.group) for o in last if o.bytes == 64] == [("broadcast", 0)]
        ddp = [o for o in last if o.op == "allreduce" and o.bytes > 4096]
        assert sum(o.bytes for o in ddp) == BYTES and {o.group for o in ddp} == {1}


def test_point_to_point_peers_are_global_ranks_and_only_the_i_calls_async():
    trace = _read("p2p").trace
    assert [g.ranks for g in trace.groups] == [(0, 1), (0, 1)]
    expected = {0: [("send", 1, False), ("recv", 1, True), ("send", 0, True), ("recv", 0, True)],
                1: [("recv", 1, False), ("send", 1, True), ("send", 0, True), ("recv", 0, True)]}
    for rank in trace.ranks:
        for step in rank.steps:
            # dist.send/recv (blocking, though they call isend/irecv inside), the reply with
            # irecv/isend, then batch_isend_irecv on the default group
            assert [(o.op, o.group, o.async_op) for o in step.ops] == expected[rank.rank]
            assert {o.peer for o in step.ops} == {1 - rank.rank}
            assert {o.bytes for o in step.ops} == {4000}


def test_times_hold_together():
    for job in ("ddp", "fsdp", "groups", "p2p"):
        for rank in _read(job).trace.ranks:
            for step in rank.steps:
                assert step.wall_us is not None and step.comm_us is not None
                assert 0 < step.comm_us <= step.wall_us
                assert all(o.dur_us is not None and o.dur_us > 0 for o in step.ops)
                assert sum(o.gap_us for o in step.ops) + step.tail_us < step.wall_us
                assert step.tail_us >= 0


def test_the_optimizers_compute_after_the_last_operation_is_the_steps_tail():
    # a step that an Optimizer.step ends: its compute after the last allreduce's wait; the
    # recording's last step, which no optimizer step ends, ends at its last operation
    for job in ("ddp", "groups", "p2p"):
        for rank in _read(job).trace.ranks:
            first, last = rank.steps
            assert 0 < first.tail_us < 20_000, (job, first.tail_us)
            assert last.tail_us == 0.0


def test_a_plain_execution_trace_is_read_as_all_on_group_0_and_says_so():
    reading = _read("groups", groups=False)
    assert len(reading.warnings) == 1 and "group 0" in reading.warnings[0]
    assert {o.group for r in reading.trace.ranks for s in r.steps for o in s.ops} == {0}
    assert len(reading.trace.groups) == 1


def test_without_kineto_there_are_no_times():
    trace = _read("ddp", kineto=False).trace
    assert trace.source["timing"].startswith("none")
    step = trace.ranks[0].steps[1]
    assert step.wall_us is None and step.comm_us is None
    assert all(o.dur_us is None and o.gap_us == 0.0 for o in step.ops)


def test_the_written_trace_reads_back_the_same(tmp_path):
    trace = _read("groups").trace
    trace.write(tmp_path / "t.json")
    assert Trace.read(tmp_path / "t.json") == trace


def test_ddps_wait_on_its_first_all_gather_is_not_read_as_compute():
    # DDP's start all-gathers the parameters' shapes (async) and waits on it at once, then
    # broadcasts: between them only bookkeeping (about 1.5 ms here); the wait, up to 0.2 s on
    # the rank that came first, is not the broadcast's gap
    for rank in _read("ddp").trace.ranks:
        gather, broadcast = rank.steps[0].ops[:2]
        assert (gather.op, gather.async_op, broadcast.op) == ("allgather", True, "broadcast")
        assert broadcast.gap_us < 2000


def test_waiting_on_an_async_op_is_not_compute():
    # thread busy 0-10 and 30-40; an async op in flight 5-25: 10-25 is waiting, 25-30 compute
    busy = [(0.0, 10.0), (30.0, 40.0)]
    assert et._idle(0.0, 40.0, [(5.0, 25.0)], busy) == 15.0
    assert et._idle(0.0, 40.0, [], busy) == 0.0  # nothing in flight: all of it counts
    assert et._idle(12.0, 20.0, [(5.0, 25.0)], busy) == 8.0


# --- refusals: each a broken variant of a real trace, one line, exit code 2 --------------------

def _copy(tmp_path: Path, job: str = "ddp") -> Path:
    folder = tmp_path / job
    shutil.copytree(FIXTURES / job, folder)
    return folder


def _load(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _save(path: Path, doc: dict) -> None:
    path.write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=1))


def _refused(capsys, folder: Path, out: Path, *words: str) -> str:
    code, stdout, err = cli(capsys, "trace", "--read", str(folder), "--out", str(out))
    assert code == 2, (stdout, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    assert not out.exists()
    return err


def test_the_fixtures_themselves_are_read(capsys, tmp_path):
    code, out, err = cli(capsys, "trace", "--read", str(_copy(tmp_path)), "--out",
                         str(tmp_path / "t.json"))
    assert code == 0, err
    assert "2 ranks, 1 process groups, 2 steps" in out
    assert Trace.read(tmp_path / "t.json").world == 2


def test_not_json_refused(capsys, tmp_path):
    folder = _copy(tmp_path)
    (folder / "et-1.json.gz").write_bytes(gzip.compress(b"<html>not a trace</html>"))
    _refused(capsys, folder, tmp_path / "t.json", "et-1.json.gz", "not JSON")


def test_truncated_refused(capsys, tmp_path):
    folder = _copy(tmp_path)
    text = gzip.decompress((folder / "et-0.json.gz").read_bytes())
    (folder / "et-0.json.gz").write_bytes(gzip.compress(text[:len(text) // 2]))
    _refused(capsys, folder, tmp_path / "t.json", "et-0.json.gz", "truncated")


def test_a_trace_the_observer_did_not_finish_refused(capsys, tmp_path):
    folder = _copy(tmp_path)
    doc = _load(folder / "et-0.json.gz")
    del doc["finish_ts"]
    _save(folder / "et-0.json.gz", doc)
    _refused(capsys, folder, tmp_path / "t.json", "finish_ts")


@pytest.mark.parametrize("schema", ["2.0.0", None, "1.1.1"])
def test_wrong_schema_refused(capsys, tmp_path, schema):
    folder = _copy(tmp_path)
    doc = _load(folder / "et-1.json.gz")
    doc["schema"] = schema
    _save(folder / "et-1.json.gz", doc)
    _refused(capsys, folder, tmp_path / "t.json", "not a PyTorch execution trace")


@pytest.mark.parametrize("name", ["c10d::gather_", "c10d::frobnicate_"])
def test_unknown_communication_op_refused(capsys, tmp_path, name):
    folder = _copy(tmp_path)
    doc = _load(folder / "et-0.json.gz")
    node = next(n for n in doc["nodes"] if n["name"] == "c10d::allreduce_")
    node["name"] = name
    _save(folder / "et-0.json.gz", doc)
    _refused(capsys, folder, tmp_path / "t.json", "unknown communication operation", name)


def test_a_dtype_fabbench_does_not_replay_refused(capsys, tmp_path):
    folder = _copy(tmp_path)
    doc = _load(folder / "et-0.json.gz")
    node = next(n for n in doc["nodes"] if n["name"] == "c10d::allreduce_")
    node["inputs"]["types"][0] = "GenericList[Tensor(c10::complex<float>)]"
    _save(folder / "et-0.json.gz", doc)
    _refused(capsys, folder, tmp_path / "t.json", "et-0.json.gz", "complex")


def test_ranks_that_disagree_cannot_all_be_on_group_0(capsys, tmp_path):
    folder = _copy(tmp_path, "groups")
    for rank in (0, 1):
        (folder / f"groups-{rank}.json").unlink()  # a plain execution trace
    doc = _load(folder / "et-1.json.gz")  # rank 1 never issued its metric all-reduces
    doc["nodes"] = [n for n in doc["nodes"] if not (
        n["name"] == "c10d::allreduce_" and n["inputs"]["shapes"][0] == [[1024]])]
    _save(folder / "et-1.json.gz", doc)
    _refused(capsys, folder, tmp_path / "t.json", "disagree", "group 0", "fabbench trace")


def test_a_recording_cut_short_by_the_jobs_own_profiler_refused(capsys, tmp_path):
    folder = _copy(tmp_path, "p2p")
    groups = json.loads((folder / "groups-1.json").read_text())
    groups["stopped"] = "the job started its own torch.profiler"
    (folder / "groups-1.json").write_text(json.dumps(groups))
    _refused(capsys, folder, tmp_path / "t.json", "groups-1.json", "own torch.profiler",
             "--read")


def test_kineto_traces_of_some_ranks_only_refused(capsys, tmp_path):
    folder = _copy(tmp_path, "p2p")
    (folder / "kineto-1.json.gz").unlink()
    _refused(capsys, folder, tmp_path / "t.json", "Kineto trace", "every rank's")


def test_another_runs_kineto_trace_refused(tmp_path):
    folder = _copy(tmp_path)
    shutil.copyfile(FIXTURES / "fsdp" / "kineto-0.json.gz", folder / "kineto-0.json.gz")
    with pytest.raises(UsageError, match="the Kineto trace does not cover it"):
        et.read(et.files_in(folder))


def test_an_existing_output_is_never_overwritten(capsys, tmp_path):
    out = tmp_path / "t.json"
    out.write_text("mine\n")
    code, _, err = cli(capsys, "trace", "--read", str(FIXTURES / "ddp"), "--out", str(out))
    assert code == 2 and "never overwrites" in err and out.read_text() == "mine\n"


def test_a_recording_never_overwrites_a_trace(capsys, tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "trace.json").write_text("{}\n")
    code, _, err = cli(capsys, "trace", "--out", str(tmp_path / "t"), "--", "false")
    assert code == 2 and err.count("\n") == 1 and "never overwritten" in err
    assert (tmp_path / "t" / "trace.json").read_text() == "{}\n"
