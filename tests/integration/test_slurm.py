"""Scripts rendered by `fabbench render slurm --runtime none`, submitted with sbatch to a real
Slurm on this host (.ci/slurm/start.sh: munge, slurmctld, slurmd): an MPI run (srun --mpi=pmix),
a Gloo run (rendezvous at the first node) and a Gloo run across two emulated nodes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO, fabbench
from fabbench.results.reader import read_results

pytestmark = [pytest.mark.integration, pytest.mark.needs_root]

FABBENCH = str(Path(sys.executable).parent / "fabbench")  # the venv that runs the tests
TINY = ["--sizes", "8,64K", "--ops", "allreduce", "--budget", "0.05", "--timeout", "30",
        "--iface", "lo", "--fabbench-command", FABBENCH]
JOB_DEADLINE_S = 180


def _cluster(mode: str, env: dict[str, str] | None = None) -> dict[str, str]:
    if os.geteuid() != 0:
        pytest.skip("the Slurm daemons need root")
    if not all(os.path.exists(f"/usr/sbin/{d}") for d in ("slurmctld", "slurmd", "munged")):
        pytest.skip("slurm-wlm and munge are not installed (.ci/apt-packages.txt)")
    try:
        p = subprocess.run([str(REPO / ".ci/slurm/start.sh"), mode], capture_output=True,
                           text=True, timeout=120, check=False, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {mode} Slurm cluster did not start within 120 s")
    if p.returncode != 0:  # root and the packages are here: a start that fails is a failure
        pytest.fail(f"the {mode} Slurm cluster did not start: {p.stderr.strip()[-500:]}")
    return {**os.environ, **(env or {}), "SLURM_CONF": p.stdout.strip().splitlines()[-1]}


def slurm_cluster(mode: str, **env: str) -> Iterator[dict[str, str]]:
    """A fixture's body: the cluster's environment, then the cluster stopped again, so that no
    test leaves a daemon behind (the next module's start is idempotent and takes seconds). A
    cluster in a directory of the test's own (FABBENCH_SLURM_DIR) goes with its directory."""
    started = _cluster(mode, env)
    try:
        yield started
    finally:
        subprocess.run([str(REPO / ".ci/slurm/stop.sh"), mode], timeout=120, check=False,
                       env={**started, **env}, capture_output=True)
        if env.get("FABBENCH_SLURM_DIR"):
            shutil.rmtree(env["FABBENCH_SLURM_DIR"], ignore_errors=True)


@pytest.fixture(scope="module")
def one_host():
    yield from slurm_cluster("one")


@pytest.fixture(scope="module")
def two_nodes():
    yield from slurm_cluster("two")


def _job_fields(job_id: str, env: dict) -> dict[str, str]:
    p = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True,
                       text=True, timeout=30, env=env, check=False)
    return dict(re.findall(r"(\w+)=(\S*)", p.stdout))


def submit_and_wait(script: str, workdir: Path, env: dict,
                    deadline_s: float = JOB_DEADLINE_S) -> dict[str, str]:
    """sbatch the script, poll until it leaves the queue (with a deadline), return its fields
    (with its log and id)."""
    path = workdir / "job.sbatch"
    path.write_text(script)
    p = subprocess.run(["sbatch", "--parsable", str(path)], capture_output=True, text=True,
                       timeout=30, env=env, cwd=workdir, check=False)
    assert p.returncode == 0, p.stderr
    job_id = p.stdout.strip().split(";")[0]
    end = time.monotonic() + deadline_s
    while True:
        fields = _job_fields(job_id, env)
        if fields.get("JobState") not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING",
                                          None):
            break
        if time.monotonic() > end:
            subprocess.run(["scancel", job_id], timeout=30, env=env, check=False)
            pytest.fail(f"job {job_id} still {fields.get('JobState')} after {deadline_s:.0f} s; "
                        f"cancelled. Log:\n{_log(workdir, job_id)}")
        time.sleep(1)
    fields["log"] = _log(workdir, job_id)
    fields["id"] = job_id
    return fields


def _log(workdir: Path, job_id: str) -> str:
    log = workdir / f"slurm-{job_id}.out"
    return log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"


def render(*args: str) -> str:
    p = fabbench("render", "slurm", *args, *TINY, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("primitive,transport", [("mpi", "ob1/tcp"), ("gloo", "gloo/tcp")])
def test_one_host_job_completes_with_valid_results(one_host, tmp_path, primitive, transport):
    script = render("--fabric", "ethernet", "--primitive", primitive, "--tasks-per-node", "2",
                    "--results-dir", str(tmp_path / "results"), "--name", f"fb-{primitive}")
    if primitive == "mpi":
        assert "--mpi=pmix" in script
    job = submit_and_wait(script, tmp_path, one_host)
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", job["log"]
    results = read_results(tmp_path / "results" / f"{job['id']}-collectives.jsonl")
    run, summary = results.records[0], results.records[-1]
    assert run.ranks == 2 and run.transport == transport
    assert summary.kind == "summary" and summary.ok is True
    assert len(results.of_kind("collective")) == 2


def test_two_emulated_nodes_rendezvous(two_nodes, tmp_path):
    script = render("--fabric", "ethernet", "--primitive", "gloo", "--nodes", "2",
                    "--results-dir", str(tmp_path / "results"), "--name", "fb-two")
    job = submit_and_wait(script, tmp_path, two_nodes)
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", job["log"]
    assert job["NodeList"] == "n[1-2]"  # one rank on each emulated node
    results = read_results(tmp_path / "results" / f"{job['id']}-collectives.jsonl")
    assert results.records[0].ranks == 2 and results.records[-1].ok is True


def test_failed_step_fails_the_job(one_host, tmp_path):
    """A rank that cannot start makes the job FAILED (set -e), not a silent success."""
    script = render("--fabric", "ethernet", "--primitive", "gloo", "--tasks-per-node", "2",
                    "--results-dir", str(tmp_path / "results"), "--extra-arg", "--no-such-opt")
    job = submit_and_wait(script, tmp_path, one_host)
    assert job["JobState"] == "FAILED", job["log"]


def test_start_script_is_idempotent(one_host):
    start = time.monotonic()
    p = subprocess.run([str(REPO / ".ci/slurm/start.sh"), "one"], capture_output=True,
                       text=True, timeout=60, check=False)
    assert p.returncode == 0 and p.stdout.strip() == one_host["SLURM_CONF"]
    assert "starting" not in p.stderr and time.monotonic() - start < 20
