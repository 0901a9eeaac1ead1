"""Primitives by name: one entry per primitive says everything the rest of fabbench decides by it
(operations, dtypes, the torch.distributed backend it starts, how local ranks are launched, the
training engine, how a scheduler launches it). Entries are data; a primitive's library is
imported only when its communicator is created.

A primitive that runs over another one (Horovod over its MPI or Gloo controller) lists its
controllers: the profile section, the local launcher and the render family follow the controller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from fabbench.by_name import ByName
from fabbench.errors import UsageError

ALL_OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall", "sendrecv")
ALL_DTYPES = ("float32", "float64", "float16", "bfloat16")
TRAIN_ENGINES = ("ddp", "horovod", "mpi")


@dataclass(frozen=True, kw_only=True)
class Primitive:
    name: str
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    communicator: str  # "module:Class", imported when the primitive is chosen
    # backend (the profile section the bytes go through) -> the launcher fabbench starts local
    # ranks with (a name of launch.launchers); the first is the default. A plain primitive is
    # its own backend.
    launchers: Mapping[str, str]
    train_engine: str
    torch_backend: str | None = None  # the torch.distributed backend it starts
    gpu_only: bool = False  # moves GPU buffers only
    point_to_point: bool = True  # has a send/receive pair (point-to-point workloads need it)
    # operations it can do on host buffers only: torch's Gloo backend sends a CUDA tensor's
    # device pointer through its TCP pair ("writev ...: Bad address"); its collectives stage
    host_only_ops: tuple[str, ...] = ()
    gpudirect: bool = True  # can move GPU buffers over the network without host staging
    module: str | None = None  # a Python package it needs beyond fabbench's own dependencies
    fusion: bool = False  # takes a tensor-fusion threshold (--fusion-mb)
    # its operations can be captured in a CUDA graph and replayed (--cuda-graph; NCCL's can)
    cuda_graph: bool = False
    # variables that make its library write its own report of the transport it chose to a file
    # under "{dir}" (a folder of the rank's own), which its communicator reads back
    report_env: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    controllers: tuple[str, ...] = field(init=False)

    def ops_on(self, device: str) -> tuple[str, ...]:
        """The operations it can do on buffers of ``device`` ("cpu", "cuda")."""
        return self.ops if device == "cpu" else tuple(
            op for op in self.ops if op not in self.host_only_ops)

    def point_to_point_on(self, device: str) -> bool:
        """Sends and receives buffers of ``device`` (point-to-point workloads need it)."""
        return self.point_to_point and "sendrecv" in self.ops_on(device) and not (
            self.gpu_only and device == "cpu")

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise UsageError(f"primitive name {self.name!r} is not an identifier")
        for op in self.ops:
            if op not in ALL_OPS:
                raise UsageError(f"primitive {self.name!r}: unknown operation {op!r}")
        for dtype in self.dtypes:
            if dtype not in ALL_DTYPES:
                raise UsageError(f"primitive {self.name!r}: unknown dtype {dtype!r}")
        if not self.launchers:
            raise UsageError(f"primitive {self.name!r}: launchers must map a backend to the "
                             "launcher of its ranks")
        if self.train_engine not in TRAIN_ENGINES:
            raise UsageError(f"primitive {self.name!r}: unknown train engine "
                             f"{self.train_engine!r}")
        if ":" not in self.communicator:
            raise UsageError(f"primitive {self.name!r}: communicator must be 'module:Class'")
        object.__setattr__(self, "launchers", MappingProxyType(dict(self.launchers)))
        object.__setattr__(self, "report_env", MappingProxyType(dict(self.report_env)))
        if any(op not in self.ops for op in self.host_only_ops):
            raise UsageError(f"primitive {self.name!r}: host_only_ops must be among its ops")
        controllers = tuple(b for b in self.launchers if b != self.name)
        object.__setattr__(self, "controllers", controllers)

    def backend(self, over: str | None = None) -> str:
        """The profile section (and wire library): the primitive's own, or its controller's."""
        if over is not None:
            if over not in self.controllers:
                raise UsageError(f"primitive {self.name!r} does not run over {over!r}")
            return over
        return next(iter(self.launchers))

    def launcher(self, over: str | None = None) -> str:
        """The name of the launcher of its ranks (launch.launchers)."""
        return self.launchers[self.backend(over)]


class Registry(ByName[Primitive]):
    """Primitives by name, in registration order; a second entry of one name is refused, and
    one that runs over a primitive not registered before it."""

    def __init__(self) -> None:
        super().__init__("primitive")

    def _admit(self, primitive: Primitive) -> None:
        for backend in primitive.launchers:
            if backend != primitive.name and backend not in self:
                raise UsageError(f"primitive {primitive.name!r} runs over {backend!r}, which "
                                 "is not registered before it")


REGISTRY = Registry()
REGISTRY.add(Primitive(
    name="mpi", ops=ALL_OPS, dtypes=("float32", "float64"),  # MPI has no standard 16-bit float
    communicator="fabbench.comm.mpi:MpiComm", launchers={"mpi": "mpirun"}, train_engine="mpi",
    module="mpi4py",  # the "comm" extra: a CPU-only or GPU image may leave it out
    description="MPI through mpi4py (CUDA-aware with GPU buffers)"))
REGISTRY.add(Primitive(
    name="gloo", ops=ALL_OPS, dtypes=ALL_DTYPES, communicator="fabbench.comm.torchdist:TorchComm",
    launchers={"gloo": "spawn"}, train_engine="ddp", torch_backend="gloo",
    gpudirect=False,  # stages GPU buffers through the host
    host_only_ops=("sendrecv",),
    description="torch.distributed Gloo"))
REGISTRY.add(Primitive(
    name="nccl", ops=ALL_OPS, dtypes=ALL_DTYPES, communicator="fabbench.comm.torchdist:TorchComm",
    launchers={"nccl": "spawn"}, train_engine="ddp", torch_backend="nccl", gpu_only=True,
    cuda_graph=True,
    report_env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET",
                "NCCL_DEBUG_FILE": "{dir}/nccl.%h.%p"},  # read by comm.nccl_report
    description="torch.distributed NCCL"))
REGISTRY.add(Primitive(
    name="horovod", ops=ALL_OPS[:-1],  # Horovod has no point-to-point operation (sendrecv)
    dtypes=("float32", "float64", "float16"), communicator="fabbench.comm.horovod:HorovodComm",
    launchers={"mpi": "mpirun", "gloo": "horovodrun"}, train_engine="horovod",
    point_to_point=False, module="horovod", fusion=True,
    description="Horovod over its MPI or Gloo controller"))

# Read-only views for validation messages and loops (known without importing any library).
PRIMITIVES = REGISTRY.names()
OPS = MappingProxyType({n: REGISTRY.get(n).ops for n in PRIMITIVES})
DTYPES = MappingProxyType({n: REGISTRY.get(n).dtypes for n in PRIMITIVES})
HOROVOD_OVER = REGISTRY.get("horovod").controllers


def get(name: str) -> Primitive:
    return REGISTRY.get(name)


def default_primitive(gpus: bool) -> tuple[str, str]:
    """The one rule for a primitive the user did not name: nccl when GPUs are visible (to this
    host, or to the job being rendered), else mpi. Returns (primitive, why)."""
    return ("nccl", "GPUs visible") if gpus else ("mpi", "no GPU visible")
