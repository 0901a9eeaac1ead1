"""Are GPUs visible to this process? Read from /dev and the environment, without importing torch
(``fabbench run`` decides its default primitive and device from it before any library starts).

Where a run needs a GPU and /dev shows none, ``probe`` says why, in one place for `fabbench run`
(which refuses before launching ranks) and `fabbench doctor`: CUDA_VISIBLE_DEVICES hides them, a
container started without the NVIDIA runtime (no --nv, no --gpus / CDI device), a CPU build of
torch, no NVIDIA driver (libcuda.so.1). Only then is torch imported, to ask its build."""

from __future__ import annotations

import ctypes
import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from fabbench.errors import UsageError
from fabbench.sysinfo.inventory import container_runtime

# how each runtime gives a container the host's GPUs and driver, said where a container has none
RUNTIME_GPU_FIX = {
    "apptainer": "run it with --nv",
    "docker": "run it with --gpus all (the NVIDIA container toolkit)",
    "podman": "run it with --device nvidia.com/gpu=all (the NVIDIA container toolkit's CDI)",
    "kubernetes": "give its pod a nvidia.com/gpu limit (the NVIDIA device plugin)",
}
CONTAINER_FIX = "run it with --nv / the NVIDIA container toolkit"  # a runtime not named above


def container_fix(runtime: str | None) -> str:
    """What gives a container of this runtime the host's GPUs, in words for one line."""
    return RUNTIME_GPU_FIX.get(runtime or "", CONTAINER_FIX)


def gpus_visible(root: str | os.PathLike[str] = "/", env: Mapping[str, str] | None = None) -> bool:
    """NVIDIA GPUs present (/dev/nvidiaN) and not hidden by CUDA_VISIBLE_DEVICES."""
    return gpu_count(root, env) > 0


def gpu_count(root: str | os.PathLike[str] = "/", env: Mapping[str, str] | None = None) -> int:
    """How many NVIDIA GPUs this process may use: the /dev/nvidiaN devices, no more than
    CUDA_VISIBLE_DEVICES lists where it is set ("" or "-1" hides them all)."""
    env = os.environ if env is None else env
    present = gpu_devices(root)
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return present
    if listed.strip() in ("", "-1"):
        return 0
    return min(present, len([d for d in listed.split(",") if d.strip()]))


def gpu_devices(root: str | os.PathLike[str] = "/") -> int:
    """The /dev/nvidiaN devices, whatever CUDA_VISIBLE_DEVICES says."""
    return sum(1 for p in Path(root, "dev").glob("nvidia*") if re.fullmatch(r"nvidia\d+", p.name))


def cuda_driver() -> bool:
    """The NVIDIA driver's user-space library, libcuda.so.1, loads in this process (a container
    runtime binds the host's in with --nv / the NVIDIA container toolkit; it is never in an
    image)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class TorchBuild:
    version: str
    cuda: str | None  # torch.version.cuda: None for a CPU build


def torch_build() -> TorchBuild | None:
    """The torch this process imports (None: none imports). Imports torch: call it only where a
    GPU is needed and /dev shows none, or from `fabbench doctor`."""
    try:
        import torch
    except Exception:  # not installed, or a build whose libraries do not load
        return None
    return TorchBuild(torch.__version__, torch.version.cuda)


def torch_device_count() -> int:
    """The GPUs a CUDA build of torch finds (some hosts have them without /dev/nvidiaN: WSL's
    /dev/dxg, Jetson's /dev/nvhost-*)."""
    import torch

    with warnings.catch_warnings():  # "CUDA initialization: ..." is said in our own line
        warnings.simplefilter("ignore")
        try:
            return torch.cuda.device_count()
        except RuntimeError:  # a driver that does not initialise: no GPU for torch
            return 0


@dataclass(frozen=True, kw_only=True)
class GpuState:
    """What this process has of a GPU, and so whether it can use one."""

    devices: int  # /dev/nvidiaN it may use (gpu_count)
    present: int  # /dev/nvidiaN present (gpu_devices)
    hidden_by: str | None  # CUDA_VISIBLE_DEVICES, when it hides every device present
    driver: bool  # libcuda.so.1 loads
    torch: TorchBuild | None
    torch_devices: int  # the GPUs torch finds where /dev shows none (0: not asked)
    container: str | None  # the container runtime (inventory.container_runtime), None: the host

    @property
    def visible(self) -> bool:
        return self.devices > 0 or self.torch_devices > 0

    @property
    def place(self) -> str:
        return "this container" if self.container else "this host"

    @property
    def where(self) -> str:
        return "in this container" if self.container else "on this host"

    @property
    def cpu_torch(self) -> TorchBuild | None:
        """This process's torch when it is a CPU build (torch.version.cuda is None)."""
        return self.torch if self.torch is not None and self.torch.cuda is None else None

    def hidden(self) -> str | None:
        """How CUDA_VISIBLE_DEVICES hides every GPU present, in words; None when it does not."""
        if self.hidden_by is None:
            return None
        return (f"CUDA_VISIBLE_DEVICES={self.hidden_by!r} hides the {self.present} "
                f"GPU{'s' if self.present > 1 else ''} of {self.place}")

    def why_not(self) -> str | None:
        """None when a GPU is visible, else why none is, in words for one line."""
        if self.visible:
            return None
        hidden = self.hidden()
        if hidden is not None:
            return hidden
        cpu_torch = self.cpu_torch
        if self.container:
            if cpu_torch:
                return (f"no GPU visible in this container, and its torch ({cpu_torch.version}) "
                        f"is a CPU build: use fabbench's cuda image and "
                        f"{container_fix(self.container)}")
            return f"no GPU visible in this container: {container_fix(self.container)}"
        if self.torch is None:
            return ("no GPU visible on this host (no /dev/nvidiaN device), and torch does not "
                    "import here")
        if cpu_torch:
            return (f"no GPU visible on this host (no /dev/nvidiaN device), and torch "
                    f"{self.torch.version} is a CPU build (torch.version.cuda is None)")
        if not self.driver:
            return (f"no GPU visible on this host: no NVIDIA driver (libcuda.so.1 does not load) "
                    f"and no /dev/nvidiaN device for torch {self.torch.version} "
                    f"(a CUDA {self.torch.cuda} build)")
        return (f"no GPU visible on this host: the NVIDIA driver (libcuda.so.1) loads, but there "
                f"is no /dev/nvidiaN device and torch {self.torch.version} "
                f"(CUDA {self.torch.cuda}) finds none")


def probe(env: Mapping[str, str] | None = None, root: str | os.PathLike[str] = "/") -> GpuState:
    """This process's GPU state; imports torch (torch_build)."""
    env = os.environ if env is None else env
    present, devices = gpu_devices(root), gpu_count(root, env)
    hidden = env.get("CUDA_VISIBLE_DEVICES") if present and not devices else None
    driver, torch = cuda_driver(), torch_build()
    asked = not devices and hidden is None and driver and torch is not None and torch.cuda
    return GpuState(devices=devices, present=present, hidden_by=hidden, driver=driver,
                    torch=torch, torch_devices=torch_device_count() if asked else 0,
                    container=container_runtime(env, root))


def require_gpu(what: str, env: Mapping[str, str] | None = None,
                root: str | os.PathLike[str] = "/") -> None:
    """Refuse (UsageError: one line, exit code 2) when ``what`` ("--primitive nccl", "--device
    cuda") needs a GPU and this process has none; fast where /dev shows one (no torch)."""
    if gpu_count(root, env) > 0:
        return
    why = probe(env, root).why_not()
    if why is not None:
        raise UsageError(f"{what} needs a GPU; {why}")
