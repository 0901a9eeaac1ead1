"""The cuda image, really built and its libraries checked (opt-in: the build is long).

`make image-cuda` (or this test) builds the cuda flavour with .ci/image-build.sh FLAVOR=cuda:
the Debian base, CUDA's runtime and headers from PyPI's nvidia-* wheels, UCX and Open MPI built
--with-cuda from Debian's source tarballs, NCCL from its wheel. Cold, that is tens of minutes on
2 cores, so the test runs only with FABBENCH_TEST_CUDA_IMAGE=1 (`make test-image-cuda`); a built
image is found again by its content tag and not rebuilt.

No GPU is needed: the checks are that every fabric library resolves every library it needs
except the driver's own (libcuda.so.1, libnvidia-ml.so.1, which the host gives at run time), that
Open MPI and UCX were built with CUDA, that `fabbench env` in the image names CUDA, NCCL, UCX and
Open MPI with their pinned versions, and that two MPI ranks run in it over TCP.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.test_image import BUILD_TIMEOUT_S, Image, manifest_of, mounted_image, results

ROOT = Path(__file__).resolve().parents[2]
# the driver's libraries: never in the image (a stub there would shadow the host's driver)
DRIVER_LIBS = {"libcuda.so.1", "libnvidia-ml.so.1"}

pytestmark = [
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.timeout(BUILD_TIMEOUT_S + 900),
    pytest.mark.skipif(os.environ.get("FABBENCH_TEST_CUDA_IMAGE") != "1",
                       reason="the cuda image takes tens of minutes to build: opt in with "
                              "FABBENCH_TEST_CUDA_IMAGE=1 (make test-image-cuda)"),
    pytest.mark.skipif(shutil.which("podman") is None,
                       reason="needs podman (apt-get install podman)"),
    pytest.mark.skipif(shutil.which("debootstrap") is None,
                       reason="needs debootstrap for the base image"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (podman storage, mount, chroot)"),
]


def pins() -> dict[str, str]:
    return {k: v.strip('"') for k, v in re.findall(r"^([A-Z0-9_]+)=(\S+)$",
                                                   (ROOT / "containers/versions.env").read_text(),
                                                   re.M)}


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Iterator[Image]:
    wheels = sorted((Path(os.environ.get("FABBENCH_CACHE", Path.home() / ".cache/fabbench"))
                     / "wheels").glob("horovod-*-cp311-*.whl"))
    build_env = {"IMAGE_WHEELS": " ".join(map(str, wheels))} if wheels else {}
    with mounted_image("cuda", tmp_path_factory, build_env) as mounted:
        yield mounted


def elf_files(image: Image) -> list[str]:
    """The fabric stack's shared libraries and programs, and the CUDA runtime and NCCL, as paths
    inside the image."""
    found = []
    roots = [image.rootfs / "opt/fabric/lib", image.rootfs / "opt/fabric/bin",
             image.rootfs / "usr/local/cuda/lib64",
             *image.rootfs.glob("opt/fabbench/venv/lib/python3*/site-packages/nvidia/nccl/lib")]
    for top in roots:
        for path in sorted(top.rglob("*")):
            if path.is_file() and not path.is_symlink() and path.read_bytes()[:4] == b"\x7fELF":
                found.append("/" + str(path.relative_to(image.rootfs)))
    return found


def test_every_fabric_library_resolves_all_but_the_drivers(image: Image):
    files = elf_files(image)
    names = {Path(f).name for f in files}
    # (Open MPI 4.1's mpirun is a link to orterun: the program is orterun)
    for needed in ("libucp.so.0", "libuct_cuda.so.0", "libmpi.so.40", "libcudart.so.12",
                   "libnccl.so.2", "orterun", "ucx_info", "ompi_info"):
        assert needed in names or any(n.startswith(needed) for n in names), needed
    assert (image.rootfs / "opt/fabric/bin/mpirun").resolve().name == "orterun"
    missing: dict[str, list[str]] = {}
    cuda_linked = []
    for chunk in (files[i:i + 40] for i in range(0, len(files), 40)):
        res = image.run(["/bin/sh", "-c", 'for f; do echo "== $f"; ldd "$f" 2>&1; done', "ldd",
                         *chunk], timeout=300)
        assert res.returncode == 0, res.stderr
        current = ""
        for line in res.stdout.splitlines():
            if line.startswith("== "):
                current = line[3:]
            elif "not found" in line:
                missing.setdefault(current, []).append(line.split()[0])
            if "libcuda.so.1" in line:
                cuda_linked.append(current)
    unexpected = {f: libs for f, libs in missing.items() if set(libs) - DRIVER_LIBS}
    assert not unexpected, f"libraries that do not resolve: {unexpected}"
    # UCX's CUDA transports link the driver API (the driver gives it at run time)
    assert any("libuct_cuda" in f for f in cuda_linked), cuda_linked
    # no stub or copy of the driver's libraries anywhere in the image
    for lib in DRIVER_LIBS:
        stem = lib.split(".so")[0]
        # (usr/ and opt/ hold every library; /proc, /sys, /dev are the host's, bound in)
        copies = [p for top in ("usr", "opt") for p in (image.rootfs / top).rglob(f"{stem}.so*")]
        assert not copies, f"the image carries {copies}: it would shadow the host's driver"


def test_open_mpi_is_cuda_aware_with_pml_ucx(image: Image):
    res = image.run(["ompi_info", "--parsable", "--all"], timeout=300)
    assert res.returncode == 0, res.stderr
    assert "mpi_built_with_cuda_support:value:true" in res.stdout
    plain = image.run(["ompi_info"], timeout=300)
    assert re.search(r"MCA pml: ucx", plain.stdout), plain.stdout[-3000:]
    assert re.search(r"MCA btl: smcuda", plain.stdout), plain.stdout[-3000:]
    assert f"Open MPI: {pins()['OPENMPI_VERSION']}" in plain.stdout


def test_ucx_was_built_with_cuda(image: Image):
    version = image.run(["ucx_info", "-v"], timeout=120)
    assert version.returncode == 0, version.stderr
    assert pins()["UCX_VERSION"] in version.stdout
    assert re.search(r"--with-cuda=/usr/local/cuda\b", version.stdout), version.stdout
    built = image.run(["ucx_info", "-b"], timeout=120)
    assert re.search(r"^#define HAVE_CUDA\s+1$", built.stdout, re.M), built.stdout[-3000:]
    modules = {p.name for p in (image.rootfs / "opt/fabric/lib/ucx").glob("libuct_cuda*.so*")}
    assert any(m.startswith("libuct_cuda.so") for m in modules), modules


def test_fabbench_env_names_cuda_nccl_ucx_and_open_mpi(image: Image):
    p = pins()
    res = image.run(["fabbench", "env", "--json"], timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    env = json.loads(res.stdout)
    versions = env["versions"]
    assert versions["openmpi"] == p["OPENMPI_VERSION"]
    assert versions["ucx"] == p["UCX_VERSION"]
    assert versions["nccl"] == p["NCCL_VERSION"]
    components = env["build"]["components"]
    assert components["cuda"]["version"] == p["CUDA_VERSION"]
    assert components["nccl"]["version"] == p["NCCL_VERSION"]
    assert env["build"] == manifest_of(image)
    assert env["build"]["image"]["flavor"] == "cuda"
    text = image.run(["fabbench", "env"], timeout=120)
    assert text.returncode == 0, text.stderr
    for name, pin in (("openmpi", "OPENMPI"), ("ucx", "UCX"), ("nccl", "NCCL")):
        assert re.search(rf"version {name}\W+{re.escape(p[pin + '_VERSION'])}\b", text.stdout), \
            (name, text.stdout[-4000:])
    assert '"cuda"' in text.stdout  # the build manifest's row


def test_two_mpi_ranks_run_in_the_cuda_image(image: Image):
    res = image.run(["fabbench", "run", "--fabric", "ethernet", "--ranks", "2",
                     "--sizes", "8,64K", "--budget", "0.05"], timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    records = results(image)
    assert records[0]["ranks"] == 2 and records[-1]["kind"] == "summary"
    assert records[-1]["ok"] is True
    assert records[0]["provenance"]["build"]["image"]["flavor"] == "cuda"
