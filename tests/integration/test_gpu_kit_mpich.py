"""The GPU kit's MPICH bundle (the cuda-mpich step), made from the MPICH with CUDA cached under
$FABBENCH_CACHE and run from nothing but itself. Runs where the cache has the build
(`make test-mpich-cuda` makes it: about an hour on 2 cores; this module never builds it).

`prepare --mpich auto` builds the C reference loop with that MPICH's mpicc and packs libmpi,
hydra's mpiexec and proxy, libcudart and the host libraries they load into mpich-cuda.tar.xz
(bench/gpu/mpich.py). Here: the kit stays under 64 MiB and carries no driver library; in a root
that holds nothing else but this host's glibc and C++ runtime (tests/integration/bare_root.py)
every carried ELF file's libraries resolve within the bundle and those, but for the driver's
(its link-time stubs stand in for the listing); the carried mpiexec starts 2 ranks of the
carried mpichversion there (hydra's fork launcher and proxy, relocated by nothing but PATH); and
drive.py's cuda-mpich step on --device cpu records its expected outcome, the loader's refusal of
the one library only a GPU machine has (MPICH's libmpi links the driver's libcuda.so.1).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO
from integration.bare_root import CHROOT, MULTIARCH, drive_step, resolves, run
from integration.bare_root import bare_root as make_bare_root

KIT = REPO / "bench" / "gpu"
HERE_PY = "{}.{}".format(*sys.version_info[:2])


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"gpukit_{name}", KIT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(KIT))  # mpich imports cuda_mpi beside it
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(KIT))
    return module


MPICH = _module("mpich")

pytestmark = [
    pytest.mark.together,
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.timeout(900),
    pytest.mark.skipif(MPICH.installed() is None,
                       reason=f"no MPICH with CUDA in {MPICH.install_dir()} (make "
                              "test-mpich-cuda builds it: about an hour on 2 cores)"),
]


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    kit = tmp_path_factory.mktemp("gpukit") / "kit"
    p = run([sys.executable, str(KIT / "prepare.py"), "--out", str(kit), "--python-version",
             HERE_PY, "--cuda-image", "none", "--mpich", "auto"], 600)
    assert p.returncode == 0, p.stdout + p.stderr
    print(p.stdout)
    return kit


@pytest.fixture(scope="module")
def bare_root(kit, tmp_path_factory) -> Iterator[Path]:
    """A root with the unpacked bundle at /b and nothing else but the host's libc and C++."""
    root = tmp_path_factory.mktemp("bare-root")
    MPICH.cuda_mpi.unpack_from_kit(kit, MPICH.TARBALL, MPICH.TOP, root / "b")
    with make_bare_root(root, MPICH.cuda_mpi.toolkit() / "lib64" / "stubs") as made:
        yield made


def _bare_env(stubs: bool = False) -> dict[str, str]:
    env = {"HOME": "/root", "TMPDIR": "/tmp", "LANG": "C",
           **MPICH.environment(Path("/b") / MPICH.TOP, {"PATH": "/bin",
                                                        "LD_LIBRARY_PATH": str(MULTIARCH)})}
    if stubs:  # the driver's two libraries are the machine's: stubs stand in for them, last
        env["LD_LIBRARY_PATH"] += ":/stubs"
    return env


def test_the_kit_with_the_bundle_is_under_64_mib(kit):
    manifest = json.loads((kit / "MANIFEST.json").read_text())
    made = manifest["mpich"]
    assert made["included"] and made["mpich"] == MPICH.cuda_mpi.pinned("MPICH_VERSION")
    assert made["cuda_arch"] == "90" and made["build"]["cuda_arch"] == "90"
    assert (kit / MPICH.TARBALL).stat().st_size == made["bytes"]
    assert manifest["bytes"] < 64 * 2**20
    assert "libcuda.so.1" in made["driver_provides"]
    assert set(made["machine_provides"]) <= set(MPICH.cuda_mpi.MACHINE_HAS)
    assert not {"libcuda.so.1", "libnvidia-ml.so.1"} & set(made["deps"])


def test_every_carried_elf_resolves_in_a_bare_root(bare_root):
    top = bare_root / "b" / MPICH.TOP
    files = MPICH.cuda_mpi.elf_files(top)
    names = {f.name for f in files}
    for wanted in ("mpi_loop", "mpiexec.hydra", "hydra_pmi_proxy", "mpichversion",
                   "libmpi.so.12", "libcudart.so.13"):
        assert any(n.startswith(wanted) for n in names), (wanted, sorted(names))
    for f in files:
        resolves(bare_root, "/" + str(f.relative_to(bare_root)), _bare_env(stubs=True),
                 ("/b/", "/stubs/", str(MULTIARCH), "/lib64/"))
    listing = resolves(bare_root, f"/b/{MPICH.TOP}/mpi_loop", _bare_env(stubs=True),
                       ("/b/", "/stubs/", str(MULTIARCH), "/lib64/"))
    assert f"/b/{MPICH.TOP}/fabric/lib/libmpi.so.12" in listing, listing
    assert f"/b/{MPICH.TOP}/deps/libcudart.so.13" in listing, listing


def test_carried_mpiexec_starts_two_ranks_in_the_bare_root(bare_root):
    top = Path("/b") / MPICH.TOP
    p = run([CHROOT, str(bare_root), str(top / "fabric" / "bin" / "mpiexec"), "-launcher",
             "fork", "-n", "2", str(top / "fabric" / "bin" / "mpichversion")], 120,
            env=_bare_env(stubs=True))
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert p.stdout.count("MPICH Version:") == 2, p.stdout
    assert "--with-cuda" in p.stdout


def test_drive_step_records_the_missing_driver_as_the_expected_outcome(kit, tmp_path):
    step, table = drive_step(kit, tmp_path / "out", "cuda-mpich")
    assert step["status"] == "ok", step
    assert MPICH.NO_DRIVER in step["reason"], step["reason"]
    assert "the expected outcome without a GPU and its driver" in step["reason"]
    assert "MPICH 4.0.2 built for CUDA 13.0.3 sm_90" in step["reason"]
    assert "| cuda-mpich | ok |" in table
