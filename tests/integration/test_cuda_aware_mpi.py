"""--device cuda with mpi on an MPI that is not CUDA-aware (this host's Debian Open MPI 4.1.4,
built without CUDA) is refused in one line, exit code 2, by what the MPI says about itself, not
because this host has no GPU: the launcher asks ompi_info, and each rank asks the running library
(MPIX_Query_cuda_support) before it looks for a GPU. An MPI that is CUDA-aware on a host where
no GPU is visible is refused by the launcher, in one line, before any rank starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import fabbench, needs_mpirun
from fabbench.sysinfo.gpus import gpus_visible

pytestmark = [pytest.mark.together, pytest.mark.integration, needs_mpirun]

RUN = ("run", "--primitive", "mpi", "--device", "cuda", "--fabric", "shm", "--sizes", "8",
       "--ops", "allreduce", "--timeout", "20")


def test_launcher_refuses_in_one_line_from_ompi_info(tmp_path):
    out = tmp_path / "r.jsonl"
    p = fabbench(*RUN, "--ranks", "2", "--out", str(out), timeout=120)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1, p.stderr
    assert "not CUDA-aware" in p.stderr
    assert "ompi_info: mpi_built_with_cuda_support:value:false" in p.stderr
    assert not out.exists()


def test_the_running_library_says_so_itself():
    code = ("from mpi4py import MPI\n"
            "from fabbench.comm.cuda_aware import ask_library, mpi4py_library\n"
            "a = ask_library(mpi4py_library())\n"
            "print(a.aware, a.evidence)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False MPIX_Query_cuda_support() returned 0"


def claiming_ompi_info(tmp_path) -> Path:
    """A folder holding an ompi_info that claims CUDA support (another MPI's, say)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ompi_info").write_text(
        "#!/bin/sh\necho mca:mpi:base:param:mpi_built_with_cuda_support:value:true\n")
    (fake / "ompi_info").chmod(0o755)
    return fake


def test_ranks_refuse_from_the_library_when_ompi_info_says_otherwise(tmp_path):
    """An ompi_info that claims CUDA support (e.g. another MPI's on PATH) does not get the run
    through: every rank asks the library it runs, and refuses before looking for a GPU. The
    rank is started by mpirun itself, as in a job: fabbench's own launcher, once ompi_info let
    it through, would refuse first on this host, where no GPU is visible (runner.run)."""
    fake = claiming_ompi_info(tmp_path)
    out = tmp_path / "r.jsonl"
    p = subprocess.run(["mpirun", "-n", "1", sys.executable, "-m", "fabbench", *RUN, "--out",
                        str(out)], capture_output=True, text=True, timeout=120, check=False,
                       env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}",
                            "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    assert p.returncode == 2, p.stderr
    assert "fabbench: error: this MPI is not CUDA-aware (MPIX_Query_cuda_support() returned 0)" \
        in p.stderr
    assert "sees none" not in p.stderr and "needs a GPU" not in p.stderr and not out.exists()


def test_the_launcher_refuses_without_a_gpu_once_the_mpi_is_cuda_aware(tmp_path):
    """Past ompi_info, fabbench's own launcher refuses --device cuda where no GPU is visible, in
    one line, before any rank starts."""
    if gpus_visible():
        pytest.skip("a GPU is visible here")
    fake = claiming_ompi_info(tmp_path)
    out = tmp_path / "r.jsonl"
    p = fabbench(*RUN, "--ranks", "1", "--out", str(out), timeout=120,
                 env={"PATH": f"{fake}:{os.environ['PATH']}"})
    assert p.returncode == 2, p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("fabbench: error: --device cuda needs a GPU; no GPU visible ")
    assert not out.exists()
