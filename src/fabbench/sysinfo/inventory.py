"""The host inventory every results file carries as provenance (and `fabbench env` prints)."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from fabbench import __version__
from fabbench.sysinfo.sysfs import gpudirect_rdma, hfi_devices, net_devices, rdma_ports

BUILD_MANIFEST = Path(os.environ.get("FABBENCH_BUILD_MANIFEST", "/etc/fabbench/build.json"))
ENV_PREFIXES = ("NCCL_", "UCX_", "FI_", "OMPI_MCA_", "PSM2_", "HFI_", "GLOO_", "HOROVOD_",
                "CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID",
                "SLURM_JOB_NODELIST", "OMPI_COMM_WORLD_SIZE", "FABBENCH_")
# fabbench's own switches for the library reports (verbosity) are noise in provenance
_ENV_SKIP = re.compile(r"^(OMPI_MCA_\w+_verbose|UCX_LOG_LEVEL|NCCL_DEBUG\w*|FABBENCH_PLAN)$")


def _run(argv: list[str], timeout: float = 5.0) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout or out.stderr).strip() or None


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
        "ucx": _first_match(r"version=([\d.]+)|Library version: ([\d.]+)", ucx),
        "libfabric": _first_match(r"libfabric: ([\d.]+)", fi),
        "nccl": None,  # filled by the rank that loads it (torch's NCCL)
    }


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
        return json.loads(BUILD_MANIFEST.read_text())
    except (OSError, ValueError):
        return None


def fabric_env(env: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ) if env is None else env
    return {k: v for k, v in sorted(env.items())
            if k.startswith(ENV_PREFIXES) and not _ENV_SKIP.match(k)}


def inventory() -> dict[str, Any]:
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
        "build": build_manifest(),
        "container": _container(),
        "scheduler": "slurm" if "SLURM_JOB_ID" in os.environ else (
            "kubernetes" if "KUBERNETES_SERVICE_HOST" in os.environ else None),
        "env": fabric_env(),
    }


def _container() -> str | None:
    if os.environ.get("APPTAINER_CONTAINER") or os.environ.get("SINGULARITY_CONTAINER"):
        return "apptainer"
    if Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
        return "oci"
    return None
