"""The host inventory every results file carries as provenance (and `fabbench env` prints)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import socket
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from fabbench import __version__
from fabbench.procs import run_tool
from fabbench.sysinfo.sysfs import gpudirect_rdma, hfi_devices, net_devices, rdma_ports

BUILD_MANIFEST = Path(os.environ.get("FABBENCH_BUILD_MANIFEST", "/etc/fabbench/build.json"))
ENV_PREFIXES = ("NCCL_", "UCX_", "FI_", "OMPI_MCA_", "PSM2_", "HFI_", "GLOO_", "HOROVOD_",
                "CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID",
                "SLURM_JOB_NODELIST", "OMPI_COMM_WORLD_SIZE", "FABBENCH_")
# fabbench's own switches for the library reports (verbosity) are noise in provenance
_ENV_SKIP = re.compile(r"^(OMPI_MCA_\w+_verbose|UCX_LOG_LEVEL|NCCL_DEBUG\w*|FABBENCH_PLAN)$")


def _run(argv: list[str], timeout: float = 5.0) -> str | None:
    r = run_tool(argv, timeout)
    if r is None or r.returncode is None:
        return None
    return (r.stdout or r.stderr).strip() or None


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def library_versions() -> dict[str, str | None]:
    """Versions without importing the libraries (so this stays cheap and safe)."""
    ompi = _run(["ompi_info", "--version"])
    ucx = _run(["ucx_info", "-v"])
    fi = _run(["fi_info", "--version"])
    return {
        "fabbench": __version__,
        "python": platform.python_version(),
        "torch": _dist_version("torch"),
        "mpi4py": _dist_version("mpi4py"),
        "horovod": _dist_version("horovod"),
        "openmpi": _first_match(r"Open MPI v?([\d.]+)", ompi),
        "ucx": ucx_version(ucx),
        "libfabric": _first_match(r"libfabric: ([\d.]+)", fi),
        # the NCCL torch loads: its wheel's version here; the rank that loads it overwrites it
        "nccl": next((v for v in map(_dist_version, ("nvidia-nccl-cu12", "nvidia-nccl-cu13",
                                                     "nvidia-nccl-cu11")) if v), None),
    }


def ucx_version(ucx_info_v: str | None) -> str | None:
    """UCX's version from `ucx_info -v`: "# Version 1.13.1" (Debian's 1.13), "# Library version:
    1.16.0" (newer releases), "version=..." (some builds)."""
    return _first_match(r"(?:Library version|Version|version)[:= ]+(\d+\.\d+(?:\.\d+)*)",
                        ucx_info_v)


def _first_match(pattern: str, text: str | None) -> str | None:
    if not text:
        return None
    m = re.search(pattern, text)
    return next((g for g in m.groups() if g), None) if m else None


def cpu_info() -> dict[str, Any]:
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"model": model or platform.processor() or None, "arch": platform.machine(),
            "cores": psutil.cpu_count(logical=False), "threads": psutil.cpu_count(),
            "memory_bytes": psutil.virtual_memory().total}


def gpu_info() -> list[dict[str, Any]]:
    out = _run(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version,pci.bus_id",
                "--format=csv,noheader"])
    gpus = []
    for line in (out or "").splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 5 and fields[0].isdigit():
            gpus.append(dict(zip(("index", "name", "memory", "driver", "pci"), fields,
                                 strict=True)))
    return gpus


def build_manifest() -> dict[str, Any] | None:
    try:
        manifest: dict[str, Any] = json.loads(BUILD_MANIFEST.read_text())  # the image's JSON
        return manifest
    except (OSError, ValueError):
        return None


def fabric_env(env: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ) if env is None else env
    return {k: v for k, v in sorted(env.items())
            if k.startswith(ENV_PREFIXES) and not _ENV_SKIP.match(k)}


def inventory() -> dict[str, Any]:
    runtime = _container()
    manifest = build_manifest()
    return {
        "host": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu_info(),
        "gpus": gpu_info(),
        "nics": [d.to_json() for d in net_devices()],
        "rdma": [p.to_json() for p in rdma_ports()],
        "hfi": hfi_devices(),
        "gpudirect_rdma": gpudirect_rdma(),
        "versions": library_versions(),
        "build": manifest,
        "image": image_identity(manifest, runtime),
        "container": runtime,
        **container_version(runtime),
        "scheduler": scheduler(),
        "env": fabric_env(),
    }


def _container() -> str | None:
    """The container runtime this process runs in, or None on the bare host."""
    return container_runtime()


def container_runtime(env: Mapping[str, str] | None = None, root: str | os.PathLike[str] = "/"
                      ) -> str | None:
    """apptainer, charliecloud, podman, docker, kubernetes, "oci" (a container of unknown make)
    or None."""
    env = os.environ if env is None else env
    if env.get("APPTAINER_CONTAINER") or env.get("SINGULARITY_CONTAINER"):
        return "apptainer"
    if env.get("CH_RUNNING"):  # ch-run sets it in every container it starts
        return "charliecloud"
    if env.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if Path(root, "run/.containerenv").exists():
        return "podman"
    if Path(root, ".dockerenv").exists():
        return "docker"
    if env.get("container"):  # systemd's convention: podman, lxc, systemd-nspawn ...
        return env["container"]
    try:
        cgroup = Path(root, "proc/1/cgroup").read_text()
    except OSError:
        cgroup = ""
    for word in ("kubepods", "docker", "libpod", "containerd", "lxc"):
        if word in cgroup:
            return {"kubepods": "kubernetes", "libpod": "podman"}.get(word, word)
    return None


APPTAINER_LABELS = "/.singularity.d/labels.json"


def container_version(runtime: str | None, root: str | os.PathLike[str] = "/") -> dict[str, str]:
    """{"container_version": ..., "container_version_source": ...} where the container tells it,
    else {}. Apptainer gives a container no variable with its own version: the image's labels
    name the Apptainer that built it (the same program at a site that builds where it runs).
    podman writes its version into /run/.containerenv."""
    if runtime == "apptainer":
        try:
            labels = json.loads(Path(root, APPTAINER_LABELS.lstrip("/")).read_text())
        except (OSError, ValueError):
            return {}
        for key in ("org.label-schema.usage.apptainer.version",
                    "org.label-schema.usage.singularity.version"):
            if isinstance(labels.get(key), str):
                return {"container_version": labels[key],
                        "container_version_source": f"{APPTAINER_LABELS} {key} (the "
                        f"{key.split('.')[-2]} that built the image)"}
    if runtime == "podman":
        try:
            text = Path(root, "run/.containerenv").read_text()
        except OSError:
            return {}
        found = re.search(r'^engine="podman-([^"]+)"', text, re.MULTILINE)
        if found:
            return {"container_version": found.group(1),
                    "container_version_source": "/run/.containerenv engine"}
    return {}


APPTAINER_DEFINITION = "/.singularity.d/Singularity"
IMAGE_REF_ENV = "FABBENCH_IMAGE_REF"
_DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})$")


def image_id(manifest: Mapping[str, Any]) -> str:
    """The image's id: its version and flavour, and the hash of its build manifest (version,
    commit, hash of the build inputs, every component's version, creation time). The manifest is
    a file in the image, so the id is the same whichever registry, digest, runtime or format
    (OCI image, SIF, a Charliecloud directory) the image came through."""
    canonical = json.dumps(manifest, sort_keys=True, separators=(",", ":"))
    image = manifest.get("image") or {}
    return (f"{image.get('version') or '?'}-{image.get('flavor') or '?'}-"
            f"{hashlib.sha256(canonical.encode()).hexdigest()[:16]}")


def image_reference(runtime: str | None, env: Mapping[str, str] | None = None,
                    root: str | os.PathLike[str] = "/") -> dict[str, str]:
    """{"ref", "ref_source"[, "digest"]}: the registry reference the image was run or pulled
    from, where the runtime tells it (podman: /run/.containerenv; Apptainer: the definition of
    an image it built from a docker:// or oras:// reference), else what the launcher stated in
    FABBENCH_IMAGE_REF; {} when nobody tells. The digest when the reference names one."""
    env = os.environ if env is None else env
    ref: str | None = None
    source = ""
    if runtime == "podman":
        try:
            text = Path(root, "run/.containerenv").read_text()
        except OSError:
            text = ""
        found = re.search(r'^image="([^"]+)"', text, re.MULTILINE)
        if found:
            ref, source = found.group(1), "/run/.containerenv image"
    if runtime == "apptainer" and ref is None:
        try:
            text = Path(root, APPTAINER_DEFINITION.lstrip("/")).read_text()
        except OSError:
            text = ""
        kind = re.search(r"^bootstrap:\s*(\S+)", text, re.MULTILINE | re.IGNORECASE)
        found = re.search(r"^from:\s*(\S+)", text, re.MULTILINE | re.IGNORECASE)
        if kind and found and kind.group(1).lower() in ("docker", "oras", "library"):
            ref = f"{kind.group(1).lower()}://{found.group(1)}"
            source = f"{APPTAINER_DEFINITION} (Apptainer built the image from it)"
    if ref is None and env.get(IMAGE_REF_ENV):
        ref, source = env[IMAGE_REF_ENV], f"{IMAGE_REF_ENV} (set by whoever started the container)"
    if ref is None:
        return {}
    found = _DIGEST.search(ref)
    return {"ref": ref, "ref_source": source, **({"digest": found.group(1)} if found else {})}


def image_identity(manifest: Mapping[str, Any] | None, runtime: str | None,
                   env: Mapping[str, str] | None = None, root: str | os.PathLike[str] = "/"
                   ) -> dict[str, Any] | None:
    """The fabbench image this process runs from (None outside one): its id (image_id), what the
    manifest says of it, and its registry reference and digest where known."""
    if not manifest:
        return None
    image = manifest.get("image") or {}
    return {"id": image_id(manifest),
            **{key: image.get(key) for key in ("version", "flavor", "vcs_ref", "inputs")},
            **image_reference(runtime, env, root)}


def scheduler(env: Mapping[str, str] | None = None) -> str | None:
    """The batch system whose job this process is part of, or None."""
    env = os.environ if env is None else env
    for name, var in (("slurm", "SLURM_JOB_ID"), ("pbs", "PBS_JOBID"), ("lsf", "LSB_JOBID"),
                      ("flux", "FLUX_JOB_ID"), ("sge", "JOB_ID"),
                      ("kubernetes", "KUBERNETES_SERVICE_HOST")):
        if env.get(var) and (name != "sge" or env.get("SGE_ROOT")):
            return name
    return None


def summary_rows(inv: dict[str, Any]) -> list[tuple[str, str]]:
    """The inventory as (what, value) lines for people (`fabbench env`)."""
    cpu = inv.get("cpu") or {}
    rows = [("host", f"{inv.get('host')} ({inv.get('os', '?')})"),
            ("cpu", f"{cpu.get('model')} ({cpu.get('arch')}), {cpu.get('cores')} cores, "
                    f"{cpu.get('threads')} threads"),
            ("memory", f"{(cpu.get('memory_bytes') or 0) / (1 << 30):.1f} GiB")]
    gpus = inv.get("gpus") or []
    rows.append(("gpus", "; ".join(f"{g.get('index')}: {g.get('name')} {g.get('memory')}, "
                                   f"driver {g.get('driver')}" for g in gpus) or "none"))
    for nic in inv.get("nics") or []:
        speed = f"{nic['speed_mbit_s'] / 1000:g} Gb/s" if nic.get("speed_mbit_s") else "speed ?"
        rows.append((f"nic {nic['name']}", f"{nic.get('kind')}, {speed}, {nic.get('operstate')}, "
                                           f"mtu {nic.get('mtu')}"
                                           + ("" if nic.get("pci") else ", virtual")))
    for port in inv.get("rdma") or []:
        layer = "RoCE" if port.get("link_layer") == "Ethernet" else port.get("link_layer")
        rows.append((f"rdma {port['device']}:{port['port']}",
                     f"{port.get('state')}, {port.get('rate')}, {layer}, driver "
                     f"{port.get('driver')}"))
    if not inv.get("rdma"):
        rows.append(("rdma", "none"))
    if inv.get("hfi"):
        rows.append(("omnipath", ", ".join(inv["hfi"])))
    rows.append(("gpudirect rdma", "yes" if inv.get("gpudirect_rdma") else "no"))
    for name, version in (inv.get("versions") or {}).items():
        if name != "mpi_library":
            rows.append((f"version {name}", str(version) if version else "-"))
    rows.append(("container", (inv.get("container") or "none (bare host)")
                  + (f" {inv['container_version']}" if inv.get("container_version") else "")))
    rows.append(("scheduler", inv.get("scheduler") or "none"))
    image = inv.get("image")
    rows.append(("image", f"{image['id']}" + (f" from {image['ref']}" if image.get("ref") else "")
                 if image else "none (not in the fabbench image)"))
    rows.append(("image build", json.dumps(inv["build"], sort_keys=True) if inv.get("build")
                 else "not in the fabbench image"))
    for key, value in (inv.get("env") or {}).items():
        rows.append((f"env {key}", value))
    return rows
