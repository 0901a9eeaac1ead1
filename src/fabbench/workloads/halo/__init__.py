"""The halo exchange workload, declared in one place: its options, its rule against the decided
plan, the figures the acceptance floors and a study's report take from its records, and its
spec, which fabbench.catalog registers by this module's name. The exchange itself (torch, the
communicator) is halo.exchange, imported only when a rank runs it (the spec's ``entry``); its
console line is halo.console_line; its record, the results contract's ``halo`` kind, is
halo.halo_record, registered by loading this module."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from fabbench.comm import primitives
from fabbench.errors import UsageError
from fabbench.option_fields import INT, at_least, option, validate
from fabbench.workload_spec import FloorFigures, StudyMetric, StudyRow, WorkloadFloors, WorkloadSpec
from fabbench.workloads.halo.grid import bytes_per_iter, process_grid, side_of
from fabbench.workloads.halo.halo_record import Halo

__all__ = ["SPEC", "HaloConfig", "bytes_per_iter", "process_grid", "side_of"]


@dataclass(frozen=True, kw_only=True)
class HaloConfig:
    """``--workload halo``: a 3-D stencil's halo exchange."""

    cells_per_rank: int = option(64**3, INT, "--cells-per-rank", "Cells per rank (a "
                                 "cube).", check=at_least(8, "cells per rank (2 x 2 x 2)"))
    halo_iters: int = option(50, INT, "--halo-iters", "Timed iterations.",
                             check=at_least(1, "halo iterations"))

    def __post_init__(self) -> None:
        validate(self)


def check(plan: Any) -> None:
    """The exchange shifts through the communicator (Horovod's through its MPI): a library
    that sends host memory only cannot shift device buffers."""
    if plan.device != "cpu" and "sendrecv" in primitives.get(plan.primitive).host_only_ops:
        raise UsageError(f"--workload halo exchanges point to point, which {plan.primitive} "
                         f"cannot do with {plan.device} buffers: use --primitive mpi or "
                         "nccl, or --device cpu")


def floor_figures(records: Sequence[Halo]) -> Iterator[FloorFigures]:
    """Each record's iteration time and exchange bandwidth."""
    for h in records:
        metrics = {"time": h.time_us.p50}
        if h.exchange_gbyte_s is not None:
            metrics["bw"] = h.exchange_gbyte_s
        yield FloorFigures(metrics=metrics, bytes=h.bytes_per_iter, dtype=h.dtype,
                           transport=h.transport, ranks=h.ranks,
                           evidence=f"p50 of {h.iterations or '?'} iterations")


def study_row(records: Sequence[Halo]) -> StudyRow | None:
    """The cell's last record: its iteration time over the iterations it kept, and the share
    of it the exchange took."""
    if not records:
        return None
    rec = records[-1]
    t = rec.time_us.p50
    ex = rec.exchange_us.p50 if rec.exchange_us else None
    return StudyRow(median=t, samples=list(rec.samples_us or []),
                    throughput=rec.exchange_gbyte_s,
                    comm_share=(ex / t) if ex is not None and t > 0 else None,
                    transport=rec.transport or "?")


SPEC = WorkloadSpec(
    name="halo", summary="a 3-D stencil's halo exchange",
    entry="fabbench.workloads.halo.exchange:WORKLOAD", record="halo", section=HaloConfig,
    lines="fabbench.workloads.halo.console_line:LINES",
    metric=StudyMetric(name="iteration time", unit="µs", value="time_us.p50",
                       throughput="exchange GB/s", throughput_short="GB/s"),
    check=check, study=study_row,
    floors=WorkloadFloors(metrics=("time", "bw"), baseline="time", rule_op=False, rule_size=True,
                          points=floor_figures))
