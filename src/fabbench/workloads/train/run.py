"""The training workload as a rank runs it (``run_train``, which the workload's ``run`` imports),
and its measurement protocol, the same for every engine, on every rank:
  1. compute-only: ``warmup_steps`` then ``steps`` local steps (forward, backward, optimizer) of
     the bare model, no gradient exchange;
  2. the model state is made equal on every rank again (the engine's start);
  3. full: ``warmup_steps`` then ``steps`` data-parallel steps, each timed alone; the interface
     byte counters are sampled every 0.1 s meanwhile (Zhang et al.);
  4. gradients and parameters of every rank compared (sha256 of their bytes);
  5. the gradient volume all-reduced alone, in the engine's bucket schedule.
A step's time is the slowest rank's (per-rank step times are gathered after the loop, so the
timed loop holds no extra synchronisation). Exposed communication = full step - compute step
(p50 of each); samples/s counts every rank's samples.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from typing import Any

from fabbench.comm.base import Communicator
from fabbench.networks import get as get_model
from fabbench.networks import models as model_registry
from fabbench.plan import Plan
from fabbench.workloads.train import section
from fabbench.workloads.train.engines import engine_for
from fabbench.workloads.train.netsampler import NetSampler
from fabbench.workloads.train.record import Train, train_record

__all__ = ["Trainer", "run_train"]

LEARNING_RATE = 1e-6


def local_world_size(default: int) -> int:
    for var in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "HOROVOD_LOCAL_SIZE",
                "SLURM_NTASKS_PER_NODE"):
        value = os.environ.get(var, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return default


def set_threads(torch: Any, ranks_here: int) -> int:
    """One share of this host's cores per local rank (oversubscription ruins CPU timings)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = max(1, (cores or 1) // max(1, ranks_here))
    torch.set_num_threads(threads)
    return threads


def synthetic_batch(torch: Any, plan: Plan, device: str, rank: int) -> tuple[Any, Any]:
    """Random inputs and labels made on the device, different on every rank (so that the
    gradient check means something)."""
    train = section.of(plan)
    spec = get_model(train.model)
    gen = torch.Generator(device=device).manual_seed(1234 + rank)
    size = train.input_size
    if spec.family == "image":
        x = torch.randn(train.batch_size, 3, size, size, device=device, generator=gen)
        y = torch.randint(0, 1000, (train.batch_size,), device=device, generator=gen)
    else:
        vocab = spec.kwargs["vocab"]
        x = torch.randint(0, vocab, (train.batch_size, size), device=device, generator=gen)
        y = torch.randint(0, vocab, (train.batch_size, size), device=device, generator=gen)
    return x, y


def digest(tensors: list[Any]) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()




class Trainer:
    """One model, one optimizer, one synthetic batch; ``local_step`` and ``step`` (exchanged by
    the engine the primitive names)."""

    torch: Any  # the module, imported when a trainer is made (not when this module is)

    def __init__(self, plan: Plan, comm: Communicator) -> None:
        import torch

        self.torch, self.plan, self.comm = torch, plan, comm
        self.device = comm.device
        self.engine = engine_for(plan)
        # the same cores per rank at every rank count of --scaling (else 1 rank gets them all)
        ranks_here = max(local_world_size(comm.size), *(plan.train.scaling or ()), 1)
        self.threads = set_threads(torch, ranks_here) if self.device == "cpu" \
            else torch.get_num_threads()
        torch.manual_seed(0)  # the same initial weights everywhere (they are broadcast anyway)
        self.model = model_registry.build(plan.train.model).to(self.device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.x, self.y = synthetic_batch(torch, plan, self.device, comm.rank)
        self.autocast_dtype = {"fp32": None, "bf16": torch.bfloat16,
                               "fp16": torch.float16}[plan.train.precision]
        self.scaler = torch.amp.GradScaler("cuda") if plan.train.precision == "fp16" else None
        self.optimizer = self._optimizer()

    def _optimizer(self) -> Any:
        # a small rate: a fixed synthetic batch is otherwise memorised within a few steps, the
        # loss reaches 0 and every gradient is exactly 0 (the cost of a step does not change)
        return self.torch.optim.SGD(self.params, lr=LEARNING_RATE, momentum=0.9)

    def loss(self, module: Any) -> Any:
        torch = self.torch
        dev_type = "cuda" if self.device.startswith("cuda") else "cpu"
        with torch.autocast(dev_type, dtype=self.autocast_dtype,
                            enabled=self.autocast_dtype is not None):
            out = module(self.x)
            # the loss as AMP's recipe writes it: autocast computes it in float32 itself; a
            # .float() of the logits first cost GPT-small (50257 logits per token) 5-7 % of
            # its step on an H100 against the bare loop
            return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]),
                                                     self.y.reshape(-1))

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def backward(self, loss: Any) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def optimizer_step(self) -> None:
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()

    def backward_and_step(self, loss: Any) -> None:
        self.backward(loss)
        self.optimizer_step()

    def local_step(self, sync: bool = True) -> None:
        """The same step without any gradient exchange."""
        self.optimizer.zero_grad()  # torch default: set_to_none
        self.backward_and_step(self.loss(self.model))
        if sync:
            self.sync()

    def go_distributed(self) -> None:
        """Make every rank's state equal again and wrap the model/optimizer for the engine."""
        self.optimizer = self._optimizer()  # fresh state: momentum from the local steps differs
        self.engine.start(self)

    def step(self, sync: bool = True) -> None:
        """One data-parallel step."""
        self.optimizer.zero_grad()  # torch default: set_to_none
        self.engine.step(self)
        if sync:
            self.sync()

    def grad_sizes(self) -> list[int]:
        return [p.numel() * p.element_size() for p in self.params]

    def buckets(self) -> tuple[list[int], float]:
        """Bytes per bucket in the order they are exchanged, and the cap (MB) they were cut by."""
        return self.engine.buckets(self)

    def allreduce_alone(self, buckets: list[int]) -> Callable[[], None]:
        """One step's gradient volume all-reduced in the bucket schedule, nothing else."""
        torch = self.torch
        bufs = [torch.ones(max(1, b // 4), dtype=torch.float32, device=self.device)
                for b in buckets]
        return self.engine.exchange_alone(self, bufs)


def _timed(fn: Callable[[], None], count: int, arm: Callable[[float, str], None],
           timeout_s: float, what: str) -> list[float]:
    clock = time.perf_counter
    times = []
    for i in range(count):
        arm(timeout_s, f"{what} {i + 1} of {count}")
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return times


def timed_steps(trainer: Trainer, step: Callable[..., None], count: int,
                arm: Callable[[float, str], None], timeout_s: float, what: str) -> list[float]:
    """Seconds of each of ``count`` calls of ``step`` (Trainer.step or .local_step). On a GPU
    the steps run as a training loop runs them, without a synchronize between them (one would
    drain the host's queue of kernels every step, a stall no training loop has: 8 % of a
    GPT-small step at batch 8 on an H100): a CUDA event after each step, one synchronize at
    the end, a step's time the interval between its events. On the CPU, the host clock."""
    if not trainer.device.startswith("cuda"):
        return _timed(step, count, arm, timeout_s, what)
    if count == 0:
        return []
    cuda = trainer.torch.cuda
    marks = [cuda.Event(enable_timing=True) for _ in range(count + 1)]
    arm(timeout_s * count, f"{count} x {what}")
    marks[0].record()
    for i in range(count):
        step(sync=False)
        marks[i + 1].record()
    cuda.synchronize()
    return [marks[i].elapsed_time(marks[i + 1]) / 1e3 for i in range(count)]


def _slowest(comm: Communicator, times: list[float]) -> list[float]:
    """Per step, the slowest rank's time."""
    every = comm.gather_objects(times)
    return [max(column) for column in zip(*every, strict=True)]


def run_train(comm: Communicator, plan: Plan, transport: str,
              arm: Callable[[float, str], None], *,
              baseline_samples_per_s: float | None = None) -> Train:
    """Train, measure, check; returns the train record on every rank (with the scaling
    efficiency against ``baseline_samples_per_s``, a 1-rank run's, when given)."""
    trainer = Trainer(plan, comm)
    warmup, steps = plan.train.warmup_steps, plan.train.steps
    first = plan.timeout_s * 4  # the first steps allocate, and DDP builds its buckets
    # 1. compute only
    _timed(trainer.local_step, 1, arm, first, "compute-only warm-up step")
    _timed(trainer.local_step, max(0, warmup - 1), arm, plan.timeout_s,
           "compute-only warm-up step")
    compute = _slowest(comm, timed_steps(trainer, trainer.local_step, steps, arm,
                                         plan.timeout_s, "compute-only step"))
    local_grads = digest([p.grad for p in trainer.params])
    # 2. the same state everywhere, then 3. data-parallel steps
    arm(first, "starting the data-parallel engine")
    trainer.go_distributed()
    _timed(trainer.step, 1, arm, first, "warm-up step")
    _timed(trainer.step, max(0, warmup - 1), arm, plan.timeout_s, "warm-up step")
    comm.barrier()
    with NetSampler(plan.iface) as net:
        full = _slowest(comm, timed_steps(trainer, trainer.step, steps, arm,
                                          plan.timeout_s, "training step"))
    # 4. every rank holds the same gradients and weights
    arm(plan.timeout_s, "comparing gradients across ranks")
    grads = comm.gather_objects(digest([p.grad for p in trainer.params]))
    finite = all(bool(trainer.torch.isfinite(p.grad).all()) for p in trainer.params)
    nonzero = any(bool(p.grad.any()) for p in trainer.params)
    usable = all(comm.gather_objects(finite and nonzero))
    weights = comm.gather_objects(digest(trainer.params))
    without = comm.gather_objects(local_grads)
    # 5. the gradient volume alone
    buckets, cap_mb = trainer.buckets()
    alone_fn = trainer.allreduce_alone(buckets)
    _timed(alone_fn, 2, arm, first, "gradient all-reduce alone (warm-up)")
    comm.barrier()
    alone = _slowest(comm, _timed(alone_fn, max(3, min(steps, 10)), arm, plan.timeout_s,
                                  "gradient all-reduce alone"))
    return train_record(
        plan, baseline_samples_per_s=baseline_samples_per_s, ranks=comm.size,
        engine=trainer.engine.name, transport=transport,
        parameters=sum(p.numel() for p in trainer.params), threads=trainer.threads,
        grad_bytes=sum(trainer.grad_sizes()), full=full, compute=compute, alone=alone,
        buckets=buckets, cap_mb=cap_mb, bucket_source=trainer.engine.source, net=net.summary(),
        grads=grads, usable=usable, weights=weights, without=without)
