"""The train record as the console shows it, as the run measures and in `fabbench report`."""

from __future__ import annotations

from fabbench.results.lines import check_cell, figure_cell
from fabbench.workloads.train.record import Train

__all__ = ["HEADER", "line"]

HEADER = (f"#{'model':>12} {'ranks':>5} {'batch':>6} {'samples/s':>12} {'±ci95':>8} "
          f"{'step ms':>10} {'compute ms':>10} {'comm ms':>9} {'eff':>6} {'grads':>7}  "
          "engine")


def line(rec: Train) -> str:
    engine = "/".join(x for x in (rec.engine, rec.transport) if x) or "-"
    sps = rec.samples_per_s
    return (f" {rec.model:>12} {rec.ranks:>5} {rec.batch_per_rank:>6} "
            f"{sps['p50']:>12.2f} {figure_cell(sps.get('ci95'), '.2f', 8)} "
            f"{rec.step_ms:>10.2f} {figure_cell(rec.compute_ms, '.2f', 10)} "
            f"{rec.comm_ms:>9.2f} {figure_cell(rec.scaling_efficiency, '.3f', 6)} "
            f"{check_cell(rec.grads_identical, 'ok', 'DIFFER', 7)}  {engine}")

