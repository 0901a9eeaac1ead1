"""The halo exchange's record as the console shows it, as the run measures and in `fabbench
report`."""

from __future__ import annotations

from fabbench.results.lines import check_cell, figure_cell
from fabbench.workloads.halo.record import Halo

HEADER = (f"#{'cells/rank':>12} {'grid':>9} {'ranks':>5} {'iter us':>11} {'exch us':>11} "
          f"{'bytes/iter':>11} {'GB/s':>8} {'check':>6}  transport")


def line(rec: Halo) -> str:
    grid = "x".join(str(d) for d in rec.grid or ()) or "-"
    transport = rec.transport
    return (f" {rec.cells_per_rank:>12} {grid:>9} {rec.ranks:>5} "
            f"{rec.time_us.p50:>11.2f} {figure_cell(rec.exchange_us, '.2f', 11)} "
            f"{rec.bytes_per_iter:>11} {figure_cell(rec.exchange_gbyte_s, '.3f', 8)} "
            f"{check_cell(rec.correct, 'ok', 'WRONG', 6)}  "
            f"{'-' if transport is None else transport}")
