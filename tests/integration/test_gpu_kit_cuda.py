"""The GPU kit's cuda-mpi bundle, made from the cuda image and run from nothing but itself
(opt-in: FABBENCH_TEST_CUDA_IMAGE=1 and a built localhost/fabbench:cuda, `make image-cuda`;
this test never builds the image).

`prepare --cuda-image localhost/fabbench:cuda` mounts the image, builds the C reference loop
with -DFB_CUDA against its /opt/fabric and packs Open MPI, UCX, libcudart and the Debian
libraries they load into cuda-mpi.tar.xz (bench/gpu/cuda_mpi.py). Here: the whole kit stays
under the device tool's 64 MiB; the tarball is unpacked into a root that holds nothing else but
this host's glibc, libstdc++, libgcc_s and libz (what a bare GPU machine has: no Open MPI, no
UCX, no CUDA; /proc, /sys, /dev and /dev/shm bound in, as test_image runs the image), where
every carried ELF file's libraries resolve within the bundle and those (the loader's own
listing), but for the driver's libcuda.so.1 and libnvidia-ml.so.1; and the carried mpirun
starts 2 ranks of the loop over pml ucx, relocated by the step's own environment, which find
no CUDA device and say so (exit 3). Last, drive.py's cuda-mpi step on --device cpu records
that outcome as the expected one. Where FABBENCH_OSU_SRC names OSU's source, the kit is made
with `--osu` too, and OSU's CUDA programs resolve their libraries in the same bare root.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO
from integration.bare_root import CHROOT, MULTIARCH, drive_step, resolves
from integration.bare_root import bare_root as make_bare_root

KIT = REPO / "bench" / "gpu"
# (another tag of the flavour, or its build stage, to try the bundle before the image is done)
IMAGE = os.environ.get("FABBENCH_GPUKIT_CUDA_IMAGE", "localhost/fabbench:cuda")
HERE_PY = "{}.{}".format(*sys.version_info[:2])
OSU_SRC = os.environ.get("FABBENCH_OSU_SRC")


def _image_built() -> bool:
    return shutil.which("podman") is not None and subprocess.run(
        ["podman", "image", "exists", IMAGE], capture_output=True, timeout=60,
        check=False).returncode == 0


pytestmark = [
    pytest.mark.together,
    pytest.mark.podman,  # one podman store: these modules run one at a time
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(os.environ.get("FABBENCH_TEST_CUDA_IMAGE") != "1",
                       reason="needs the cuda image (tens of minutes to build): opt in with "
                              "FABBENCH_TEST_CUDA_IMAGE=1 after make image-cuda"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (podman image mount, chroot)"),
    pytest.mark.skipif(os.environ.get("FABBENCH_TEST_CUDA_IMAGE") == "1" and not _image_built(),
                       reason=f"podman has no {IMAGE} (make image-cuda builds it)"),
]


def _cuda_mpi():
    spec = importlib.util.spec_from_file_location("gpukit_cuda_mpi", KIT / "cuda_mpi.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(argv: list[str], timeout: float, env: dict | None = None, **kw
         ) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                          env=env if env is not None else dict(os.environ), **kw)


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    kit = tmp_path_factory.mktemp("gpukit") / "kit"
    p = _run([sys.executable, str(KIT / "prepare.py"), "--out", str(kit), "--python-version",
              HERE_PY, "--cuda-image", IMAGE, *(["--osu", OSU_SRC] if OSU_SRC else [])], 1200)
    assert p.returncode == 0, p.stdout + p.stderr
    print(p.stdout)
    return kit


@pytest.fixture(scope="module")
def bare_root(kit, tmp_path_factory) -> Iterator[Path]:
    """A root with the unpacked bundle at /b and nothing else but the host's HOST_LIBS."""
    root = tmp_path_factory.mktemp("bare-root")
    _cuda_mpi().unpack(kit / "cuda-mpi.tar.xz", root / "b")
    with make_bare_root(root, _cuda_mpi().toolkit() / "lib64" / "stubs") as made:
        yield made


def _bare_env(cuda_mpi) -> dict[str, str]:
    top = Path("/b") / cuda_mpi.TOP
    return {"HOME": "/root", "TMPDIR": "/tmp", "LANG": "C",
            **cuda_mpi.environment(top, {"PATH": "/bin",
                                         "LD_LIBRARY_PATH": str(MULTIARCH)})}


def test_the_kit_with_the_bundle_is_under_64_mib(kit):
    manifest = json.loads((kit / "MANIFEST.json").read_text())
    total = sum(f.stat().st_size for f in kit.iterdir())
    print(f"kit: {total / 2**20:.2f} MiB, cuda-mpi.tar.xz "
          f"{(kit / 'cuda-mpi.tar.xz').stat().st_size / 2**20:.2f} MiB")
    assert total < 64 * 2**20
    bundle = manifest["cuda_mpi"]
    assert bundle["included"] is True and bundle["image"] == IMAGE
    assert bundle["bytes"] == (kit / "cuda-mpi.tar.xz").stat().st_size
    assert bundle["versions"]["openmpi"].startswith("4.1.") and bundle["versions"]["ucx"]
    assert set(bundle["driver_provides"]) <= {"libcuda.so.1", "libnvidia-ml.so.1"}
    assert set(bundle["machine_provides"]) <= set(_cuda_mpi().MACHINE_HAS)
    assert not {"libcuda.so.1", "libnvidia-ml.so.1"} & set(bundle["deps"])


def test_every_carried_elf_resolves_in_a_bare_root(bare_root):
    cuda_mpi = _cuda_mpi()
    top = bare_root / "b" / cuda_mpi.TOP
    files = cuda_mpi.elf_files(top)
    names = {f.name for f in files}
    for wanted in ("mpi_loop", "orterun", "orted", "ompi_info", "ucx_info", "libmpi.so.40",
                   "libucp.so.0", "libcudart.so.13"):
        assert any(n.startswith(wanted) for n in names), wanted
    assert any(f.parent.name == "ucx" and f.name.startswith("libuct_cuda") for f in files)
    assert any(f.parent.name == "openmpi" and f.name == "mca_pml_ucx.so" for f in files)
    env = _bare_env(cuda_mpi)
    # the driver's two libraries are the machine's: stubs stand in for them here, last
    env["LD_LIBRARY_PATH"] += ":/stubs"
    for f in files:
        resolves(bare_root, "/" + str(f.relative_to(bare_root)), env,
                 ("/b/", "/stubs/", str(MULTIARCH), "/lib64/"))


@pytest.mark.skipif(not OSU_SRC, reason="needs OSU's source: FABBENCH_OSU_SRC names a folder of "
                    "OSU 7.x (fetched, never committed)")
def test_osu_programs_resolve_in_the_bare_root(kit, bare_root):
    """OSU's CUDA programs (prepare --osu) load the bundle's libmpi and libcudart and the
    machine's glibc and C++ runtime only (the driver's libcuda: its stub here)."""
    made = json.loads((kit / "MANIFEST.json").read_text())["osu"]
    assert made["included"] and made["cuda"] is True and made["openmpi"].startswith("4.1.")
    assert (kit / "osu.tar.xz").stat().st_size == made["bytes"]
    cuda_mpi = _cuda_mpi()
    cuda_mpi.unpack(kit / "osu.tar.xz", bare_root / "o")
    env = _bare_env(cuda_mpi)
    env["LD_LIBRARY_PATH"] += ":/stubs"
    for program in ("osu_latency", "osu_bw", "osu_allreduce"):
        listing = resolves(bare_root, f"/o/osu/{program}", env,
                           ("/b/", "/o/", "/stubs/", str(MULTIARCH), "/lib64/"))
        assert "/b/cuda-mpi/fabric/lib/libmpi.so.40" in listing, listing
        assert "/b/cuda-mpi/deps/libcudart.so.13" in listing, listing


def test_carried_mpirun_starts_two_ranks_that_find_no_device(bare_root):
    cuda_mpi = _cuda_mpi()
    top = Path("/b") / cuda_mpi.TOP
    argv = cuda_mpi.mpirun_argv(str(top / "fabric" / "bin" / "mpirun"), str(top / "mpi_loop"),
                                "allreduce", [8, 4096])
    p = _run([CHROOT, str(bare_root), *argv], 180, env=_bare_env(cuda_mpi))
    text = p.stdout + p.stderr
    said = [line for line in text.splitlines() if line.startswith(cuda_mpi.NO_DEVICE)]
    assert p.returncode == cuda_mpi.NO_DEVICE_EXIT and len(said) == 1, text[-4000:]
    assert cuda_mpi.transports(text), text[-4000:]  # UCX (pml ucx) carried the ranks' agreement
    # the carried ompi_info: Open MPI built with CUDA, pml ucx among its components
    p = _run([CHROOT, str(bare_root), str(top / "fabric" / "bin" / "ompi_info"), "--parsable",
              "--all"], 120, env=_bare_env(cuda_mpi))
    assert "mpi_built_with_cuda_support:value:true" in p.stdout, (p.stdout + p.stderr)[-3000:]
    assert "mca:pml:ucx:" in p.stdout


def test_drive_step_records_no_device_as_the_expected_outcome(kit, tmp_path):
    step, table = drive_step(kit, tmp_path / "out", "cuda-mpi")
    assert step["status"] == "ok", step
    assert step["reason"].startswith(_cuda_mpi().NO_DEVICE), step["reason"]
    assert step["figures"]["built_with_cuda"] is True
    assert step["figures"]["transports"] and step["figures"]["exit"] == 3
    assert "| cuda-mpi | ok |" in table
