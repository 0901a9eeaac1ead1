"""The collectives' console: the run's header and a point's nccl-tests-style line, as the run
measures (and as ``fabbench report`` and the floors say of a world of one rank,
fabbench.console.ONE_RANK)."""

from __future__ import annotations

from fabbench.console import ONE_RANK
from fabbench.results.records import Run
from fabbench.workloads.collectives.record import Collective

__all__ = ["HEADER", "UNITS", "header", "line"]

HEADER = (f"#{'op':>15} {'size':>10} {'count':>11} {'type':>9} {'p50 us':>11} {'algbw':>8} "
          f"{'busbw':>8} {'#wrong':>7}  transport")
UNITS = (f"#{'':>15} {'(B)':>10} {'(elements)':>11} {'':>9} {'':>11} {'(GB/s)':>8} "
         f"{'(GB/s)':>8} {'':>7}")


def line(rec: Collective) -> str:
    wrong = "N/A" if rec.wrong is None else str(rec.wrong)
    busbw = "-" if rec.ranks == 1 else f"{rec.busbw_gbyte_s:.3f}"
    return (f" {rec.op:>15} {rec.bytes:>10} {rec.count:>11} {rec.dtype:>9} "
            f"{rec.time_us.p50:>11.2f} {rec.algbw_gbyte_s:>8.3f} {busbw:>8} "
            f"{wrong:>7}  {rec.transport}")


def header(run: Run) -> str:
    """The run's header: what ran where (GPUDirect's outcome on a GPU, a note for a world of one
    rank), then the table's heading and units, shown once before the first point."""
    text = [f"# fabbench {run.run_id}: fabric {run.fabric} (wire {run.wire}), "
            f"primitive {run.primitive}, {run.ranks} ranks on {run.nodes} node(s)"]
    gdr = run.gpudirect
    if run.device == "cuda" and gdr:
        got = gdr.obtained or "not reported"
        text.append(f"# GPUDirect RDMA: asked {gdr.requested}, got {got} ({gdr.evidence}); "
                    f"timing: {run.timing_method}")
    if run.ranks == 1:
        text.append(f"# {ONE_RANK}")
    return "\n".join([*text, HEADER, UNITS])
