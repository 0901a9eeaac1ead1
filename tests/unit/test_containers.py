"""The image recipes: linted (hadolint, shellcheck) and consistent with the pinned versions.

Every pinned component of containers/versions.env has a build script, the Dockerfile uses that
script, every source download and every wheel has a sha256, and the Dockerfile's base image is
the pinned one. Building the cuda flavour takes long (make image-cuda); its built image is
checked by tests/integration/test_image_cuda.py, opt-in.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTAINERS = ROOT / "containers"
DOCKERFILE = ROOT / "Dockerfile"
APPTAINER = ROOT / "Apptainer.def"
SCRIPTS = (sorted(CONTAINERS.glob("*.sh")) + [ROOT / ".ci" / "image-build.sh"]
           + sorted((ROOT / ".ci" / "docker").glob("*.sh")))

# pinned component (prefix in versions.env) -> the script that builds or installs it
COMPONENT_SCRIPTS = {
    "CUDA": "cuda-toolkit.sh",
    "UCX": "ucx.sh",
    "OPENMPI": "openmpi.sh",
    "NCCL": "python-stack.sh",
    "TORCH": "python-stack.sh",
    "MPI4PY": "mpi4py.sh",
    "HOROVOD": "horovod.sh",
}
# pins that are not components built by a script: base images and build settings
NOT_COMPONENTS: set[str] = set()
# components the GPU kit builds on the host, not the image: prefix -> (script, the kit's module
# that runs it)
KIT_COMPONENTS = {"MPICH": ("mpich.sh", "bench/gpu/mpich.py")}


def versions() -> dict[str, str]:
    pins = {}
    for line in (CONTAINERS / "versions.env").read_text().splitlines():
        m = re.match(r"^([A-Z0-9_]+)=(.*)$", line)
        if m:
            pins[m.group(1)] = m.group(2).strip('"')
    return pins


def tool(name: str) -> str:
    """A linter from the dev extra (next to this Python) or PATH; skip when absent."""
    candidate = Path(sys.executable).with_name(name)
    found = str(candidate) if candidate.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} not installed (pip install -e '.[dev]')")
    return found


def apptainer_section(name: str) -> str:
    """The body of one %section of Apptainer.def."""
    text = APPTAINER.read_text()
    m = re.search(rf"^%{name}\s*\n(.*?)(?=^%\w+|\Z)", text, re.S | re.M)
    assert m, f"Apptainer.def has no %{name}"
    return m.group(1)


def test_hadolint_clean_on_dockerfile():
    out = subprocess.run([tool("hadolint"), "--no-color", str(DOCKERFILE)], capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shellcheck_clean(script: Path):
    out = subprocess.run([tool("shellcheck"), "-x", "-P", str(ROOT), str(script)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("section", ["runscript", "test"])
def test_shellcheck_clean_on_apptainer_sections(section: str, tmp_path: Path):
    script = tmp_path / f"{section}.sh"
    script.write_text("#!/bin/sh\n" + apptainer_section(section))
    out = subprocess.run([tool("shellcheck"), "-s", "sh", str(script)], capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_pinned_component_has_a_script_the_dockerfile_uses():
    pins = versions()
    dockerfile = DOCKERFILE.read_text()
    components = {k[: -len("_VERSION")] for k in pins if k.endswith("_VERSION")} - NOT_COMPONENTS
    assert components == set(COMPONENT_SCRIPTS) | set(KIT_COMPONENTS), \
        "versions.env and this test disagree"
    for prefix, (script, user) in KIT_COMPONENTS.items():
        assert f"{prefix}_VERSION" in (CONTAINERS / script).read_text(), script
        assert f'"{script}"' in (ROOT / user).read_text(), f"{user} never runs {script}"
    for prefix, script in COMPONENT_SCRIPTS.items():
        path = CONTAINERS / script
        assert path.exists(), f"{prefix}: no containers/{script}"
        assert f"{prefix}_VERSION" in path.read_text(), f"{script} does not use {prefix}_VERSION"
        user = script
        if script in ("horovod.sh", "mpi4py.sh"):  # run by python-stack.sh
            # (the Dockerfile runs python-stack.sh)
            assert script in (CONTAINERS / "python-stack.sh").read_text()
            user = "python-stack.sh"
        assert re.search(rf"/opt/fabbench/containers/{re.escape(user)}\b", dockerfile), \
            f"the Dockerfile never runs containers/{user}"


def test_every_source_download_has_a_checksum():
    pins = versions()
    for key, url in pins.items():
        if key.endswith("_URL"):
            prefix = key[: -len("_URL")]
            assert url.startswith("https://"), key
            assert re.fullmatch(r"[0-9a-f]{64}", pins.get(f"{prefix}_SHA256", "")), \
                f"{prefix}_URL has no sha256"
            assert pins[f"{prefix}_VERSION"].split("-")[0] in url, f"{key} is not version {prefix}"
    assert re.fullmatch(r"[0-9a-f]{64}", pins["HOROVOD_SHA256"])
    fetch = re.compile(r'fetch "\$([A-Z0-9_]+)_URL" "\$([A-Z0-9_]+)_SHA256"')
    for script in CONTAINERS.glob("*.sh"):
        text = script.read_text()
        if script.name != "lib.sh":  # lib.sh's fetch is the one checked download
            assert not re.search(r"(^|[;&|(]\s*|timeout \S+ )(curl|wget) ", text, re.M), \
                f"{script.name} downloads without a checksum"
        for url_prefix, sha_prefix in fetch.findall(text):
            assert url_prefix == sha_prefix, f"{script.name} checks {url_prefix} with {sha_prefix}"
    # every from-source component of the cuda flavour downloads through the checked fetch
    for prefix in ("UCX", "OPENMPI"):
        text = (CONTAINERS / COMPONENT_SCRIPTS[prefix]).read_text()
        assert f'fetch "${prefix}_URL" "${prefix}_SHA256"' in text, prefix
    # every wheel of the cuda flavour is pinned exactly and installed hash-checked
    wheels = [k for k in pins if k.endswith("_WHEEL")]
    toolkit = [k for k in wheels if k.startswith("CUDA_")]
    assert {"CUDA_RUNTIME_WHEEL", "CUDA_NVCC_WHEEL", "CUDA_NVVM_WHEEL", "CUDA_NVML_WHEEL",
            "NCCL_WHEEL"} <= set(wheels)
    for key in wheels:
        assert re.fullmatch(r"[a-z0-9-]+==[\d.]+", pins[key]), key
        assert re.fullmatch(r"[0-9a-f]{64}", pins.get(f"{key}_SHA256", "")), f"{key} has no sha256"
    # cuda-toolkit.sh downloads each CUDA_<NAME>_WHEEL it lists, with --require-hashes
    script = (CONTAINERS / "cuda-toolkit.sh").read_text()
    listed = re.search(r"^wheels=\(([A-Z ]+)\)$", script, re.M)
    assert listed and {f"CUDA_{w}_WHEEL" for w in listed.group(1).split()} == set(toolkit)
    assert "--require-hashes" in script
    assert pins["NCCL_WHEEL"].endswith("==" + pins["NCCL_VERSION"])


def test_the_cuda_flavours_torch_lock_is_the_cuda_build_every_wheel_hashed():
    pins = versions()
    lock = [line for line in (CONTAINERS / "torch-cuda.lock").read_text().splitlines()
            if line and not line.startswith("#")]
    entries = {}
    for line in lock:
        m = re.fullmatch(r"([a-z0-9-]+)==([\w.]+) --hash=sha256:([0-9a-f]{64})", line)
        assert m, f"not 'name==version --hash=sha256:...': {line}"
        assert m.group(1) not in entries, f"{m.group(1)} twice"
        entries[m.group(1)] = (m.group(2), m.group(3))
    # torch's own CUDA wheel (never a +cpu local version), the NCCL and CUDA of versions.env
    assert entries["torch"] == (pins["TORCH_VERSION"], pins["TORCH_CUDA_WHEEL_SHA256"])
    name, version = pins["NCCL_WHEEL"].split("==")
    assert entries[name] == (version, pins["NCCL_WHEEL_SHA256"])
    assert entries["cuda-toolkit"][0].startswith(pins["CUDA_VERSION"])
    assert entries["nvidia-cuda-runtime"] == tuple(
        [pins["CUDA_RUNTIME_WHEEL"].split("==")[1], pins["CUDA_RUNTIME_WHEEL_SHA256"]])
    assert not [e for e in entries if e.endswith("-cu12")], "a CUDA 12 wheel in the CUDA 13 lock"
    # python-stack.sh installs the lock hash-checked, with no local wheel folder, then checks it
    stack = (CONTAINERS / "python-stack.sh").read_text()
    assert re.search(r"unset PIP_FIND_LINKS; pip install -q --require-hashes --only-binary :all: "
                     r"-r \"\$lock\"", stack)
    assert "torch.version.cuda" in stack and "torch.cuda.nccl.version()" in stack


def test_dockerfile_base_images_are_the_pinned_ones():
    pins = versions()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE.read_text(), re.M))
    assert args["DEBIAN_IMAGE"] == pins["DEBIAN_IMAGE"]
    assert args["FLAVOR"] == "cpu"
    # both flavours build on the Debian base; the cuda runtime never carries the link-time
    # stubs of the driver's libraries (the host's driver gives libcuda.so.1)
    text = DOCKERFILE.read_text()
    for stage in ("cpu-build", "cuda-build", "cpu-runtime", "cuda-runtime"):
        assert re.search(rf"^FROM \$\{{DEBIAN_IMAGE\}} AS {stage}$", text, re.M), stage
    cuda_runtime = text[text.index("AS cuda-runtime"):text.index("AS runtime")]
    copies = re.findall(r"^COPY --from=cuda-build (\S+)", cuda_runtime, re.M)
    assert "/usr/local/cuda/lib64/libcudart.so.13" in copies
    assert not [c for c in copies if "stubs" in c or c.rstrip("/") in ("/usr/local/cuda",
                                                                        "/usr/local/cuda/lib64")]


def test_dockerfile_shape():
    text = DOCKERFILE.read_text()
    stages = re.findall(r"^FROM \S+ AS (\S+)$", text, re.M)
    assert stages == ["cpu-build", "cuda-build", "python-build", "cpu-runtime", "cuda-runtime",
                      "runtime"]
    assert re.search(r"^FROM \$\{FLAVOR\}-build AS python-build$", text, re.M)
    assert re.search(r"^FROM \$\{FLAVOR\}-runtime AS runtime$", text, re.M)
    final = text[text.index("AS runtime"):]
    assert 'ENTRYPOINT ["fabbench"]' in final
    user = re.findall(r"^USER (\S+)$", final, re.M)
    assert user and user[-1] not in ("root", "0")
    for label in ("title", "description", "version", "revision", "licenses", "base.name"):
        assert f"org.opencontainers.image.{label}=" in final, label
    assert "manifest.sh /etc/fabbench/build.json" in final
    # the runtime copies the environment, never the build tools
    assert "COPY --from=python-build /opt/fabbench/venv /opt/fabbench/venv" in final


def test_apptainer_definition():
    text = APPTAINER.read_text()
    assert re.search(r"^Bootstrap: (docker-archive|docker-daemon|localimage|docker)$", text, re.M)
    assert re.search(r'^\s+exec fabbench "\$@"$', apptainer_section("runscript"), re.M)
    assert "fabbench run" in apptainer_section("test")
    assert "org.opencontainers.image.title fabbench" in apptainer_section("labels")
    help_text = apptainer_section("help")
    for needle in ("/dev/infiniband", "/dev/hfi1_", "PMIx", "srun --mpi=pmix", "mpirun"):
        assert needle in help_text, needle


WORKFLOW = ROOT / ".github" / "workflows" / "images.yml"


def test_publishing_workflow_builds_every_flavour():
    text = WORKFLOW.read_text()
    for needle in (".ci/image-build.sh", "flavor: [cpu, cuda]", ".ci/publish.sh"):
        assert needle in text, needle
    # one source of truth: the workflow pushes nothing itself, .ci/publish.sh does
    for needle in ("podman push", "skopeo copy", "apptainer push"):
        assert needle not in text, needle


def test_publishing_workflow_is_where_github_actions_runs_it_and_its_paths_exist():
    """GitHub Actions runs only .github/workflows/*.yml; a path filter naming a file that is not
    there (e.g. the workflow under another folder) silently never triggers."""
    import yaml

    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads on: True
    paths = triggers["push"]["paths"]
    assert str(WORKFLOW.relative_to(ROOT)) in paths
    for pattern in paths:
        assert list(ROOT.glob(pattern.replace("**", "**/*"))), pattern
    for step in (s for job in workflow["jobs"].values() for s in job.get("steps", [])):
        for path in re.findall(r"(?:tests|\.ci)/[\w/.\-]+\.(?:py|sh)", step.get("run", "")):
            assert (ROOT / path).exists(), path


def fake_wheel(folder: Path, content: bytes, name: str = "horovod", **fields: str) -> Path:
    """A file named like the setup's NAME wheel (horovod, mpi4py), with a record (WHEEL.abi)
    naming fields."""
    pins = versions()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{pins[name.upper() + '_VERSION']}-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(content)
    lines = [f"{k}={v}" for k, v in fields.items()]
    lines.append(f"sha256={hashlib.sha256(content).hexdigest()}")
    (folder / f"{wheel.name}.abi").write_text("# a test record\n" + "\n".join(lines) + "\n")
    return wheel


def wheel_check(wheel: Path, *fields: str) -> subprocess.CompletedProcess:
    """containers/<horovod|mpi4py>.sh --check WHEEL FIELDS: the script of the wheel's name."""
    script = CONTAINERS / f"{wheel.name.split('-')[0]}.sh"
    return subprocess.run(["bash", str(script), "--check", str(wheel), *fields],
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(("name", "field", "built", "asked"), [
    ("horovod", "torch", "2.13.0+cpu", "2.12.0+cpu"),
    ("mpi4py", "mpi_package", "libopenmpi-dev 4.1.4-3+b1", "none: /opt/fabric/bin/opal_wrapper"),
])
def test_a_prebuilt_wheel_is_used_only_when_its_record_names_the_environment(
        tmp_path: Path, name: str, field: str, built: str, asked: str):
    wheel = fake_wheel(tmp_path, b"wheel", name, **{field: built}, mpi="Open MPI 4.1.4")
    assert wheel_check(wheel, f"{field}={built}", "mpi=Open MPI 4.1.4").returncode == 0
    other = wheel_check(wheel, f"{field}={asked}", "mpi=Open MPI 4.1.4", "libc=glibc2.36")
    assert other.returncode == 1
    assert other.stdout.strip() == (f"it was built for {field} {built}, not {asked}; "
                                    "libc (none), not glibc2.36")
    wheel.write_bytes(b"another wheel")  # the record no longer describes the file
    assert "describes another file" in wheel_check(wheel).stdout
    (tmp_path / f"{wheel.name}.abi").unlink()
    assert "has no record" in wheel_check(wheel).stdout


def test_image_identity_includes_reused_wheels_and_only_then(tmp_path: Path):
    """.ci/image-build.sh --tag: the setup's Horovod and mpi4py wheels (in
    $FABBENCH_CACHE/wheels) join the image's identity when their records name the image's
    version, Python and MPI (and torch, for Horovod); the same wheel gives the same tag, another
    wheel another; a wheel it does not use leaves the tag of the inputs."""
    pins = versions()
    path = {"PATH": "/usr/bin:/bin"}  # the python3 the script asks, the one it downloads torch with
    py = subprocess.run(["python3", "-c", "import platform, sys; "
                         "print('cp%d%d-%s' % (*sys.version_info[:2], platform.machine()))"],
                        env=path, capture_output=True, text=True, timeout=60,
                        check=True).stdout.strip()
    mpi = f"Open MPI {pins['OPENMPI_VERSION']}"
    horovod = dict(horovod=pins["HOROVOD_VERSION"], python=py, mpi=mpi,
                   torch=f"{pins['TORCH_VERSION']}+cpu", gpu_operations="none")
    mpi4py = dict(mpi4py=pins["MPI4PY_VERSION"], python=py, mpi=mpi)

    def tag(wheels: dict[str, dict[str, str]], content: bytes = b"wheel",
            flavor: str = "cpu") -> str:
        cache = tmp_path / f"cache-{len(list(tmp_path.iterdir()))}"
        for name, fields in wheels.items():
            fake_wheel(cache / "wheels", content + name.encode(), name, **fields)
        out = subprocess.run(["bash", str(ROOT / ".ci" / "image-build.sh"), "--tag"],
                             env={**path, "HOME": str(tmp_path),
                                  "FABBENCH_CACHE": str(cache), "FLAVOR": flavor},
                             capture_output=True, text=True, timeout=120, check=True)
        return out.stdout.strip()

    without = tag({})
    reused = tag({"horovod": horovod})
    both = tag({"horovod": horovod, "mpi4py": mpi4py})
    assert len({without, reused, both, tag({"mpi4py": mpi4py})}) == 4
    assert tag({"horovod": horovod}) == reused
    assert tag({"horovod": horovod}, b"another build") not in (reused, without)
    assert tag({"horovod": {**horovod, "torch": "2.12.0+cpu"}}) == without
    assert tag({"horovod": {**horovod, "mpi": "MPICH 4.1"}}) == without
    assert tag({"horovod": horovod, "mpi4py": {**mpi4py, "mpi": "MPICH 4.1"}}) == reused
    # the cuda flavour builds its own Open MPI: the setup's mpi4py never joins its identity
    assert tag({"mpi4py": mpi4py}, flavor="cuda") == tag({}, flavor="cuda")
