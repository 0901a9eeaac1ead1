"""The image's front door, through Apptainer itself, as a site's user meets it.

The SIF is built from Apptainer.def exactly as its header says (`podman save --format
docker-archive` of the cpu image that .ci/image-build.sh builds, then `apptainer build
--build-arg image_archive=... fabbench.sif Apptainer.def`), cached by the image's content tag
(.ci/apptainer.sh sif). Apptainer is Debian sid's 1.4 (no setuid: user namespaces), run from a sid
root by .ci/apptainer.sh as the unprivileged user fabbench-user: as root it stops on its
capability check, and sites run it as users. /dev/fuse is root-only on these machines, so a user
cannot mount the SIF with squashfuse: `--unsquash` extracts it to a temporary sandbox instead.

After every test, passed or failed: no process of the user, no mount of the sid root or of an
image, no loop device and no user-namespace process is left (each command runs in its own PID and
mount namespaces, which end with it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO
from fabbench.results.reader import read_results
from fabbench.results.records import Run

BUILD_TIMEOUT_S = 5400  # a cold image build (test_image.py); cached afterwards
SIF_TIMEOUT_S = 2400    # the sid root (a minute or two) and the SIF (minutes), cached afterwards
USER = "fabbench-user"
APPTAINER = REPO / ".ci" / "apptainer.sh"

pytestmark = [
    pytest.mark.together,
    pytest.mark.podman,  # one podman store: these modules run one at a time
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.timeout(BUILD_TIMEOUT_S + SIF_TIMEOUT_S + 1200),
    pytest.mark.skipif(os.geteuid() != 0,
                       reason="needs root (podman storage, debootstrap, mount namespaces)"),
    *[pytest.mark.skipif(shutil.which(tool) is None, reason=f"needs {tool} ({why})")
      for tool, why in (("podman", "builds the image"), ("debootstrap", "the base image and "
                        "the sid root Apptainer lives in"), ("unshare", "util-linux"))],
]

TINY = ["--sizes", "8,64K", "--ops", "allreduce,broadcast", "--budget", "0.05",
        "--timeout", "60"]


def sh(argv: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                          **kw)


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment less an outer launcher's and fabbench's variables (the sid
    root's exec passes those through, as a job's environment reaches its ranks)."""
    drop = ("OMPI_", "PMIX_", "PMI_", "SLURM_", "FABBENCH_", "APPTAINER", "SINGULARITY",
            "MASTER_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "HOROVOD_", "UCX_", "FI_")
    keep = {"FABBENCH_CACHE"}
    return {**{k: v for k, v in os.environ.items() if k in keep or not k.startswith(drop)},
            **extra}


@dataclass(frozen=True)
class Sif:
    tag: str       # the podman image it was built from
    path: str      # inside the sid root, where apptainer sees it
    host: Path     # on this host, in the cache
    manifest: dict  # /etc/fabbench/build.json of the podman image
    version: str   # `apptainer --version`: "1.4.5"

    def apptainer(self, args: list[str], cwd: Path, timeout: float = 900,
                  env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """`apptainer ARGS` as the unprivileged user, in CWD."""
        return sh([str(APPTAINER), "exec", "--cwd", str(cwd), "--", "apptainer", *args],
                  timeout, env=env or clean_env())


def image_manifest(tag: str) -> dict:
    mounted = sh(["podman", "image", "mount", tag], 300)
    assert mounted.returncode == 0, mounted.stderr
    try:
        return json.loads((Path(mounted.stdout.strip()) / "etc/fabbench/build.json").read_text())
    finally:
        sh(["podman", "image", "unmount", tag], 120)


@pytest.fixture(scope="module")
def sif() -> Sif:
    built = sh([str(REPO / ".ci/image-build.sh")], BUILD_TIMEOUT_S,
               env={**os.environ, "FLAVOR": "cpu"})
    assert built.returncode == 0, built.stderr[-6000:]
    tag = built.stdout.strip().splitlines()[-1]
    made = sh([str(APPTAINER), "sif", tag], SIF_TIMEOUT_S, env=clean_env())
    assert made.returncode == 0, made.stderr[-6000:]
    inside, host = made.stdout.strip().splitlines()[-2:]
    version = sh([str(APPTAINER), "exec", "--", "apptainer", "--version"], 60, env=clean_env())
    assert version.returncode == 0, version.stderr
    found = re.fullmatch(r"apptainer version (\S+)", version.stdout.strip())
    assert found, version.stdout
    return Sif(tag, inside, Path(host), image_manifest(tag), found.group(1))


def _left_behind() -> dict[str, list[str]]:
    """What a test could leave: the user's processes, mounts of the sid root or of an image
    (fuse, squashfs, overlay), loop devices."""
    procs = sh(["ps", "-o", "pid=,comm=", "-u", USER], 30).stdout.split("\n") \
        if shutil.which("ps") else []
    mounts = [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
              if "apptainer" in line or "fuse.squashfuse" in line or " squashfs " in line]
    loops = sh(["losetup", "-a"], 30).stdout.splitlines() if shutil.which("losetup") else []
    return {"processes": [p for p in procs if p.strip()], "mounts": mounts, "loops": loops}


@pytest.fixture
def user_dir(sif) -> Iterator[Path]:
    """A fresh folder in the user's home, owned by the user; removed afterwards, and nothing may
    be left behind by the test, passed or failed."""
    before = _left_behind()
    home = Path(os.path.expanduser(f"~{USER}"))
    work = home / f"fabbench-test-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    shutil.chown(work, USER, USER)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        after = _left_behind()
        assert after == before, f"left behind: {after} (before: {before})"


def check_results(path: Path, sif: Sif, ranks: int, transport: str) -> Run:
    assert path.stat().st_uid == int(sh(["id", "-u", USER], 10).stdout)  # the user wrote it
    results = read_results(path)  # validated against the schema
    run, summary = results.records[0], results.records[-1]
    assert run.kind == "run" and run.ranks == ranks and run.transport == transport
    prov = run.provenance
    assert prov.container == "apptainer"
    assert prov.container_version == sif.version
    assert prov.build == sif.manifest  # the image's own, read inside it
    assert summary.kind == "summary" and summary.ok is True, summary
    assert results.of_kind("collective")
    return run


def test_apptainer_test(sif, user_dir):
    """`apptainer test fabbench.sif`: the definition's %test, in the image, as the user."""
    res = sif.apptainer(["test", "--unsquash", sif.path], user_dir)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    assert "fabbench self-test passed" in res.stdout, res.stdout[-3000:]
    assert "build manifest: cpu" in res.stdout


def test_run_fabric_ethernet_as_a_user(sif, user_dir):
    """The README's container line: `apptainer run fabbench.sif run --fabric ethernet`, as it
    is (fabbench starts its local ranks inside the container); the file lands in the user's
    folder."""
    res = sif.apptainer(["run", "--unsquash", sif.path, "run", "--fabric", "ethernet"],
                        user_dir)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    files = list(user_dir.rglob("*.jsonl"))
    assert len(files) == 1, (files, res.stdout[-2000:])
    run = check_results(files[0], sif, 2, "ob1/tcp")
    assert run.fabric == "ethernet" and run.nodes == 1


def test_run_help(sif, user_dir):
    """`apptainer run-help` prints the definition's %help section."""
    res = sif.apptainer(["run-help", sif.path], user_dir, timeout=300)
    assert res.returncode == 0, res.stderr
    text = (REPO / "Apptainer.def").read_text()
    help_text = textwrap.dedent(text.split("%help\n", 1)[1]).strip()
    # Apptainer keeps the section's own indentation (less the first line's): compare the words
    # line by line
    assert [ln.strip() for ln in res.stdout.strip().splitlines()] == \
        [ln.strip() for ln in help_text.splitlines()]


def test_two_ranks_on_one_node_share_memory(sif, user_dir):
    """Two ranks of one container, over shared memory: the transport that ran is recorded."""
    res = sif.apptainer(["run", "--unsquash", sif.path, "run", "--fabric", "shm", "--ranks", "2",
                         *TINY, "--out", "shm.jsonl"], user_dir)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    check_results(user_dir / "shm.jsonl", sif, 2, "ob1/vader")


def test_doctor_checks_shared_memory_between_two_ranks(sif, user_dir):
    """`fabbench doctor` in the image under Apptainer runs two ranks of the container over shared
    memory and names the transport that ran (or the fix: a user namespace per container)."""
    res = sif.apptainer(["exec", "--unsquash", sif.path, "fabbench", "doctor", "--fabric", "shm",
                         "--json"], user_dir)
    report = json.loads(res.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    shared = checks["shared memory between ranks (apptainer)"]
    assert shared["verdict"] == "pass", shared
    assert "2 ranks of this container" in shared["detail"] and "ob1/vader" in shared["detail"]
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
