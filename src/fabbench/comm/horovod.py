"""Horovod (horovod.torch) over its MPI or Gloo controller; NCCL for GPU tensors when built so."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from fabbench.comm.base import INIT_DIED, Capture, Communicator, captured_stderr
from fabbench.comm.mpi import LibraryReport, direct_launch_env, parse_ompi_transport
from fabbench.comm.torchdist import torch_array
from fabbench.errors import RunError

if TYPE_CHECKING:
    from fabbench.comm.primitives import Primitive


class HorovodComm(Communicator):
    name = "horovod"
    in_place_reduce = True

    @classmethod
    def start(cls, primitive: Primitive, *, rank_env: Mapping[str, int], device: str,
              over: str | None, timeout_s: float) -> HorovodComm:
        return cls(over=primitive.backend(over), device=device)

    def __init__(self, *, over: str, device: str) -> None:
        if over == "mpi":
            os.environ.update(direct_launch_env(os.environ))
        report = LibraryReport() if over == "mpi" else None
        try:
            import torch

            try:
                import horovod.torch as hvd
            except ImportError as exc:
                raise RunError(f"horovod is not installed in this environment ({exc}); "
                               "in a checkout `make setup-all` builds it (make demo does "
                               "not), elsewhere containers/horovod.sh") from None
            self._torch, self._hvd, self.over = torch, hvd, over
            capture: Capture = report.capture if report is not None else {}
            with captured_stderr(died=INIT_DIED, **capture) as captured:
                hvd.init()
                ok = (hvd.mpi_enabled() if over == "mpi" else hvd.gloo_enabled())
                if ok:
                    hvd.allreduce(torch.ones(1), name="fabbench.connect")
            if not ok:
                raise RunError(f"horovod did not start its {over} controller "
                               f"(mpi built: {hvd.mpi_built()}, gloo built: {hvd.gloo_built()})")
            self._report = ""
            if report is not None:
                report.add(captured[0])
                self._report = report.collect()
        finally:
            if report is not None:  # also when the start failed
                report.close()
        self.rank, self.size = hvd.rank(), hvd.size()
        self.device = "cpu"
        if device == "cuda":
            if not torch.cuda.is_available() or not hvd.nccl_built():
                raise RunError("horovod with device cuda needs a GPU and a Horovod built with NCCL")
            torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
            self.device = f"cuda:{torch.cuda.current_device()}"

    def array(self, host: np.ndarray, dtype: str) -> Any:
        return torch_array(self._torch, host, dtype, self.device)

    def host(self, buf: Any) -> np.ndarray:
        out: np.ndarray = buf.detach().to("cpu", self._torch.float64).numpy()  # a torch tensor
        return out

    def bind(self, op: str, send: Any, recv: Any) -> Callable[[], None]:
        hvd = self._hvd
        name = f"fabbench.{op}.{recv.numel()}.{recv.dtype}"
        if op == "allreduce":
            return lambda: hvd.allreduce_(recv, op=hvd.Sum, name=name)
        if op == "allgather":
            return lambda: recv.copy_(hvd.allgather(send, name=name))
        if op == "reduce_scatter":
            return lambda: recv.copy_(hvd.reducescatter(send, op=hvd.Sum, name=name))
        if op == "broadcast":
            return lambda: hvd.broadcast_(recv, root_rank=0, name=name)
        if op == "alltoall":
            return lambda: recv.copy_(hvd.alltoall(send, name=name))
        raise KeyError(op)

    def synchronize(self) -> None:
        if self.device != "cpu":
            self._torch.cuda.synchronize()

    def barrier(self) -> None:
        self._hvd.barrier()

    def shift(self, send: Any, dest: int, recv: Any, source: int, tag: str) -> None:
        """Horovod has no point-to-point operation: an alltoall whose only non-empty split
        goes to ``dest``, named by ``tag`` (Horovod matches operations by name)."""
        splits = self._torch.zeros(self.size, dtype=self._torch.int32)
        splits[dest] = send.shape[0]
        out = self._hvd.alltoall(send, splits=splits, name=f"fabbench.shift.{tag}")
        recv.copy_(out[0] if isinstance(out, tuple) else out)

    def max_scalar(self, value: float) -> float:
        t = self._torch.tensor([value], dtype=self._torch.float64)
        return float(self._hvd.allreduce(t, op=self._hvd.Max, name="fabbench.max").item())

    def gather_objects(self, obj: Any) -> list[Any]:
        # horovod ships no types: allgather_object returns a list, one object per rank
        objects: list[Any] = self._hvd.allgather_object(obj, name="fabbench.objects")
        return objects

    def transport(self) -> str:
        if self.device != "cpu":
            return "horovod/nccl"
        if self.over == "mpi":
            return parse_ompi_transport(self._report)
        return "gloo/tcp"

    def close(self) -> None:
        with captured_stderr():  # quiet the verbosity turned on for the transport report
            self._hvd.shutdown()
