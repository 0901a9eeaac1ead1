"""`fabbench floors verify|baseline|label-nodes`: acceptance floors (docs/floors.md), and the
chart's health check that labels the nodes a verdict judged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from fabbench.cli.labels import label_nodes
from fabbench.cli.options import old_spelling

floors_app = typer.Typer(no_args_is_help=True, help=(
    "Judge results against acceptance floors, make floors, label the nodes judged.\n\n"
    "A floors file (docs/floors.md) holds the figures a healthy cluster reaches; fabbench ships "
    "reference floors ('reference').\n\n"
    "Examples:\n"
    "    fabbench floors verify --floors reference results/\n"
    "    fabbench floors baseline runs/ --out site.toml  # floors from healthy runs"))

Results = Annotated[list[Path], typer.Argument(
    help="Results files or directories: fabbench's JSON Lines, nccl-tests' or OSU's output.",
    show_default=False)]
FloorsFile = Annotated[Path, typer.Option(
    "--floors", help="The floors file (TOML, docs/floors.md), or 'reference' for the shipped "
    "reference floors.", show_default=False)]


def floors_path(path: Path) -> Path:
    from fabbench.floors.rules import REFERENCE

    return REFERENCE if str(path) == "reference" else path


def verify(
    results: Results, floors: FloorsFile,
    json_out: Annotated[Path | None, typer.Option(
        "--json", help="Also write the verdict as JSON (fabbench-verdict/1) to this file.")] = None,
    prometheus: Annotated[Path | None, typer.Option(
        "--prometheus", help="Also write the verdict and the figures in Prometheus' text format "
        "to this file (e.g. for node_exporter's textfile collector: a *.prom file in its "
        "directory): a new file, or one this command wrote before, replaced atomically.")] =
    None,
) -> None:
    """Judge results against acceptance floors.

    Per rule, and per node where the results have per-node figures (pairs), pass / fail / not
    judged with the figure, the floor and the margin. Exit code 0: no floor failed (and one was
    judged); 1: a floor failed, or nothing could be judged; 2: bad input.

    Examples:
        fabbench floors verify --floors site.toml results/pairs.jsonl
        fabbench floors verify --floors reference results/ --json verdict.json
        fabbench floors verify --floors site.toml results/
            --prometheus /var/lib/node_exporter/fabric.prom  # for Prometheus to scrape
    """
    from fabbench.floors import prometheus as exposition
    from fabbench.floors.rules import load
    from fabbench.floors.verify import verify as run_verify
    from fabbench.results import output_files

    checked = output_files.check_all([("--json", json_out), ("--prometheus", prometheus)],
                                [*results, floors_path(floors)],
                                own={"--prometheus": exposition.HEADER})  # node_exporter's
    outcome = run_verify(load(floors_path(floors)), results)
    for line in outcome.lines():
        print(line)
    text = {"--json": json.dumps(outcome.to_json(), indent=1) + "\n",
            "--prometheus": exposition.exposition(outcome)}
    for path in output_files.write_all([(out, text[out.flag]) for out in checked]):
        print(f"wrote {path}")
    raise typer.Exit(outcome.exit_code)


def baseline(
    runs: Annotated[list[Path], typer.Argument(
        help="Results files (or directories) of healthy runs of the same configuration.",
        show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="The floors file to write (a new one).",
                                      show_default=False)],
    below: Annotated[float, typer.Option(
        help="Each floor this fraction below the runs' median.")] = 0.10,
    spread: Annotated[float, typer.Option(
        help="Where it is lower, each floor this many robust standard deviations (1.4826 x "
        "MAD) below the median: a floor never inside the spread the runs showed (0: off).")]
    = 3.0,
    min_size: Annotated[str, typer.Option(
        help="Collective sizes below this are left out (latency-bound, noisy).")] = "1M",
    name: Annotated[str, typer.Option(help="The floors file's name.")] = "baseline",
) -> None:
    """Write floors from runs of a healthy cluster.

    Per point the median and spread of the runs, a floor a stated fraction below the median or,
    where lower, the bound the spread allows, with the runs' provenance in the file.

    Examples:
        fabbench floors baseline runs/*.jsonl --out site.toml --below 0.1
        fabbench floors baseline runs/ --out site.toml --min-size 64K --name rack1
    """
    from fabbench.floors.baseline import make
    from fabbench.results import output_files
    from fabbench.results.runs import load
    from fabbench.units import parse_size

    to = output_files.check("--out", out, runs)
    text = make(load(runs), below=below, spread=spread, min_bytes=parse_size(min_size),
                name=name)
    output_files.write(to, text)
    print(f"wrote {out} ({text.count('[[rule]]')} rules from {len(runs)} file(s))")


def register(app: typer.Typer) -> None:
    floors_app.command()(verify)
    floors_app.command()(baseline)
    floors_app.command("label-nodes")(label_nodes)
    app.add_typer(floors_app, name="floors")
    old_spelling(app, "verify", "floors verify", verify)
    old_spelling(app, "baseline", "floors baseline", baseline)
    old_spelling(app, "label-nodes", "floors label-nodes", label_nodes)
