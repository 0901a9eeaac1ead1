"""The training workload: a model from fabbench.models, trained data-parallel on synthetic data.

Engines (chosen by the primitive):
  ddp      torch DistributedDataParallel over the process group the gloo/nccl communicator
           started; ``bucket_mb`` is DDP's bucket_cap_mb.
  horovod  hvd.DistributedOptimizer over Horovod's MPI or Gloo controller; ``fusion_mb`` is
           HOROVOD_FUSION_THRESHOLD (set before Horovod starts: ``prepare_env``).
  mpi      gradients flattened into buckets of ``bucket_mb`` and all-reduced with mpi4py after
           the backward pass (torch has no MPI backend; no overlap with the backward pass).

Measurement, in this order, on every rank:
  1. compute-only: ``warmup_steps`` then ``steps`` local steps (forward, backward, optimizer) of
     the bare model, no gradient exchange;
  2. the model state is made equal on every rank again (DDP's constructor, or a broadcast);
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
import math
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from fabbench.comm.base import Communicator
from fabbench.models import get as get_model
from fabbench.models import registry as model_registry
from fabbench.plan import Plan

NET_INTERVAL_S = 0.1
LEARNING_RATE = 1e-6


def prepare_env(plan: Plan) -> None:
    """Settings a library reads when it starts: call before the communicator is created."""
    if plan.primitive == "horovod" and plan.fusion_mb is not None:
        os.environ["HOROVOD_FUSION_THRESHOLD"] = str(int(plan.fusion_mb * 1024 * 1024))


def engine_name(plan: Plan) -> str:
    return {"gloo": "ddp", "nccl": "ddp", "horovod": "horovod", "mpi": "mpi"}[plan.primitive]


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
    spec = get_model(plan.model)
    gen = torch.Generator(device=device).manual_seed(1234 + rank)
    size = plan.input_size
    if spec.family == "image":
        x = torch.randn(plan.batch_size, 3, size, size, device=device, generator=gen)
        y = torch.randint(0, 1000, (plan.batch_size,), device=device, generator=gen)
    else:
        vocab = spec.kwargs["vocab"]
        x = torch.randint(0, vocab, (plan.batch_size, size), device=device, generator=gen)
        y = torch.randint(0, vocab, (plan.batch_size, size), device=device, generator=gen)
    return x, y


class NetSampler:
    """Interface byte counters every 0.1 s in a thread (psutil.net_io_counters(pernic=True))."""

    def __init__(self, iface: str | None) -> None:
        import psutil

        self._psutil = psutil
        self.iface = iface
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fabbench-net", daemon=True)

    def _read(self) -> tuple[float, int, int]:
        counters = self._psutil.net_io_counters(pernic=True)
        if self.iface is not None and self.iface in counters:
            c = counters[self.iface]
            return time.perf_counter(), c.bytes_sent, c.bytes_recv
        names = [n for n in counters if n != "lo"]
        return (time.perf_counter(), sum(counters[n].bytes_sent for n in names),
                sum(counters[n].bytes_recv for n in names))

    def _run(self) -> None:
        while not self._stop.wait(NET_INTERVAL_S):
            self.samples.append(self._read())

    def __enter__(self) -> NetSampler:
        self.samples.append(self._read())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.samples.append(self._read())

    def summary(self) -> dict[str, Any]:
        (t0, s0, r0), (t1, s1, r1) = self.samples[0], self.samples[-1]
        elapsed = max(t1 - t0, 1e-9)
        peak = 0.0
        for (ta, sa, ra), (tb, sb, rb) in zip(self.samples, self.samples[1:], strict=False):
            if tb > ta:
                peak = max(peak, max(sb - sa, rb - ra) * 8 / (tb - ta) / 1e9)
        link_gbps = None
        if self.iface is not None:
            stats = self._psutil.net_if_stats().get(self.iface)
            if stats is not None and stats.speed > 0:  # Mb/s; 0 when unknown (lo, veth)
                link_gbps = stats.speed / 1000
        tx_gbps, rx_gbps = (s1 - s0) * 8 / elapsed / 1e9, (r1 - r0) * 8 / elapsed / 1e9
        return {"iface": self.iface or "all but lo", "interval_s": NET_INTERVAL_S,
                "samples": len(self.samples), "seconds": round(elapsed, 4),
                "tx_bytes": s1 - s0, "rx_bytes": r1 - r0, "tx_gbps": tx_gbps,
                "rx_gbps": rx_gbps, "peak_gbps": peak, "link_gbps": link_gbps,
                "utilization": (max(tx_gbps, rx_gbps) / link_gbps) if link_gbps else None,
                "peak_utilization": (peak / link_gbps) if link_gbps else None}


def bucket_plan(sizes_bytes: list[int], cap_bytes: int, first_cap_bytes: int | None = None
                ) -> list[int]:
    """Greedy buckets over the gradients in reverse registration order (the order backward
    produces them), each up to its cap: DDP's and Horovod's fusion approximated."""
    buckets: list[int] = []
    current = 0
    for size in reversed(sizes_bytes):
        cap = first_cap_bytes if (first_cap_bytes is not None and not buckets) else cap_bytes
        if current and current + size > cap:
            buckets.append(current)
            current = 0
        current += size
    if current:
        buckets.append(current)
    return buckets


def digest(tensors: list[Any]) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()


def ci95(values: list[float]) -> float:
    """Half-width of the normal-approximation 95% confidence interval of the mean."""
    if len(values) < 2:
        return 0.0
    return 1.96 * statistics.stdev(values) / math.sqrt(len(values))


def p50(values: list[float]) -> float:
    return statistics.median(values)


class Trainer:
    """One model, one optimizer, one synthetic batch; ``local_step`` and ``step`` (exchanged)."""

    def __init__(self, plan: Plan, comm: Communicator) -> None:
        import torch

        self.torch, self.plan, self.comm = torch, plan, comm
        self.device = comm.device
        self.engine = engine_name(plan)
        # the same cores per rank at every rank count of --scaling (else 1 rank gets them all)
        ranks_here = max(local_world_size(comm.size), *plan.scaling, 1)
        self.threads = set_threads(torch, ranks_here) if self.device == "cpu" \
            else torch.get_num_threads()
        torch.manual_seed(0)  # the same initial weights everywhere (they are broadcast anyway)
        self.model = model_registry.build(plan.model).to(self.device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.x, self.y = synthetic_batch(torch, plan, self.device, comm.rank)
        self.autocast_dtype = {"fp32": None, "bf16": torch.bfloat16,
                               "fp16": torch.float16}[plan.precision]
        self.scaler = torch.amp.GradScaler("cuda") if plan.precision == "fp16" else None
        self.optimizer = self._optimizer()
        self.ddp: Any = None
        self.hvd: Any = None
        self._mpi: Any = None
        self.bucket_source = "estimated"

    def _optimizer(self) -> Any:
        # a small rate: a fixed synthetic batch is otherwise memorised within a few steps, the
        # loss reaches 0 and every gradient is exactly 0 (the cost of a step does not change)
        return self.torch.optim.SGD(self.params, lr=LEARNING_RATE, momentum=0.9)

    def _loss(self, module: Any) -> Any:
        torch = self.torch
        dev_type = "cuda" if self.device.startswith("cuda") else "cpu"
        with torch.autocast(dev_type, dtype=self.autocast_dtype,
                            enabled=self.autocast_dtype is not None):
            out = module(self.x)
            return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]).float(),
                                                     self.y.reshape(-1))

    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def local_step(self) -> None:
        """The same step without any gradient exchange."""
        self.optimizer.zero_grad()  # torch default: set_to_none
        self._backward_and_step(self._loss(self.model))
        self._sync()

    def _backward(self, loss: Any) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def _optimizer_step(self) -> None:
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()

    def _backward_and_step(self, loss: Any) -> None:
        self._backward(loss)
        self._optimizer_step()

    def go_distributed(self) -> None:
        """Make every rank's state equal again and wrap the model/optimizer for the engine."""
        plan = self.plan
        self.optimizer = self._optimizer()  # fresh state: momentum from the local steps differs
        if self.engine == "ddp":
            from torch.nn.parallel import DistributedDataParallel as DDP

            ids = [self.torch.device(self.device).index] if self.device.startswith("cuda") \
                else None
            self.ddp = DDP(self.model, device_ids=ids, bucket_cap_mb=plan.bucket_mb)
        elif self.engine == "horovod":
            import horovod.torch as hvd

            self.hvd = hvd
            hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)
            self.optimizer = hvd.DistributedOptimizer(
                self.optimizer, named_parameters=self.model.named_parameters())
        else:
            from mpi4py import MPI

            self._mpi = MPI
            for t in [*self.model.parameters(), *self.model.buffers()]:
                host = t.detach().to("cpu").contiguous()
                MPI.COMM_WORLD.Bcast(host.numpy(), root=0)
                t.data.copy_(host)
            cap = int(plan.bucket_mb * 1024 * 1024)
            self._buckets: list[list[Any]] = []
            current: list[Any] = []
            size = 0
            for p in reversed(self.params):
                nbytes = p.numel() * p.element_size()
                if current and size + nbytes > cap:
                    self._buckets.append(current)
                    current, size = [], 0
                current.append(p)
                size += nbytes
            if current:
                self._buckets.append(current)

    def _mpi_allreduce_grads(self) -> None:
        torch, MPI = self.torch, self._mpi
        for bucket in self._buckets:
            flat = torch.cat([p.grad.reshape(-1) for p in bucket]).to("cpu")
            MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, flat.numpy(), MPI.SUM)
            flat /= self.comm.size
            offset = 0
            for p in bucket:
                n = p.numel()
                p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
                offset += n

    def step(self) -> None:
        """One data-parallel step."""
        self.optimizer.zero_grad()  # torch default: set_to_none
        if self.engine == "ddp":
            self._backward_and_step(self._loss(self.ddp))
        elif self.engine == "horovod":
            loss = self._loss(self.model)
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
                self.optimizer.synchronize()
                self.scaler.unscale_(self.optimizer)
                with self.optimizer.skip_synchronize():
                    self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                loss.backward()
                self.optimizer.step()
        else:
            self._backward(self._loss(self.model))
            self._mpi_allreduce_grads()
            self._optimizer_step()
        self._sync()

    def grad_sizes(self) -> list[int]:
        return [p.numel() * p.element_size() for p in self.params]

    def buckets(self) -> tuple[list[int], float | None]:
        """Bytes per bucket in the order they are exchanged, and the cap (MB) they were cut by."""
        sizes = self.grad_sizes()
        if self.engine == "ddp":
            data = self.ddp._get_ddp_logging_data() if self.ddp is not None else {}
            found = data.get("bucket_sizes")
            # torch >= 2.x starts with one bucket and re-cuts them after the first step; its
            # logging data says so only when it refreshed the sizes
            if found and data.get("has_rebuilt_buckets"):
                self.bucket_source = "ddp"
                return [int(s) for s in str(found).split(",") if s.strip()], self.plan.bucket_mb
            return bucket_plan(sizes, int(self.plan.bucket_mb * 2**20), 2**20), self.plan.bucket_mb
        if self.engine == "horovod":
            threshold = int(os.environ.get("HOROVOD_FUSION_THRESHOLD", str(128 * 2**20)))
            return bucket_plan(sizes, threshold), threshold / 2**20
        self.bucket_source = "mpi"
        return [sum(p.numel() * p.element_size() for p in b) for b in self._buckets], \
            self.plan.bucket_mb

    def allreduce_alone(self, buckets: list[int]) -> Callable[[], None]:
        """One step's gradient volume all-reduced in the bucket schedule, nothing else."""
        torch = self.torch
        bufs = [torch.ones(max(1, b // 4), dtype=torch.float32, device=self.device)
                for b in buckets]
        if self.engine == "ddp":
            import torch.distributed as dist

            def run() -> None:
                works = [dist.all_reduce(b, async_op=True) for b in bufs]
                for w in works:
                    w.wait()
                self._sync()
            return run
        if self.engine == "horovod":
            hvd = self.hvd

            def run_hvd() -> None:
                handles = [hvd.allreduce_async_(b, name=f"fabbench.alone.{i}")
                           for i, b in enumerate(bufs)]
                for h in handles:
                    hvd.synchronize(h)
                self._sync()
            return run_hvd
        MPI = self._mpi
        host = [b.to("cpu").numpy() for b in bufs]

        def run_mpi() -> None:
            for h in host:
                MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, h, MPI.SUM)
        return run_mpi


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


def _slowest(comm: Communicator, times: list[float]) -> list[float]:
    """Per step, the slowest rank's time."""
    every = comm.gather_objects(times)
    return [max(column) for column in zip(*every, strict=True)]


def run_train(comm: Communicator, plan: Plan, transport: str,
              arm: Callable[[float, str], None]) -> dict[str, Any]:
    """Train, measure, check; returns the train record (without run_id) on every rank."""
    spec = get_model(plan.model)
    trainer = Trainer(plan, comm)
    first = plan.timeout_s * 4  # the first steps allocate, and DDP builds its buckets
    # 1. compute only
    _timed(trainer.local_step, 1, arm, first, "compute-only warm-up step")
    _timed(trainer.local_step, max(0, plan.warmup_steps - 1), arm, plan.timeout_s,
           "compute-only warm-up step")
    compute = _slowest(comm, _timed(trainer.local_step, plan.steps, arm, plan.timeout_s,
                                    "compute-only step"))
    local_grads = digest([p.grad for p in trainer.params])
    # 2. the same state everywhere, then 3. data-parallel steps
    arm(first, "starting the data-parallel engine")
    trainer.go_distributed()
    _timed(trainer.step, 1, arm, first, "warm-up step")
    _timed(trainer.step, max(0, plan.warmup_steps - 1), arm, plan.timeout_s, "warm-up step")
    comm.barrier()
    with NetSampler(plan.iface) as net:
        full = _slowest(comm, _timed(trainer.step, plan.steps, arm, plan.timeout_s,
                                     "training step"))
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
    alone = _slowest(comm, _timed(alone_fn, max(3, min(plan.steps, 10)), arm, plan.timeout_s,
                                  "gradient all-reduce alone"))

    global_batch = plan.batch_size * comm.size
    rates = [global_batch / t for t in full]
    step_ms, compute_ms = p50(full) * 1e3, p50(compute) * 1e3
    grad_bytes = sum(trainer.grad_sizes())
    n = comm.size
    total = {"p50": p50(rates), "mean": statistics.fmean(rates), "ci95": ci95(rates)}
    efficiency = None
    if plan.baseline_samples_per_s:
        efficiency = total["p50"] / (n * plan.baseline_samples_per_s)
    return {
        "kind": "train", "model": plan.model, "parameters": sum(p.numel() for p in trainer.params),
        "reference_parameters": spec.reference_parameters, "family": spec.family,
        "input_size": plan.input_size, "batch_per_rank": plan.batch_size,
        "global_batch": global_batch, "ranks": n, "engine": trainer.engine,
        "primitive": plan.primitive, "horovod_over": plan.horovod_over, "transport": transport,
        "device": plan.device, "precision": plan.precision, "threads_per_rank": trainer.threads,
        "steps": plan.steps, "warmup_steps": plan.warmup_steps,
        "samples_per_s": total,
        "samples_per_s_per_rank": {k: v / n for k, v in total.items()},
        "step_ms": step_ms, "step_ms_mean": statistics.fmean(full) * 1e3,
        "compute_ms": compute_ms, "compute_ms_mean": statistics.fmean(compute) * 1e3,
        "comm_ms": step_ms - compute_ms,
        "comm_fraction": max(0.0, step_ms - compute_ms) / step_ms if step_ms > 0 else None,
        "allreduce_ms": p50(alone) * 1e3,
        "step_ms_samples": [round(t * 1e3, 4) for t in full],
        "compute_ms_samples": [round(t * 1e3, 4) for t in compute],
        "grad_bytes": grad_bytes,
        "wire_bytes_per_rank": int(2 * (n - 1) / n * grad_bytes),  # ring all-reduce
        "buckets": {"cap_mb": cap_mb, "count": len(buckets), "bytes": buckets,
                    "source": trainer.bucket_source},
        "net": net.summary(),
        "grads_identical": len(set(grads)) == 1,
        "grads_finite_nonzero": usable,
        "params_identical": len(set(weights)) == 1,
        "grads_differ_without_exchange": (len(set(without)) > 1) if n > 1 else None,
        "baseline_samples_per_s": plan.baseline_samples_per_s,
        "scaling_efficiency": efficiency,
    }


def line(rec: dict[str, Any]) -> str:
    eff = rec["scaling_efficiency"]
    return (f" {rec['model']:>12} {rec['ranks']:>5} {rec['batch_per_rank']:>6} "
            f"{rec['samples_per_s']['p50']:>12.2f} {rec['samples_per_s']['ci95']:>8.2f} "
            f"{rec['step_ms']:>10.2f} {rec['compute_ms']:>10.2f} {rec['comm_ms']:>9.2f} "
            f"{'-' if eff is None else f'{eff:.3f}':>6} "
            f"{'ok' if rec['grads_identical'] else 'DIFFER':>7}  "
            f"{rec['engine']}/{rec['transport']}")


HEADER = (f"#{'model':>12} {'ranks':>5} {'batch':>6} {'samples/s':>12} {'±ci95':>8} "
          f"{'step ms':>10} {'compute ms':>10} {'comm ms':>9} {'eff':>6} {'grads':>7}  engine")
