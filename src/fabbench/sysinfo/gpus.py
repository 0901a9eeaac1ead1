"""Are GPUs visible to this process? Read from /dev and the environment, without importing torch
(``fabbench run`` decides its default primitive and device from it before any library starts)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path


def gpus_visible(root: str | os.PathLike = "/", env: Mapping[str, str] | None = None) -> bool:
    """NVIDIA GPUs present (/dev/nvidiaN) and not hidden by CUDA_VISIBLE_DEVICES."""
    return gpu_count(root, env) > 0


def gpu_count(root: str | os.PathLike = "/", env: Mapping[str, str] | None = None) -> int:
    """How many NVIDIA GPUs this process may use: the /dev/nvidiaN devices, no more than
    CUDA_VISIBLE_DEVICES lists where it is set ("" or "-1" hides them all)."""
    env = os.environ if env is None else env
    present = sum(1 for p in Path(root, "dev").glob("nvidia*")
                  if re.fullmatch(r"nvidia\d+", p.name))
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return present
    if listed.strip() in ("", "-1"):
        return 0
    return min(present, len([d for d in listed.split(",") if d.strip()]))
