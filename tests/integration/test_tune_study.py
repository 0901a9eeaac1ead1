"""A tuned profile in a study (issue 35, "the study knows"): a tune on 2 local ranks writes
<fabric>-tuned.toml, and a study names it beside the profile it came from, found through
FABBENCH_PROFILE_PATH like any site profile; each cell's training step runs with its own
profile's settings, and the study's report ranks the two.

The profile tuned here is made slow on purpose (Open MPI's allreduce forced to the segmented
ring, coll_tuned algorithm 5, with 1 KiB segments: a thousand messages per MiB, 3x to 50x slower
than recursive doubling at 1 MiB on 2 local ranks of this busy host, where forcing basic_linear
was not reliably slower), so that the tune finds recursive doubling faster whatever the noise,
and writes its profile. How much faster the tuned step is, is a measurement: not asserted."""

from __future__ import annotations

import json

import pytest

from conftest import fabbench, needs_mpirun
from fabbench.results.reader import read_results
from fabbench.results.records import Run
from fabbench.workloads.train.record import Train

pytestmark = [pytest.mark.integration, needs_mpirun, pytest.mark.timeout(900)]

SLOW = """name = "slow-test"
description = "Open MPI over TCP on loopback, allreduce forced to a ring of 1 KiB segments"
[primitive.mpi]
transport = ["ob1/tcp"]

[primitive.mpi.mca]
pml = "ob1"
btl = "self,tcp"
btl_tcp_if_include = "lo"
coll_tuned_use_dynamic_rules = "1"
coll_tuned_allreduce_algorithm = "5"
coll_tuned_allreduce_algorithm_segmentsize = "1024"

[[primitive.mpi.tune]]
mca = "coll_tuned_allreduce_algorithm"
values = [3]
ops = ["allreduce"]
"""

STUDY = """name = "tuned-step"
description = "What does tuning buy a training step?"

[matrix]
fabric = ["slow-test", "slow-test-tuned"]
primitive = ["mpi"]
workload = ["step"]

[run]
ranks_per_node = 2
timeout = 60
deadline = 300

[workload.step]
kind = "train"
model = "gpt-tiny"
image_size = 32
batch_size = 4
steps = 6
warmup_steps = 1
"""


def test_a_study_runs_the_tuned_profile_beside_the_default(tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "slow-test.toml").write_text(SLOW)
    tune = tmp_path / "tune"
    t = fabbench("tune", str(tune), "--fabric", str(profiles / "slow-test.toml"), "--ops",
                 "allreduce", "--ranks", "2", "--sizes", "256K", "--budget", "0.3",
                 "--repeats", "3", "--timeout", "20", "--primitive", "mpi", timeout=600)
    assert t.returncode == 0, t.stdout[-2000:] + t.stderr[-2000:]
    tuned = tune / "slow-test-tuned.toml"
    assert tuned.is_file(), t.stdout
    assert 'coll_tuned_allreduce_algorithm = "3"' in tuned.read_text()

    (tmp_path / "study.toml").write_text(STUDY)
    env = {"FABBENCH_PROFILE_PATH": f"{profiles}:{tune}"}
    out = tmp_path / "study"
    s = fabbench("study", "run", str(tmp_path / "study.toml"), "--out", str(out),
                 timeout=600, env=env)
    assert s.returncode == 0, s.stdout[-2000:] + s.stderr[-2000:]
    cells = json.loads((out / "study.json").read_text())["cells"]
    assert {c["axes"]["fabric"]: c["status"] for c in cells} == \
        {"slow-test": "ok", "slow-test-tuned": "ok"}
    for cell in cells:
        results = read_results(out / cell["file"])
        (run,) = results.of_kind(Run)
        assert run.fabric == cell["axes"]["fabric"]
        (step,) = results.of_kind(Train)
        assert step.samples_per_s["p50"] > 0
    r = fabbench("report", str(out), timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "slow-test-tuned/mpi" in r.stdout and "slow-test/mpi" in r.stdout, r.stdout
