"""MPI ranks time through the C batch loop (comm/batch_loop.c) by default and through mpi4py
calls when FABBENCH_MPI_LOOP=python says so: both give correct results on real ranks, and the
choice is in the run's provenance."""

from __future__ import annotations

import pytest

from conftest import fabbench, needs_mpirun
from fabbench.results.reader import read_results

pytestmark = [pytest.mark.integration, needs_mpirun, pytest.mark.together]

OPS = "allreduce,allgather,reduce_scatter,broadcast,alltoall,sendrecv"


@pytest.mark.parametrize(("loop", "timing"), [("c", "batch"), ("python", "batch"),
                                              ("c", "osu"), ("python", "osu")])
def test_every_op_is_correct_through_either_loop(tmp_path, loop, timing):
    """Either loop, under either protocol (--timing osu: fb_each in C, the engine's own loop
    through mpi4py; sendrecv back to back as osu_bibw, through fb_batch or mpi4py)."""
    out = tmp_path / "r.jsonl"
    env = {"FABBENCH_MPI_LOOP": loop} if loop == "python" else {}
    p = fabbench("run", "--fabric", "shm", "--ops", OPS, "--sizes", "8,64K", "--dtypes",
                 "float32,float64", "--budget", "0.02", "--check", "--timing", timing,
                 "--out", str(out), timeout=240, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    results = read_results(out)
    points = results.of_kind("collective")
    assert {r.op for r in points} == set(OPS.split(","))
    assert all(r.correct is True and r.wrong == 0 for r in points)
    assert {r.timing for r in points} == {timing}
    assert results.records[0].timing.protocol == timing
    if timing == "osu":  # OSU's counts: osu_bibw's for the exchange, osu_allreduce's else
        counts = {(r.op, r.bytes): (r.warmup, r.iters) for r in points}
        assert counts[("sendrecv", 8)] == (10, 100)
        assert counts[("sendrecv", 64 << 10)] == (2, 20)
        assert counts[("allreduce", 8)] == (200, 1000)
        assert counts[("allreduce", 64 << 10)] == (10, 100)
    said = results.records[0].provenance.env.get("FABBENCH_MPI_LOOP")
    assert said == (loop if loop == "python" else None)


def test_a_bad_loop_name_is_refused_before_any_rank_starts(tmp_path):
    out = tmp_path / "r.jsonl"
    p = fabbench("run", "--fabric", "shm", "--ops", "allreduce", "--sizes", "8", "--budget",
                 "0.02", "--out", str(out), timeout=120, env={"FABBENCH_MPI_LOOP": "fortran"})
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "fabbench: error: FABBENCH_MPI_LOOP='fortran': expected c (the default) or python"]
    assert not out.exists()
