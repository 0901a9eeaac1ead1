"""The peers the GPU kit sets fabbench beside: nccl-tests, built here, run on the GPU machine.

prepare.py (``--nccl-tests SRC``) builds NVIDIA's nccl-tests from a source folder the user
fetched (never committed) with nvcc of containers/cuda-toolkit.sh (cuda_mpi.toolkit, cached in
$FABBENCH_CACHE) against the NCCL headers of the GPU machine's NCCL version (PyPI's
nvidia-nccl-cu13 wheel of that version, fetched into the cache), for the GPU's architecture
only (``--cuda-arch``, default 90: H100 and H200), CUDA's runtime linked statically; it packs
the binaries of the six operations fabbench has, stripped, as nccl-tests.tar.xz. On the GPU
machine they load that machine's own libnccl.so.2 (the one torch loads, found beside torch's
packages: the library fabbench's NCCL figures come from).

The kit's ``nccl-tests`` step (drive.py) runs each binary twice, eager (``-G 0``: nccl-tests'
default, each iteration launched by the host) and as CUDA graphs (``-G``), on the sizes of the
kit's nccl step, and sets each beside fabbench's figure of the same op and size under the
same way of issuing (fabbench's default, a CUDA graph; ``--cuda-graph off``, eager): the time
ratio fabbench / nccl-tests per size. nccl-tests' column is the form torch calls: in place for
allreduce and broadcast (torch has no out-of-place form of either), out of place for the rest.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

import cuda_mpi  # bench/gpu/cuda_mpi.py, beside this file

TARBALL = "nccl-tests.tar.xz"
TOP = "nccl-tests"
# fabbench's op -> (the nccl-tests program, the column torch's form matches)
PROGRAMS = {"allreduce": ("all_reduce_perf", "in"), "allgather": ("all_gather_perf", "out"),
            "reduce_scatter": ("reduce_scatter_perf", "out"),
            "broadcast": ("broadcast_perf", "in"), "alltoall": ("alltoall_perf", "out"),
            "sendrecv": ("sendrecv_perf", "out")}
# the lent GPU machine's NCCL: what its torch 2.11.0+cu130 loads (the kit's env step on the
# H200, 2026-11; issue 49): nccl-tests is built against this version's headers
GPU_MACHINE_NCCL = "2.28.9"
# -n is fabbench's graph of GRAPH_OPS operations (comm.base), so that a batch of 1000 is
# nccl-tests' -n 100 -G 10: the same launches per operation and the same buffer shifts
ITERS, WARMUP, GRAPH_LAUNCHES = 100, 5, 10
RESOLUTION_US = 0.1  # nccl-tests prints times with two decimals: below this, no ratio
# a result line: size count type redop root, then out-of-place time algbw busbw #wrong, then
# in-place time algbw busbw #wrong ("N/A" where a test has no in-place check)
_NUM = r"([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"  # getFloatStr's %.2f ... %.1e
LINE = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\S+)\s+(-?\d+)"
                  + rf"\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+(\S+)" * 2 + r"\s*$", re.M)


class BuildError(Exception):
    """nccl-tests could not be built: the kit is made without it only when asked."""


def source_problem(src: Path) -> str | None:
    """Why ``src`` is not an nccl-tests source folder, or None."""
    if (src / "src" / "common.cu").is_file():
        return None
    return f"{src} is not an nccl-tests source folder (no src/common.cu)"


def _nccl_headers(version: str, cache: Path) -> Path:
    """NCCL's include/ and lib/ (libnccl.so for the linker) from PyPI's nvidia-nccl-cu13
    wheel of ``version``, unpacked once into the cache."""
    home = cache / f"nccl-{version}"
    if (home / "include" / "nccl.h").exists():
        return home
    with tempfile.TemporaryDirectory(prefix="gpukit-nccl-") as tmp:
        p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                            "--disable-pip-version-check", "--only-binary=:all:",
                            "--platform", "manylinux_2_18_x86_64", "--python-version", "3.12",
                            "-d", tmp, f"nvidia-nccl-cu13=={version}"],
                           capture_output=True, text=True, timeout=900, check=False)
        wheels = list(Path(tmp).glob("*.whl"))
        if p.returncode or len(wheels) != 1:
            raise BuildError(f"pip download nvidia-nccl-cu13=={version}: "
                             f"{(p.stdout + p.stderr).strip()[-500:]}")
        part = home.with_name(home.name + ".part")
        shutil.rmtree(part, ignore_errors=True)
        with zipfile.ZipFile(wheels[0]) as z:
            for name in z.namelist():
                if name.startswith("nvidia/nccl/") and not name.endswith("/"):
                    dest = part / name.removeprefix("nvidia/nccl/")
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(z.read(name))
    (part / "lib" / "libnccl.so").symlink_to("libnccl.so.2")
    shutil.rmtree(home, ignore_errors=True)
    part.rename(home)
    return home


def build(src: Path, out: Path, nccl_version: str = GPU_MACHINE_NCCL, arch: str = "90",
          cache: Path | None = None) -> dict:
    """Build nccl-tests from ``src`` and pack its six programs into ``out``/TARBALL; returns
    the manifest entry (version, NCCL headers, architecture, bytes, seconds)."""
    why = source_problem(src)
    if why:
        raise BuildError(why)
    cache = cache or cuda_mpi.cache_dir()
    try:
        cuda = cuda_mpi.toolkit(cache)
    except cuda_mpi.BundleError as exc:
        raise BuildError(str(exc)) from None
    nccl = _nccl_headers(nccl_version, cache)
    version = re.search(r'NCCL_TESTS_VERSION "([\d.]+)"',
                        (src / "src" / "common.h").read_text(errors="replace"))
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpukit-nccl-tests-") as tmp:
        work = Path(tmp, "src")
        shutil.copytree(src, work, ignore=shutil.ignore_patterns(".git", "build"))
        env = {**os.environ, "PATH": f"{cuda / 'bin'}:{os.environ['PATH']}"}
        p = subprocess.run(["make", f"-j{os.cpu_count() or 2}", "-C", str(work / "src"), "build",
                            f"CUDA_HOME={cuda}", f"NCCL_HOME={nccl}",
                            f"NVCC_GENCODE=-gencode=arch=compute_{arch},code=sm_{arch}",
                            "CUDARTLIB=cudart_static", f"BUILDDIR={tmp}/build"],
                           capture_output=True, text=True, env=env, timeout=1800, check=False)
        if p.returncode:
            raise BuildError(f"make failed: {(p.stdout + p.stderr).strip()[-1500:]}")
        top = Path(tmp, TOP)
        top.mkdir()
        for program, _ in PROGRAMS.values():
            subprocess.run(["strip", "--strip-unneeded", "-o", str(top / program),
                            f"{tmp}/build/{program}"], check=True, timeout=120)
        made = {"version": version.group(1) if version else None,
                "source_commit": cuda_mpi.source_commit(src), "nccl_headers": nccl_version,
                "cuda_arch": arch,
                "cuda": json.loads((cuda / "version.json").read_text()).get("cuda"),
                "build_s": round(time.monotonic() - t0, 1),
                "programs": sorted(p for p, _ in PROGRAMS.values())}
        (top / "BUILD.json").write_text(json.dumps(made, indent=2) + "\n")
        with tarfile.open(out / TARBALL, "w:xz") as tar:
            tar.add(top, arcname=TOP)
    return {**made, "bytes": (out / TARBALL).stat().st_size}


# ---- on the GPU machine
def unpack(kit: Path, into: Path) -> Path | None:
    """The kit's programs unpacked under ``into``; None where the kit has none."""
    return cuda_mpi.unpack_from_kit(kit, TARBALL, TOP, into)


def machine_nccl() -> Path | None:
    """The folder of the libnccl.so.2 torch loads here (PyPI's nvidia-nccl wheel beside torch),
    read from the process's own maps once torch has loaded it."""
    import torch

    if not torch.cuda.is_available():
        return None
    torch.cuda.nccl.version()
    for line in Path("/proc/self/maps").read_text().splitlines():
        if line.endswith("libnccl.so.2") or "/libnccl.so" in line:
            return Path(line.split()[-1]).parent
    return None


def argv(program: Path, sizes: tuple[int, int], graph: bool) -> list[str]:
    return [str(program), "-g", "1", "-b", str(sizes[0]), "-e", str(sizes[1]), "-f", "2",
            "-w", str(WARMUP), "-n", str(ITERS), "-G", str(GRAPH_LAUNCHES if graph else 0)]


def parse(text: str) -> dict[int, dict[str, float]]:
    """nccl-tests' result lines: bytes -> out-of-place and in-place time (us) and busbw."""
    points = {}
    for m in LINE.finditer(text):
        points[int(m.group(1))] = {"out_us": float(m.group(6)), "out_busbw": float(m.group(8)),
                                   "in_us": float(m.group(10)), "in_busbw": float(m.group(12))}
    return points


def side_by_side(fab: dict[int, float], peer: dict[int, dict[str, float]], column: str,
                 ) -> list[dict]:
    """Per size both ran: fabbench's p50, nccl-tests' time in ``column`` (in, out), and the
    ratio fabbench / nccl-tests (1 = the same time; above 1 fabbench's is longer). No ratio
    where nccl-tests' time is below RESOLUTION_US (it prints two decimals: an operation that
    moves nothing, one rank's in-place allreduce or broadcast, reads 0.00 or 0.01)."""
    rows = []
    for size in sorted(set(fab) & set(peer)):
        theirs = peer[size][f"{column}_us"]
        low = theirs < RESOLUTION_US
        rows.append({"bytes": size, "fabbench_us": fab[size], "nccl_tests_us": theirs,
                     "ratio": None if low else round(fab[size] / theirs, 4),
                     "below_resolution": low})
    return rows
