"""`fabbench report` and `fabbench compare`: read results files, write tables, plots, HTML, CSV;
`fabbench from-log`: results files out of a pod's log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from fabbench.cli.options import Json
from fabbench.workloads.collectives.workload import CollectivesWorkload

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


def _is_dir_of(what: str, path: Path) -> bool:
    """A tune's or a study's directory; a file is neither, and their modules (the study's
    imports jsonschema) are not imported for one."""
    if not path.is_dir():
        return False
    if what == "tune":
        from fabbench.tune import is_tune_dir

        return is_tune_dir(path)
    from fabbench.study.manifest import is_study_dir

    return is_study_dir(path)


def _written(paths: list[Path]) -> None:
    for p in paths:
        print(f"wrote {p}")


def report(paths: Paths, html: Html = None, plots: Plots = None, csv: Csv = None,
           title: Title = None, json_out: Json = False,
           floors: Annotated[Path | None, typer.Option(
               help="Place the figures against this floors file (docs/floors.md). Default: "
               "the reference floors.")] = None,
           trend: Annotated[bool, typer.Option(
               "--trend", help="Each node's and link's figure across the runs, in the order "
               "they started, judged by --floors (a file, or 'reference'): the nodes drifting "
               "toward the floor flagged before they cross it (docs/floors.md#trends).")] = False,
           window: Annotated[int | None, typer.Option(
               help="--trend: fit the slope over the last N runs (default 10, at least 5).",
               show_default=False)] = None,
           ahead: Annotated[int | None, typer.Option(
               help="--trend: project the fit this many runs ahead (default 5).",
               show_default=False)] = None) -> None:
    """Report results files, a study or a tune.

    Tables in the nccl-tests layout, busbw against the link, which node is slow (pairs) and
    which rank arrives late, plots, HTML and CSV.

    Examples:
        fabbench report results/ --html report.html --plots figs/ --csv all.csv
        fabbench report study/  # a study's answer; report.html beside its manifest
        fabbench report tune-eth/  # a tune's gains against the default settings
    """
    if trend or window is not None or ahead is not None:
        _trend_report(paths, trend=trend, window=window, ahead=ahead, floors=floors, html=html,
                      plots=plots, csv=csv, title=title, json_out=json_out)
        return
    if len(paths) == 1 and _is_dir_of("tune", paths[0]):
        _tune_report(paths[0], given=[flag for flag, value in (
            ("--html", html), ("--plots", plots), ("--csv", csv), ("--title", title),
            ("--json", json_out), ("--floors", floors)) if value])
        return
    if len(paths) == 1 and _is_dir_of("study", paths[0]):
        if csv:
            from fabbench.errors import UsageError

            raise UsageError("a study's report is written as HTML and JSON (report.html, "
                             "report.json beside study.json); --csv is for results files")
        _study_report(paths[0], html=html, plots=plots, title=title, json_out=json_out)
        return
    from fabbench.report.runs_report import findings_json, make_report
    from fabbench.report.tables import collective_rows, train_rows
    from fabbench.workloads.train.record import Train

    out = make_report(paths, html=html, plots_dir=plots, csv=csv, title=title, floors=floors)
    if json_out:
        print(json.dumps({CollectivesWorkload.name: collective_rows(out.series),
                          Train.kind: train_rows(out.series),
                          "findings": findings_json(out.series), "warnings": out.warnings,
                          "written": [str(p) for p in out.written]}, indent=1))
        return
    print(out.text, end="")
    _warn(out.warnings)
    _written(out.written)


def _trend_report(paths: list[Path], *, trend: bool, window: int | None, ahead: int | None,
                  floors: Path | None, html: Path | None, plots: Path | None,
                  csv: Path | None, title: str | None, json_out: bool) -> None:
    """Runs of several days: each node's and link's figure over time, drift flagged."""
    from fabbench.cli.floors import floors_path
    from fabbench.errors import UsageError
    from fabbench.report.trend import AHEAD, WINDOW
    from fabbench.report.trend_report import make_trend

    if not trend:
        raise UsageError("--window and --ahead are options of --trend")
    if csv:
        raise UsageError("--trend writes its table, --json, --html and --plots; --csv is for "
                         "a report of runs")
    out = make_trend(paths, floors=floors_path(floors) if floors else None,
                     window=WINDOW if window is None else window,
                     ahead=AHEAD if ahead is None else ahead, html=html, plots_dir=plots,
                     title=title)
    if json_out:
        print(json.dumps({**out.trend.to_json(), "written": [str(p) for p in out.written]},
                         indent=1))
        return
    print("\n".join(out.trend.lines()))
    _warn(out.warnings)
    _written(out.written)


def _tune_report(directory: Path, given: list[str]) -> None:
    """A tune's directory: its table (the gain of each op and size against the default, and
    the share of the wire's ceiling), decided again from its files; nothing is launched."""
    from fabbench.errors import UsageError
    from fabbench.tune import publish
    from fabbench.tune.search import replayed

    if given:
        raise UsageError(f"{' '.join(given)}: a tune's report is its table (the tuned profile "
                         "and tune.json beside it hold the rest); these are for results files")
    print(publish.summary(replayed(directory)), end="")


def _study_report(directory: Path, *, html: Path | None, plots: Path | None,
                  title: str | None, json_out: bool) -> None:
    """A study directory: the answer on the console, and by default report.html and
    report.json beside its manifest."""
    from fabbench.console import console
    from fabbench.report.study.answer_text import lines
    from fabbench.report.study.study_report import make_study_report

    answer, written = make_study_report(directory, html=html, plots_dir=plots, title=title)
    if json_out:
        print(json.dumps(answer.to_json(), indent=1))
        return
    con = console()
    for item in lines(answer):
        con.print(item, soft_wrap=True) if isinstance(item, str) else con.print(item)
    _warn(answer.warnings)
    _written(written)


def compare(paths: Paths, html: Html = None, plots: Plots = None, csv: Csv = None,
            title: Title = None, json_out: Json = False) -> None:
    """Compare results: A against B (and C ...).

    Per op and size the time ratio, its 95% CI and whether the difference is real; training
    side by side; the provenance that differs.

    Examples:
        fabbench compare siteA.jsonl siteB.jsonl --html compare.html
        fabbench compare siteA/ siteB/  # two study directories, cell by cell
    """
    if len(paths) == 2 and all(_is_dir_of("study", p) for p in paths):
        if plots or csv:
            from fabbench.errors import UsageError

            raise UsageError("compare of two study directories writes the console table, "
                             "--json or --html; --plots and --csv are for results files")
        _study_compare(paths[0], paths[1], json_out=json_out, html=html, title=title)
        return
    from fabbench.console import console
    from fabbench.report.compare_text import compare_tables, verdict_summary
    from fabbench.report.long_table import LongTable
    from fabbench.report.runs_report import compare_rows, make_compare
    from fabbench.results.reader import collector_paused

    with collector_paused():  # the tables' rows as the records were read: no cycles to find
        out = make_compare(paths, html=html, plots_dir=plots, csv=csv, title=title)
        c = out.comparison
        assert c is not None  # make_compare's outputs always hold its comparison
        if json_out:
            print(json.dumps({"rows": compare_rows(c), "provenance_diff": dict(c.provenance),
                              "warnings": out.warnings,
                              "written": [str(p) for p in out.written]}, indent=1))
            return
        con = console()
        for table in compare_tables(c):
            con.print(table, crop=not (isinstance(table, LongTable) and table.fits(con)))
        for line in verdict_summary(c):
            con.print(line)
    _warn(out.warnings)
    _written(out.written)


def _study_compare(a: Path, b: Path, *, json_out: bool, html: Path | None,
                   title: str | None) -> None:
    """Two study directories: the image first, then cell by cell, then the networks."""
    from rich.table import Table

    from fabbench.console import console
    from fabbench.report.study.study_compare import (
        compare_studies,
        image_line,
        network_lines,
        summary_lines,
    )
    from fabbench.results import output_files

    to = output_files.check_all([("--html", html)], [a, b])
    c = compare_studies(a, b)
    if to:
        from fabbench.report.study.compare_html import render

        output_files.write_all([(to[0], render(c, title=title, summary=summary_lines(c)))])
    if json_out:
        print(json.dumps({**c.to_json(), "written": [str(html)] if html else []}, indent=1))
        return
    con = console()
    con.print(image_line(c), soft_wrap=True, markup=False)
    table = Table(title=f"B = {b} against A = {a}: median time ratio B/A (< 1: B is faster)",
                  title_justify="left")
    for name in ("cell", "measure", "A median", "B median", "B/A", "95% CI", "p", "verdict"):
        table.add_column(name, justify="left" if name in ("cell", "measure", "verdict")
                         else "right", no_wrap=name in ("cell", "95% CI"))
    style = {"faster": "green", "slower": "red", "same": "dim"}
    for p in c.pairs:
        v = p.verdict
        table.add_row(p.label, p.what, f"{p.a_median:.4g}", f"{p.b_median:.4g}",
                      f"{v.ratio:.3f}", "-" if v.ci_low is None else
                      f"{v.ci_low:.3f}–{v.ci_high:.3f}",
                      "-" if v.p_value is None else f"{v.p_value:.3g}",
                      f"[{style.get(v.verdict, 'yellow')}]{v.verdict}[/]")
    con.print(table)
    for line in summary_lines(c) + network_lines(c):
        con.print(line, soft_wrap=True, markup=False)
    prov = Table(title="provenance that differs", title_justify="left")
    for name in ("field", "A", "B"):
        prov.add_column(name)
    for key, values in c.provenance:
        prov.add_row(key, *values)
    if not c.provenance:
        prov.add_row("(none: same set-up)", "", "")
    con.print(prov)
    _written([html] if html else [])


def from_log(
        log: Annotated[str, typer.Argument(
            help="The log: a file, or - to read it from stdin.", show_default=False)],
        out: Annotated[Path | None, typer.Option(
            "--out", "-o", help="The results file to write; a directory: each file of the log "
            "under its own name in it. Default: the file's own name, here.")] = None) -> None:
    """Write the results files rank 0 put into its log, out of `kubectl logs`.

    Every record checked (rank 0 does so with FABBENCH_RESULTS_TO_LOG=1: the Helm chart's
    default when results.claim and results.hostPath are unset). Exit code 0: written; 2: no
    results, a block cut short, or a record that is not valid.

    Examples:
        fabbench from-log launcher.log -o results.jsonl  # a log kubectl logs saved
        kubectl logs job/NAME-launcher | fabbench from-log - -o results/
    """
    import sys

    from fabbench.errors import UsageError
    from fabbench.launch.results_log import from_log as read_back

    if log == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(log).read_text(errors="replace")
        except OSError as exc:
            raise UsageError(f"cannot read the log {log}: {exc.strerror or exc}") from None
    for path, count in read_back(text, out, inputs=[] if log == "-" else [log]):
        print(f"wrote {path} ({count} records)")


def register(app: typer.Typer) -> None:
    app.command()(report)
    app.command()(compare)
    app.command("from-log")(from_log)
