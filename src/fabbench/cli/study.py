"""`fabbench study list|show|run`: studies are data; the library runs them."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated

import typer

from fabbench.cli.options import Json

study_app = typer.Typer(name="study", no_args_is_help=True, help=(
    "List, show and run studies: grids of benchmarks, each run into one directory.\n\n"
    "A study crosses fabrics x primitives x GPUDirect x workloads x nodes; `fabbench report "
    "DIR` answers it.\n\n"
    "Examples:\n"
    "    fabbench study list\n"
    "    fabbench study run quick --out study/ && fabbench report study/"))

Name = Annotated[str, typer.Argument(help="A study of `fabbench study list`, or a .toml file.",
                                     show_default=False)]


@study_app.command("list")
def list_studies(json_out: Json = False) -> None:
    """List the studies on the search path.

    Examples:
        fabbench study list
        fabbench study list --json
    """
    from fabbench.study.spec import available_studies, load_study

    rows = []
    for name, path in available_studies().items():
        s = load_study(str(path))
        rows.append({"name": name, "cells": len(s.cells), "description": s.description,
                     "source": str(path)})
    if json_out:
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        print(f"{r['name']:<18} {r['cells']:>4} cells  {r['description']}")


@study_app.command("show")
def show(name: Name, json_out: Json = False) -> None:
    """Show a study's cells and whether this host can run each (and why not).

    Examples:
        fabbench study show quick
        fabbench study show hpec2020 --json
    """
    from fabbench.cli.show_study import cells_table
    from fabbench.study.host import Host, detect_place, why_not
    from fabbench.study.spec import load_study

    s = load_study(name)
    place, host = detect_place(), Host.look()
    rows = [{"id": c.id, **c.axes(), "kind": c.kind, "skip": why_not(c, host, place),
             "options": dict(c.options)} for c in s.cells]
    if json_out:
        print(json.dumps({"study": s.name, "source": s.source, "cells": rows}, indent=1))
        return
    from fabbench.console import console

    console().print(cells_table(s, rows))


@study_app.command("run")
def run(
    name: Name,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="The study directory. Default: results/study-<name>-<time>.")] = None,
    resume: Annotated[bool, typer.Option(
        help="Continue the study in --out: run the cells that are not complete.")] = False,
    only: Annotated[str | None, typer.Option(
        help="Run only the cells whose id matches this glob (the others stay pending).")] =
    None,
    floors: Annotated[Path | None, typer.Option(
        help="Judge every cell's results against this floors file (docs/floors.md) when the "
        "study ends: exit 1 when a floor fails.", metavar="FILE")] = None,
) -> None:
    """Run every cell of a study as its own launch: a results file per cell and a manifest.

    Inside a Slurm allocation each cell is an srun step on the allocation's nodes.

    Examples:
        fabbench study run quick --out study/ && fabbench report study/
        fabbench study run quick --out study/ --resume  # the cells not complete yet
        fabbench study run quick --only 'allreduce-*-gloo-*' --floors reference
    """
    import fnmatch

    from fabbench.cli.show_study import Progress
    from fabbench.study.run import run_study
    from fabbench.study.spec import load_study

    s = load_study(name)
    judge_by = None
    if floors is not None:  # a bad floors file is refused before any cell runs
        from fabbench.floors.rules import REFERENCE, load

        judge_by = load(REFERENCE if str(floors) == "reference" else floors)
    if out is None:
        if resume:
            print("fabbench: error: --resume needs --out DIR (the study to continue)",
                  file=sys.stderr)
            raise typer.Exit(2)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        out = Path("results") / f"study-{s.name}-{stamp}"
    keep = (lambda c: fnmatch.fnmatch(c.id, only)) if only else None
    with Progress(s, out) as progress:
        outcome = run_study(s, out, resume=resume, only=keep, progress=progress.update)
    progress.summary(outcome)
    cells = sorted((out / "cells").glob("*.jsonl"))
    if judge_by is not None and outcome.code == 0 and cells:
        from fabbench.floors.verify import verify

        verdict = verify(judge_by, cells)
        print("\n".join(verdict.lines()))
        raise typer.Exit(verdict.exit_code)
    raise typer.Exit(outcome.code)


def register(app: typer.Typer) -> None:
    app.add_typer(study_app, name="study")
