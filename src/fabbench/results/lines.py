"""Each measurement record as the console shows it: the line a run streams as it measures, and
`fabbench report` prints again from the file (train, halo and ceiling records; collectives have
the nccl-tests table of report/tables.py, pairs theirs in workloads/pairs.py). A record is the
typed record the writer wrote (a run, as it measures) or the loader read (the report); a field a
file does not have (None) shows as "-"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from fabbench.results.records import Ceiling, Halo, Record, Times, Train

R = TypeVar("R", bound=Record, contravariant=True)

TRAIN_HEADER = (f"#{'model':>12} {'ranks':>5} {'batch':>6} {'samples/s':>12} {'±ci95':>8} "
                f"{'step ms':>10} {'compute ms':>10} {'comm ms':>9} {'eff':>6} {'grads':>7}  "
                "engine")


def _num(value: float | Times | None, spec: str, width: int) -> str:
    """A figure as the table shows it (of times, the p50); "-" where a file (an older one) does
    not have it."""
    if isinstance(value, Times):
        value = value.p50
    return f"{'-' if value is None else format(value, spec):>{width}}"


def _check(value: bool | None, good: str, bad: str, width: int) -> str:
    return f"{'-' if value is None else good if value else bad:>{width}}"


def train(rec: Train) -> str:
    engine = "/".join(x for x in (rec.engine, rec.transport) if x) or "-"
    sps = rec.samples_per_s
    return (f" {rec.model:>12} {rec.ranks:>5} {rec.batch_per_rank:>6} "
            f"{sps['p50']:>12.2f} {_num(sps.get('ci95'), '.2f', 8)} "
            f"{rec.step_ms:>10.2f} {_num(rec.compute_ms, '.2f', 10)} "
            f"{rec.comm_ms:>9.2f} {_num(rec.scaling_efficiency, '.3f', 6)} "
            f"{_check(rec.grads_identical, 'ok', 'DIFFER', 7)}  {engine}")


HALO_HEADER = (f"#{'cells/rank':>12} {'grid':>9} {'ranks':>5} {'iter us':>11} {'exch us':>11} "
               f"{'bytes/iter':>11} {'GB/s':>8} {'check':>6}  transport")


def halo(rec: Halo) -> str:
    grid = "x".join(str(d) for d in rec.grid or ()) or "-"
    transport = rec.transport
    return (f" {rec.cells_per_rank:>12} {grid:>9} {rec.ranks:>5} "
            f"{rec.time_us.p50:>11.2f} {_num(rec.exchange_us, '.2f', 11)} "
            f"{rec.bytes_per_iter:>11} {_num(rec.exchange_gbyte_s, '.3f', 8)} "
            f"{_check(rec.correct, 'ok', 'WRONG', 6)}  "
            f"{'-' if transport is None else transport}")


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
HALO = Lines(HALO_HEADER, halo)
