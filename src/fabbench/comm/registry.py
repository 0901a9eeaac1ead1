"""Primitives by name. Each entry builds its communicator lazily (the import happens then)."""

from __future__ import annotations

from collections.abc import Callable

from fabbench.comm.base import Communicator

PRIMITIVES = ("mpi", "gloo", "nccl", "horovod")
HOROVOD_OVER = ("mpi", "gloo")
ALL_OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall", "sendrecv")

# What each primitive can do, known without importing its library (the CLI validates with it).
OPS = {
    "mpi": ALL_OPS,
    "gloo": ALL_OPS,
    "nccl": ALL_OPS,
    "horovod": ALL_OPS[:-1],  # Horovod has no point-to-point operation
}
DTYPES = {
    "mpi": ("float32", "float64"),  # MPI has no standard 16-bit float type
    "gloo": ("float32", "float64", "float16", "bfloat16"),
    "nccl": ("float32", "float64", "float16", "bfloat16"),
    "horovod": ("float32", "float64", "float16"),
}


def create(primitive: str, *, rank_env: dict, device: str, horovod_over: str | None,
           timeout_s: float) -> Communicator:
    builders: dict[str, Callable[[], Communicator]] = {
        "mpi": lambda: _mpi(device),
        "gloo": lambda: _torch("gloo", rank_env, device, timeout_s),
        "nccl": lambda: _torch("nccl", rank_env, "cuda", timeout_s),
        "horovod": lambda: _horovod(horovod_over or "mpi", device),
    }
    return builders[primitive]()


def _mpi(device: str) -> Communicator:
    from fabbench.comm.mpi import MpiComm

    return MpiComm(device=device)


def _torch(backend: str, env: dict, device: str, timeout_s: float) -> Communicator:
    from fabbench.comm.torchdist import TorchComm

    return TorchComm(backend, rank=env["rank"], size=env["size"], local_rank=env["local_rank"],
                     device=device, timeout_s=timeout_s)


def _horovod(over: str, device: str) -> Communicator:
    from fabbench.comm.horovod import HorovodComm

    return HorovodComm(over=over, device=device)
