"""Is the MPI CUDA-aware? Asked of the MPI itself, never guessed.

`--device cuda` with `mpi` hands GPU buffers to MPI; one that is not CUDA-aware fails or stages
them through host memory unannounced, so fabbench refuses such a run (one line, exit code 2).
Evidence, strongest first: in every rank after MPI_Init, the running library's own query
(Open MPI's ``MPIX_Query_cuda_support()``, MPICH's ``MPIX_GPU_query_support``; mpi4py wraps
neither, so both are looked up in the library mpi4py loaded); before any rank starts,
``ompi_info``'s ``mpi_built_with_cuda_support`` (an MPI without ompi_info defers to the first).
Neither needs a GPU: the GPU is checked after."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from dataclasses import dataclass

_BUILT = re.compile(r"^mca:mpi:base:param:mpi_built_with_cuda_support:value:(true|false)\s*$",
                    re.MULTILINE)
MPIX_GPU_SUPPORT_CUDA = 0  # MPICH's mpi.h: a type id, not a flag


@dataclass(frozen=True, kw_only=True)
class CudaAwareness:
    aware: bool
    evidence: str  # what said so, as a user can check it

    def refusal(self) -> str:
        return (f"this MPI is not CUDA-aware ({self.evidence}): --device cuda with mpi would "
                "hand GPU buffers to an MPI that cannot read them; use a CUDA-aware MPI (e.g. "
                "Open MPI built --with-cuda, the CUDA image), --primitive nccl, or --device cpu")


def from_ompi_info(text: str) -> CudaAwareness | None:
    """From ``ompi_info --parsable`` output; None when it does not say."""
    m = _BUILT.search(text)
    if m is None:
        return None
    return CudaAwareness(aware=m.group(1) == "true",
                         evidence=f"ompi_info: mpi_built_with_cuda_support:value:{m.group(1)}")


def ask_ompi_info(timeout_s: float = 30.0) -> CudaAwareness | None:
    """Evidence (2); None when there is no ompi_info on PATH or it does not say."""
    exe = shutil.which("ompi_info")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, "--parsable", "--param", "mpi", "all", "--level", "9"],
                              capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return from_ompi_info(done.stdout)


def ask_library(library: ctypes.CDLL) -> CudaAwareness | None:
    """Evidence (1), after MPI_Init; None when the library has neither query."""
    query = getattr(library, "MPIX_Query_cuda_support", None)
    if query is not None:
        query.restype, query.argtypes = ctypes.c_int, []
        value = query()
        return CudaAwareness(aware=value == 1,
                             evidence=f"MPIX_Query_cuda_support() returned {value}")
    query = getattr(library, "MPIX_GPU_query_support", None)
    if query is not None:
        flag = ctypes.c_int(0)
        query.restype, query.argtypes = ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        query(MPIX_GPU_SUPPORT_CUDA, ctypes.byref(flag))
        return CudaAwareness(aware=flag.value == 1,
                             evidence="MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA) set "
                                      f"{flag.value}")
    return None


def mpi4py_library() -> ctypes.CDLL:
    """The MPI library mpi4py loaded (symbols are looked up through its extension module's
    dependencies)."""
    from mpi4py import MPI

    return ctypes.CDLL(MPI.__file__)
