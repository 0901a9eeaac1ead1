"""`fabbench models`, and the tables of train and halo records (used by `fabbench run`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import typer
from rich.table import Table

from fabbench.cli.options import Json


def register(app: typer.Typer) -> None:
    @app.command()
    def models(json_out: Json = False) -> None:
        """List the models of --workload train with their parameter counts.

        Example: [bold]fabbench models[/]
        """
        from fabbench.console import console
        from fabbench.models import MODELS, parameter_count

        rows = [{"name": s.name, "family": s.family, "parameters": parameter_count(s.name),
                 "reference_parameters": s.reference_parameters,
                 "default_input": s.default_input, "description": s.description}
                for s in MODELS.values()]
        if json_out:
            print(json.dumps(rows, indent=2))
            return
        table = Table(title="models (--workload train --model NAME)", title_justify="left")
        for name, justify in (("name", "left"), ("input", "left"), ("parameters", "right"),
                              ("reference", "right"), ("", "left")):
            table.add_column(name, justify=justify)
        for r in rows:
            ref = r["reference_parameters"]
            what = f"{r['default_input']}² images" if r["family"] == "image" \
                else f"{r['default_input']} tokens"
            table.add_row(r["name"], what, f"{r['parameters']:,}",
                          "-" if ref is None else f"{ref:,}", r["description"])
        console().print(table)


def train_table(records: Iterable[dict[str, Any]], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for name in ("model", "ranks", "batch/rank", "samples/s", "±ci95", "per rank", "step ms",
                 "compute ms", "comm ms", "efficiency", "grads", "engine"):
        table.add_column(name, justify="left" if name in ("model", "engine") else "right")
    for r in records:
        eff = r.get("scaling_efficiency")
        table.add_row(r["model"], str(r["ranks"]), str(r["batch_per_rank"]),
                      f"{r['samples_per_s']['p50']:.2f}", f"{r['samples_per_s']['ci95']:.2f}",
                      f"{r['samples_per_s']['p50'] / r['ranks']:.2f}", f"{r['step_ms']:.1f}",
                      f"{r.get('compute_ms', 0.0):.1f}", f"{r['comm_ms']:.1f}",
                      "-" if eff is None else f"{eff:.3f}",
                      "[green]equal[/]" if r.get("grads_identical") else "[red]differ[/]",
                      f"{r.get('engine', '?')}/{r.get('transport', '?')}")
    return table


def halo_table(records: Iterable[dict[str, Any]], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for name in ("cells/rank", "grid", "ranks", "p50 µs/iter", "exchange µs", "bytes/iter",
                 "GB/s", "check"):
        table.add_column(name, justify="right")
    for r in records:
        table.add_row(str(r["cells_per_rank"]), "x".join(map(str, r.get("grid", []))),
                      str(r["ranks"]), f"{r['time_us']['p50']:.1f}",
                      f"{r.get('exchange_us', {}).get('p50', 0.0):.1f}", str(r["bytes_per_iter"]),
                      f"{r.get('exchange_gbps', 0.0):.3f}",
                      "[green]ok[/]" if r.get("correct") else "[red]wrong[/]")
    return table
