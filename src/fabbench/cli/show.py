"""Output sinks of the CLI: Rich for people, JSON for machines."""

from __future__ import annotations

import json
import os

from rich.markup import escape

from fabbench.console import console, results_table
from fabbench.fabrics.profile import available_profiles, read_profile
from fabbench.results.reader import read_results


def show_run(path: str) -> None:
    if not os.path.exists(path):
        return
    out = console()
    try:
        results = read_results(path)
    except Exception as exc:  # the run's own exit code already tells; say why no table
        out.print(f"[yellow]no table: {escape(str(exc))}[/]")
        return
    run = results.records[0]
    title = f"{run['fabric']} / {run['primitive']} / {run['ranks']} ranks"
    if results.of_kind("collective") or not (results.of_kind("train") or results.of_kind("halo")
                                             or results.of_kind("pairs")):
        out.print(results_table(results.of_kind("collective"), title))
    from fabbench.cli.train import halo_table, train_table

    if results.of_kind("train"):
        out.print(train_table(results.of_kind("train"), f"{run['fabric']} / {run['primitive']}"
                              " / training (samples/s of all ranks)"))
    if results.of_kind("halo"):
        out.print(halo_table(results.of_kind("halo"), f"{title} / halo exchange"))
    if results.of_kind("pairs"):
        from fabbench.report.pairs import analyse

        for text in analyse(results.of_kind("pairs")).text:
            out.print(escape(text), soft_wrap=True)
    summary = results.of_kind("summary")
    status = "[green]ok[/]" if summary and summary[-1]["ok"] else \
        f"[red]failed: {escape(summary[-1]['error'] if summary else 'no summary')}[/]"
    out.print(f"results: {path} ({status})")


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
