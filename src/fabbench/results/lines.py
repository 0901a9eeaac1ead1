"""Each measurement record as the console shows it: the line a run streams as it measures, and
`fabbench report` prints again from the file (ceiling records here; a workload's own beside it,
shown by its class's ``line``: train's in workloads/train/line.py; collectives have the nccl-tests
table of report/tables.py, pairs theirs in workloads/pairs/line.py). A record is the typed
record the writer wrote (a run, as it measures) or the loader read (the report); a field a file
does not have (None) shows as "-"."""

from __future__ import annotations

from fabbench.results.records import Ceiling, Times


def figure_cell(value: float | Times | None, spec: str, width: int) -> str:
    """A figure as the table shows it (of times, the p50); "-" where a file (an older one) does
    not have it."""
    if isinstance(value, Times):
        value = value.p50
    return f"{'-' if value is None else format(value, spec):>{width}}"


def check_cell(value: bool | None, good: str, bad: str, width: int) -> str:
    return f"{'-' if value is None else good if value else bad:>{width}}"


def ceiling(c: Ceiling) -> str:
    """One line for the console."""
    where = f"{c.client.host} <-> {c.server.host}"
    if c.error:
        return f"# ceiling {c.tool} {c.mode} {where}: not measured: {c.error}"
    rates = " + ".join(f"{d.gbit_s:.3f}" for d in c.directions)
    return f"# ceiling {c.tool} {c.mode} {where}: {rates} Gbit/s"

