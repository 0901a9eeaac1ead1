"""The halo exchange as a workload: what it declares (its options, record, metric and floors),
its rule against the decided plan, a study cell's row and the acceptance floors' figures. The
exchange itself (torch, the communicator) is halo.exchange, imported by ``run`` only."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from fabbench.comm import primitives
from fabbench.errors import UsageError
from fabbench.workload_base import Workload, register
from fabbench.workload_spec import FloorFigures, StudyMetric, StudyRow, WorkloadFloors
from fabbench.workloads.halo.line import HEADER
from fabbench.workloads.halo.line import line as line_of
from fabbench.workloads.halo.record import Halo
from fabbench.workloads.halo.section import HaloConfig

if TYPE_CHECKING:
    from fabbench.plan import Plan
    from fabbench.results.records import Run
    from fabbench.workloads.interface import RankContext


@register
class HaloWorkload(Workload[Halo]):
    """One record per run: the iteration time and exchange bandwidth of the slowest rank."""

    name = "halo"
    summary = "a 3-D stencil's halo exchange"
    record = "halo"
    section = HaloConfig
    metric = StudyMetric(name="iteration time", unit="µs", value="time_us.p50",
                         throughput="exchange GB/s", throughput_short="GB/s")
    floors = WorkloadFloors(metrics=("time", "bw"), baseline="time", rule_op=False,
                            rule_size=True)

    def run(self, ctx: RankContext) -> Iterator[Halo]:
        from fabbench.workloads.halo.exchange import run_halo  # torch: on a rank that runs it

        yield run_halo(ctx.comm, ctx.plan, ctx.transport, ctx.arm)

    def header(self, run: Run) -> str:
        return HEADER

    def line(self, record: Halo) -> str:
        return line_of(record)

    def check(self, plan: Plan) -> None:
        """The exchange shifts through the communicator (Horovod's through its MPI): a library
        that sends host memory only cannot shift device buffers."""
        if plan.device != "cpu" and "sendrecv" in primitives.get(plan.primitive).host_only_ops:
            raise UsageError(f"--workload halo exchanges point to point, which "
                             f"{plan.primitive} cannot do with {plan.device} buffers: use "
                             "--primitive mpi or nccl, or --device cpu")

    def study(self, records: Sequence[Halo]) -> StudyRow | None:
        """The cell's last record: its iteration time over the iterations it kept, and the
        share of it the exchange took."""
        if not records:
            return None
        rec = records[-1]
        t = rec.time_us.p50
        ex = rec.exchange_us.p50 if rec.exchange_us else None
        return StudyRow(median=t, samples=list(rec.samples_us or []),
                        throughput=rec.exchange_gbyte_s,
                        comm_share=(ex / t) if ex is not None and t > 0 else None,
                        transport=rec.transport or "?")

    def floor_points(self, records: Sequence[Halo]) -> Iterator[FloorFigures]:
        """Each record's iteration time and exchange bandwidth."""
        for h in records:
            metrics = {"time": h.time_us.p50}
            if h.exchange_gbyte_s is not None:
                metrics["bw"] = h.exchange_gbyte_s
            yield FloorFigures(metrics=metrics, bytes=h.bytes_per_iter, dtype=h.dtype,
                               transport=h.transport, ranks=h.ranks,
                               evidence=f"p50 of {h.iterations or '?'} iterations")
