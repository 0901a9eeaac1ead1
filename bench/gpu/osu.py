"""The OSU micro-benchmarks in the GPU kit: built here, run on the GPU machine beside the
cuda-mpi step.

prepare.py (``--osu SRC``) builds OSU's osu_latency, osu_bw and osu_allreduce from a source
folder the user fetched (never committed; an OSU 7.x release tree, with its ready configure)
with CUDA (``--enable-cuda``: OSU's CUDA kernels by nvcc of containers/cuda-toolkit.sh, for
``--cuda-arch`` only) against the cuda image's own Open MPI: the image mounted as for the
cuda-mpi bundle (cuda_mpi.mounted), this host's gcc with the image's /opt/fabric headers and
libmpi, the toolkit's CUDA headers, libcudart and the driver's link stubs. The programs,
stripped, go into osu.tar.xz with a BUILD.json (OSU's version, the source commit, the image,
Open MPI's version, the configure line). They load the cuda-mpi bundle's libmpi and libcudart
where they run (cuda_mpi.environment), and the machine's own libcuda.so.1.

OSU 7.4 calls cudaMemPrefetchAsync with CUDA 12's four arguments; CUDA 13 takes a
cudaMemLocation and flags. The build includes SHIM first in every file: after cuda_runtime.h it
maps the old call onto the new one (a device location, no flags). OSU calls it only for managed
memory (``-d managed``), which the kit does not use.

The kit's ``osu`` step (drive.py) runs them with the bundle's mpirun and the cuda-mpi step's
options (cuda_mpi.mpirun_prefix: 2 ranks on the one GPU, pml ucx), buffers on the device
(``-d cuda``, ``D D``), sizes from the cuda-mpi step's smallest to its largest, ITERS timed
iterations after WARMUP (OSU's defaults are 10,000 and 1,000: minutes at 64 MiB), and sets
each beside the cuda-mpi step's figure of the same size (side_by_side): sendrecv's p50 against
osu_latency, sendrecv's bandwidth against osu_bw, allreduce's p50 against osu_allreduce. OSU's
output is read by fabbench's own reader (fabbench.floors.peer_output).

``build(..., image=None)`` builds the same programs without CUDA against this host's Open MPI
(mpicc): the CPU rehearsal of the reading and the ratios (tests/integration/test_gpu_kit.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import cuda_mpi  # bench/gpu/cuda_mpi.py, beside this file

TARBALL = "osu.tar.xz"
TOP = "osu"
# program -> (its folder in OSU's tree, the cuda-mpi op it stands beside, what it measures)
PROGRAMS = {"osu_latency": ("c/mpi/pt2pt/standard", "sendrecv", "time"),
            "osu_bw": ("c/mpi/pt2pt/standard", "sendrecv", "bw"),
            "osu_allreduce": ("c/mpi/collective/blocking", "allreduce", "time")}
ITERS, WARMUP = 50, 5
PROGRAM_CAP_S = 60   # one program's limit on the GPU machine
DEADLINE_S = 120     # the osu step's own deadline, all three programs
# a line of UCX's log: "[1764312345.123456] [host:pid:tid]  file.c:123  UCX  INFO  ..."
UCX_LOG = re.compile(r"^\[\d+\.\d+\] \[[^\]]+\].*\bUCX\s+[A-Z]+\b")
SHIM = """#include <cuda_runtime.h>
#if CUDART_VERSION >= 13000
#define cudaMemPrefetchAsync(p, n, dev, s) cudaMemPrefetchAsync((p), (n), \\
    (struct cudaMemLocation){.type = cudaMemLocationTypeDevice, .id = (dev)}, 0, (s))
#endif
"""


class BuildError(Exception):
    """OSU could not be built: one line saying why."""


def source_problem(src: Path) -> str | None:
    """Why ``src`` is not an OSU source folder with a ready configure, or None."""
    if (src / "configure").is_file() and (src / PROGRAMS["osu_latency"][0] /
                                          "osu_latency.c").is_file():
        return None
    return (f"{src} is not an OSU micro-benchmarks source folder with its configure (no "
            f"configure or {PROGRAMS['osu_latency'][0]}/osu_latency.c)")


def _version(src: Path) -> str | None:
    m = re.search(r"AC_INIT\(\[OSU-Micro-Benchmarks\],\s*\[([^\]]+)\]",
                  (src / "configure.ac").read_text(errors="replace")) \
        if (src / "configure.ac").is_file() else None
    return m.group(1) if m else None


def _run(argv: list[str], cwd: Path, env: dict, what: str) -> None:
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=1200,
                       check=False)
    if p.returncode:
        lines = (p.stdout + p.stderr).splitlines() or ["?"]
        said = [line for line in lines if "error" in line.lower()]  # the first says why
        raise BuildError(f"{what} failed: {(said or lines[-1:])[0].strip()}")


def _configure(root: Path | None, cuda: Path | None, arch: str, work: Path) -> list[str]:
    """configure's arguments: against the image mounted at ROOT with CUDA, or (ROOT None)
    this host's mpicc without. (SHIM goes to make's CFLAGS, not configure's: configure's
    first test compiles before it knows CUDA's headers.)"""
    if root is None:
        return ["CC=mpicc", "CXX=mpicxx"]  # (OSU links with its C++ compiler)
    assert cuda is not None
    fabric = root / cuda_mpi.FABRIC.lstrip("/")
    link = [fabric / "lib", root / cuda_mpi.PMIX.lstrip("/") / "lib",
            root / "usr/lib/x86_64-linux-gnu", root / "lib/x86_64-linux-gnu"]
    (work / "shim.h").write_text(SHIM)
    # libmpi alone in a folder of its own: the image's lib/ also holds libtool's .la files,
    # which name /opt/fabric/lib (this host's /, not the image's), and libtool follows them
    (work / "mpi").mkdir()
    (work / "mpi" / "libmpi.so").symlink_to(fabric / "lib" / "libmpi.so")
    return ["CC=gcc", "CXX=g++", "--enable-cuda", f"--with-cuda-include={cuda / 'include'}",
            f"CPPFLAGS=-I{fabric / 'include'}",
            f"LDFLAGS=-L{work / 'mpi'} -L{cuda / 'lib64'} -L{cuda / 'lib64' / 'stubs'} "
            f"-Wl,-rpath-link,{':'.join(map(str, link))}",
            "LIBS=-lmpi", f"NVCCFLAGS=-gencode=arch=compute_{arch},code=sm_{arch}"]


def build(src: Path, out: Path, image: str | None, arch: str = "90",
          cache: Path | None = None) -> dict:
    """OSU's three programs from ``src`` into ``out``/TARBALL: with CUDA against IMAGE's Open
    MPI, or (IMAGE None) without CUDA against this host's; the manifest entry."""
    why = source_problem(src)
    if why:
        raise BuildError(why)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpukit-osu-") as tmp:
        work = Path(tmp, "src")
        shutil.copytree(src, work, ignore=shutil.ignore_patterns(".git"))
        env = dict(os.environ)
        made: dict = {"version": _version(src), "source_commit": cuda_mpi.source_commit(src),
                      "cuda": image is not None}
        if image is None:
            args = _configure(None, None, arch, Path(tmp))
            _make(work, args, env)
            made["mpi"] = "this host's (mpicc), no CUDA: a rehearsal"
        else:
            try:
                cuda = cuda_mpi.toolkit(cache)
                with cuda_mpi.mounted(image) as root:
                    args = _configure(root, cuda, arch, Path(tmp))
                    env["PATH"] = f"{cuda / 'bin'}:{env['PATH']}"  # nvcc, for OSU's kernels
                    _make(work, args, env)
                    made.update({"image": image, "cuda_arch": arch,
                                 "openmpi": cuda_mpi.image_versions(root)["openmpi"],
                                 "cuda_toolkit": json.loads((cuda / "version.json")
                                                            .read_text()).get("cuda"),
                                 "make": "CFLAGS=-O2 -include shim.h (osu.SHIM: "
                                         "cudaMemPrefetchAsync mapped to CUDA 13's form)"})
                    args = [a.replace(str(root), "<image>") for a in args]
            except cuda_mpi.BundleError as exc:
                raise BuildError(str(exc)) from None
        made["configure"] = [a.replace(tmp, "<build>") for a in args]
        top = Path(tmp, TOP)
        top.mkdir()
        for program, (folder, _, _) in PROGRAMS.items():
            subprocess.run(["strip", "--strip-unneeded", "-o", str(top / program),
                            str(work / folder / program)], check=True, timeout=120)
        made["build_s"] = round(time.monotonic() - t0, 1)
        made["programs"] = sorted(PROGRAMS)
        (top / "BUILD.json").write_text(json.dumps(made, indent=2) + "\n")
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out / TARBALL, "w:xz") as tar:
            tar.add(top, arcname=TOP)
    return {**made, "bytes": (out / TARBALL).stat().st_size}


def _make(work: Path, configure: list[str], env: dict) -> None:
    _run(["./configure", *configure], work, env, "OSU's configure")
    shim = work.parent / "shim.h"
    cflags = [f"CFLAGS=-O2 -include {shim}"] if shim.exists() else []
    for folder in dict.fromkeys(f for f, _, _ in PROGRAMS.values()):
        wanted = [p for p, (f, _, _) in PROGRAMS.items() if f == folder]
        _run(["make", f"-j{os.cpu_count() or 2}", "-C", folder, *cflags, *wanted], work, env,
             f"make {' '.join(wanted)}")


# ---- on the GPU machine
def unpack(kit: Path, into: Path) -> Path | None:
    """The kit's programs unpacked under ``into``; None where the kit has none."""
    return cuda_mpi.unpack_from_kit(kit, TARBALL, TOP, into)


def argv(prefix: list[str], program: Path, sizes: tuple[int, ...] | list[int],
         cuda: bool) -> list[str]:
    """One OSU program after mpirun's PREFIX: sizes min:max (OSU doubles the size), ITERS
    timed after WARMUP, device buffers where CUDA (``-d cuda``; the point-to-point programs
    also take the buffers' places, ``D D``); allreduce on floats, as the cuda-mpi loop."""
    name = program.name
    return [*prefix, str(program), *(["-d", "cuda"] if cuda else []),
            "-m", f"{min(sizes)}:{max(sizes)}", "-i", str(ITERS), "-x", str(WARMUP),
            *(["-T", "mpi_float"] if PROGRAMS[name][1] == "allreduce" else []),
            *(["D", "D"] if cuda and PROGRAMS[name][1] == "sendrecv" else [])]


def figures(text: str, where: Path) -> dict[int, float]:
    """OSU's output (written to WHERE without UCX's log lines, which UCX_LOG_LEVEL=info puts
    on the same stdout, then read by fabbench's reader of OSU's tables): bytes -> time in us
    (latency, allreduce) or bandwidth in GB/s (osu_bw)."""
    from fabbench.floors.peer_output import read_foreign

    where.write_text("".join(line for line in text.splitlines(keepends=True)
                             if not UCX_LOG.match(line)))
    out = {}
    for point in read_foreign(where):
        metric = "bw" if "bw" in point.metrics else "time"
        out[point.bytes] = point.metrics[metric]
    return out


def side_by_side(sizes: dict[str, list[dict]], osu: dict[str, dict[int, float]]) -> list[dict]:
    """Per OSU program and size both have: the cuda-mpi step's figure (p50 us, or sendrecv's
    algbw in GB/s beside osu_bw), OSU's, and fabbench / OSU (for a time above 1 fabbench's is
    longer; for a bandwidth above 1 fabbench's is higher)."""
    rows = []
    for program, (_, op, metric) in PROGRAMS.items():
        mine = {r["bytes"]: r["algbw_gbyte_s"] if metric == "bw" else r["p50_us"]
                for r in sizes.get(op) or []}
        theirs = osu.get(program) or {}
        for size in sorted(set(mine) & set(theirs)):
            rows.append({"program": program, "op": op, "metric": metric, "bytes": size,
                         "fabbench": mine[size], "osu": theirs[size],
                         "ratio": round(mine[size] / theirs[size], 4) if theirs[size] else None})
    return rows
