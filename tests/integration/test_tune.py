"""`fabbench tune` with real launches of `fabbench run` on local ranks (Open MPI over TCP on
loopback), with small search spaces in profiles written here: a faster value that moved the
bytes to shared memory is refused, named; a tune stopped by SIGTERM and resumed launches only
what it had not, a finished tune resumed launches nothing and decides the same, and `fabbench
report DIR` shows its table without launching or writing anything; a search
space the library would not take is one line, exit 2, before anything runs.

The choices a tune makes on this shared 2-core host are not asserted (they are measurements);
what is asserted is how they are made and what is written."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import fabbench, needs_mpirun, stop
from fabbench.tune.outputs import read_rules

pytestmark = [pytest.mark.integration, needs_mpirun, pytest.mark.timeout(900)]

QUICK = ["--ranks", "2", "--sizes", "64K,1M", "--budget", "0.1", "--repeats", "2",
         "--timeout", "20", "--primitive", "mpi"]


def profile(tmp_path: Path, axes: str, transport: str = '["ob1/tcp"]') -> Path:
    path = tmp_path / "tcp-test.toml"
    path.write_text(f"""name = "tcp-test"
description = "Open MPI over TCP on loopback, with a small search space"
[primitive.mpi]
mca = {{ pml = "ob1", btl = "self,tcp", btl_tcp_if_include = "lo" }}
transport = {transport}
{axes}
""")
    return path


SPACE = """
[[primitive.mpi.tune]]
mca = "btl_tcp_links"
values = [2]

[[primitive.mpi.tune]]
mca = "coll_tuned_allreduce_algorithm"
values = [6]
ops = ["allreduce"]
per_size = true
needs = { mca = { coll_tuned_use_dynamic_rules = "1" } }
segment = { mca = "coll_tuned_allreduce_algorithm_segmentsize", algorithms = [5], values = [65536] }
"""


def state(directory: Path) -> dict:
    return json.loads((directory / "tune.json").read_text())


def test_a_faster_value_on_another_transport_is_refused_and_named(tmp_path):
    # the profile accepts any ob1 transport, so the run itself does not refuse shared memory:
    # the tune must, because the base ran over TCP
    space = '[[primitive.mpi.tune]]\nmca = "btl"\nvalues = ["self,vader,tcp"]\n'
    path = profile(tmp_path, space, transport='["ob1/*"]')
    p = fabbench("tune", str(tmp_path / "t"), "--fabric", str(path), "--ops", "allreduce",
                 *QUICK, timeout=600)
    doc = state(tmp_path / "t")
    (stage,) = doc["stages"]
    (cand,) = stage["candidates"]
    assert stage["transport"] == "ob1/tcp"
    # shared memory carried the on-host bytes: "ob1/tcp+vader" as the library reported it
    assert cand["refused"].startswith("the transport changed from ob1/tcp to ob1/"), cand
    assert "vader" in cand["refused"].rsplit(" ", 1)[1], cand
    assert stage["chosen"] is None and doc["tuned"] == {"mca": {}, "env": {}, "per_size": []}
    assert p.returncode == 0, p.stderr[-2000:]
    assert "refused self,vader,tcp: the transport changed from ob1/tcp to ob1/" in p.stdout
    assert "nothing was faster than the profile as it is" in p.stdout
    assert not list((tmp_path / "t").glob("*-tuned.toml"))


def test_a_stopped_tune_resumes_where_it_stopped_and_decides_the_same(tmp_path):
    path = profile(tmp_path, SPACE)
    d = tmp_path / "t"
    argv = [sys.executable, "-m", "fabbench", "tune", str(d), "--fabric", str(path),
            "--ops", "allreduce", *QUICK]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    try:  # stop it in the middle of its third launch
        end = time.monotonic() + 300
        while time.monotonic() < end and proc.poll() is None and \
                len(list((d / "logs").glob("*.log"))) < 3:
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert proc.returncode != 0
    done = sorted(p.name for p in (d / "trials").glob("*.jsonl"))
    assert len(done) in (2, 3), done
    unfinished = fabbench("report", str(d), timeout=120)  # nothing to show yet: one line
    assert unfinished.returncode == 2, unfinished.stderr
    (line,) = unfinished.stderr.strip().splitlines()
    assert "the tune did not finish; continue it with fabbench tune" in line, line
    resumed = fabbench("tune", str(d), "--fabric", str(path), "--ops", "allreduce", *QUICK,
                       "--resume", timeout=600)
    assert resumed.returncode in (0, 1), resumed.stderr[-2000:]
    skipped = [ln for ln in resumed.stderr.splitlines() if "(done before)" in ln]
    assert len(skipped) >= 2, resumed.stderr  # the launches that had finished: not again
    first = state(d)
    # the two axes, then the final stages: none (nothing faster), one, or one per narrowing
    finals = [s for s in first["stages"] if s["axis"] == "final"]
    assert first["finished"] and len(first["stages"]) == 2 + len(finals) and len(finals) <= 3
    trials = sorted(p.name for p in (d / "trials").glob("*.jsonl"))
    assert len(trials) == 2 * 2 + 2 * 3 + 4 * len(finals)
    # the segmented ring's launches forced it with its segment size
    (paired,) = {p.read_text() for p in (d / "profiles").glob("*-5_65536-r1.toml")}
    assert 'coll_tuned_allreduce_algorithm = "5"' in paired and \
        'coll_tuned_allreduce_algorithm_segmentsize = "65536"' in paired, paired
    # the interrupted launch was kept beside its rerun, never overwritten
    assert list((d / "trials").glob("*.jsonl.attempt-1")) or len(done) == 2
    # a finished tune resumed: nothing launched again, the same decisions
    again = fabbench("tune", str(d), "--fabric", str(path), "--ops", "allreduce", *QUICK,
                     "--resume", timeout=300)
    assert again.returncode == resumed.returncode
    launches = [ln for ln in again.stderr.splitlines() if "] launch " in ln]
    assert launches and all(ln.endswith("(done before)") for ln in launches), again.stderr
    second = state(d)
    assert second["stages"] == first["stages"] and second["tuned"] == first["tuned"]
    # `report DIR`: the same table, decided again from the files, nothing launched or written
    before = {p: p.stat().st_mtime_ns for p in d.rglob("*")}
    shown = fabbench("report", str(d), timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.startswith("tune of tcp-test / mpi in ") and \
        again.stdout.startswith(shown.stdout), (shown.stdout, again.stdout)
    assert {p: p.stat().st_mtime_ns for p in d.rglob("*")} == before
    refused = fabbench("report", str(d), "--html", str(tmp_path / "r.html"), timeout=120)
    assert refused.returncode == 2 and "--html: a tune's report is its table" in refused.stderr
    if first["tuned"]["per_size"] and resumed.returncode == 0:
        rules = (d / "coll_tuned.rules").read_text()
        assert read_rules(rules)[:2] == [1, 2]  # one collective: allreduce
        if any(alg == "5:65536" for _, _, alg in first["tuned"]["per_size"]):
            assert re.search(r"^\d+ 5 0 65536 ", rules, re.M), rules  # its segment column
        profile_text = (d / "tcp-test-tuned.toml").read_text()
        assert f'coll_tuned_dynamic_rules_filename = "{(d / "coll_tuned.rules").resolve()}"' \
            in profile_text


@pytest.mark.parametrize("axis,message", [
    ('mca = "btl_tcp_linkz"\nvalues = [2]', "Open MPI has no MCA parameter 'btl_tcp_linkz'"),
    ('mca = "coll_tuned_allreduce_algorithm"\nvalues = [4, 42]\nops = ["allreduce"]',
     "Open MPI refuses '42': not one of its values: 0 (ignore), 1 (basic_linear)"),
    ('mca = "btl_tcp_links"\nvalues = ["many"]',
     "Open MPI refuses 'many': not an integer"),
    ('mca = "btl_tcp_links"\nvalues = []', "values must be a non-empty list"),
    ('env = "NCCL_ALGO"\nvalues = ["Ring"]', "NCCL_ALGO is not a setting of mpi"),
])
def test_a_bad_search_space_is_one_line_and_runs_nothing(tmp_path, axis, message):
    path = profile(tmp_path, f"[[primitive.mpi.tune]]\n{axis}\n")
    p = fabbench("tune", str(tmp_path / "t"), "--fabric", str(path), *QUICK, timeout=120)
    assert p.returncode == 2, p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("fabbench: error: ") and message in line, line
    assert not (tmp_path / "t" / "trials").exists() or \
        not list((tmp_path / "t" / "trials").iterdir())


def test_gloo_has_nothing_to_tune(tmp_path):
    p = fabbench("tune", str(tmp_path / "t"), "--fabric", "ethernet", "--primitive", "gloo",
                 timeout=120)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "fabbench: error: " + str(Path(__file__).resolve().parents[2] / "src/fabbench/fabrics"
                                  "/profiles/ethernet.toml") +
        ": [primitive.gloo] declares nothing to tune ([[primitive.gloo.tune]]) for these ops"]
