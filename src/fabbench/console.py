"""The console of every command (rich, at least 120 columns when piped), and what the
console, the report and the floors say of a world of one rank. A workload's streamed lines are
its package's (the collectives': fabbench.workloads.collectives.line)."""

from __future__ import annotations

from rich.console import Console

# what the console, the report and the floors say of a world of one rank, whose busbw is 0
NO_BUS = "one rank: nothing crosses a bus between ranks"
ONE_RANK = (f"{NO_BUS}, so no busbw (-); algbw is the call's own rate (an in-place operation may "
            "copy nothing)")


def console(stderr: bool = False) -> Console:
    # at least 120 columns when piped, so that tables are not squeezed into 80
    probe = Console(stderr=stderr)
    width = None if probe.is_terminal else max(probe.width, 120)
    return Console(stderr=stderr, highlight=False, width=width)
