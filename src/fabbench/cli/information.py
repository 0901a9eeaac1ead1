"""`fabbench fabrics`, `fabbench models` and `fabbench version`: what this fabbench knows of.
`fabbench env` and `fabbench doctor`, about the host, are cli/sysinfo.py's."""

from __future__ import annotations

import json

import typer

from fabbench import __version__
from fabbench.cli.options import Json


def fabrics(json_out: Json = False) -> None:
    """List the fabric profiles on the search path.

    Examples:
        fabbench fabrics
        fabbench fabrics --json
    """
    from fabbench.cli.show import show_fabrics

    show_fabrics(json_out)


def models(json_out: Json = False) -> None:
    """List the models of --workload train with their parameter counts.

    Examples:
        fabbench models
        fabbench models --json
    """
    from rich.table import Table

    from fabbench.console import console
    from fabbench.networks import MODELS, parameter_count

    rows = [{"name": s.name, "family": s.family, "parameters": parameter_count(s.name),
             "reference_parameters": s.reference_parameters,
             "default_input": s.default_input, "description": s.description}
            for s in MODELS.values()]
    if json_out:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="models (--workload train --model NAME)", title_justify="left")
    for name in ("name", "input", "parameters", "reference", ""):
        table.add_column(name, justify="right" if name in ("parameters", "reference")
                         else "left")
    for r in rows:
        ref = r["reference_parameters"]
        what = f"{r['default_input']}² images" if r["family"] == "image" \
            else f"{r['default_input']} tokens"
        table.add_row(str(r["name"]), what, f"{r['parameters']:,}",
                      "-" if ref is None else f"{ref:,}", str(r["description"]))
    console().print(table)


def version() -> None:
    """Print fabbench's version.

    Examples:
        fabbench version
    """
    print(__version__)


def register(app: typer.Typer) -> None:
    app.command()(fabrics)
    app.command()(models)
    app.command()(version)
