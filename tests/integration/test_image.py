"""The cpu image, really built and really run: podman's build.

The image is built with podman (.ci/image-build.sh: chroot isolation, a debootstrap base,
cached by the content of Dockerfile, containers/, src/ — nothing is rebuilt when they did not
change). Its checks (tests/integration/image_checks.py, shared with Docker's build in
test_docker.py) run it the way Apptainer runs one: its filesystem is mounted (`podman image
mount`), /proc, /sys, /dev and /dev/shm are bound into it, a scratch folder is bound at its
working directory, and the entrypoint runs under chroot as the image's user with the image's
environment. `podman run` itself runs it in test_podman_run.py.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from integration.image_checks import *  # noqa: F403  (the checks: pytest collects them here)
from integration.image_checks import ROOT, Image, sh

BUILD_TIMEOUT_S = 5400  # cold: debootstrap + Debian's stack + mpi4py + Horovod on 2 cores

pytestmark = [
    pytest.mark.together,
    pytest.mark.podman,  # one podman store: these modules run one at a time
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.timeout(BUILD_TIMEOUT_S + 900),
    pytest.mark.skipif(shutil.which("podman") is None,
                       reason="needs podman (apt-get install podman)"),
    pytest.mark.skipif(shutil.which("debootstrap") is None,
                       reason="needs debootstrap for the base image"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (podman storage, mount, chroot)"),
]


@contextmanager
def mounted_image(flavor: str, tmp_path_factory, build_env: dict[str, str] | None = None
                  ) -> Iterator[Image]:
    """Build (or find) the image of a flavour, mount it and bind what a run needs into it;
    everything is unmounted on the way out."""
    built = sh([str(ROOT / ".ci" / "image-build.sh")], BUILD_TIMEOUT_S,
               env={**os.environ, **(build_env or {}), "FLAVOR": flavor})
    assert built.returncode == 0, built.stderr[-6000:]
    tag = built.stdout.strip().splitlines()[-1]

    inspect = sh(["podman", "image", "inspect", tag], 120)
    assert inspect.returncode == 0, inspect.stderr
    config = json.loads(inspect.stdout)[0]["Config"]
    env = dict(item.split("=", 1) for item in config.get("Env", []))
    env.setdefault("HOME", "/home/fabbench")

    mounted = sh(["podman", "image", "mount", tag], 300)
    assert mounted.returncode == 0, mounted.stderr
    rootfs = Path(mounted.stdout.strip())
    work = tmp_path_factory.mktemp("image-work")
    work.chmod(0o777)
    tmp = tmp_path_factory.mktemp("image-tmp")
    tmp.chmod(0o1777)
    binds = [("/proc", "proc"), ("/sys", "sys"), ("/dev", "dev"), ("/dev/shm", "dev/shm"),
             (str(tmp), "tmp"), (str(work), config.get("WorkingDir", "/work").lstrip("/"))]
    done: list[Path] = []
    try:
        for source, target in binds:
            where = rootfs / target
            res = sh(["mount", "--bind", source, str(where)], 60)
            assert res.returncode == 0, f"mount {source} -> {where}: {res.stderr}"
            done.append(where)
        yield Image(tag=tag, rootfs=rootfs, work=work, env=env,
                    user=config.get("User") or "0:0", workdir=config.get("WorkingDir") or "/",
                    entrypoint=config.get("Entrypoint") or [])
    finally:
        for where in reversed(done):
            sh(["umount", "-l", str(where)], 60)
        sh(["podman", "image", "unmount", tag], 120)


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Iterator[Image]:
    with mounted_image("cpu", tmp_path_factory) as mounted:
        yield mounted


