"""The Dockerfile's entrypoint started by a real container engine: `podman run`.

podman runs containers here with Debian's runc (crun fails on this host's cgroup set-up; NOTES),
with the open-files and process limits given explicitly. The cpu image is the one
.ci/image-build.sh builds (cached by content). The line a Podman user runs, `podman run --rm
-v $PWD:/w -w /w IMAGE run --fabric ethernet`, must leave a valid results file on the bind
mount, whose record names the container engine and carries the image's build manifest. The
container is removed afterwards, passed or failed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import REPO
from fabbench.results.reader import read_results

BUILD_TIMEOUT_S = 5400  # a cold image build (test_image.py); cached afterwards

pytestmark = [
    pytest.mark.together,
    pytest.mark.podman,  # one podman store: these modules run one at a time
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.timeout(BUILD_TIMEOUT_S + 900),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (podman storage)"),
    *[pytest.mark.skipif(shutil.which(tool) is None, reason=f"needs {tool} ({why})")
      for tool, why in (("podman", "builds and runs the image"),
                        ("debootstrap", "the base image"),
                        ("runc", "apt-get install runc: podman runs containers with it here"))],
]


def sh(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def podman_run(image: str, work: Path, args: list[str], env: dict[str, str] | None = None
               ) -> tuple[subprocess.CompletedProcess, str]:
    """`podman run --rm` of ``image`` with ``args``, ``work`` (made here, writable by the image's
    user, 1000) bound at /w as the working folder and ``env`` passed with -e; the container is
    removed afterwards, passed or failed. The run and the container's name."""
    work.mkdir()
    work.chmod(0o777)
    name = f"fabbench-test-{uuid.uuid4().hex[:8]}"
    given = [arg for key, value in (env or {}).items() for arg in ("-e", f"{key}={value}")]
    try:
        # --network none: the ranks are local (loopback); podman's default network would
        # make its bridge and give the container an address outside 198.18.0.0/15
        res = sh(["podman", "--runtime", "runc", "run", "--rm", "--name", name, "--network",
                  "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", *given,
                  "-v", f"{work}:/w", "-w", "/w", image, *args], 600)
    finally:
        sh(["podman", "--runtime", "runc", "rm", "-f", "--time", "5", name], 120)
    return res, name


@pytest.fixture(scope="module")
def image() -> tuple[str, dict]:
    built = subprocess.run([str(REPO / ".ci/image-build.sh")], capture_output=True, text=True,
                           timeout=BUILD_TIMEOUT_S, check=False,
                           env={**os.environ, "FLAVOR": "cpu"})
    assert built.returncode == 0, built.stderr[-6000:]
    tag = built.stdout.strip().splitlines()[-1]
    mounted = sh(["podman", "image", "mount", tag], 300)
    assert mounted.returncode == 0, mounted.stderr
    try:
        manifest = json.loads((Path(mounted.stdout.strip()) / "etc/fabbench/build.json")
                              .read_text())
    finally:
        sh(["podman", "image", "unmount", tag], 120)
    return tag, manifest


def test_podman_run_of_the_entrypoint_writes_on_the_bind_mount(image, tmp_path):
    tag, manifest = image
    work = tmp_path / "w"
    res, name = podman_run(tag, work, ["run", "--fabric", "ethernet", "--sizes", "8,64K", "--ops",
                                       "allreduce,broadcast", "--budget", "0.05", "--timeout",
                                       "60"])
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    files = list(work.rglob("*.jsonl"))
    assert len(files) == 1, (files, res.stdout[-2000:])
    results = read_results(files[0])
    run, summary = results.records[0], results.records[-1]
    assert run.ranks == 2 and run.transport == "ob1/tcp" and run.fabric == "ethernet"
    assert run.provenance.container == "podman"
    assert run.provenance.build == manifest
    assert summary.ok is True and len(results.of_kind("collective")) == 4
    listed = sh(["podman", "ps", "-a", "--filter", f"name={name}", "--format", "{{.Names}}"], 60)
    assert listed.stdout.strip() == ""  # --rm removed it
