"""The GPU kit's cuda-mpi step: the cuda image's own CUDA-aware Open MPI and UCX on the GPU.

The lent GPU machine has no Open MPI, so the kit carries the image's: `make_bundle` (called by
bench/gpu/prepare.py --cuda-image) mounts the image (`podman image mount`), builds the C
reference loop (src/fabbench/fidelity/loops/mpi_loop.c with -DFB_CUDA: its protocol on
cudaMalloc'd buffers) with gcc against the image's /opt/fabric and CUDA headers from
containers/cuda-toolkit.sh (installed once into $FABBENCH_CACHE/cuda-<version>), and packs into
one tarball, cuda-mpi.tar.xz, under one folder cuda-mpi/:

    mpi_loop                 the loop, linked against the image's libmpi and libcudart
    fabric/                  the image's /opt/fabric: lib/ (Open MPI, its MCA components in
                             lib/openmpi, UCX and its modules in lib/ucx), the programs a run
                             needs (mpirun -> orterun, orted, ompi_info, ucx_info),
                             share/openmpi (help files) and etc/; and Debian's PMIx, which
                             Open MPI loads (/usr/lib/x86_64-linux-gnu/pmix2: libpmix.so.2 and
                             its plugins into lib/ and lib/pmix, its help files into
                             share/pmix): Open MPI wants PMIx's install folders equal to its
                             own where both are set (ext3x's check_evars)
    deps/                    libcudart.so.13 and every Debian library the above load (ldd in
                             the image, chroot), but glibc's, libstdc++, libgcc_s and libz
                             (the machine has them) and the driver's libcuda.so.1 and
                             libnvidia-ml.so.1 (the machine's own, never carried)
    MANIFEST.json            the image, versions, what was carried from where, the newest glibc
                             symbol version the files need

every ELF file stripped (strip --strip-unneeded); every library a carried file names is
checked to be in the bundle or among those the machine gives.

Where it runs (bench/gpu/drive.py, step cuda-mpi): `unpack`, then `environment` relocates it
(Open MPI's and PMIx's prefix, libdir and datarootdir, the same for both, as OPAL_* and PMIX_*;
PATH; LD_LIBRARY_PATH before the machine's own); `mpirun_argv` is the command line the step runs
(and the CPU rehearsal, with this host's mpirun): 2 ranks, pml ucx (told to accept any
transport: Open MPI 4.1's pml ucx otherwise declines where it finds no InfiniBand device),
UCX_LOG_LEVEL=info so that UCX names the transports each endpoint uses ("ep_cfg[N]:
tag(cuda_copy/cuda cuda_ipc/cuda ...)", read by `transports`); `points` and `bandwidths` read
the loop's lines.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOOP_SOURCE = REPO / "src" / "fabbench" / "fidelity" / "loops" / "mpi_loop.c"
TOOLKIT_SCRIPT = REPO / "containers" / "cuda-toolkit.sh"
VERSIONS = REPO / "containers" / "versions.env"

DEFAULT_IMAGE = "localhost/fabbench:cuda"
TARBALL = "cuda-mpi.tar.xz"
TOP = "cuda-mpi"  # the tarball's one folder
FABRIC = "/opt/fabric"  # the image's fabric stack (containers/ucx.sh, openmpi.sh)
CUDART = "/usr/local/cuda/lib64/libcudart.so.13"
PMIX = "/usr/lib/x86_64-linux-gnu/pmix2"  # Debian's PMIx prefix (openmpi.sh --with-pmix)
PROGRAMS = ("orterun", "mpirun", "mpiexec", "orted", "ompi_info", "ucx_info")
SKIP = shutil.ignore_patterns("*.la", "*.a", "pkgconfig", "cmake", "*-wrapper-data.txt")
# Found on the GPU machine (glibc, the C++ runtime, zlib): never carried.
MACHINE_HAS = frozenset({
    "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libmvec.so.1", "libpthread.so.0",
    "libdl.so.2", "librt.so.1", "libutil.so.1", "libresolv.so.2", "libanl.so.1",
    "libnss_files.so.2", "libnss_dns.so.2", "libthread_db.so.1", "libBrokenLocale.so.1",
    "libstdc++.so.6", "libgcc_s.so.1", "libz.so.1"})
# The driver's: the machine's own (a copy would shadow it); "not found" in the image.
DRIVER = frozenset({"libcuda.so.1", "libnvidia-ml.so.1"})

# Where an op fails with UCX's default transports, the step runs it once more with these only:
# no cuda_ipc (CUDA IPC handles) and no cma (process_vm_readv), which a sandboxed machine (the
# lent ones run under gVisor) may refuse; the GPU buffers are then staged through host memory.
FALLBACK_TLS = "self,sysv,posix,cuda_copy"
# The allreduce split (docs/gpu-kit.md): where Open MPI 4.1's allreduce on device buffers
# spends its time. variant -> (the loop's flags, further mpirun MCA options):
SPLIT = {
    "device": (("--cuda",), ()),                 # MPI_Allreduce on cudaMalloc'd buffers
    "staged": (("--cuda", "--staged"), ()),      # cudaMemcpy to pinned host, MPI, and back
    "host": ((), ()),                            # host buffers only: what is left of MPI
    "no-coll-cuda": (("--cuda",), ("--mca", "coll", "^cuda")),  # coll/cuda excluded
}
# The coll components selected, logged by a run of the device variant at the smallest size.
COLL_VERBOSE = ("--mca", "coll_base_verbose", "10")
COLL_LINE = re.compile(r"^\[([^\]]+)\] coll:base:comm_select: (.*)$", re.M)
COLL_ENABLED = re.compile(r"selecting\s+(\S+), priority\s+(-?\d+), Enabled")
NO_DEVICE = "mpi_loop: no CUDA device: "  # mpi_loop.c, rank 0, where a rank finds no device
NO_DEVICE_EXIT = 3
DEVICE_LINE = re.compile(r"^mpi_loop: rank 0 on CUDA device .*$", re.M)
POINT = re.compile(r"^(\d+) (\d+(?:\.\d+)?) (\d+) (\d+)$", re.M)
EP_CFG = re.compile(r"ep_cfg\[\d+\]: (.*)$", re.M)
TL = re.compile(r"([A-Za-z0-9_]+)/([^\s()/]+)")


class BundleError(Exception):
    """The bundle cannot be made: one line saying why."""


def cache_dir() -> Path:
    return Path(os.environ.get("FABBENCH_CACHE", Path.home() / ".cache" / "fabbench"))


def pinned(name: str) -> str:
    """A pin of containers/versions.env."""
    m = re.search(rf"^{name}=\"?([^\"\s]+)", VERSIONS.read_text(), re.M)
    if not m:
        raise BundleError(f"containers/versions.env pins no {name}")
    return m.group(1)


def _run(argv: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                          **kw)


def _said(p: subprocess.CompletedProcess) -> str:
    lines = (p.stderr.strip() or p.stdout.strip()).splitlines() or ["?"]
    return next((line for line in lines if "error" in line.lower()), lines[-1])


# ---- the CUDA toolkit (headers, libcudart) and the loop built with it
def toolkit(cache: Path | None = None) -> Path:
    """The pinned CUDA toolkit in CACHE/cuda-<version>, installed there once by
    containers/cuda-toolkit.sh (PyPI's nvidia-* wheels, ~100 MB of downloads)."""
    version = pinned("CUDA_VERSION")
    home = (cache or cache_dir()) / f"cuda-{version}"
    stamp = home / "version.json"
    if stamp.exists() and json.loads(stamp.read_text()).get("cuda") == version:
        return home
    home.parent.mkdir(parents=True, exist_ok=True)
    tmp = home.with_name(f".{home.name}.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    p = _run(["bash", str(TOOLKIT_SCRIPT)], 1800, env={**os.environ, "CUDA_HOME": str(tmp)})
    if p.returncode:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BundleError(f"containers/cuda-toolkit.sh could not install CUDA {version}: "
                          f"{_said(p)}")
    if home.exists():  # another process installed it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.rename(home)
    return home


def _compile(argv: list[str], out: Path) -> Path:
    """argv (whose output is its last two words '-o' OUT replaced by a temporary name) run, and
    its program renamed into place: ranks or tests building at once see no half file."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    p = _run([*argv, "-o", str(tmp)], 300)
    if p.returncode:
        tmp.unlink(missing_ok=True)
        raise BundleError(f"could not build {LOOP_SOURCE.name} with -DFB_CUDA: {_said(p)}")
    tmp.replace(out)
    return out


def build_host_loop(cache: Path | None = None) -> Path:
    """mpi_loop.c with -DFB_CUDA, by this host's mpicc, against the toolkit's libcudart
    (the CPU rehearsal of the step); cached by the source's, mpicc's and CUDA's identity."""
    mpicc = shutil.which("mpicc")
    if mpicc is None:
        raise BundleError("the CPU rehearsal of the cuda-mpi loop needs mpicc "
                          "(Debian: libopenmpi-dev)")
    cuda = toolkit(cache)
    identity = "".join(_run([mpicc, flag], 30).stdout for flag in ("--showme:version",
                                                                   "--showme"))
    key = hashlib.sha256(LOOP_SOURCE.read_bytes() + identity.encode()
                         + (cuda / "version.json").read_bytes()).hexdigest()[:16]
    out = (cache or cache_dir()) / "fidelity" / f"mpi_loop-cuda-{key}"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    lib = cuda / "lib64"
    return _compile([mpicc, "-O2", "-DFB_CUDA", f"-I{cuda / 'include'}", str(LOOP_SOURCE),
                     f"-L{lib}", "-lcudart", f"-Wl,-rpath,{lib}"], out)


def build_image_loop(root: Path, cuda: Path, out: Path) -> Path:
    """mpi_loop.c with -DFB_CUDA by this host's gcc against the image mounted at ROOT: its
    mpi.h and libmpi, its libcudart.so.13 (the headers are the toolkit's: the runtime image
    has none). The image is Debian bookworm as this host: the same glibc."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise BundleError("building the cuda-mpi loop needs gcc")
    fabric = root / FABRIC.lstrip("/")
    include = fabric / "include"
    if not (include / "mpi.h").exists():
        raise BundleError(f"the image has no {FABRIC}/include/mpi.h")
    incs = [f"-I{include}"] + ([f"-I{include / 'openmpi'}"]
                               if (include / "openmpi").is_dir() else [])
    link_dirs = [fabric / "lib", root / PMIX.lstrip("/") / "lib",
                 root / "usr/lib/x86_64-linux-gnu", root / "lib/x86_64-linux-gnu"]
    return _compile([gcc, "-O2", "-pthread", "-DFB_CUDA", *incs, f"-I{cuda / 'include'}",
                     str(LOOP_SOURCE), f"-L{fabric / 'lib'}", "-lmpi",
                     str(root / CUDART.lstrip("/")),
                     "-Wl,-rpath-link," + ":".join(map(str, link_dirs))], out)


# ---- the image
def image_missing(image: str) -> str | None:
    """Why IMAGE cannot be used here, or None."""
    if shutil.which("podman") is None:
        return "podman is not installed"
    if os.geteuid() != 0:
        return "mounting an image (podman image mount) needs root"
    if _run(["podman", "image", "exists", image], 60).returncode:
        return f"podman has no image {image} (make image-cuda builds it)"
    return None


@contextmanager
def mounted(image: str) -> Iterator[Path]:
    """The image's filesystem, read-only, unmounted on the way out."""
    p = _run(["podman", "image", "mount", image], 300)
    if p.returncode:
        raise BundleError(f"podman image mount {image}: {_said(p)}")
    try:
        yield Path(p.stdout.strip())
    finally:
        _run(["podman", "image", "unmount", image], 120)


def inside(root: Path, path: str) -> Path:
    """PATH as the image sees it, its symbolic links followed within ROOT (an absolute link
    means the image's /, not this host's)."""
    parts, cur, hops = [p for p in path.split("/") if p], root, 0
    while parts:
        part = parts.pop(0)
        if part == ".":
            continue
        if part == "..":
            cur = cur.parent if cur != root else root
            continue
        nxt = cur / part
        if nxt.is_symlink():
            hops += 1
            if hops > 40:
                raise BundleError(f"too many symbolic links in {path} in the image")
            target = os.readlink(nxt)
            if target.startswith("/"):
                cur = root
            parts = [p for p in target.split("/") if p] + parts
            continue
        cur = nxt
    return cur


def is_elf(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def real(root: Path, path: str) -> str:
    """PATH in the image with every symbolic link followed: the file's own path there."""
    return "/" + str(inside(root, path).relative_to(root))


def ldd(root: Path, files: list[str], library_path: str | None = None
        ) -> dict[str, dict[str, str | None]]:
    """Per file (a path in the image): each library it loads, directly or not, and where the
    image's loader finds it, every link followed (None: not found). In the image by chroot,
    with the image's LD_LIBRARY_PATH (or LIBRARY_PATH); ROOT / runs this host's ldd (the tests,
    and the MPICH bundle, built on this host: bench/gpu/mpich.py)."""
    script = 'for f; do echo "== $f"; ldd "$f" 2>&1; done'
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C",
           "LD_LIBRARY_PATH": library_path or f"{FABRIC}/lib:{Path(CUDART).parent}"}
    out: dict[str, dict[str, str | None]] = {}
    for at in range(0, len(files), 200):
        chunk = files[at:at + 200]
        argv = ["/bin/sh", "-c", script, "ldd", *chunk]
        p = _run(argv if root == Path("/") else ["chroot", str(root), *argv], 600, env=env)
        current: dict[str, str | None] = {}
        for line in p.stdout.splitlines():
            if line.startswith("== "):
                current = out.setdefault(line[3:], {})
                continue
            if "No such file" in line or "cannot" in line:
                raise BundleError(f"ldd in the image: {line.strip()}")
            m = re.match(r"\s*(\S+) => (?:not found|(\S+)(?: \(0x[0-9a-f]+\))?)$", line)
            if m:
                current[m.group(1)] = real(root, m.group(2)) if m.group(2) else None
        missing = [f for f in chunk if f not in out]
        if missing:
            raise BundleError(f"ldd in the image said nothing of {missing[0]}: {_said(p)}")
    return out


def sort_libraries(found: Mapping[str, Mapping[str, str | None]], carried: set[str]
                   ) -> dict[str, dict]:
    """Each library the files load, sorted by where the GPU machine gets it: 'carried' (in the
    bundle already: a path under one of CARRIED's prefixes), 'machine' (MACHINE_HAS), 'driver'
    (DRIVER), 'copy' (name -> the image's path: to be copied into deps/), 'missing' (found
    nowhere in the image: name -> the files that need it)."""
    out: dict[str, dict] = {"carried": {}, "machine": {}, "driver": {}, "copy": {},
                            "missing": {}}
    for file, libs in found.items():
        for name, path in libs.items():
            if name in DRIVER:
                out["driver"][name] = path
            elif path is None:
                out["missing"].setdefault(name, []).append(file)
            elif any(path == c or path.startswith(c.rstrip("/") + "/") for c in carried):
                out["carried"][name] = path
            elif name in MACHINE_HAS:
                out["machine"][name] = path
            else:
                out["copy"][name] = path
    return out


def copy_tree(root: Path, src: str, dest: Path, ignore=SKIP) -> None:
    """The image's folder SRC into DEST, links kept where they stay inside it (an absolute or
    escaping link becomes a copy of its target)."""
    top = inside(root, src)
    shutil.copytree(top, dest, symlinks=True, ignore=ignore)
    for link in [p for p in dest.rglob("*") if p.is_symlink()]:
        target = os.readlink(link)
        resolved = (link.parent / target).resolve()
        if target.startswith("/") or not resolved.is_relative_to(dest.resolve()):
            image_path = f"{src}/{link.relative_to(dest)}"
            link.unlink()
            real = inside(root, image_path)
            if real.is_dir():
                shutil.copytree(real, link, ignore=ignore)
            else:
                shutil.copy2(real, link)


def copy_fabric(root: Path, dest: Path) -> None:
    """What a run needs of the image's /opt/fabric: lib/ (without libtool and static files),
    the programs of PROGRAMS, share/openmpi, etc/."""
    fabric = inside(root, FABRIC)
    copy_tree(root, f"{FABRIC}/lib", dest / "lib")
    (dest / "bin").mkdir(parents=True)
    for name in PROGRAMS:
        src = fabric / "bin" / name
        if src.is_symlink() and "/" not in os.readlink(src):
            (dest / "bin" / name).symlink_to(os.readlink(src))  # mpirun -> orterun
        elif os.path.lexists(src):
            shutil.copy2(inside(root, f"{FABRIC}/bin/{name}"), dest / "bin" / name)
    for sub in ("share/openmpi", "etc"):
        if (fabric / sub).is_dir():
            copy_tree(root, f"{FABRIC}/{sub}", dest / sub)
    for needed in ("bin/orterun", "bin/orted", "lib/openmpi", "share/openmpi"):
        if not (dest / needed).exists():
            raise BundleError(f"the image has no {FABRIC}/{needed}")


def elf_files(top: Path) -> list[Path]:
    return sorted(p for p in top.rglob("*") if is_elf(p))


def needed_versions(files: list[Path]) -> dict[str, str]:
    """The newest GLIBC_, GLIBCXX_ and CXXABI_ symbol versions the files need."""
    newest: dict[str, tuple[int, ...]] = {}
    for at in range(0, len(files), 200):
        p = _run(["readelf", "-V", "-W", *map(str, files[at:at + 200])], 300)
        for family, version in re.findall(r"Name: (GLIBC|GLIBCXX|CXXABI)_([\d.]+)", p.stdout):
            v = tuple(int(x) for x in version.split(".") if x)
            newest[family] = max(newest.get(family, v), v)
    return {k: ".".join(map(str, v)) for k, v in sorted(newest.items())}


def unresolved(top: Path, files: list[Path]) -> dict[str, list[str]]:
    """The libraries the files name (DT_NEEDED) that are neither on the bundle's library path,
    nor in a folder its own RUNPATH/RPATH names relative to itself ($ORIGIN: an absolute one
    names the image's folders, absent where the bundle runs), nor the machine's or the
    driver's: name -> the files (relative to TOP) that name them."""
    listing: dict[Path, set[str]] = {}

    def names(folder: Path) -> set[str]:
        if folder not in listing:
            listing[folder] = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
        return listing[folder]

    have = set().union(*(names(d) for d in library_dirs(top))) | MACHINE_HAS | DRIVER
    out: dict[str, list[str]] = {}
    for at in range(0, len(files), 200):
        chunk = files[at:at + 200]
        p = _run(["readelf", "-d", "-W", *map(str, chunk)], 300)
        # with several files readelf heads each one's section with "File: PATH"
        for path, text in re.findall(r"^File: (\S+)\n(.*?)(?=^File: |\Z)", p.stdout,
                                     re.M | re.S) or [(str(chunk[0]), p.stdout)]:
            own: set[str] = set()
            for runpath in re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]",
                                      text):
                for d in runpath.split(":"):
                    if "ORIGIN" in d:
                        own |= names(Path(d.replace("${ORIGIN}", "$ORIGIN").replace(
                            "$ORIGIN", str(Path(path).parent))))
            for name in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", text):
                if name not in have | own:
                    out.setdefault(name, []).append(str(Path(path).relative_to(top)))
    return out


def strip(files: list[Path]) -> None:
    for at in range(0, len(files), 200):
        p = _run(["strip", "--strip-unneeded", *map(str, files[at:at + 200])], 600)
        if p.returncode:
            raise BundleError(f"strip: {_said(p)}")


def make_bundle(image: str, out: Path, cache: Path | None = None) -> dict:
    """OUT/cuda-mpi.tar.xz made from IMAGE (see the module's docstring); its manifest."""
    cuda = toolkit(cache)
    inspect = _run(["podman", "image", "inspect", image], 120)
    if inspect.returncode:
        raise BundleError(f"podman image inspect {image}: {_said(inspect)}")
    info = json.loads(inspect.stdout)[0]
    with tempfile.TemporaryDirectory(prefix="gpukit-cuda-mpi-") as tmp, mounted(image) as root:
        stage = Path(tmp) / TOP
        stage.mkdir()
        build_image_loop(root, cuda, stage / "mpi_loop")
        copy_fabric(root, stage / "fabric")
        (stage / "deps").mkdir()
        shutil.copy2(inside(root, CUDART), stage / "deps" / Path(CUDART).name)
        carried = {real(root, FABRIC), real(root, CUDART)}
        files = [f"{FABRIC}/{p.relative_to(stage / 'fabric')}"
                 for p in elf_files(stage / "fabric")] + [CUDART]
        libs = sort_libraries(ldd(root, files), carried)
        pmix_at = real(root, PMIX)
        if any(path.startswith(pmix_at + "/") for path in libs["copy"].values()):
            pmix = stage / "pmix"  # then merged into fabric/
            copy_tree(root, f"{PMIX}/lib", pmix / "lib")
            if inside(root, f"{PMIX}/share/pmix").is_dir():
                copy_tree(root, f"{PMIX}/share/pmix", pmix / "share" / "pmix")
            carried.add(pmix_at)
            files += [f"{PMIX}/{p.relative_to(pmix)}" for p in elf_files(pmix)]
            libs = sort_libraries(ldd(root, files), carried)
            shutil.copytree(pmix, stage / "fabric", symlinks=True, dirs_exist_ok=True)
            shutil.rmtree(pmix)
        if libs["missing"]:
            name, users = next(iter(libs["missing"].items()))
            raise BundleError(f"{name}, needed by {users[0]}, is not found in the image")
        for name, path in sorted(libs["copy"].items()):
            shutil.copy2(inside(root, path), stage / "deps" / name)
        elves = elf_files(stage)
        strip(elves)
        lost = unresolved(stage, elves)
        if lost:
            name, users = next(iter(lost.items()))
            raise BundleError(f"{name}, needed by {users[0]}, is not in the bundle")
        versions = image_versions(root)
        manifest = {
            "image": image, "image_id": info.get("Id"), "image_created": info.get("Created"),
            "image_digest": info.get("Digest"), "versions": versions,
            "loop_source_sha256": hashlib.sha256(LOOP_SOURCE.read_bytes()).hexdigest(),
            "carried_from_image": sorted({*carried})}
        return pack(stage, manifest, libs, elves, out / TARBALL)


def pack(stage: Path, manifest: dict, libs: Mapping[str, Mapping], elves: list[Path],
         tarball: Path) -> dict:
    """STAGE (a bundle's one folder) with its MANIFEST.json (MANIFEST, and what LIBS and ELVES
    say of it) packed into TARBALL, written whole; the manifest, with the tarball's bytes."""
    manifest = {**manifest,
                "deps": {name: path for name, path in sorted(libs["copy"].items())},
                "machine_provides": sorted(libs["machine"]),
                "driver_provides": sorted(libs["driver"]),
                "needs_versions": needed_versions(elves),
                "files": sum(1 for p in stage.rglob("*") if not p.is_dir()),
                "unpacked_bytes": sum(p.stat().st_size for p in stage.rglob("*")
                                      if p.is_file() and not p.is_symlink())}
    (stage / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    partial = tarball.with_name(f".{tarball.name}.partial")
    with tarfile.open(partial, "w:xz") as tar:
        tar.add(stage, arcname=stage.name)
    partial.replace(tarball)
    return {**manifest, "bytes": tarball.stat().st_size}


def image_versions(root: Path) -> dict[str, str | None]:
    """Open MPI's, UCX's and CUDA's versions from the image's build manifest (the pins where it
    has none)."""
    try:
        components = json.loads(inside(root, "/etc/fabbench/build.json").read_text())[
            "components"]
    except (OSError, ValueError, KeyError):
        components = {}
    return {name: (components.get(name) or {}).get("version") or pinned(pin)
            for name, pin in (("openmpi", "OPENMPI_VERSION"), ("ucx", "UCX_VERSION"),
                              ("cuda", "CUDA_VERSION"))}


# ---- where it runs
def unpack(tarball: Path, into: Path) -> Path:
    """The tarball unpacked under INTO; its folder."""
    with tarfile.open(tarball) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:  # Python before 3.11.4 / 3.12
            tar.extractall(into)  # noqa: S202 (the kit's own tarball)
    return into / TOP


def unpack_from_kit(kit: Path, tarball: str, top: str, into: Path) -> Path | None:
    """A peer's programs (the kit's TARBALL, one folder TOP) unpacked under INTO; None where
    the kit has no such tarball (bench/gpu/peers.py, osu.py)."""
    if not (kit / tarball).is_file():
        return None
    unpack(kit / tarball, into)
    return into / top


def source_commit(src: Path) -> str | None:
    """The git commit of a peer's source folder, where it is a git checkout."""
    p = _run(["git", "-C", str(src), "rev-parse", "HEAD"], 60)
    return p.stdout.strip() or None


def library_dirs(top: Path) -> list[Path]:
    """The bundle's library path (lib/ucx: UCX's rdmacm module loads its ib module from there,
    which the image's RUNPATH names as /opt/fabric/lib/ucx)."""
    return [top / "fabric" / "lib", top / "fabric" / "lib" / "ucx", top / "deps"]


def environment(top: Path, base: Mapping[str, str]) -> dict[str, str]:
    """What a run from the unpacked bundle at TOP sets: Open MPI and PMIx relocated there (the
    same folders for both: Debian's PMIx has its libdir and datarootdir built in absolute, and
    Open MPI refuses OPAL_* and PMIX_* that differ), its programs and libraries first, the
    machine's library path after (the driver's libcuda)."""
    fabric, keep = top / "fabric", base.get("LD_LIBRARY_PATH", "")
    dirs = {"PREFIX": fabric, "LIBDIR": fabric / "lib", "DATAROOTDIR": fabric / "share"}
    return {**{f"OPAL_{k}": str(v) for k, v in dirs.items()},
            **{f"PMIX_{'INSTALL_PREFIX' if k == 'PREFIX' else k}": str(v)
               for k, v in dirs.items()},
            "PATH": f"{fabric / 'bin'}:{base.get('PATH', '/usr/bin:/bin')}",
            "LD_LIBRARY_PATH": ":".join([*map(str, library_dirs(top)), *([keep] if keep else [])])}


def mpirun_prefix(mpirun: str, ranks: int = 2, ucx_tls: str | None = None,
                  mca: tuple[str, ...] = ()) -> list[str]:
    """mpirun's command line up to the program: RANKS ranks over pml ucx, UCX naming its
    transports (and using only UCX_TLS where given), MCA's further `--mca NAME VALUE` pairs.
    mpirun's agent for other nodes is `false`: Open MPI 4.1's mpirun refuses to start where it
    finds no ssh or rsh (a bare machine), even for ranks on its own host, which never use it.
    The osu step (bench/gpu/osu.py) starts OSU's programs with it too."""
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    tls = ["-x", f"UCX_TLS={ucx_tls}"] if ucx_tls else []
    return [mpirun, *root, "--oversubscribe", "-np", str(ranks), "--mca", "plm_rsh_agent",
            "false", "--mca", "pml", "ucx", "--mca", "pml_ucx_tls", "any",
            "--mca", "pml_ucx_devices", "any", "--mca", "btl", "self,vader", *mca,
            "-x", "UCX_LOG_LEVEL=info", *tls]


def mpirun_argv(mpirun: str, loop: str, op: str, sizes: list[int] | tuple[int, ...],
                ranks: int = 2, ucx_tls: str | None = None,
                variant: str = "device") -> list[str]:
    """RANKS ranks of the loop over pml ucx (mpirun_prefix), its buffers as VARIANT (SPLIT)
    says: on the device (--cuda), staged by hand (--cuda --staged) or on the host."""
    flags, mca = SPLIT[variant]
    return [*mpirun_prefix(mpirun, ranks, ucx_tls, mca), loop, op, *flags, *map(str, sizes)]


def coll_selected(text: str) -> list[tuple[str, int]]:
    """The coll components Open MPI enabled on MPI_COMM_WORLD (coll_base_verbose 10:
    coll_base_comm_select.c's "new communicator: <name>" then "selecting <component>, priority
    <n>, Enabled", each line tagged [host:pid] by the rank that wrote it), each once, the
    highest priority first: the first of them that has an MPI_Allreduce ran it."""
    current: dict[str, str] = {}
    found: set[tuple[str, int]] = set()
    for tag, what in COLL_LINE.findall(text):
        if m := re.match(r"new communicator: (\S+)", what):
            current[tag] = m.group(1)
        elif (m := COLL_ENABLED.match(what)) and current.get(tag) == "MPI_COMM_WORLD":
            found.add((m.group(1), int(m.group(2))))
    return sorted(found, key=lambda c: (-c[1], c[0]))


def transports(text: str) -> list[str]:
    """The transport/device pairs UCX's ep_cfg lines name (UCX_LOG_LEVEL=info)."""
    return sorted({f"{tl}/{dev}" for cfg in EP_CFG.findall(text) for tl, dev in TL.findall(cfg)
                   if tl not in ("tag", "rma", "amo", "am", "stream")})


def points(stdout: str) -> dict[int, float]:
    """The loop's "bytes p50_us samples batch" lines: bytes -> p50 us."""
    return {int(b): float(us) for b, us, _, _ in POINT.findall(stdout)}


def bandwidths(op: str, nbytes: int, p50_us: float, ranks: int) -> dict[str, float]:
    """nccl-tests' convention: algbw = bytes / time; busbw = algbw x 2(n-1)/n for allreduce,
    x 1 for sendrecv. GB/s (1e9 bytes)."""
    algbw = nbytes / (p50_us * 1e-6) / 1e9 if p50_us > 0 else 0.0
    factor = 2 * (ranks - 1) / ranks if op == "allreduce" else 1.0
    return {"algbw_gbyte_s": round(algbw, 4), "busbw_gbyte_s": round(algbw * factor, 4)}
