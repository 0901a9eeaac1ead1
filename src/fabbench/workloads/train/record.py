"""The train workload's record: the results contract's ``train`` kind (its fields are
schema.json's ``$defs/train``, the published contract; a unit test compares the two) with its
gradient buckets and interface counters, and the record made from what one training run
measured. Registered when the workload's package is loaded, as fabbench.catalog loads it."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fabbench.networks import get as get_model
from fabbench.results.records import OMITTED, Nested, Record, kind
from fabbench.workloads.train import section

if TYPE_CHECKING:
    from fabbench.plan import Plan

__all__ = ["Buckets", "Net", "Train", "train_record"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Buckets(Nested):
    """The gradient buckets a training step all-reduces (workloads/train): the cap, how many,
    each one's bytes, and where their sizes come from."""

    cap_mb: float | None
    count: int
    bytes: Sequence[int]
    source: str | None = dataclasses.field(default=None, metadata=OMITTED)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Net(Nested):
    """The interface counters sampled while a training run stepped (workloads/train/
    netsampler.py); the schema requires none of them."""

    iface: str | None
    interval_s: float | None
    samples: int | None
    seconds: float | None
    tx_bytes: int | None
    rx_bytes: int | None
    tx_gbit_s: float | None
    rx_gbit_s: float | None
    peak_gbit_s: float | None
    link_gbit_s: float | None
    utilization: float | None
    peak_utilization: float | None


@kind("train")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Train(Record):
    """A data-parallel training measurement (one rank count)."""

    model: str
    parameters: int
    reference_parameters: int | None
    family: str | None
    input_size: int | None
    batch_per_rank: int
    global_batch: int | None
    ranks: int
    engine: str | None
    primitive: str | None
    horovod_over: str | None
    transport: str | None
    device: str | None
    precision: str | None
    threads_per_rank: int | None
    steps: int | None
    warmup_steps: int | None
    samples_per_s: Mapping[str, float]           # p50, mean, ci95 (all ranks)
    samples_per_s_per_rank: Mapping[str, float] | None
    step_ms: float
    step_ms_mean: float | None
    compute_ms: float | None
    compute_ms_mean: float | None
    comm_ms: float
    comm_fraction: float | None
    allreduce_ms: float | None
    step_ms_samples: Sequence[float] | None
    compute_ms_samples: Sequence[float] | None
    grad_bytes: int | None
    wire_bytes_per_rank: int | None
    buckets: Buckets | None
    net: Net | None  # interface counters: tx/rx/peak/link in _gbit_s
    grads_identical: bool | None
    grads_finite_nonzero: bool | None
    params_identical: bool | None
    grads_differ_without_exchange: bool | None
    baseline_samples_per_s: float | None
    scaling_efficiency: float | None


def ci95(values: list[float]) -> float:
    """Half-width of the normal-approximation 95% confidence interval of the mean."""
    if len(values) < 2:
        return 0.0
    return 1.96 * statistics.stdev(values) / math.sqrt(len(values))


def p50(values: list[float]) -> float:
    return statistics.median(values)


def train_record(plan: Plan, *, baseline_samples_per_s: float | None, ranks: int, engine: str,
                 transport: str, parameters: int, threads: int, grad_bytes: int,
                 full: list[float], compute: list[float], alone: list[float],
                 buckets: list[int], cap_mb: float, bucket_source: str,
                 net: dict[str, Any], grads: list[str], usable: bool, weights: list[str],
                 without: list[str]) -> Train:
    """The record from the measured step times (the slowest rank's, seconds),
    the bucket schedule, the interface summary and every rank's digests; its scaling
    efficiency against ``baseline_samples_per_s`` (a 1-rank run's) when given."""
    train = section.of(plan)
    spec = get_model(train.model)
    n = ranks
    global_batch = train.batch_size * n
    rates = [global_batch / t for t in full]
    step_ms, compute_ms = p50(full) * 1e3, p50(compute) * 1e3
    total = {"p50": p50(rates), "mean": statistics.fmean(rates), "ci95": ci95(rates)}
    efficiency = None
    if baseline_samples_per_s:
        efficiency = total["p50"] / (n * baseline_samples_per_s)
    return Train(
        run_id=plan.run_id, model=train.model, parameters=parameters,
        reference_parameters=spec.reference_parameters, family=spec.family,
        input_size=train.input_size, batch_per_rank=train.batch_size,
        global_batch=global_batch, ranks=n, engine=engine,
        primitive=plan.primitive, horovod_over=plan.horovod_over, transport=transport,
        device=plan.device, precision=train.precision, threads_per_rank=threads,
        steps=train.steps, warmup_steps=train.warmup_steps,
        samples_per_s=total,
        samples_per_s_per_rank={k: v / n for k, v in total.items()},
        step_ms=step_ms, step_ms_mean=statistics.fmean(full) * 1e3,
        compute_ms=compute_ms, compute_ms_mean=statistics.fmean(compute) * 1e3,
        comm_ms=step_ms - compute_ms,
        comm_fraction=max(0.0, step_ms - compute_ms) / step_ms if step_ms > 0 else None,
        allreduce_ms=p50(alone) * 1e3,
        step_ms_samples=[round(t * 1e3, 4) for t in full],
        compute_ms_samples=[round(t * 1e3, 4) for t in compute],
        grad_bytes=grad_bytes,
        wire_bytes_per_rank=int(2 * (n - 1) / n * grad_bytes),  # ring all-reduce
        buckets=Buckets(cap_mb=cap_mb, count=len(buckets), bytes=buckets,
                                source=bucket_source),
        net=Net.of(net),
        grads_identical=len(set(grads)) == 1,
        grads_finite_nonzero=usable,
        params_identical=len(set(weights)) == 1,
        grads_differ_without_exchange=(len(set(without)) > 1) if n > 1 else None,
        baseline_samples_per_s=baseline_samples_per_s,
        scaling_efficiency=efficiency)
