"""Shared fixtures: the real CLI, run as a subprocess of this environment's Python."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def fabbench(*args: str, timeout: float = 180, env: dict | None = None,
             cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """Run `python -m fabbench ARGS` and return the completed process (never hangs)."""
    return subprocess.run([sys.executable, "-m", "fabbench", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})},
                          cwd=cwd, check=False)


@pytest.fixture
def run_cli():
    return fabbench


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


needs_mpirun = pytest.mark.skipif(not have("mpirun"), reason="needs Open MPI's mpirun")


def horovod_available() -> bool:
    try:
        import horovod.torch  # noqa: F401
    except ImportError:
        return False
    return True
