"""The data-parallel engines, one class each, chosen by name from the primitive's registry entry
(comm.primitives: ``train_engine``):

  ddp      torch DistributedDataParallel over the process group the gloo/nccl communicator
           started; ``bucket_mb`` is DDP's bucket_cap_mb.
  horovod  hvd.DistributedOptimizer over Horovod's MPI or Gloo controller; ``fusion_mb`` is
           HOROVOD_FUSION_THRESHOLD (set before Horovod starts: ``prepare_env``).
  mpi      gradients flattened into buckets of ``bucket_mb`` and all-reduced with mpi4py after
           the backward pass (torch has no MPI backend; no overlap with the backward pass).

An engine makes the ranks' state equal and wraps the model/optimizer (``start``), takes one
data-parallel step, says how the gradients were bucketed, and all-reduces one step's gradient
volume alone in that bucket schedule. Each imports its library only when started.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from fabbench.comm import primitives
from fabbench.plan import Plan
from fabbench.workloads.train.buckets import bucket_groups, bucket_plan

if TYPE_CHECKING:
    from fabbench.comm.base import Communicator

HOROVOD_DEFAULT_FUSION = 128 * 2**20  # Horovod's own default threshold (bytes)
DDP_FIRST_BUCKET = 2**20  # DDP's first bucket is capped at 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES)


class TrainerInterface(Protocol):
    """What an engine reads and calls of the trainer that holds it (workloads.train.run's
    Trainer): declared here so that this module does not import that one."""

    torch: Any
    plan: Plan
    comm: Communicator
    device: str
    model: Any
    optimizer: Any
    scaler: Any
    params: list[Any]

    def loss(self, module: Any) -> Any: ...
    def sync(self) -> None: ...
    def backward(self, loss: Any) -> None: ...
    def optimizer_step(self) -> None: ...
    def backward_and_step(self, loss: Any) -> None: ...
    def grad_sizes(self) -> list[int]: ...


class Engine(ABC):
    name: str = ""
    source: str = "estimated"  # where the bucket sizes come from (the record's buckets.source)

    @abstractmethod
    def start(self, t: TrainerInterface) -> None:
        """Make every rank's state equal and wrap the model/optimizer."""

    @abstractmethod
    def step(self, t: TrainerInterface) -> None:
        """Backward, gradient exchange and optimizer step of one data-parallel step."""

    @abstractmethod
    def buckets(self, t: TrainerInterface) -> tuple[list[int], float]:
        """Bytes per bucket in the order they are exchanged, and the cap (MB) they were cut by."""

    @abstractmethod
    def exchange_alone(self, t: TrainerInterface, bufs: list[Any]) -> Callable[[], None]:
        """All-reduce these buffers (one per bucket), nothing else."""


class DdpEngine(Engine):
    name = "ddp"
    ddp: Any  # torch's DistributedDataParallel, made by start (its logging data is untyped)

    def start(self, t: TrainerInterface) -> None:
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [t.torch.device(t.device).index] if t.device.startswith("cuda") else None
        self.ddp = DDP(t.model, device_ids=ids, bucket_cap_mb=t.plan.train.bucket_mb)

    def step(self, t: TrainerInterface) -> None:
        t.backward_and_step(t.loss(self.ddp))

    def buckets(self, t: TrainerInterface) -> tuple[list[int], float]:
        data = (self.ddp._get_ddp_logging_data()
                if getattr(self, "ddp", None) is not None else {})
        found = data.get("bucket_sizes")
        # torch >= 2.x starts with one bucket and re-cuts them after the first step; its
        # logging data says so only when it refreshed the sizes
        if found and data.get("has_rebuilt_buckets"):
            self.source = "ddp"
            return [int(s) for s in str(found).split(",") if s.strip()], t.plan.train.bucket_mb
        cap_mb = t.plan.train.bucket_mb
        return bucket_plan(t.grad_sizes(), int(cap_mb * 2**20), DDP_FIRST_BUCKET), cap_mb

    def exchange_alone(self, t: TrainerInterface, bufs: list[Any]) -> Callable[[], None]:
        import torch.distributed as dist

        def run() -> None:
            works = [dist.all_reduce(b, async_op=True) for b in bufs]
            for w in works:
                w.wait()
            t.sync()
        return run


class HorovodEngine(Engine):
    name = "horovod"

    def start(self, t: TrainerInterface) -> None:
        import horovod.torch as hvd

        self.hvd = hvd
        hvd.broadcast_parameters(t.model.state_dict(), root_rank=0)
        t.optimizer = hvd.DistributedOptimizer(
            t.optimizer, named_parameters=t.model.named_parameters())

    def step(self, t: TrainerInterface) -> None:
        loss = t.loss(t.model)
        if t.scaler is not None:  # the gradients are unscaled after Horovod's all-reduce
            t.scaler.scale(loss).backward()
            t.optimizer.synchronize()
            t.scaler.unscale_(t.optimizer)
            with t.optimizer.skip_synchronize():
                t.scaler.step(t.optimizer)
            t.scaler.update()
        else:
            loss.backward()
            t.optimizer.step()

    def buckets(self, t: TrainerInterface) -> tuple[list[int], float]:
        threshold = int(os.environ.get("HOROVOD_FUSION_THRESHOLD", str(HOROVOD_DEFAULT_FUSION)))
        return bucket_plan(t.grad_sizes(), threshold), threshold / 2**20

    def exchange_alone(self, t: TrainerInterface, bufs: list[Any]) -> Callable[[], None]:
        hvd = self.hvd

        def run() -> None:
            handles = [hvd.allreduce_async_(b, name=f"fabbench.alone.{i}")
                       for i, b in enumerate(bufs)]
            for h in handles:
                hvd.synchronize(h)
            t.sync()
        return run


class MpiEngine(Engine):
    name = "mpi"
    source = "mpi"

    def start(self, t: TrainerInterface) -> None:
        from mpi4py import MPI

        self.mpi = MPI
        for tensor in [*t.model.parameters(), *t.model.buffers()]:
            host = tensor.detach().to("cpu").contiguous()
            MPI.COMM_WORLD.Bcast(host.numpy(), root=0)
            tensor.data.copy_(host)
        groups = bucket_groups(t.grad_sizes(), int(t.plan.train.bucket_mb * 1024 * 1024))
        self.param_buckets = [[t.params[i] for i in group] for group in groups]

    def _allreduce_grads(self, t: TrainerInterface) -> None:
        torch, MPI = t.torch, self.mpi
        for bucket in self.param_buckets:
            flat = torch.cat([p.grad.reshape(-1) for p in bucket]).to("cpu")
            MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, flat.numpy(), MPI.SUM)
            flat /= t.comm.size
            offset = 0
            for p in bucket:
                n = p.numel()
                p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
                offset += n

    def step(self, t: TrainerInterface) -> None:
        t.backward(t.loss(t.model))
        self._allreduce_grads(t)
        t.optimizer_step()

    def buckets(self, t: TrainerInterface) -> tuple[list[int], float]:
        return [sum(p.numel() * p.element_size() for p in b) for b in self.param_buckets], \
            t.plan.train.bucket_mb

    def exchange_alone(self, t: TrainerInterface, bufs: list[Any]) -> Callable[[], None]:
        MPI = self.mpi
        host = [b.to("cpu").numpy() for b in bufs]

        def run() -> None:
            for h in host:
                MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, h, MPI.SUM)
        return run


ENGINES: dict[str, type[Engine]] = {e.name: e for e in (DdpEngine, HorovodEngine, MpiEngine)}
assert set(ENGINES) == set(primitives.TRAIN_ENGINES)


def engine_for(plan: Plan) -> Engine:
    """The engine the plan's primitive names in the registry."""
    return ENGINES[primitives.get(plan.primitive).train_engine]()


def prepare_env(plan: Plan) -> None:
    """Settings a library reads when it starts: call before the communicator is created."""
    fusion_mb = plan.train.fusion_mb
    if primitives.get(plan.primitive).train_engine == "horovod" and fusion_mb is not None:
        os.environ["HOROVOD_FUSION_THRESHOLD"] = str(int(fusion_mb * 1024 * 1024))
