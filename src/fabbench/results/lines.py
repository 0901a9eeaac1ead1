"""Each measurement record as the console shows it: the line a run streams as it measures, and
`fabbench report` prints again from the file (train and ceiling records here; a workload's own
beside it, named by its spec; collectives have the nccl-tests table of report/tables.py, pairs
theirs in workloads/pairs/line.py). A record is the typed record the writer wrote (a run,
as it measures) or the loader read (the report); a field a file does not have (None) shows as
"-"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from fabbench.results.records import Ceiling, Record, Times, Train

R = TypeVar("R", bound=Record, contravariant=True)

TRAIN_HEADER = (f"#{'model':>12} {'ranks':>5} {'batch':>6} {'samples/s':>12} {'±ci95':>8} "
                f"{'step ms':>10} {'compute ms':>10} {'comm ms':>9} {'eff':>6} {'grads':>7}  "
                "engine")


def figure_cell(value: float | Times | None, spec: str, width: int) -> str:
    """A figure as the table shows it (of times, the p50); "-" where a file (an older one) does
    not have it."""
    if isinstance(value, Times):
        value = value.p50
    return f"{'-' if value is None else format(value, spec):>{width}}"


def check_cell(value: bool | None, good: str, bad: str, width: int) -> str:
    return f"{'-' if value is None else good if value else bad:>{width}}"


def train(rec: Train) -> str:
    engine = "/".join(x for x in (rec.engine, rec.transport) if x) or "-"
    sps = rec.samples_per_s
    return (f" {rec.model:>12} {rec.ranks:>5} {rec.batch_per_rank:>6} "
            f"{sps['p50']:>12.2f} {figure_cell(sps.get('ci95'), '.2f', 8)} "
            f"{rec.step_ms:>10.2f} {figure_cell(rec.compute_ms, '.2f', 10)} "
            f"{rec.comm_ms:>9.2f} {figure_cell(rec.scaling_efficiency, '.3f', 6)} "
            f"{check_cell(rec.grads_identical, 'ok', 'DIFFER', 7)}  {engine}")


def ceiling(c: Ceiling) -> str:
    """One line for the console."""
    where = f"{c.client.host} <-> {c.server.host}"
    if c.error:
        return f"# ceiling {c.tool} {c.mode} {where}: not measured: {c.error}"
    rates = " + ".join(f"{d.gbit_s:.3f}" for d in c.directions)
    return f"# ceiling {c.tool} {c.mode} {where}: {rates} Gbit/s"


@dataclass(frozen=True)
class Lines(Generic[R]):
    """How a workload's records show on the console and in ``fabbench report``: a header line,
    then one line per record (a workload's spec names its Lines, fabbench.workload_spec)."""

    header: str
    line: Callable[[R], str]


TRAIN = Lines(TRAIN_HEADER, train)
