"""`fabbench report` and `fabbench compare`: read results files, write tables, plots, HTML, CSV."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from fabbench.cli.options import Json

Paths = Annotated[list[Path], typer.Argument(
    help="Results files (JSON Lines) or directories holding them.", show_default=False)]
Html = Annotated[Path | None, typer.Option("--html", help="Write one self-contained HTML file.")]
Plots = Annotated[Path | None, typer.Option(
    "--plots", help="Write the figures (PNG and SVG) into this directory.")]
Csv = Annotated[Path | None, typer.Option("--csv", help="Write the rows as CSV.")]
Title = Annotated[str | None, typer.Option(help="Title of the HTML page.")]


def _warn(warnings: list[str]) -> None:
    from fabbench.console import console

    err = console(stderr=True)
    for w in warnings:
        err.print(f"[yellow]warning:[/] {w}", soft_wrap=True)


def _written(paths: list[Path]) -> None:
    for p in paths:
        print(f"wrote {p}")


def report(paths: Paths, html: Html = None, plots: Plots = None, csv: Csv = None,
           title: Title = None, json_out: Json = False) -> None:
    """Tables in the nccl-tests layout, busbw against the link, which node is slow (pairs)
    and which rank arrives late, plots, HTML and CSV.

    Example: [bold]fabbench report results/ --html report.html --plots figs/ --csv all.csv[/]
    """
    from fabbench.report.build import findings_json, make_report
    from fabbench.report.tables import collective_rows, train_rows

    out = make_report(paths, html=html, plots_dir=plots, csv=csv, title=title)
    if json_out:
        print(json.dumps({"collectives": collective_rows(out.series),
                          "train": train_rows(out.series),
                          "findings": findings_json(out.series), "warnings": out.warnings,
                          "written": [str(p) for p in out.written]}, indent=1))
        return
    print(out.text, end="")
    _warn(out.warnings)
    _written(out.written)


def compare(paths: Paths, html: Html = None, plots: Plots = None, csv: Csv = None,
            title: Title = None, json_out: Json = False) -> None:
    """A against B (and C ...): per op and size the time ratio, its 95% CI and whether the
    difference is real; training side by side; the provenance that differs.

    Example: [bold]fabbench compare siteA.jsonl siteB.jsonl --html compare.html[/]
    """
    from fabbench.console import console
    from fabbench.report.build import compare_rows, make_compare
    from fabbench.report.text import compare_tables, verdict_summary

    out = make_compare(paths, html=html, plots_dir=plots, csv=csv, title=title)
    c = out.comparison
    if json_out:
        print(json.dumps({"rows": compare_rows(c), "provenance_diff": dict(c.provenance),
                          "warnings": out.warnings,
                          "written": [str(p) for p in out.written]}, indent=1))
        return
    con = console()
    for table in compare_tables(c):
        con.print(table)
    for line in verdict_summary(c):
        con.print(line)
    _warn(out.warnings)
    _written(out.written)


def register(app: typer.Typer) -> None:
    app.command()(report)
    app.command()(compare)
