"""The cpu image in a real HPC container runtime, Charliecloud, the way sites run such images.

The image podman built (.ci/image-build.sh, cached: test_image.py builds the same one) is
converted into Charliecloud's directory image and its SquashFS single-file form
(.ci/charliecloud-image.sh, cached by tag). Then, with ch-run: `fabbench env` and a 2-rank
ethernet run inside one container; the hybrid model, where the host's launcher starts one
containerised rank per slot and the image's Open MPI talks to the host's PMIx (host mpirun, and
host `srun --mpi=pmix` on the real one-host Slurm); and a rendered `--runtime charliecloud`
sbatch script submitted to that Slurm. Every results file must name Charliecloud as the
container and carry the image's build manifest.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, fabbench
from fabbench.results.reader import read_results

BUILD_TIMEOUT_S = 5400  # a cold image build (test_image.py); cached afterwards

pytestmark = [
    pytest.mark.together,
    pytest.mark.podman,  # one podman store: these modules run one at a time
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.timeout(BUILD_TIMEOUT_S + 1800),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (podman storage, image mount)"),
    *[pytest.mark.skipif(shutil.which(tool) is None, reason=f"needs {tool} ({why})")
      for tool, why in (("podman", "builds the image"), ("debootstrap", "the base image"),
                        ("ch-run", "apt-get install charliecloud-runtime"),
                        ("mksquashfs", "apt-get install squashfs-tools"))],
]

TINY = ["--fabric", "ethernet", "--sizes", "8,64K", "--ops", "allreduce,broadcast",
        "--budget", "0.05", "--timeout", "60", "--iface", "lo"]
# what must not leak from the test's own process into the containers (ch-run passes the host's
# environment through): this checkout's Python, an outer job's launcher variables
LEAKS = ("PYTHONPATH", "VIRTUAL_ENV", "OMPI_", "PMIX_", "PMI_", "SLURM_", "MV2_", "HOROVOD_",
         "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_", "JOB_COMPLETION_INDEX", "FABBENCH_")


def host_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(LEAKS)}
    return {**env, "USER": os.environ.get("USER") or "root", **extra}  # ch-run wants $USER


def sh(argv: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("env", host_env())
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                          **kw)


@dataclass(frozen=True)
class ChImage:
    dir: Path
    sqfs: Path
    manifest: dict
    sqfs_refused: str | None  # why the SquashFS form cannot run here, or None

    def path(self, form: str) -> Path:
        if form == "sqfs" and self.sqfs_refused:
            pytest.skip(self.sqfs_refused)
        return self.dir if form == "dir" else self.sqfs


@pytest.fixture(scope="module")
def image() -> ChImage:
    built = sh([str(REPO / ".ci/image-build.sh")], BUILD_TIMEOUT_S,
               env={**os.environ, "FLAVOR": "cpu"})
    assert built.returncode == 0, built.stderr[-6000:]
    tag = built.stdout.strip().splitlines()[-1]
    conv = sh([str(REPO / ".ci/charliecloud-image.sh"), tag], 1800, env=dict(os.environ))
    assert conv.returncode == 0, conv.stderr[-4000:]
    directory, sqfs = (Path(p) for p in conv.stdout.strip().splitlines()[-2:])
    manifest = json.loads((directory / "etc/fabbench/build.json").read_text())
    probe = sh(["ch-run", str(sqfs), "--", "true"], 120)
    refused = None
    if probe.returncode != 0:  # e.g. no /dev/fuse, or FUSE refused in this kernel/namespace
        refused = f"ch-run cannot mount the SquashFS image here: {probe.stderr.strip()[-300:]}"
    return ChImage(directory, sqfs, manifest, refused)


def ch_run(image: Path, work: Path, argv: list[str], launcher: list[str] | None = None,
           timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """[launcher...] ch-run --set-env -b WORK:/mnt/0 -c /mnt/0 IMAGE -- argv"""
    cmd = [*(launcher or []), "ch-run", "--set-env", "-b", f"{work}:/mnt/0", "-c", "/mnt/0",
           str(image), "--", *argv]
    return sh(cmd, timeout, env=env or host_env())


def check_results(path: Path, image: ChImage, primitive: str, transport: str) -> None:
    results = read_results(path)  # validated against the schema
    run, summary = results.records[0], results.records[-1]
    assert run.kind == "run" and run.ranks == 2 and run.primitive == primitive
    assert run.transport == transport
    assert run.provenance.container == "charliecloud"
    assert run.provenance.build == image.manifest  # the image's, read inside it
    assert summary.kind == "summary" and summary.ok is True
    assert len(results.of_kind("collective")) == 4


@pytest.mark.parametrize("form", ["dir", "sqfs"])
def test_env_inside_ch_run(image, tmp_path, form):
    res = ch_run(image.path(form), tmp_path, ["fabbench", "env", "--json"], timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    env = json.loads(res.stdout)
    assert env["container"] == "charliecloud" and env["build"] == image.manifest
    text = ch_run(image.path(form), tmp_path, ["fabbench", "env"], timeout=300)
    assert text.returncode == 0 and "charliecloud" in text.stdout


@pytest.mark.parametrize("form", ["dir", "sqfs"])
def test_two_rank_ethernet_run_inside_ch_run(image, tmp_path, form):
    """fabbench launches its 2 local ranks itself, inside the container."""
    res = ch_run(image.path(form), tmp_path, ["fabbench", "run", *TINY, "--ranks", "2",
                                               "--out", "/mnt/0/r.jsonl"])
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    check_results(tmp_path / "r.jsonl", image, "mpi", "ob1/tcp")


def test_host_mpirun_starts_containerised_ranks(image, tmp_path):
    """The hybrid model: the host's mpirun, one ch-run per rank, the image's Open MPI wired to
    the host's through PMIx."""
    mpirun = ["mpirun", "-np", "2", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
    res = ch_run(image.path("sqfs" if not image.sqfs_refused else "dir"), tmp_path,
                 ["fabbench", "run", *TINY, "--primitive", "mpi", "--out", "/mnt/0/r.jsonl"],
                 launcher=mpirun)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    check_results(tmp_path / "r.jsonl", image, "mpi", "ob1/tcp")


@pytest.fixture(scope="module")
def one_host() -> Iterator[dict[str, str]]:
    from integration.test_slurm import slurm_cluster  # the one-host Slurm of .ci/slurm/start.sh

    yield from slurm_cluster("one")


def test_host_srun_pmix_starts_containerised_ranks(image, one_host, tmp_path):
    env = host_env(SLURM_CONF=one_host["SLURM_CONF"])
    res = ch_run(image.dir, tmp_path,
                 ["fabbench", "run", *TINY, "--primitive", "mpi", "--out", "/mnt/0/r.jsonl"],
                 launcher=["srun", "-n", "2", "--mpi=pmix", "--kill-on-bad-exit=1"], env=env)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    check_results(tmp_path / "r.jsonl", image, "mpi", "ob1/tcp")


def test_rendered_charliecloud_sbatch_completes(image, one_host, tmp_path):
    from integration.test_slurm import submit_and_wait

    p = fabbench("render", "slurm", "--runtime", "charliecloud", "--image", str(image.dir),
                 "--primitive", "mpi", "--tasks-per-node", "2", "--results-dir",
                 str(tmp_path / "results"), "--name", "fb-charliecloud", *TINY, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "ch-run --set-env" in p.stdout and "--mpi=pmix" in p.stdout
    job = submit_and_wait(p.stdout, tmp_path, host_env(SLURM_CONF=one_host["SLURM_CONF"]))
    assert job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", job["log"]
    check_results(tmp_path / "results" / f"{job['id']}-collectives.jsonl", image, "mpi",
                  "ob1/tcp")
