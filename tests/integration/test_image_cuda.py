"""The cuda image, really built and checked without a GPU (opt-in: the build is long).

`make image-cuda` (or this test) builds the cuda flavour with .ci/image-build.sh FLAVOR=cuda:
the Debian base; CUDA 13.0's runtime, headers and nvcc from PyPI's nvidia-* wheels; UCX and
Open MPI built --with-cuda from Debian's source tarballs; torch's CUDA build with the NCCL and
CUDA libraries it requires (containers/torch-cuda.lock); Horovod with NCCL operations, its
kernels compiled by that nvcc. Cold, that is about half an hour on 2 cores (1660 s measured), so
the test runs only with FABBENCH_TEST_CUDA_IMAGE=1 (`make test-image-cuda`); a built image is
found again by its content tag and not rebuilt.

No GPU is needed: the checks are that torch is the CUDA build of the flavour's CUDA and loads the
pinned NCCL, which is the libnccl the image carries (so a CPU wheel of torch fails here); that
Horovod has NCCL, MPI and Gloo operations; that every library resolves every library it needs
except the driver's own (libcuda.so.1, libnvidia-ml.so.1, which the host gives at run time);
that Open MPI and UCX were built with CUDA; that `fabbench env` names torch with its CUDA, CUDA,
NCCL, UCX, Open MPI, Horovod and mpi4py at their pins; that Gloo and MPI ranks run in it; and
that in a container started without a GPU, NCCL and --device cuda are refused in one line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.image_checks import Image, manifest_of, results
from integration.test_image import BUILD_TIMEOUT_S, mounted_image

ROOT = Path(__file__).resolve().parents[2]
# the driver's libraries: never in the image (a stub there would shadow the host's driver)
DRIVER_LIBS = {"libcuda.so.1", "libnvidia-ml.so.1"}

pytestmark = [
    pytest.mark.together,
    pytest.mark.podman,  # one podman store: these modules run one at a time
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.timeout(BUILD_TIMEOUT_S + 900),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (podman storage, mount, chroot)"),
]


def skip_without_the_image() -> None:
    """Every test of the built image: opt-in, and it needs what builds it."""
    if os.environ.get("FABBENCH_TEST_CUDA_IMAGE") != "1":
        pytest.skip("the cuda image takes about half an hour to build cold: opt in with "
                    "FABBENCH_TEST_CUDA_IMAGE=1 (make test-image-cuda)")
    for tool, why in (("podman", "podman (apt-get install podman)"),
                      ("debootstrap", "debootstrap for the base image")):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {why}")


def pins() -> dict[str, str]:
    return {k: v.strip('"') for k, v in re.findall(r"^([A-Z0-9_]+)=(\S+)$",
                                                   (ROOT / "containers/versions.env").read_text(),
                                                   re.M)}


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Iterator[Image]:
    skip_without_the_image()
    # (no Horovod wheel from the host: the setup's is a CPU build, the image builds its own with
    # NCCL; .ci/image-build.sh would say so and not use it)
    with mounted_image("cuda", tmp_path_factory) as mounted:
        yield mounted


def cuda_minor() -> str:
    return ".".join(pins()["CUDA_VERSION"].split(".")[:2])


def torch_in(image: Image) -> dict:
    """What the image's torch and Horovod say they are, asked of themselves."""
    res = image.run(["python", "-c", """import json, torch, horovod.torch as hvd
print(json.dumps({"version": torch.__version__, "cuda": torch.version.cuda,
                  "nccl": list(torch.cuda.nccl.version()) if torch.version.cuda else None,
                  "horovod": {"nccl": bool(hvd.nccl_built()), "mpi": bool(hvd.mpi_built()),
                              "gloo": bool(hvd.gloo_built())}}))"""], timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def assert_cuda_torch(image: Image) -> dict:
    """The image's torch is the CUDA build of the flavour's CUDA, loading the pinned NCCL, and its
    Horovod has NCCL operations. A CPU wheel of torch fails here (torch.version.cuda is None)."""
    got = torch_in(image)
    assert got["cuda"] == cuda_minor(), \
        f"the image's torch {got['version']} is built for CUDA {got['cuda']}, not {cuda_minor()}"
    assert ".".join(map(str, got["nccl"])) == pins()["NCCL_VERSION"], got
    assert got["horovod"] == {"nccl": True, "mpi": True, "gloo": True}, got["horovod"]
    return got


def test_a_cpu_torch_fails_the_check(tmp_path):
    """The check above on an environment whose torch is the CPU wheel (this project's own venv,
    seen as the image is: chroot, its environment only) fails, naming why: a CPU wheel in the
    cuda flavour cannot pass `make test-image-cuda`. Needs no image: it runs in `make test`."""
    venv = ROOT / ".venv"
    if not (venv / "bin/python").exists():
        pytest.skip("needs the project's venv (make setup)")
    host = Image(tag="this host", rootfs=Path("/"), work=tmp_path,
                 env={"PATH": f"{venv}/bin:/usr/bin:/bin", "HOME": str(tmp_path)},
                 user="0:0", workdir=str(tmp_path), entrypoint=[])
    got = torch_in(host)
    assert got["cuda"] is None and got["version"].endswith("+cpu"), got  # what this venv has
    with pytest.raises(AssertionError, match=r"is built for CUDA None, not 13\.0"):
        assert_cuda_torch(host)


def test_torch_is_the_cuda_build_with_the_pinned_nccl_and_horovod_has_nccl(image: Image):
    got = assert_cuda_torch(image)
    assert got["version"].split("+")[0] == pins()["TORCH_VERSION"]
    # the libnccl the image carries is the one torch loads: its wheel, at the pin, and the
    # library itself says so (ncclGetVersion: major * 10000 + minor * 100 + patch)
    res = image.run(["python", "-c", """import ctypes, glob, importlib.metadata as md, sys
lib = glob.glob(sys.prefix + "/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2")
assert len(lib) == 1, lib
v = ctypes.c_int()
assert ctypes.CDLL(lib[0]).ncclGetVersion(ctypes.byref(v)) == 0
print(md.version("nvidia-nccl-cu13"), v.value)"""], timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    dist, code = res.stdout.split()
    major, minor, patch = map(int, pins()["NCCL_VERSION"].split("."))
    assert dist == pins()["NCCL_VERSION"] and int(code) == major * 10000 + minor * 100 + patch
    # no CPU wheel anywhere in the environment
    assert not list(image.rootfs.glob("opt/fabbench/venv/lib/python3*/site-packages/"
                                      "torch-*+cpu.dist-info"))


def elf_files(image: Image) -> list[str]:
    """The fabric stack's shared libraries and programs, the CUDA runtime, torch's libraries and
    the CUDA libraries it loads (NCCL among them), and Horovod's torch extension, as paths inside
    the image."""
    found = []
    site = "opt/fabbench/venv/lib/python3*/site-packages"
    roots = [image.rootfs / "opt/fabric/lib", image.rootfs / "opt/fabric/bin",
             image.rootfs / "usr/local/cuda/lib64",
             *image.rootfs.glob(f"{site}/nvidia/*/lib"), *image.rootfs.glob(f"{site}/torch/lib"),
             *image.rootfs.glob(f"{site}/horovod/torch")]
    for top in roots:
        for path in sorted(top.rglob("*")):
            if path.is_file() and not path.is_symlink() and path.read_bytes()[:4] == b"\x7fELF":
                found.append("/" + str(path.relative_to(image.rootfs)))
    return found


def test_every_fabric_library_resolves_all_but_the_drivers(image: Image):
    files = elf_files(image)
    names = {Path(f).name for f in files}
    # (Open MPI 4.1's mpirun is a link to orterun: the program is orterun)
    for needed in ("libucp.so.0", "libuct_cuda.so.0", "libmpi.so.40", "libcudart.so.13",
                   "libnccl.so.2", "libtorch_cuda.so", "libcudnn.so.9", "libcublas.so.13",
                   "mpi_lib_v2", "orterun", "ucx_info", "ompi_info"):
        assert needed in names or any(n.startswith(needed) for n in names), needed
    assert (image.rootfs / "opt/fabric/bin/mpirun").resolve().name == "orterun"
    missing: dict[str, list[str]] = {}
    cuda_linked = []
    # The nvidia-* wheels' libraries have no run path to one another: the process that loads
    # them (torch, by its own run paths, after loading their siblings) finds them by soname.
    # They are checked with every wheel's lib folder on the search path; everything else as
    # the image's environment has it, so a missing run path (torch's, Horovod's) shows.
    wheel_libs = sorted({str(Path(f).parent) for f in files if "/site-packages/nvidia/" in f})
    for chunk in (files[i:i + 40] for i in range(0, len(files), 40)):
        res = image.run(["/bin/sh", "-c", 'wheels=$1; shift; for f; do echo "== $f"; case $f in'
                         ' */site-packages/nvidia/*) LD_LIBRARY_PATH=$wheels:$LD_LIBRARY_PATH'
                         ' ldd "$f" 2>&1 ;; *) ldd "$f" 2>&1 ;; esac; done', "ldd",
                         ":".join(wheel_libs), *chunk], timeout=300)
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
    # NVSHMEM's OpenSHMEM bootstrap plug-in, opened only under NVSHMEM_BOOTSTRAP=shmem, needs an
    # OpenSHMEM (liboshmem): this image's Open MPI is built without OSHMEM (openmpi.sh)
    optional = {"nvshmem_bootstrap_shmem.so.3": {"liboshmem.so.40"}}
    unexpected = {f: libs for f, libs in unexpected.items()
                  if set(libs) - DRIVER_LIBS - optional.get(Path(f).name, set())}
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
    # UCX's CUDA transports: `ucx_info -d` lists them only where a driver answers (a GPU host);
    # here, the transport components the module registers, by the names ucx_info -d prints
    module = next(p for p in (image.rootfs / "opt/fabric/lib/ucx").glob("libuct_cuda.so*")
                  if not p.is_symlink())
    names = set(re.findall(rb"\b(cuda_copy|cuda_ipc|gdr_copy)\b", module.read_bytes()))
    assert {b"cuda_copy", b"cuda_ipc"} <= names, names


def test_fabbench_env_names_every_component_at_its_pin(image: Image):
    p = pins()
    res = image.run(["fabbench", "env", "--json"], timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    env = json.loads(res.stdout)
    versions = env["versions"]
    assert versions["openmpi"] == p["OPENMPI_VERSION"]
    assert versions["ucx"] == p["UCX_VERSION"]
    assert versions["nccl"] == p["NCCL_VERSION"]
    assert versions["torch"].split("+")[0] == p["TORCH_VERSION"]
    assert versions["horovod"] == p["HOROVOD_VERSION"]
    assert versions["mpi4py"] == p["MPI4PY_VERSION"]
    components = env["build"]["components"]
    assert components["cuda"]["version"] == p["CUDA_VERSION"]
    assert components["nccl"]["version"] == p["NCCL_VERSION"]
    assert components["torch"]["cuda"] == cuda_minor()
    assert components["torch"]["nccl"] == p["NCCL_VERSION"]
    assert components["horovod"]["operations"] == ["mpi", "gloo", "nccl"]
    assert env["build"] == manifest_of(image)
    assert env["build"]["image"]["flavor"] == "cuda"
    text = image.run(["fabbench", "env"], timeout=300)
    assert text.returncode == 0, text.stderr
    for name, pin in (("openmpi", "OPENMPI"), ("ucx", "UCX"), ("nccl", "NCCL"),
                      ("torch", "TORCH"), ("horovod", "HOROVOD"), ("mpi4py", "MPI4PY")):
        assert re.search(rf"version {name}\W+{re.escape(p[pin + '_VERSION'])}\b", text.stdout), \
            (name, text.stdout[-4000:])
    assert '"cuda"' in text.stdout  # the build manifest's row


@pytest.mark.parametrize("primitive", ["gloo", "mpi"])
def test_gloo_and_mpi_ranks_run_in_the_cuda_image(image: Image, primitive: str):
    res = image.run(["fabbench", "run", "--fabric", "ethernet", "--primitive", primitive,
                     "--ranks", "2", "--sizes", "8,64K", "--budget", "0.05"], timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    records = results(image)
    assert records[0]["ranks"] == 2 and records[-1]["kind"] == "summary"
    assert records[0]["primitive"] == primitive
    assert records[-1]["ok"] is True
    assert records[0]["provenance"]["build"]["image"]["flavor"] == "cuda"


@pytest.mark.skipif(shutil.which("runc") is None, reason="needs runc (podman run, NOTES)")
@pytest.mark.parametrize("args", [["--primitive", "nccl"],
                                  ["--primitive", "mpi", "--device", "cuda"]],
                         ids=["nccl", "device-cuda"])
def test_a_container_without_a_gpu_refuses_gpu_runs_in_one_line(image: Image, tmp_path, args):
    from integration.test_podman_run import podman_run

    res, _ = podman_run(image.tag, tmp_path / "w", ["run", "--fabric", "shm", "--ranks", "2",
                                                    "--sizes", "8", *args])
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    assert "no GPU visible in this container" in lines[0], lines
    # podman's way to give a container the GPUs (the toolkit's CDI device), named for podman
    assert "--device nvidia.com/gpu=all" in lines[0], lines
    assert "Traceback" not in res.stdout + res.stderr


def test_publish_pushes_the_cuda_flavour_by_immutable_tags_and_digest(image: Image, registry,
                                                                      tmp_path):
    """.ci/publish.sh --flavor cuda: the image's own test (version, 2 ranks over shared memory),
    then <version>-cuda and cuda-<commit> pushed, each printed with the digest the registry
    serves; pulled by that digest and run, the results record the reference and the digest."""
    from integration.test_podman_run import podman_run
    from integration.test_registry import clean_env, sh

    res = sh([ROOT / ".ci/publish.sh", "--registry", registry.host, "--cert-dir",
              registry.cert_dir, "--flavor", "cuda", "--no-sif"], BUILD_TIMEOUT_S + 1800,
             env=clean_env())
    assert res.returncode == 0, res.stderr[-6000:]
    version, commit = re.search(r"\[publish\] version (\S+) commit (\S+)", res.stderr).groups()
    pushed = re.findall(r"^pushed oci (\S+) (sha256:[0-9a-f]{64})$", res.stdout, re.M)
    assert {ref for ref, _ in pushed} == {f"{registry.host}/fabbench:{version}-cuda",
                                          f"{registry.host}/fabbench:cuda-{commit}"}
    assert len({digest for _, digest in pushed}) == 1
    by_digest = f"{registry.host}/fabbench@{pushed[0][1]}"
    assert res.stdout.strip().splitlines()[-1] == f"oci {by_digest}"
    # what the registry serves by that digest is this flavour, and it runs as pulled
    pulled = sh(["podman", "pull", "--cert-dir", registry.cert_dir, by_digest], 1800)
    assert pulled.returncode == 0, pulled.stderr[-3000:]
    try:
        run, _ = podman_run(by_digest, tmp_path / "w",
                            ["run", "--fabric", "shm", "--ranks", "2", "--sizes", "8",
                             "--budget", "0.02", "--out", "/w/r.jsonl"],
                            {"FABBENCH_IMAGE_REF": by_digest})
        assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
        first = json.loads((tmp_path / "w/r.jsonl").read_text().splitlines()[0])
        image = first["provenance"]["image"]
        assert image["ref"] == by_digest and image["digest"] == pushed[0][1], image
        assert first["provenance"]["build"]["image"]["flavor"] == "cuda"
    finally:
        sh(["podman", "rmi", "-f", by_digest], 300)
