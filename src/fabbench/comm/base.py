"""The interface every primitive implements, and what they share."""

from __future__ import annotations

import contextlib
import importlib
import mmap
import os
import subprocess
import sys
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from fabbench.comm import guard as guard_script
from fabbench.comm.guard import shown
from fabbench.comm.primitives import REGISTRY, Primitive
from fabbench.errors import UsageError

GRAPH_OPS = 100
"""Operations in one captured graph: a batch of more replays such graphs back to back (and one
of the rest), as nccl-tests' ``-n 100 -G k`` (the GPU kit's) replays its graph of 100
iterations k times. Measured on an H200 (docs/methods.md, "fabbench beside nccl-tests"): the
graph's launch is shared by its operations (nccl-tests' allgather of 32 B-16 KiB took 1.06-1.16
us per operation in graphs of 1000, 1.13-1.23 in graphs of 100), and torch's batch_isend_irecv
captured costs more per operation the more of them one graph holds (8 B: 6.4 us in 10, 12.5-16
in 100, 47-77 in 1000)."""

GRAPH_MIXING_ENV = "NCCL_GRAPH_MIXING_SUPPORT"
"""NCCL's support for graph launches outstanding beside other launches of a communicator (on
by default): with it, NCCL serializes the streams torch captures around each operation, and
torch's captured batch_isend_irecv took 12.5 us per operation on an H200 against nccl-tests'
4.2 (4.9 with it off; docs/methods.md). Under --cuda-graph fabbench turns it off where nothing
set it (launch.rank): NCCL's condition for that holds, since the timing engine synchronizes
the device after every batch, so no NCCL call is issued while a graph is outstanding."""


def graph_environment(cuda_graph: bool, environ: MutableMapping[str, str]) -> None:
    """Before NCCL starts: its graph mixing off under --cuda-graph, unless the user or the
    fabric's profile set it (that value stays, and is recorded)."""
    if cuda_graph:
        environ.setdefault(GRAPH_MIXING_ENV, "0")


def graph_timing(cuda_graph: bool, environ: Mapping[str, str]) -> dict[str, Any]:
    """What a run under --cuda-graph records beside its timing policy: the operations per
    graph and NCCL's graph mixing as the ranks ran with it; nothing for eager calls."""
    if not cuda_graph:
        return {}
    return {"graph_ops": GRAPH_OPS, "nccl_graph_mixing": environ.get(GRAPH_MIXING_ENV)}


class Communicator(ABC):
    """A group of ranks that can run the six collectives on buffers it allocates.

    Buffers are opaque to callers: ``array`` places host data where the primitive works (host
    memory, or GPU memory for CUDA-aware MPI and NCCL) and ``host`` brings it back.
    """

    name: str = ""
    rank: int = 0
    size: int = 1
    device: str = "cpu"
    in_place_reduce: bool = False  # reduces into the receive buffer (torch, horovod)

    @classmethod
    @abstractmethod
    def start(cls, primitive: Primitive, *, rank_env: Mapping[str, int], device: str,
              over: str | None, timeout_s: float) -> Communicator:
        """Join the group of ranks this process belongs to (``create_communicator`` calls this)."""

    @abstractmethod
    def array(self, host: np.ndarray, dtype: str) -> Any: ...

    @abstractmethod
    def host(self, buf: Any) -> np.ndarray: ...

    @abstractmethod
    def bind(self, op: str, send: Any, recv: Any) -> Callable[[], None]:
        """One operation with its buffers bound, ready to be called back to back."""

    def graphed(self, op: str, send: Any, recv: Any, slots: int = 1) -> Callable[[], None]:
        """``op`` on these buffers, made to run a batch as CUDA graphs (the timing engine's
        ``ready``/``batch``) whose operations cycle through ``slots`` copies of the buffers;
        only a primitive whose registry entry says cuda_graph can (plan.Plan refuses
        --cuda-graph on for the others)."""
        raise UsageError(f"{self.name} cannot capture its operations in a CUDA graph")

    @abstractmethod
    def synchronize(self) -> None: ...

    @abstractmethod
    def barrier(self) -> None: ...

    def quiet_barrier(self) -> None:
        """A barrier for ranks that may wait long for others (pairs, one at a time): one that
        keeps no core busy while it waits, so that the ranks being measured have the host's
        CPUs to themselves. The libraries' own barriers that block in the kernel are quiet
        already."""
        self.barrier()

    @abstractmethod
    def max_scalar(self, value: float) -> float: ...

    def exchange(self, peer: int, send: Any, recv: Any) -> Callable[[], None]:
        """One bidirectional exchange with one peer (each sends ``send`` and receives into
        ``recv`` at once), ready to be called back to back; only the two ranks take part."""
        raise UsageError(f"{self.name} has no point-to-point operation")

    def shift(self, send: Any, dest: int, recv: Any, source: int, tag: str) -> None:
        """Send the torch tensor ``send`` to ``dest`` while receiving ``recv`` from ``source``
        (every rank calls it at once with its own neighbours, as a stencil's exchange does). ``tag``
        names the step identically on every rank (a library that matches operations by name
        needs it). Tensors live on this communicator's device."""
        raise UsageError(f"{self.name} has no point-to-point operation")

    def pair(self, peer: int) -> Pair:
        """This rank and ``peer`` as a group of two for the timing engine."""
        return Pair(self, peer)

    @abstractmethod
    def gather_objects(self, obj: Any) -> list[Any]:
        """Every rank's object, on every rank (small metadata only)."""

    @abstractmethod
    def transport(self) -> str:
        """What carried the bytes, as the library itself reports it."""

    def gpudirect(self) -> str | None:
        """GPUDirect RDMA as the library reports it for this rank's network connections: "on",
        "off", "partial", or None when the library does not say (or no connection used the
        network)."""
        return None

    def library_report(self) -> dict[str, Any] | None:
        """What the library said about its set-up (NCCL: network, GDR use, channels)."""
        return None

    @property
    def timing_method(self) -> str:
        """How a timed stretch ends on every rank before the host clock is read (timing/engine
        and the train steps call synchronize()): "device-synchronize" for GPU buffers
        (torch.cuda.synchronize(), every kernel of the device finished), "host-clock" on CPU
        (the call returned)."""
        return "device-synchronize" if self.device.startswith("cuda") else "host-clock"

    def close(self) -> None:  # noqa: B027 - optional
        pass


class Pair:
    """Two ranks as a timing group (barrier, synchronize, max of a scalar), built on their
    exchange alone, so that the other ranks are free to measure their own pairs meanwhile."""

    def __init__(self, comm: Communicator, peer: int) -> None:
        self._comm = comm
        self._out = comm.array(np.zeros(1), "float64")
        self._in = comm.array(np.zeros(1), "float64")
        self._swap = comm.exchange(peer, self._out, self._in)

    def barrier(self) -> None:
        self._swap()
        self._comm.synchronize()

    def synchronize(self) -> None:
        self._comm.synchronize()

    def max_scalar(self, value: float) -> float:
        self._out[0] = value
        self._swap()
        self._comm.synchronize()
        return max(value, float(self._comm.host(self._in)[0]))


INIT_DIED = ("fabbench: error: the communication library ended this process while it started "
             "(its own message is above)")


class Capture(TypedDict, total=False):
    """The keywords of captured_stderr a LibraryReport sets: what of a failed start to show."""

    quiet: str
    logs: Sequence[str]

@contextlib.contextmanager
def captured_stderr(died: str | None = None, quiet: str = "",
                    logs: Sequence[str] = ()) -> Iterator[list[str]]:
    """Capture what the process (C libraries included) writes to fd 2 inside the block.

    Yields a list that holds the captured text after the block. If the block raises, the text is
    written back to stderr (less the lines matching ``quiet``: verbosity fabbench asked for,
    plus the error lines of ``logs``, files the library writes instead of stderr) so that the
    library's own error message is not lost. With ``died`` (one line), it is not lost either
    when the process dies inside the block (a C library's exit() or abort()): a guard process
    (comm/guard.py) writes the same, then that line.
    """
    holder: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        guard, mark = None, None
        if died is not None:
            mark = guard_script.mark_of(os.getpid())
            if mark is not None:  # the launcher waits for what the guard may write
                with contextlib.suppress(OSError):
                    mark.touch()
            # the guard must be up before the library can end us: a bare interpreter, by path
            guard = subprocess.Popen([sys.executable, "-I", "-S", guard_script.__file__,
                                      str(tmp.fileno()), str(os.getpid()), died, quiet,
                                      *logs],
                                     stdin=subprocess.PIPE, pass_fds=(tmp.fileno(),),
                                     start_new_session=True)
        os.dup2(tmp.fileno(), 2)
        try:
            yield holder
        except BaseException:
            _restore(saved, tmp, holder, guard, mark)
            sys.stderr.write(shown(holder[0], quiet, logs))
            raise
        _restore(saved, tmp, holder, guard, mark)


def _restore(saved: int, tmp: Any, holder: list[str], guard: subprocess.Popen[bytes] | None,
             mark: Path | None = None) -> None:
    if guard is not None:  # alive: the capture is this process's to show or keep
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            guard.communicate(b"ok", timeout=30)
        if guard.poll() is None:
            guard.kill()
            guard.wait()
    if mark is not None:
        mark.unlink(missing_ok=True)
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
    tmp.seek(0)
    holder.append(tmp.read().decode(errors="replace"))


def create_communicator(primitive: str, *, rank_env: Mapping[str, int], device: str,
                        horovod_over: str | None, timeout_s: float) -> Communicator:
    """The primitive's communicator, its class named by the registry entry; its library is
    imported here, not before."""
    spec = REGISTRY.get(primitive)
    module, _, cls_name = spec.communicator.partition(":")
    cls: type[Communicator] = getattr(importlib.import_module(module), cls_name)
    return cls.start(spec, rank_env=rank_env, device=device, over=horovod_over,
                     timeout_s=timeout_s)


def page_aligned(nbytes: int) -> mmap.mmap:
    """Host memory for a buffer a library moves: an anonymous mapping of its own, page-aligned
    and never shared with the interpreter's heap, as OSU's buffers (posix_memalign to a page)
    and the C reference loop's are. Where numpy or torch place a buffer depends on what the
    process allocated and freed before; in the interpreter's heap the same Open MPI allreduce
    measured 2.5-3x slower at 256 KiB-4 MiB than in a mapping of its own (docs/methods.md,
    "Fidelity"). The mapping lives as long as the array or tensor made on it."""
    return mmap.mmap(-1, max(nbytes, 1))


def host_array(host: np.ndarray, dtype: str) -> np.ndarray:
    """``host``'s values as ``dtype`` in page-aligned memory of their own (page_aligned)."""
    dt = np_dtype(dtype)
    out = np.frombuffer(page_aligned(host.size * dt.itemsize), dt, host.size)
    out[:] = host
    return out


def np_dtype(dtype: str) -> np.dtype:
    return np.dtype({"float32": np.float32, "float64": np.float64, "float16": np.float16}[dtype])
