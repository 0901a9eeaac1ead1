"""`fabbench run` end to end: real ranks, real Open MPI transports, real Gloo, real Horovod."""

from __future__ import annotations

import shutil
import time

import pytest

from conftest import fabbench, horovod_available, needs_mpirun
from fabbench.results.reader import read_results
from fabbench.timing.stats import STABLE_RULE, is_stable, median_ci95_rel

pytestmark = [pytest.mark.integration, pytest.mark.together, needs_mpirun]

SMALL = ["--sizes", "8,4K,256K", "--budget", "0.02", "--check"]

PATHS = [
    pytest.param(["--fabric", "ethernet", "--primitive", "mpi"], "ob1/tcp", id="ethernet-mpi"),
    pytest.param(["--fabric", "ethernet", "--primitive", "gloo"], "gloo/tcp", id="ethernet-gloo"),
    pytest.param(["--fabric", "infiniband", "--wire", "tcp", "--primitive", "mpi"], "ucx/tcp",
                 id="infiniband-wire-tcp-ucx"),
    pytest.param(["--fabric", "omnipath", "--wire", "tcp", "--primitive", "mpi"],
                 "cm/ofi/tcp;ofi_rxm", id="omnipath-wire-tcp-ofi"),
    pytest.param(["--fabric", "shm", "--primitive", "mpi"], "ob1/vader", id="shm-mpi"),
    pytest.param(["--fabric", "ethernet", "--primitive", "horovod", "--horovod-over", "mpi"],
                 "ob1/tcp", id="horovod-mpi"),
    pytest.param(["--fabric", "ethernet", "--primitive", "horovod", "--horovod-over", "gloo"],
                 "gloo/tcp", id="horovod-gloo"),
]


@pytest.mark.parametrize("args,transport", PATHS)
def test_two_rank_path(tmp_path, args, transport):
    if "horovod" in args and not horovod_available():
        pytest.skip("horovod is not installed (containers/horovod.sh builds it)")
    out = tmp_path / "r.jsonl"
    p = fabbench("run", *args, *SMALL, "--out", str(out), timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    results = read_results(out)  # every record validated against the schema
    run = results.records[0]
    assert run.ranks == 2 and run.nodes == 1 and run.transport == transport
    versions = run.provenance.versions
    assert versions.fabbench
    if shutil.which("ucx_info"):  # asked after the start: the start's UCX log is gone by then
        assert versions.ucx, versions
    assert "\0" not in (versions.mpi_library or ""), versions
    assert "UCX_LOG_FILE" not in run.provenance.env, run.provenance.env
    collectives = results.of_kind("collective")
    ops = {r.op for r in collectives}
    assert ops == ({"allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall"}
                   | (set() if "horovod" in args else {"sendrecv"}))
    for r in collectives:
        assert r.busbw_gbyte_s > 0 and r.algbw_gbyte_s > 0
        assert r.correct is True and r.wrong == 0
        assert r.transport == transport
        t = r.time_us
        assert 0 < t.min <= t.p50 <= t.max and t.min <= t.mean <= t.max
    summary = results.records[-1]
    assert summary.kind == "summary" and summary.ok is True
    assert summary.counts["collective"] == len(collectives)
    # the streamed table, printed once: one header, one line per record, then where they are
    assert p.stdout.count("busbw") == 1 and p.stdout.count("results: ") == 1
    assert sum(ln.startswith(" ") and ln.endswith(transport)
               for ln in p.stdout.splitlines()) == len(collectives)


def test_half_precision_over_gloo(tmp_path):
    out = tmp_path / "r.jsonl"
    p = fabbench("run", "--fabric", "ethernet", "--primitive", "gloo", "--dtypes",
                 "float16,bfloat16", "--ops", "allreduce,allgather", "--sizes", "64,64K",
                 "--budget", "0.02", "--check", "--out", str(out), timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    recs = read_results(out).of_kind("collective")
    assert {r.dtype for r in recs} == {"float16", "bfloat16"}
    assert all(r.correct for r in recs)


def test_four_ranks_whole_array_sizes(tmp_path):
    out = tmp_path / "r.jsonl"
    p = fabbench("run", "--fabric", "shm", "--ranks", "4", "--ops", "alltoall,reduce_scatter",
                 "--sizes", "8,100,64K", "--budget", "0.02", "--check", "--out", str(out),
                 timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    recs = read_results(out).of_kind("collective")
    # 8 bytes cannot be split over 4 ranks of float32: skipped; 100 B rounds down to 96 B
    assert sorted({r.bytes for r in recs}) == [96, 65536]
    assert all(r.ranks == 4 and r.correct for r in recs)
    assert all(r.busbw_gbyte_s == pytest.approx(r.algbw_gbyte_s * 3 / 4) for r in recs)


def _unavailable_transport(tmp_path):
    """A site profile that forces UCX transports this host does not have (rc, ud)."""
    (tmp_path / "badib.toml").write_text(
        'name = "badib"\nhardware = "none"\n'
        '[primitive.mpi]\nmca = { pml = "ucx", pml_ucx_tls = "any", pml_ucx_devices = "any" }\n'
        'env = { UCX_TLS = "rc,ud" }\ntransport = ["ucx/*rc*"]\n')
    start = time.monotonic()
    p = fabbench("run", "--fabric", str(tmp_path / "badib.toml"), "--sizes", "8",
                 "--timeout", "20", "--out", str(tmp_path / "r.jsonl"), timeout=120)
    return p, time.monotonic() - start


def test_unavailable_transport_fails_fast_naming_the_fabric_and_what_it_asked(tmp_path):
    p, elapsed = _unavailable_transport(tmp_path)
    assert p.returncode != 0 and elapsed < 60
    assert "Traceback" not in p.stderr
    assert "fabbench: error: mpi on fabric 'badib' (asked for transport ucx/*rc*) failed" \
        in p.stderr


def test_unavailable_transport_shows_the_librarys_own_message(tmp_path):
    """UCX names both sides, the transports asked for and those this host has, in the log it
    writes to a private file: its error lines reach the user, Open MPI's answer too, and the
    selection verbosity fabbench turned on does not."""
    p, _ = _unavailable_transport(tmp_path)
    assert "transports 'rc','ud' are not available, please use one or more of:" in p.stderr
    assert "PML ucx cannot be selected" in p.stderr
    assert "mca: base: components_open" not in p.stderr


def test_transport_mismatch_is_detected(tmp_path):
    """The fabric asks for ob1/tcp but the library selects shared memory: fail, naming both."""
    (tmp_path / "liar.toml").write_text(
        'name = "liar"\n[primitive.mpi]\nmca = { pml = "ob1", btl = "self,vader" }\n'
        'transport = ["ob1/tcp"]\n')
    out = tmp_path / "r.jsonl"
    p = fabbench("run", "--fabric", str(tmp_path / "liar.toml"), "--sizes", "8",
                 "--out", str(out), timeout=120)
    assert p.returncode == 1
    assert "asked for transport ob1/tcp" in p.stderr and "'ob1/vader'" in p.stderr
    results = read_results(out)
    assert results.records[-1].ok is False
    assert "ob1/vader" in results.records[-1].error
    assert not results.of_kind("collective")


def test_corrupted_buffer_is_caught(tmp_path):
    out = tmp_path / "r.jsonl"
    p = fabbench("run", "--fabric", "shm", "--ops", "allreduce", "--sizes", "64,4K",
                 "--budget", "0.02", "--check", "--out", str(out), timeout=120,
                 env={"FABBENCH_FAULT": "corrupt:1"})
    assert p.returncode == 1
    recs = read_results(out).of_kind("collective")
    assert recs and all(r.correct is False and r.wrong_ranks == [1] and r.wrong == 1
                        for r in recs)
    assert "data check failed" in p.stderr
    # one summary, the last line (it was written twice: by the run's end and by the handler)
    kinds = [r.kind for r in read_results(out).records]
    assert kinds.count("summary") == 1 and kinds[-1] == "summary", kinds


def test_default_sweep_is_whole_and_judged_by_the_one_rule(tmp_path):
    """The demo's sweep (all six collectives, 8 B to 64 MiB, 2 ranks) writes every point, and
    each point's stable verdict is the one rule applied to its own samples. How fast and how
    stable it is on a quiet host is bench/stability.py's to say, not a timed test's."""
    out = tmp_path / "r.jsonl"
    p = fabbench("run", "--fabric", "ethernet", "--primitive", "mpi", "--out", str(out),
                 timeout=280)
    assert p.returncode == 0, p.stderr[-2000:]
    recs = read_results(out).of_kind("collective")
    assert len(recs) == 6 * 24
    for r in recs:
        assert r.stable_rule == STABLE_RULE
        # the engine judged the unrounded samples; the record keeps them rounded
        again = median_ci95_rel(r.samples_us)
        if r.median_ci95_rel is None:  # too few samples to know: never called stable
            assert again is None and r.stable is False
        else:
            assert r.median_ci95_rel == pytest.approx(again, rel=0.05, abs=0.002)
        assert r.stable == is_stable(r.median_ci95_rel)


def test_one_rank_is_said_as_such(tmp_path):
    """A world of one rank moves nothing between ranks: busbw 0 in the records, "-" and the
    reason in the console and the report, and a busbw floor not judged (issue 49)."""
    out = tmp_path / "one.jsonl"
    p = fabbench("run", "--fabric", "ethernet", "--primitive", "gloo", "--ranks", "1", "--sizes",
                 "8,1M", "--ops", "allreduce,broadcast", "--budget", "0.02", "--out", str(out),
                 timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    collectives = read_results(out).of_kind("collective")
    assert {(c.op, c.ranks, c.busbw_gbyte_s) for c in collectives} == {
        (op, 1, 0.0) for op in ("allreduce", "broadcast")}
    assert all(c.algbw_gbyte_s > 0 for c in collectives)
    assert "# one rank: nothing crosses a bus between ranks, so no busbw (-)" in p.stdout
    rows = [ln.split() for ln in p.stdout.splitlines() if ln.startswith(" ")]
    assert len(rows) == 4 and all(r[6] == "-" for r in rows), p.stdout  # the busbw column
    report = fabbench("report", str(out), timeout=120)
    assert report.returncode == 0, report.stderr
    assert "one rank: nothing crosses a bus" in report.stdout, report.stdout
    floors = tmp_path / "floors.toml"
    floors.write_text('format = "fabbench-floors/1"\nname = "one rank"\n[[rule]]\nid = "bw"\n'
                      'source = "test"\nworkload = "collectives"\nop = "allreduce"\n'
                      'size = "1M"\nmetric = "busbw"\nat_least = 0.001\nunit = "GB/s"\n')
    judged = fabbench("verify", "--floors", str(floors), str(out), timeout=120)
    assert judged.returncode == 1, judged.stdout  # nothing judged is not a pass
    assert "one rank: nothing crosses a bus between ranks: no busbw to judge" in judged.stdout
