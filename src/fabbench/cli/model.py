"""`fabbench forecast`: what the measured records predict for more nodes or another network."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from fabbench.cli.options import Json, old_spelling

From = Annotated[list[Path], typer.Option(
    "--from", help="Results files (JSON Lines) or directories holding them; repeatable.",
    show_default=False)]


def forecast(
    sources: From,
    nodes: Annotated[int, typer.Option(help="Nodes to predict for.")] = 16,
    ranks_per_node: Annotated[int, typer.Option(help="Ranks (GPUs) per node.")] = 1,
    bandwidth: Annotated[str | None, typer.Option(
        help="Per-node link: 25Gbit, 100G (bits/s) or 12.5GB/s. Default: the fitted "
        "allreduce bandwidth, else the wire's ceiling measured in the job, else the run's "
        "link.")] = None,
    latency: Annotated[str | None, typer.Option(
        help="Per-message latency α, e.g. 5us. Default: the fitted one.")] = None,
    intra_bandwidth: Annotated[str | None, typer.Option(
        help="Per-rank bandwidth inside a node (hierarchical model). Default: a single-node "
        "allreduce fit.")] = None,
    compression: Annotated[float, typer.Option(help="Gradient compression ratio c.")] = 1.0,
    backward_fraction: Annotated[float | None, typer.Option(
        help="Backward time as a share of the compute step, when the record lacks it. "
        "Default 0.55 (Zhang et al.).")] = None,
    json_out: Json = False,
) -> None:
    """Forecast scaling from measured records: more nodes, another network.

    α-β fits per op and transport, allreduce at scale, and the training what-if of Zhang et al.
    (scaling factor vs nodes and bandwidth).

    Examples:
        fabbench forecast --from results.jsonl --nodes 64 --bandwidth 25Gbit
        fabbench forecast --from results/ --nodes 16 --ranks-per-node 8 --compression 4
    """
    from fabbench.console import console
    from fabbench.scaling import forecast_text
    from fabbench.scaling.predict import ModelOptions, build

    answer = build(sources, ModelOptions(
        nodes=nodes, ranks_per_node=ranks_per_node, bandwidth=bandwidth, latency=latency,
        intra_bandwidth=intra_bandwidth, compression=compression,
        backward_fraction=backward_fraction))
    if json_out:
        print(json.dumps(answer.to_json(), indent=1))
        return
    con = console()
    con.print(forecast_text.HEADER)
    for item in (forecast_text.fit_table(answer) if answer.fits else None,
                 forecast_text.allreduce_table(answer), forecast_text.hierarchy_table(answer),
                 *forecast_text.train_tables(answer), *forecast_text.replay_tables(answer)):
        if item is not None:
            con.print(item)
    con.print("[bold]Model assumptions:[/]")
    for line in answer.assumptions:
        con.print(f"  - {line}", soft_wrap=True)
    err = console(stderr=True)
    for w in answer.warnings:
        err.print(f"[yellow]warning:[/] {w}", soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command()(forecast)
    old_spelling(app, "model", "forecast", forecast)
