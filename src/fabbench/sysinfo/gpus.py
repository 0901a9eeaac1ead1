"""Are GPUs visible to this process? Read from /dev and the environment, without importing torch
(``fabbench run`` decides its default primitive and device from it before any library starts)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path


def gpus_visible(root: str | os.PathLike = "/", env: Mapping[str, str] | None = None) -> bool:
    """NVIDIA GPUs present (/dev/nvidiaN) and not hidden by CUDA_VISIBLE_DEVICES."""
    env = os.environ if env is None else env
    if env.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return any(re.fullmatch(r"nvidia\d+", p.name) for p in Path(root, "dev").glob("nvidia*"))
