"""`fabbench trace --out DIR -- torchrun ...` records real gloo jobs on CPU with no change to
their scripts (examples/replay): DDP of gpt-tiny and FSDP2 of gpt-tiny at 2 ranks, the job of
two process groups at 4 ranks; the job's own sitecustomize still runs; a failing command's
exit code is fabbench's, in one line. About a minute on 2 cores."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from conftest import LOOPBACK_ENV, REPO, fabbench
from fabbench.networks import parameter_count
from fabbench.trace.document import Trace

pytestmark = pytest.mark.integration

EXAMPLES = REPO / "examples" / "replay"
BYTES = 4 * parameter_count("gpt-tiny")


def _record(out: Path, script: str, ranks: int, *args: str, env: dict | None = None):
    return fabbench("trace", "--out", str(out), "--steps", "2", "--",
                    sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "--nproc-per-node", str(ranks), str(EXAMPLES / script), "--steps", "3",
                    "--input", "16", *args, timeout=300, env={**LOOPBACK_ENV, **(env or {})})


def test_ddp_recorded_and_the_jobs_own_sitecustomize_still_runs(tmp_path):
    mine = tmp_path / "site"
    mine.mkdir()
    (mine / "sitecustomize.py").write_text(
        "import os\n"
        "open(os.path.join(os.environ['MARKS'], str(os.getpid())), 'w').close()\n")
    (tmp_path / "marks").mkdir()
    env = {"PYTHONPATH": os.pathsep.join([str(mine), os.environ.get("PYTHONPATH", "")]),
           "MARKS": str(tmp_path / "marks")}
    proc = _record(tmp_path / "t", "ddp.py", 2, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trace = Trace.read(tmp_path / "t" / "trace.json")
    assert trace.world == 2 and len(trace.groups) == 1
    for rank in trace.ranks:
        assert len(rank.steps) == 2
        assert sum(o.bytes for o in rank.steps[1].ops if o.op == "allreduce") == BYTES
    raw = sorted(p.name for p in (tmp_path / "t" / "raw").iterdir())
    assert raw == ["et-0.json", "et-1.json", "groups-0.json", "groups-1.json",
                   "kineto-0.json", "kineto-1.json"]
    # torchrun and its 2 ranks each ran the job's own sitecustomize after fabbench's
    assert len(list((tmp_path / "marks").iterdir())) >= 3
    # a second recording into the same directory is refused, the trace kept
    again = _record(tmp_path / "t", "ddp.py", 2)
    assert again.returncode == 2 and "never overwritten" in again.stderr
    assert Trace.read(tmp_path / "t" / "trace.json") == trace


def test_fsdp2_recorded(tmp_path):
    proc = _record(tmp_path / "t", "fsdp.py", 2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trace = Trace.read(tmp_path / "t" / "trace.json")
    for rank in trace.ranks:
        for step in rank.steps:
            assert {o.op for o in step.ops} == {"allgather", "reduce_scatter"}
            assert sum(o.bytes for o in step.ops if o.op == "reduce_scatter") == BYTES // 2


def test_two_process_groups_at_4_ranks(tmp_path):
    proc = _record(tmp_path / "t", "groups.py", 4)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trace = Trace.read(tmp_path / "t" / "trace.json")
    assert [g.ranks for g in trace.groups] == [(0, 1, 2, 3), (0, 1), (2, 3), (0, 2), (1, 3)]
    for rank in trace.ranks:
        last = rank.steps[-1].ops
        pair, position = 1 + rank.rank // 2, 3 + rank.rank % 2
        assert {o.group for o in last if o.op == "allreduce" and o.bytes > 4096} == {pair}
        assert [o.group for o in last if o.bytes == 4096] == [position]
        assert [o.group for o in last if o.op == "broadcast" and o.bytes == 64] == [0]


def test_a_failing_command_says_so_in_one_line_with_its_exit_code(tmp_path):
    proc = fabbench("trace", "--out", str(tmp_path / "t"), "--", "sh", "-c", "exit 3")
    assert proc.returncode == 3
    assert proc.stderr.count("\n") == 1 and "failed (exit 3)" in proc.stderr
    assert not (tmp_path / "t" / "trace.json").exists()
    missing = fabbench("trace", "--out", str(tmp_path / "u"), "--", "no-such-command-here")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    nothing = fabbench("trace", "--out", str(tmp_path / "v"), "--", sys.executable, "-c", "1")
    assert nothing.returncode == 2 and "no process of it started torch.distributed" in \
        nothing.stderr and nothing.stderr.count("\n") == 1
    assert not any((tmp_path / name).exists() for name in ("t", "u", "v"))  # no empty DIR
