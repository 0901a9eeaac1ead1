"""Output sinks of the CLI: Rich for people, JSON for machines."""

from __future__ import annotations

import json
import os

from rich.markup import escape

from fabbench import catalog
from fabbench.console import console
from fabbench.errors import FabbenchError
from fabbench.fabrics.profile import available_profiles, read_profile
from fabbench.results.reader import read_results
from fabbench.results.records import Summary

MEASUREMENTS = catalog.RECORDS  # record kinds counted after a run


def show_run(path: str) -> None:
    """After a launched run: where its results are and whether it finished. The results table
    itself was streamed line by line as each point was measured (and is not printed twice);
    `fabbench report` tables and plots a results file again."""
    if not os.path.exists(path):
        return
    out = console()
    try:
        results = read_results(path)
    except (FabbenchError, OSError) as exc:  # the run's exit code tells; say why no summary
        out.print(f"[yellow]results: {escape(path)} cannot be read: {escape(str(exc))}[/]")
        return
    for found in catalog.findings(results.of_kind).values():  # over all records (streamed)
        for text in found.text if found else ():
            out.print(escape(text), soft_wrap=True)
    measured = ", ".join(f"{len(results.of_kind(kind))} {kind}" for kind in MEASUREMENTS
                         if results.of_kind(kind))
    summary = results.of_kind(Summary)
    status = "[green]ok[/]" if summary and summary[-1].ok else \
        f"[red]failed: {escape(str(summary[-1].error) if summary else 'no summary')}[/]"
    out.print(f"results: {escape(path)} ({status}; {measured or 'no measurements'})")


def show_fabrics(json_out: bool) -> None:
    rows = []
    for name, path in sorted(available_profiles().items()):
        p = read_profile(path)
        rows.append({"name": name, "hardware": p.hardware, "wires": ["native", *p.wires],
                     "primitives": sorted(p.primitives), "source": str(path),
                     "description": p.description})
    if json_out:
        print(json.dumps(rows, indent=2))
        return
    out = console()
    for r in rows:
        out.print(f"[bold]{r['name']:<12}[/] {r['description']}  "
                  f"(wires: {', '.join(r['wires'])}; {r['source']})")
