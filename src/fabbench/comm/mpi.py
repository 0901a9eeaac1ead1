"""MPI through mpi4py: host buffers (numpy), or GPU buffers through CUDA-aware MPI.

The transport is taken from Open MPI's own report: the rank turns on the selection verbosity of
the pml/mtl/btl frameworks (and UCX's info log), captures what the library writes to stderr while
it initialises and connects every peer, and parses the selected components from it.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fabbench.comm import batch_loop
from fabbench.comm.base import (
    INIT_DIED,
    Capture,
    Communicator,
    captured_stderr,
    host_array,
    np_dtype,
)
from fabbench.comm.cuda_aware import CudaAwareness, ask_library, mpi4py_library
from fabbench.errors import RunError, UsageError

if TYPE_CHECKING:
    from fabbench.comm.primitives import Primitive

QUIET_POLL_S = 0.001  # quiet_barrier: how often a waiting rank looks

# Set before MPI_Init: make Open MPI say what it selected (read back by parse_ompi_transport).
REPORT_ENV = {
    "OMPI_MCA_pml_base_verbose": "10",
    "OMPI_MCA_mtl_base_verbose": "10",
    "OMPI_MCA_btl_base_verbose": "30",
    "OMPI_MCA_mtl_ofi_verbose": "100",
    "UCX_LOG_LEVEL": "info",
}


# A direct launch (srun --mpi=pmix, no mpirun) has Open MPI 4.1 exchange its addresses in one
# fence, then add its peers, then fence again. On the emulated Slurm nodes, a rank whose
# container started late was still waiting for the first fence's release when a peer, past both,
# sent it its first collective: the tcp btl handed the fragment to ob1's receive callback, not
# yet registered (add_procs), and the rank died at address 0 (a segfault in MPI_Init, 1 start in
# 8; a core showed rank 0's tag -13 fragment). With the addresses fetched from the PMIx server
# when first needed (async modex, no collection), the only fence comes after add_procs, so no
# fragment can reach a rank before its callbacks exist. A site's own setting wins; the results'
# provenance records what the rank ran with.
DIRECT_LAUNCH_ENV = {"OMPI_MCA_pmix_base_async_modex": "1",
                     "OMPI_MCA_pmix_base_collect_data": "0"}


def direct_launch_env(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """What to set before MPI_Init in a rank that PMIx started without mpirun (PMIX_RANK set, no
    ORTE daemon's URI): DIRECT_LAUNCH_ENV, less what the environment already sets."""
    if "PMIX_RANK" not in environ or "OMPI_MCA_orte_hnp_uri" in environ:
        return {}
    return {k: v for k, v in DIRECT_LAUNCH_ENV.items() if k not in environ}


# The lines of that verbosity ("[host:pid] mca: base: ...", "select: init of ...", "btl:tcp: ..."),
# left out when a failed start's output is shown: they are fabbench's question, not the answer.
VERBOSE_LINES = (r"^\[[^\]]+\] (mca: base: |mca:base:select|select: |btl: ?tcp: |pml:ucx |"
                 r"mtl:ofi:|mtl: ofi: )")


class LibraryReport:
    """Turns on the libraries' selection reports for this process and collects them: Open MPI's
    verbose output on stderr (captured around initialisation) and UCX's log, which UCX writes to
    stdout unless UCX_LOG_FILE names a file (here, a private one). close() removes the file and
    gives the environment back: a program this process runs afterwards (`ucx_info -v` for the
    results' provenance) would otherwise inherit a log file in a removed folder, where UCX's own
    start aborts."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="fabbench-report-")
        self._ucx_log = Path(self._dir, "ucx.log")
        # what captured_stderr needs to show a failed start in the library's own words
        self.capture: Capture = {"quiet": VERBOSE_LINES, "logs": [str(self._ucx_log)]}
        mine = {**REPORT_ENV, "UCX_LOG_FILE": str(self._ucx_log)}
        self._saved = {k: os.environ.get(k) for k in mine}
        os.environ.update(mine)
        self.text = ""

    def add(self, captured: str) -> None:
        self.text += captured

    def collect(self) -> str:
        ctypes.CDLL(None).fflush(None)  # C stdio buffers UCX's log file
        try:
            ucx = self._ucx_log.read_text(errors="replace")
        except OSError:
            ucx = ""
        return self.text + "\n" + ucx

    def close(self) -> None:
        for k, v in self._saved.items():  # the libraries read them when they started
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self._dir, ignore_errors=True)


def parse_ompi_transport(text: str) -> str:
    """"ob1/tcp", "ob1/vader", "ucx/tcp", "ucx/rc_mlx5+sysv", "cm/ofi/tcp;ofi_rxm", "cm/psm2"."""
    pml: list[str] = re.findall(r"selected (\w+) best priority", text)  # one group: str
    if not pml:
        raise RunError("Open MPI did not report which pml it selected")
    pml_name = pml[-1]
    if pml_name == "ob1":
        btls = sorted({b for b in re.findall(r"select: init of component (\w+) returned success",
                                              text) if b != "self"})
        if not btls:
            raise RunError("Open MPI selected pml ob1 but reported no btl besides self")
        return "ob1/" + "+".join(btls)
    if pml_name == "ucx":
        tags = re.findall(r"ep_cfg\[\d+\]: tag\(([^)]*)\)", text)
        tls = sorted({t.split("/")[0] for tag in tags for t in tag.split()} - {"self"})
        if not tls:
            raise RunError("UCX reported no transport for its endpoints (UCX_LOG_LEVEL=info)")
        return "ucx/" + "+".join(tls)
    if pml_name == "cm":
        mtl = re.findall(r"Selected component \[(\w+)\]", text)
        if not mtl:
            raise RunError("Open MPI selected pml cm but reported no mtl")
        if mtl[-1] == "ofi":
            prov = re.findall(r"mtl:ofi:prov: (\S+)", text)
            if not prov:
                raise RunError("Open MPI's mtl ofi did not report its libfabric provider")
            return f"cm/ofi/{prov[-1]}"
        return f"cm/{mtl[-1]}"
    return pml_name


class MpiComm(Communicator):
    name = "mpi"

    @classmethod
    def start(cls, primitive: Primitive, *, rank_env: Mapping[str, int], device: str,
              over: str | None, timeout_s: float) -> MpiComm:
        return cls(device=device)

    def __init__(self, *, device: str) -> None:
        os.environ.update(direct_launch_env(os.environ))
        report = LibraryReport()
        import mpi4py

        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        # THREAD_SINGLE like a plain C MPI_Init: ob1 takes no locks (the watchdog thread never
        # calls MPI)
        mpi4py.rc.threads = False
        from mpi4py import MPI

        self._MPI = MPI
        # built (or found) and checked before MPI_Init: no fork under a running MPI
        self._loop = batch_loop.load(MPI) if batch_loop.wanted() else None
        try:
            with captured_stderr(died=INIT_DIED, **report.capture) as captured:
                if not MPI.Is_initialized():
                    MPI.Init()
                comm = MPI.COMM_WORLD
                comm.Set_errhandler(MPI.ERRORS_RETURN)
                # touch every peer so that lazily connected transports (UCX) report theirs
                ones = np.ones(comm.Get_size(), np.int32)
                comm.Alltoall(ones, np.empty_like(ones))
                comm.Barrier()
            report.add(captured[0])
            self._report = report.collect()
        finally:
            report.close()
        self._comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.device = "cpu"
        self._cuda_aware: CudaAwareness | None = None
        if device == "cuda":
            # CUDA-awareness first, from the running library: its answer does not depend on a GPU
            self._cuda_aware = ask_library(mpi4py_library())
            if self._cuda_aware is None:
                raise UsageError("cannot tell whether this MPI is CUDA-aware (it has neither "
                                 "MPIX_Query_cuda_support nor MPIX_GPU_query_support): "
                                 "--device cuda with mpi is refused")
            if not self._cuda_aware.aware:
                raise UsageError(self._cuda_aware.refusal())
            import torch

            if not torch.cuda.is_available():
                raise RunError("mpi with device cuda needs a GPU and torch sees none")
            torch.cuda.set_device(int(os.environ.get("FABBENCH_LOCAL_RANK", "0"))
                                  % torch.cuda.device_count())
            self._torch = torch
            self.device = f"cuda:{torch.cuda.current_device()}"
        self._scalar_in = np.zeros(1, np.float64)
        self._scalar_out = np.zeros(1, np.float64)

    def array(self, host: np.ndarray, dtype: str) -> Any:
        if self.device == "cpu":
            return host_array(host, dtype)
        torch = self._torch
        return torch.from_numpy(host.astype(np_dtype(dtype))).to(self.device)

    def host(self, buf: Any) -> np.ndarray:
        if self.device == "cpu":
            return np.asarray(buf, dtype=np.float64)
        out: np.ndarray = buf.cpu().double().numpy()  # a torch tensor on the GPU
        return out

    def bind(self, op: str, send: Any, recv: Any) -> Callable[[], None]:
        comm, SUM = self._comm, self._MPI.SUM
        if self._loop is not None:  # batch_loop: a sample's operations in one C call
            nxt, prv = (self.rank + 1) % self.size, (self.rank - 1) % self.size
            return batch_loop.Batched(self._loop, self._MPI, comm, op, send, recv, dest=nxt,
                                      source=prv)
        if op == "allreduce":
            return lambda: comm.Allreduce(send, recv, SUM)
        if op == "allgather":
            return lambda: comm.Allgather(send, recv)
        if op == "reduce_scatter":
            return lambda: comm.Reduce_scatter_block(send, recv, SUM)
        if op == "broadcast":
            return lambda: comm.Bcast(recv, 0)
        if op == "alltoall":
            return lambda: comm.Alltoall(send, recv)
        if op == "sendrecv":
            nxt, prv = (self.rank + 1) % self.size, (self.rank - 1) % self.size
            return lambda: comm.Sendrecv(send, nxt, 0, recv, prv, 0)
        raise KeyError(op)

    def exchange(self, peer: int, send: Any, recv: Any) -> Callable[[], None]:
        comm = self._comm
        if self._loop is not None:
            return batch_loop.Batched(self._loop, self._MPI, comm, "sendrecv", send, recv,
                                      dest=peer, source=peer, tag=1)
        return lambda: comm.Sendrecv(send, peer, 1, recv, peer, 1)

    def shift(self, send: Any, dest: int, recv: Any, source: int, tag: str) -> None:
        if self.device == "cpu":
            self._comm.Sendrecv(send.numpy(), dest, 7, recv.numpy(), source, 7)
        else:  # CUDA-aware MPI takes device buffers
            self._comm.Sendrecv(send, dest, 7, recv, source, 7)

    def synchronize(self) -> None:
        if self.device != "cpu":
            self._torch.cuda.synchronize()

    def barrier(self) -> None:
        self._comm.Barrier()

    def quiet_barrier(self) -> None:
        """Open MPI's Barrier polls (yielding, but polling) until the last rank arrives; a
        non-blocking barrier tested every millisecond leaves the CPUs to the others."""
        request = self._comm.Ibarrier()
        while not request.Test():
            time.sleep(QUIET_POLL_S)

    def max_scalar(self, value: float) -> float:
        self._scalar_in[0] = value
        self._comm.Allreduce(self._scalar_in, self._scalar_out, self._MPI.MAX)
        return float(self._scalar_out[0])

    def gather_objects(self, obj: Any) -> list[Any]:
        return self._comm.allgather(obj)

    def transport(self) -> str:
        return parse_ompi_transport(self._report)

    def library_report(self) -> dict[str, Any] | None:
        if self._cuda_aware is None:
            return None
        return {"cuda_aware": self._cuda_aware.aware, "evidence": self._cuda_aware.evidence}

    def library_version(self) -> str:
        # Open MPI 4.1 counts the string's terminating NUL in its length: mpi4py keeps it
        return self._MPI.Get_library_version().replace("\0", "").strip().splitlines()[0]

    def close(self) -> None:
        if not self._MPI.Is_finalized():
            # the selection verbosity turned on for the report also narrates the shutdown
            with captured_stderr():
                self._MPI.Finalize()
