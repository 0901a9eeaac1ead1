"""The GPU kit's cuda-mpich step: MPICH with CUDA, whose allreduce reduces device buffers on the
GPU (yaksa's CUDA kernels), beside the cuda image's Open MPI (bench/gpu/cuda_mpi.py), whose
allreduce stages them through the host.

MPICH is built on this host by containers/mpich.sh (Debian's source, CUDA of
containers/cuda-toolkit.sh, one architecture) into $FABBENCH_CACHE/mpich-<version>-cuda<cuda>-
sm<arch>, once: about an hour on 2 cores, most of it yaksa's generated kernels. This host
is Debian bookworm as the cuda image, so what it builds needs the same glibc. `make_bundle`
(prepare.py --mpich) builds the C reference loop (mpi_loop.c with -DFB_CUDA) with that MPICH's
mpicc and packs into mpich-cuda.tar.xz, under one folder mpich-cuda/:

    mpi_loop        the loop, linked against MPICH's libmpi and the toolkit's libcudart
    fabric/         MPICH's lib/ (libmpi.so.12: libfabric and hwloc are built into it) and the
                    programs a run needs: mpiexec (hydra), hydra_pmi_proxy, mpichversion
    deps/           libcudart.so.13 and every library of this host the above load, but glibc's,
                    libstdc++, libgcc_s, libz and the driver's (cuda_mpi.MACHINE_HAS, DRIVER)
    MANIFEST.json   versions, MPICH's BUILD.json, what was carried from where, the newest glibc
                    symbol version the files need

every ELF file stripped; every library a carried file names is in the bundle or among those the
machine gives (cuda_mpi.unresolved). Hydra needs no relocation: it finds its proxy beside
itself, and MPICH has no help files or components to find at run time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import cuda_mpi  # bench/gpu/cuda_mpi.py, beside this file

SCRIPT = cuda_mpi.REPO / "containers" / "mpich.sh"
TARBALL = "mpich-cuda.tar.xz"
TOP = "mpich-cuda"
PROGRAMS = ("mpiexec.hydra", "hydra_pmi_proxy", "mpichversion")
BUILD_S = 5400  # containers/mpich.sh's limit: a build took about an hour here
# The second try where a run fails with MPICH's defaults: no CUDA IPC between the ranks (a
# sandboxed machine, as the lent ones are, may refuse IPC handles); device buffers then move
# through MPICH's shared-memory copies. The reduction stays on the GPU (yaksa).
FALLBACK_ENV = {"MPIR_CVAR_CH4_IPC_GPU_P2P_THRESHOLD": str(2**31 - 1)}
# The loader's words where the driver's library is missing (a host without a GPU driver: the
# CPU rehearsal; MPICH's libmpi links libcuda.so.1 itself, which Open MPI's leaves to UCX's
# modules).
NO_DRIVER = "libcuda.so.1: cannot open shared object file"
# What every run sets: GPU support on (MPICH's default, said so the record shows it) and the
# reduction on the device (its default too: float and integer types).
RUN_ENV = {"MPIR_CVAR_ENABLE_GPU": "1", "MPIR_CVAR_ENABLE_YAKSA_REDUCTION": "1"}


class BuildError(Exception):
    """MPICH cannot be built or bundled: one line saying why."""


def install_dir(cache: Path | None = None, arch: str = "90") -> Path:
    """Where containers/mpich.sh installs MPICH for ARCH with the pinned CUDA."""
    return ((cache or cuda_mpi.cache_dir())
            / f"mpich-{cuda_mpi.pinned('MPICH_VERSION')}-cuda{cuda_mpi.pinned('CUDA_VERSION')}"
              f"-sm{arch}")


def installed(cache: Path | None = None, arch: str = "90") -> Path | None:
    """The cached MPICH for ARCH where a whole install is there (its BUILD.json, written last)."""
    prefix = install_dir(cache, arch)
    return prefix if (prefix / "BUILD.json").is_file() else None


def build(cache: Path | None = None, arch: str = "90", timeout: float = BUILD_S) -> Path:
    """The cached MPICH for ARCH, built by containers/mpich.sh where it is not there yet (a
    partial install from a build cut short is removed first); its log in CACHE/logs."""
    if (prefix := installed(cache, arch)) is not None:
        return prefix
    try:
        cuda = cuda_mpi.toolkit(cache)
    except cuda_mpi.BundleError as exc:
        raise BuildError(str(exc)) from None
    prefix = install_dir(cache, arch)
    shutil.rmtree(prefix, ignore_errors=True)
    log = (cache or cuda_mpi.cache_dir()) / "logs" / f"{prefix.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PREFIX": str(prefix), "CUDA_HOME": str(cuda), "CUDA_ARCH": arch}
    with log.open("w") as f:
        try:
            p = subprocess.run(["bash", str(SCRIPT)], stdout=f, stderr=subprocess.STDOUT,
                               env=env, timeout=timeout, check=False)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = None
    if rc != 0 or installed(cache, arch) is None:
        shutil.rmtree(prefix, ignore_errors=True)
        lines = log.read_text(errors="replace").splitlines() or ["?"]
        said = next((line for line in reversed(lines) if "ERROR" in line), lines[-1])
        how = f"ran past {timeout:.0f} s" if rc is None else "failed"
        raise BuildError(f"containers/mpich.sh {how} ({log}): {said.strip()}")
    return prefix


def build_loop(prefix: Path, cuda: Path, out: Path) -> Path:
    """mpi_loop.c with -DFB_CUDA by MPICH's own mpicc, against the toolkit's libcudart and the
    driver's link-time stub (MPICH's libmpi calls the driver API: its symbols are resolved at
    the link; the machine's own libcuda.so.1 gives them at run time)."""
    lib = cuda / "lib64"
    try:
        return cuda_mpi._compile([str(prefix / "bin" / "mpicc"), "-O2", "-DFB_CUDA",
                                  f"-I{cuda / 'include'}", str(cuda_mpi.LOOP_SOURCE),
                                  f"-L{lib}", "-lcudart", f"-L{lib / 'stubs'}", "-lcuda"], out)
    except cuda_mpi.BundleError as exc:
        raise BuildError(str(exc)) from None


def copy_install(prefix: Path, dest: Path) -> None:
    """What a run needs of the install: lib/ (without libtool, static and pkg-config files)
    and PROGRAMS, mpiexec linked to mpiexec.hydra."""
    shutil.copytree(prefix / "lib", dest / "lib", symlinks=True, ignore=cuda_mpi.SKIP)
    (dest / "bin").mkdir(parents=True)
    for name in PROGRAMS:
        if not (prefix / "bin" / name).is_file():
            raise BuildError(f"the MPICH install {prefix} has no bin/{name}")
        shutil.copy2(prefix / "bin" / name, dest / "bin" / name)
    (dest / "bin" / "mpiexec").symlink_to("mpiexec.hydra")


def make_bundle(out: Path, cache: Path | None = None, arch: str = "90") -> dict:
    """OUT/mpich-cuda.tar.xz from the cached MPICH for ARCH (see the module's docstring); its
    manifest. The MPICH must be built already (`build`)."""
    prefix = installed(cache, arch)
    if prefix is None:
        raise BuildError(f"no MPICH for sm_{arch} in {install_dir(cache, arch)} (build first)")
    cuda = cuda_mpi.toolkit(cache)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpukit-mpich-") as tmp:
        stage = Path(tmp) / TOP
        stage.mkdir()
        build_loop(prefix, cuda, stage / "mpi_loop")
        copy_install(prefix, stage / "fabric")
        (stage / "deps").mkdir()
        cudart = (cuda / "lib64" / "libcudart.so.13").resolve()
        shutil.copy2(cudart, stage / "deps" / "libcudart.so.13")
        root = Path("/")
        files = [str(p) for p in cuda_mpi.elf_files(stage)]
        path = ":".join(str(d) for d in cuda_mpi.library_dirs(stage))
        libs = cuda_mpi.sort_libraries(cuda_mpi.ldd(root, files, path), {str(stage)})
        if libs["missing"]:
            name, users = next(iter(libs["missing"].items()))
            raise BuildError(f"{name}, needed by {Path(users[0]).relative_to(stage)}, is not "
                             "found on this host")
        for name, found in sorted(libs["copy"].items()):
            shutil.copy2(found, stage / "deps" / name)
        elves = cuda_mpi.elf_files(stage)
        cuda_mpi.strip(elves)
        lost = cuda_mpi.unresolved(stage, elves)
        if lost:
            name, users = next(iter(lost.items()))
            raise BuildError(f"{name}, needed by {users[0]}, is not in the bundle")
        build_info = json.loads((prefix / "BUILD.json").read_text())
        manifest = cuda_mpi.pack(stage, {
            "mpich": build_info.get("mpich"), "build": build_info, "prefix": str(prefix),
            "cuda": cuda_mpi.pinned("CUDA_VERSION"), "cuda_arch": arch,
            "loop_source_sha256": hashlib.sha256(cuda_mpi.LOOP_SOURCE.read_bytes()).hexdigest()},
            libs, elves, out / TARBALL)
    return {**manifest, "bundle_s": round(time.monotonic() - t0, 1)}


# ---- where it runs
def environment(top: Path, base: Mapping[str, str]) -> dict[str, str]:
    """What a run from the unpacked bundle at TOP sets: its programs and libraries first, the
    machine's library path after (the driver's libcuda)."""
    keep = base.get("LD_LIBRARY_PATH", "")
    return {"PATH": f"{top / 'fabric' / 'bin'}:{base.get('PATH', '/usr/bin:/bin')}",
            "LD_LIBRARY_PATH": ":".join([*map(str, cuda_mpi.library_dirs(top)),
                                         *([keep] if keep else [])])}


def mpiexec_argv(mpiexec: str, loop: str, op: str, sizes: list[int] | tuple[int, ...],
                 ranks: int = 2, fallback: bool = False, variant: str = "device") -> list[str]:
    """RANKS ranks of the loop on this host (hydra's fork launcher: no ssh), every rank with
    RUN_ENV (and FALLBACK_ENV where FALLBACK), its buffers as VARIANT says (cuda_mpi.SPLIT's
    flags; MPICH has no coll/cuda, so the split's MCA options do not apply)."""
    env = {**RUN_ENV, **(FALLBACK_ENV if fallback else {})}
    flags, _ = cuda_mpi.SPLIT[variant]
    return [mpiexec, "-launcher", "fork", "-n", str(ranks),
            *[w for k, v in env.items() for w in ("-genv", k, v)],
            loop, op, *flags, *map(str, sizes)]


def main(argv: list[str] | None = None) -> int:
    """`python bench/gpu/mpich.py [--cuda-arch 90]`: the cached MPICH, built where it is not
    there yet (make test-mpich-cuda); its folder on stdout."""
    import argparse
    import re
    import sys

    ap = argparse.ArgumentParser(prog="mpich", description=main.__doc__)
    ap.add_argument("--cuda-arch", default="90")
    args = ap.parse_args(argv)
    if not re.fullmatch(r"\d{2,3}", args.cuda_arch):
        print(f"mpich: error: --cuda-arch takes a compute capability such as 90, not "
              f"{args.cuda_arch!r}", file=sys.stderr)
        return 2
    try:
        print(build(arch=args.cuda_arch))
    except BuildError as exc:
        print(f"mpich: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
