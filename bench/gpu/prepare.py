"""Make the GPU kit's folder: fabbench as a wheel and wheels of the runtime dependencies a lent
GPU machine lacks, for its Python (3.12) on manylinux x86-64, one version of each, and the cuda
image's CUDA-aware Open MPI and UCX with the C reference loop built against them, under 64 MiB.

    .venv/bin/python bench/gpu/prepare.py [--out .gpukit] [--python-version 3.12]
        [--cuda-image IMAGE|auto|none] [--mpich auto|build|none] [--nccl-tests SRC] [--osu SRC]

The device command (bench/gpu/run.sh) installs from this folder only: the GPU machine has no
network. What it has is written down in GPU_MACHINE_HAS; every other distribution fabbench's
wheel requires, and whatever those require in turn (their markers evaluated for the target
Python), is fetched with `pip download --only-binary=:all:` for the target's Python and
platforms. Each is pinned to the version installed in this environment when that one satisfies
the requirement (the version fabbench's tests ran with), else pip picks the newest that does.

--cuda-image (default auto: localhost/fabbench:cuda where podman has it) adds cuda-mpi.tar.xz,
the cuda-mpi step's bundle (bench/gpu/cuda_mpi.py: the image mounted with `podman image mount`,
mpi_loop.c built with -DFB_CUDA against its /opt/fabric, Open MPI, UCX, libcudart and the Debian
libraries they load, stripped); without the image the kit leaves it out and its MANIFEST.json
says why (the step then says so on the GPU machine).

--mpich (default auto: where $FABBENCH_CACHE holds the build) adds mpich-cuda.tar.xz, the
cuda-mpich step's bundle: MPICH with CUDA built on this host by containers/mpich.sh (once, about
an hour on 2 cores: `--mpich build` does it) and the C loop built with its mpicc
(bench/gpu/mpich.py), for the one --cuda-arch; `none` leaves it out.

--osu SRC (an OSU micro-benchmarks 7.x source folder the user fetched) adds osu.tar.xz:
osu_latency, osu_bw and osu_allreduce built with CUDA against the same image's Open MPI
(bench/gpu/osu.py), for the kit's osu step; it needs the cuda image.

The folder is rebuilt from scratch each time (it is ignored by git) and holds a MANIFEST.json:
the target Python, the wheels and their sizes, the cuda-mpi bundle's manifest (or why there is
none), the git commit fabbench was built from and whether src/ had uncommitted changes. Bad
input: one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # also when a test loads it by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
import cuda_mpi  # noqa: E402  (bench/gpu/cuda_mpi.py, beside this file)
import mpich  # noqa: E402  (bench/gpu/mpich.py, beside this file)
import osu  # noqa: E402  (bench/gpu/osu.py, beside this file)
import peers  # noqa: E402  (bench/gpu/peers.py, beside this file)

try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # pip vendors it
    from pip._vendor.packaging.markers import Marker  # type: ignore[no-redef]
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[2]
LIMIT_BYTES = 64 * 1024 * 1024  # what the device tool carries along, all paths together
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")

# What the lent GPU machine has installed (the brief of issue 25): Python 3.12 with PyTorch
# (CUDA) and NCCL, typer, rich, jinja2, psutil, matplotlib, scipy, torchvision; and what those
# need (numpy for scipy and matplotlib, typing-extensions for torch, markupsafe for jinja2,
# click for typer). It has no jsonschema, no Open MPI, no Horovod (mpi4py would be useless).
GPU_MACHINE_HAS = frozenset(canonicalize_name(n) for n in (
    "torch", "numpy", "typer", "rich", "jinja2", "psutil", "matplotlib", "scipy", "torchvision",
    "typing-extensions", "markupsafe", "click"))


class BadInput(Exception):
    """A wrong option: one line, exit 2."""


def marker_env(python_version: str) -> dict[str, str]:
    """The environment markers of CPython `python_version` on Linux x86-64."""
    return {"python_version": python_version, "python_full_version": f"{python_version}.0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "implementation_version": f"{python_version}.0", "os_name": "posix",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
            "platform_release": "", "platform_version": "", "extra": ""}


def requires(wheel: Path, python_version: str) -> list[Requirement]:
    """A wheel's Requires-Dist that apply on the target without extras."""
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        text = z.read(name).decode()
    env = marker_env(python_version)
    out = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or Marker(str(req.marker)).evaluate(env):
                out.append(req)
    return out


def pin(req: Requirement) -> str:
    """name==<the version installed here> when it satisfies req, else req as written."""
    try:
        have = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        return str(Requirement(f"{req.name}{req.specifier}"))
    if req.specifier.contains(have, prereleases=True):
        return f"{req.name}=={have}"
    return str(Requirement(f"{req.name}{req.specifier}"))


def pip(*args: str, timeout: float = 600) -> None:
    p = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                       capture_output=True, text=True, timeout=timeout, check=False)
    if p.returncode:
        raise SystemExit(f"prepare: pip {args[0]} failed:\n{(p.stdout + p.stderr)[-3000:]}")


def build_fabbench(into: Path) -> Path:
    """fabbench's wheel, built from a copy of pyproject.toml, README.md and src/ (the shared
    working tree gets no build/ or egg-info)."""
    with tempfile.TemporaryDirectory(prefix="gpukit-src-") as tmp:
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(REPO / name, tmp)
        shutil.copytree(REPO / "src", Path(tmp, "src"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
        pip("wheel", "--no-deps", "--quiet", "-w", str(into), tmp)
    return next(into.glob("fabbench-*.whl"))


def download(spec: str, into: Path, python_version: str) -> Path:
    before = set(into.glob("*.whl"))
    pip("download", "--no-deps", "--only-binary=:all:", "--quiet", "--python-version",
        python_version, "--implementation", "cp", *(a for p in PLATFORMS for a in
                                                     ("--platform", p)),
        "-d", str(into), spec)
    new = set(into.glob("*.whl")) - before
    if len(new) != 1:
        raise SystemExit(f"prepare: pip download {spec} gave {len(new)} new wheels, not 1")
    return new.pop()


def wheel_name(wheel: Path) -> str:
    return canonicalize_name(wheel.name.split("-")[0])


def cuda_image_choice(name: str) -> tuple[str | None, str]:
    """--cuda-image: (the image to use or None, why none)."""
    if name == "none":
        return None, "left out: --cuda-image none"
    image = cuda_mpi.DEFAULT_IMAGE if name == "auto" else name
    missing = cuda_mpi.image_missing(image)
    if missing and name != "auto":
        raise BadInput(f"--cuda-image {name}: {missing}")
    return (None, missing) if missing else (image, "")


def _included(what: str, error: type[Exception], make) -> dict:
    """MAKE()'s manifest entry, marked included; its error ends prepare with one line."""
    try:
        return {"included": True, **make()}
    except error as exc:
        raise SystemExit(f"prepare: {what}: {exc}") from None


def prepare(out: Path, python_version: str, cuda_image: str = "auto",
            nccl_tests: Path | None = None, nccl_version: str = peers.GPU_MACHINE_NCCL,
            cuda_arch: str = "90", osu_src: Path | None = None, with_mpich: str = "auto"
            ) -> dict:
    why = peers.source_problem(nccl_tests) if nccl_tests is not None else None
    if why:
        raise BadInput(f"--nccl-tests {why}: fetch NVIDIA's nccl-tests and name its folder")
    why = osu.source_problem(osu_src) if osu_src is not None else None
    if why:
        raise BadInput(f"--osu {why}: fetch OSU's micro-benchmarks and name its folder")
    if not re.fullmatch(r"\d{2,3}", cuda_arch):
        raise BadInput(f"--cuda-arch takes a compute capability such as 90, not {cuda_arch!r}")
    if with_mpich not in ("auto", "build", "none"):
        raise BadInput(f"--mpich takes auto, build or none, not {with_mpich!r}")
    if not re.fullmatch(r"3\.\d{1,2}", python_version):
        raise BadInput(f"--python-version takes MAJOR.MINOR such as 3.12, not {python_version!r}")
    image, why_not = cuda_image_choice(cuda_image)
    if osu_src is not None and image is None:
        raise BadInput(f"--osu needs the cuda image, whose Open MPI OSU is built against "
                       f"({why_not})")
    if out.exists() and any(out.iterdir()) and not (out / "MANIFEST.json").exists():
        raise BadInput(f"--out {out} is a folder with other things in it (no MANIFEST.json): "
                       "name a new folder or an old kit's")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    fab = build_fabbench(out)
    wanted, fetched = list(requires(fab, python_version)), {"fabbench": fab}
    skipped = {}
    while wanted:
        req = wanted.pop(0)
        name = canonicalize_name(req.name)
        if name in GPU_MACHINE_HAS:
            skipped[name] = str(req)
            continue
        if name in fetched:
            continue
        wheel = download(pin(req), out, python_version)
        fetched[name] = wheel
        wanted += requires(wheel, python_version)
    names = [wheel_name(w) for w in out.glob("*.whl")]
    if len(names) != len(set(names)):
        raise SystemExit(f"prepare: more than one version of a distribution in {out}: {names}")
    wheels = sorted(out.glob("*.whl"))
    bundle = _included(f"the cuda-mpi bundle from {image}", cuda_mpi.BundleError,
                       lambda: cuda_mpi.make_bundle(image, out)) if image else {
        "included": False, "why": why_not}
    mpich_made = mpich_bundle(out, with_mpich, cuda_arch)
    peer = _included(f"nccl-tests from {nccl_tests}", peers.BuildError,
                     lambda: peers.build(nccl_tests, out, nccl_version, cuda_arch)) \
        if nccl_tests is not None else {
            "included": False, "why": "left out: no --nccl-tests source folder"}
    osu_made = _included(f"OSU from {osu_src}", osu.BuildError,
                         lambda: osu.build(osu_src, out, image, cuda_arch)) \
        if osu_src is not None else {"included": False, "why": "left out: no --osu source folder"}
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src",
                            "pyproject.toml"], capture_output=True, text=True,
                           check=False).stdout.strip()
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()
    manifest = {"python_version": python_version, "platforms": list(PLATFORMS),
                "wheels": {w.name: w.stat().st_size for w in wheels},
                "bytes": sum(f.stat().st_size for f in out.iterdir()),
                "expected_on_machine": dict(sorted(skipped.items())), "cuda_mpi": bundle,
                "mpich": mpich_made, "nccl_tests": peer, "osu": osu_made,
                "fabbench_commit": commit, "fabbench_src_uncommitted_changes": bool(dirty)}
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    total = sum(f.stat().st_size for f in out.iterdir())
    if total >= LIMIT_BYTES:
        raise SystemExit(f"prepare: {out} holds {total / 2**20:.1f} MiB, over the 64 MiB the "
                         "device tool carries")
    return manifest


def mpich_bundle(out: Path, choice: str, cuda_arch: str) -> dict:
    """--mpich: the manifest entry of mpich-cuda.tar.xz (CHOICE build makes MPICH first where
    the cache has none; auto takes it only where the cache has it)."""
    if choice == "none":
        return {"included": False, "why": "left out: --mpich none"}
    if choice == "auto" and mpich.installed(arch=cuda_arch) is None:
        return {"included": False, "why": f"no MPICH for sm_{cuda_arch} in "
                f"{mpich.install_dir(arch=cuda_arch)} (prepare.py --mpich build makes it, about "
                "an hour on 2 cores)"}

    def make() -> dict:
        mpich.build(arch=cuda_arch)
        return mpich.make_bundle(out, arch=cuda_arch)
    return _included(f"the MPICH bundle for sm_{cuda_arch}", mpich.BuildError, make)


class OneLineParser(argparse.ArgumentParser):
    """Bad input: one line on stderr, exit 2 (argparse's own adds the usage)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="prepare", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / ".gpukit"),
                    help="the kit's folder (rebuilt; default: .gpukit, ignored by git)")
    ap.add_argument("--python-version", default="3.12",
                    help="the target's CPython MAJOR.MINOR (default 3.12, the GPU machine's; "
                    "the CPU rehearsal passes this interpreter's)")
    ap.add_argument("--cuda-image", default="auto",
                    help="the cuda image whose Open MPI and UCX the cuda-mpi step carries "
                    f"(default auto: {cuda_mpi.DEFAULT_IMAGE} where podman has it; none: "
                    "leave the step's bundle out)")
    ap.add_argument("--nccl-tests", type=Path, metavar="SRC",
                    help="an nccl-tests source folder (fetched, never committed): built for "
                    "the GPU machine and carried as nccl-tests.tar.xz for the kit's "
                    "nccl-tests step (bench/gpu/peers.py)")
    ap.add_argument("--nccl-version", default=peers.GPU_MACHINE_NCCL,
                    help="the NCCL whose headers nccl-tests is built against (default "
                    f"{peers.GPU_MACHINE_NCCL}, the GPU machine's)")
    ap.add_argument("--cuda-arch", default="90",
                    help="the GPU's compute capability nccl-tests and OSU's CUDA kernels are "
                    "built for (default 90)")
    ap.add_argument("--osu", type=Path, metavar="SRC",
                    help="an OSU micro-benchmarks 7.x source folder (fetched, never "
                    "committed): osu_latency, osu_bw and osu_allreduce built with CUDA against "
                    "the cuda image's Open MPI, carried as osu.tar.xz for the kit's osu step "
                    "(bench/gpu/osu.py)")
    ap.add_argument("--mpich", default="auto", choices=("auto", "build", "none"),
                    help="MPICH with CUDA for the kit's cuda-mpich step (bench/gpu/mpich.py): "
                    "auto (default) takes the build in $FABBENCH_CACHE where it is there, build "
                    "makes it first where it is not (about an hour on 2 cores), none "
                    "leaves it out")
    args = ap.parse_args(argv)
    try:
        manifest = prepare(Path(args.out), args.python_version, args.cuda_image,
                           args.nccl_tests, args.nccl_version, args.cuda_arch, args.osu,
                           args.mpich)
    except BadInput as exc:
        print(f"prepare: error: {exc}", file=sys.stderr)
        return 2
    for name, size in manifest["wheels"].items():
        print(f"{size / 2**20:8.2f} MiB  {name}")
    bundle = manifest["cuda_mpi"]
    if bundle["included"]:
        print(f"{bundle['bytes'] / 2**20:8.2f} MiB  {cuda_mpi.TARBALL} (from {bundle['image']}: "
              f"Open MPI {bundle['versions']['openmpi']}, UCX {bundle['versions']['ucx']}, "
              f"{bundle['files']} files, {bundle['unpacked_bytes'] / 2**20:.1f} MiB unpacked)")
    else:
        print(f"    (no {cuda_mpi.TARBALL}: {bundle['why']})")
    made = manifest["mpich"]
    if made["included"]:
        print(f"{made['bytes'] / 2**20:8.2f} MiB  {mpich.TARBALL} (MPICH {made['mpich']} with "
              f"CUDA {made['cuda']} for sm_{made['cuda_arch']}, {made['files']} files, "
              f"{made['unpacked_bytes'] / 2**20:.1f} MiB unpacked)")
    else:
        print(f"    (no {mpich.TARBALL}: {made['why']})")
    peer = manifest["nccl_tests"]
    if peer["included"]:
        print(f"{peer['bytes'] / 2**20:8.2f} MiB  {peers.TARBALL} (nccl-tests {peer['version']}"
              f" for sm_{peer['cuda_arch']}, NCCL {peer['nccl_headers']} headers, built in "
              f"{peer['build_s']} s)")
    else:
        print(f"    (no {peers.TARBALL}: {peer['why']})")
    made = manifest["osu"]
    if made["included"]:
        print(f"{made['bytes'] / 2**20:8.2f} MiB  {osu.TARBALL} (OSU {made['version']} with "
              f"CUDA for sm_{made['cuda_arch']}, Open MPI {made['openmpi']} of {made['image']}, "
              f"built in {made['build_s']} s)")
    else:
        print(f"    (no {osu.TARBALL}: {made['why']})")
    print(f"{manifest['bytes'] / 2**20:8.2f} MiB  in {args.out} for CPython "
          f"{manifest['python_version']} (expected on the machine: "
          f"{', '.join(manifest['expected_on_machine']) or 'nothing'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
