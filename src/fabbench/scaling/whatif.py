"""Is the network the bottleneck? Zhang et al. (NetAI 2020)'s what-if for data-parallel training
(docs/methods.md has the formulas).

Gradient buckets are all-reduced one after another as backward produces them; a bucket starts
when it is ready and the previous one is done. overhead = (when backward and communication are
both done) − (backward time); scaling = t_batch / (t_batch + overhead). Links are in bits/s.
Workers are nodes: ranks inside a node are taken to reduce among themselves at no cost, so the
node's link carries its gradients once."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fabbench.errors import UsageError
from fabbench.workloads.train.record import Train

FLUSH_S = 5e-3        # Zhang et al.: buckets flushed at 5 ms ...
FLUSH_BYTES = 64e6    # ... or 64 MB
# Their measured backward/iteration ratios are 0.51-0.57 (ResNet50 64.8/128.1 ms, ResNet101
# 106.4/192.0, VGG16-bn 111.6/194.5): used when a record does not say.
BACKWARD_FRACTION = 0.55

# Zhang et al.'s inputs (batch 32, 224², one V100): iteration s, gradient bytes, backward s.
ZHANG_INPUTS = {
    "resnet50": (0.1281, 102.2e6, 0.0648),
    "resnet101": (0.1920, 178.2e6, 0.1064),
    "vgg16": (0.1945, 553.5e6, 0.1116),
}


@dataclass(frozen=True, kw_only=True)
class Bucket:
    nbytes: float
    ready_s: float  # since the start of backward


@dataclass(frozen=True, kw_only=True)
class TrainProfile:
    """One worker's step, as the what-if needs it."""

    model: str
    iteration_s: float
    backward_s: float
    buckets: tuple[Bucket, ...]
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.iteration_s > 0:
            raise UsageError(f"{self.model}: iteration time must be > 0, not {self.iteration_s}")
        if not 0 < self.backward_s <= self.iteration_s:
            raise UsageError(f"{self.model}: backward time {self.backward_s} s must be > 0 and "
                             f"at most the iteration's {self.iteration_s} s")
        if not self.buckets:
            raise UsageError(f"{self.model}: no gradient buckets")

    @property
    def grad_bytes(self) -> float:
        return sum(b.nbytes for b in self.buckets)


@dataclass(frozen=True, kw_only=True)
class Prediction:
    nodes: int
    bandwidth_bytes_per_s: float
    compression: float
    comm_s: float       # the buckets' communication, summed
    overhead_s: float   # exposed: after backward ends
    scaling: float

    @property
    def bandwidth_gbit_s(self) -> float:
        return self.bandwidth_bytes_per_s * 8 / 1e9

    @property
    def comm_ms(self) -> float:
        return self.comm_s * 1e3

    @property
    def overhead_ms(self) -> float:
        return self.overhead_s * 1e3

    def to_json(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "bandwidth_gbit_s": self.bandwidth_gbit_s,
                "compression": self.compression, "comm_ms": self.comm_ms,
                "overhead_ms": self.overhead_ms, "scaling": self.scaling}


def flushed_buckets(grad_bytes: float, backward_s: float, flush_s: float = FLUSH_S,
                    flush_bytes: float = FLUSH_BYTES) -> list[Bucket]:
    """Buckets as Zhang et al.'s fusion cuts them, gradients produced at a uniform rate over
    backward: flushed every ``flush_s`` or ``flush_bytes``, whichever comes first."""
    rate = grad_bytes / backward_s
    step = min(flush_s, flush_bytes / rate)
    # counted, not stepped until the end: a step far below backward_s would add nothing to it
    count = max(1, math.ceil(backward_s / step * (1 - 1e-12)))
    ends = [min((i + 1) * step, backward_s) for i in range(count - 1)] + [backward_s]
    return [Bucket(nbytes=(end - start) * rate, ready_s=end)
            for start, end in zip([0.0, *ends[:-1]], ends, strict=True)]


def spread_ready(bucket_bytes: list[float], backward_s: float) -> list[Bucket]:
    """Ready times for buckets in exchange order, gradient bytes produced at a uniform rate over
    backward: a bucket is ready when backward has produced all bytes up to its end."""
    total = float(sum(bucket_bytes))
    out, done = [], 0.0
    for nbytes in bucket_bytes:
        done += nbytes
        out.append(Bucket(nbytes=float(nbytes), ready_s=backward_s * done / total))
    return out


def reference_profile(model: str) -> TrainProfile:
    """Zhang et al.'s measured inputs for resnet50, resnet101 or vgg16, bucketed as they did."""
    if model not in ZHANG_INPUTS:
        raise UsageError(f"no reference inputs for {model!r} (known: {', '.join(ZHANG_INPUTS)})")
    iteration, grads, backward = ZHANG_INPUTS[model]
    return TrainProfile(model=model, iteration_s=iteration, backward_s=backward,
                        buckets=tuple(flushed_buckets(grads, backward)),
                        notes=("Zhang et al.'s inputs (one V100, batch 32)",))


def profile_from_record(rec: Train, backward_fraction: float | None = None
                        ) -> TrainProfile:
    """A `train` record as a profile; what it lacks is assumed, and said in ``notes``. A
    measured backward time (``backward_ms``) and per-bucket ready times (``buckets.ready_ms``)
    are used when a record carries them: this fabbench does not write them, so a
    ``backward_ms`` is read from the fields a newer writer added (``rec.extra``)."""
    notes = []
    if rec.compute_ms:
        iteration = rec.compute_ms / 1e3
    else:
        iteration = (rec.step_ms - max(0.0, rec.comm_ms)) / 1e3
        notes.append("no compute-only time in the record: step − comm used")
    measured_backward = rec.extra.get("backward_ms")
    if measured_backward and backward_fraction is None:
        backward = measured_backward / 1e3
    else:
        fraction = BACKWARD_FRACTION if backward_fraction is None else backward_fraction
        if not 0 < fraction <= 1:
            raise UsageError(f"backward fraction must be in (0, 1], not {fraction}")
        backward = fraction * iteration
        notes.append(f"backward time taken as {fraction:.2f} of the compute step "
                     f"(Zhang et al. measured 0.51-0.57)")
    grad_bytes = rec.grad_bytes or 4 * rec.parameters
    if not rec.grad_bytes:
        notes.append("no gradient bytes in the record: 4 B (fp32) per parameter")
    sizes: list[float] = [b for b in rec.buckets.bytes if b > 0] if rec.buckets else []
    # per-bucket ready times: no field of this version (a newer writer's, kept as read)
    ready = rec.buckets.extra.get("ready_ms") if rec.buckets else None
    if sizes and ready and len(ready) == len(sizes):
        buckets = [Bucket(nbytes=float(s), ready_s=r / 1e3) for s, r in zip(sizes, ready,
                                                                              strict=True)]
    elif sizes:
        buckets = spread_ready(sizes, backward)
        notes.append(f"{len(sizes)} buckets from the record; no per-bucket ready times: "
                     "spread uniformly (by bytes) over the backward time")
    else:
        buckets = flushed_buckets(grad_bytes, backward)
        notes.append(f"no bucket schedule in the record: {len(buckets)} buckets flushed every "
                     f"{FLUSH_S * 1e3:g} ms or {FLUSH_BYTES / 1e6:g} MB over a uniform backward")
    if grad_bytes < 1:
        raise UsageError(f"{rec.model}: no gradient bytes")
    return TrainProfile(model=rec.model, iteration_s=iteration, backward_s=backward,
                        buckets=tuple(buckets), notes=tuple(notes))


def bucket_comm_s(nbytes: float, nodes: int, bandwidth_bytes_per_s: float,
                  compression: float = 1.0, add_s_per_byte: float = 0.0,
                  alpha_s: float = 0.0) -> float:
    """Reduce-scatter + all-gather of one bucket (Zhang et al.'s two formulas)."""
    if nodes < 1:
        raise UsageError(f"nodes must be >= 1, not {nodes}")
    if nodes == 1:
        return 0.0
    if not compression >= 1:
        raise UsageError(f"compression ratio must be >= 1, not {compression}")
    n = nodes
    wire = nbytes * (n - 1) / n / bandwidth_bytes_per_s / compression
    reduce_scatter = wire + (n - 1) * add_s_per_byte * nbytes / n + (n - 1) * alpha_s
    all_gather = wire + (n - 1) * alpha_s
    return reduce_scatter + all_gather


def predict(profile: TrainProfile, nodes: int, bandwidth_bytes_per_s: float,
            compression: float = 1.0, add_s_per_byte: float = 0.0,
            alpha_s: float = 0.0) -> Prediction:
    """The step's exposed communication and the scaling factor at ``nodes`` workers."""
    end = 0.0
    total = 0.0
    for b in sorted(profile.buckets, key=lambda b: b.ready_s):
        t = bucket_comm_s(b.nbytes, nodes, bandwidth_bytes_per_s, compression, add_s_per_byte,
                          alpha_s)
        total += t
        end = max(end, b.ready_s) + t
    overhead = max(0.0, end - profile.backward_s)
    return Prediction(nodes=nodes, bandwidth_bytes_per_s=bandwidth_bytes_per_s,
                      compression=compression, comm_s=total, overhead_s=overhead,
                      scaling=profile.iteration_s / (profile.iteration_s + overhead))
