"""`fabbench env` (the inventory every run records) and `fabbench doctor` (preflight checks)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from fabbench.cli.options import Fabric, Json, Primitive, Wire

_MARK = {"pass": "[green]pass[/]", "warn": "[yellow]warn[/]", "fail": "[red]FAIL[/]",
         "skip": "[dim]skip[/]"}


def env(json_out: Json = False) -> None:
    """Print this host's inventory.

    CPU, memory, GPUs, NICs, RDMA ports, GPUDirect, library versions, image manifest,
    container runtime, scheduler, fabric environment variables.

    Examples:
        fabbench env
        fabbench env --json > env.json
    """
    from fabbench.sysinfo.inventory import inventory, summary_rows

    inv = inventory()
    if json_out:
        print(json.dumps(inv, indent=2, sort_keys=True))
        return
    from rich.table import Table

    from fabbench.console import console

    table = Table(title=f"fabbench env: {inv['host']}", title_justify="left", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    for key, value in summary_rows(inv):
        table.add_row(key, value)
    console().print(table)


def doctor(
    fabric: Fabric = "auto",
    primitive: Primitive = None,
    wire: Wire = "native",
    iface: Annotated[str | None, typer.Option(help="Interface for TCP traffic and the "
                                                   "rendezvous. Default: IPoIB on RDMA "
                                                   "fabrics, else the default route's.")] = None,
    rdma_device: Annotated[str | None, typer.Option(help="RDMA device (e.g. mlx5_0).")] = None,
    smoke: Annotated[bool, typer.Option(help="Run the 2-rank smoke test.")] = True,
    fidelity: Annotated[bool, typer.Option(
        "--fidelity", help="Also time fabbench against the bare loop of its library here "
        "(alternating, about a minute): can its figures be trusted on this host?")] = False,
    root: Annotated[str, typer.Option(hidden=True, help="Read sysfs/dev under this root (a "
                                                        "recorded tree).")] = "/",
    json_out: Json = False,
) -> None:
    """Check that this host can run a benchmark, with the fix for each check that fails.

    A verdict per check: pass, warn, FAIL or skip. Exit code 0: ready; 1: a check failed.

    Examples:
        fabbench doctor --fabric infiniband
        fabbench doctor --fidelity  # is fabbench as fast as the bare library loop here?
        fabbench doctor --no-smoke --json  # no 2-rank smoke test; the checks as JSON
    """
    from fabbench.doctor import DoctorOptions
    from fabbench.doctor import doctor as run_doctor

    report = run_doctor(DoctorOptions(fabric=fabric, wire=wire, primitive=primitive, iface=iface,
                                      rdma_device=rdma_device, smoke=smoke, fidelity=fidelity,
                                      root=root))
    if json_out:
        print(json.dumps(report.to_json(), indent=2))
    else:
        from fabbench.console import console

        out = console()
        out.print(f"[bold]fabbench doctor[/]: fabric {report.fabric} (wire {report.wire}), "
                  f"primitive {report.primitive}")
        for c in report.checks:
            out.print(f"  {_MARK[c.verdict]}  {c.name:<15} {c.detail}", soft_wrap=True)
            if c.fix and c.verdict in ("fail", "warn"):
                out.print(f"  {'':4}  {'':<15} [cyan]fix:[/] {c.fix}", soft_wrap=True)
        failed = sum(c.verdict == "fail" for c in report.checks)
        out.print("[green]ready[/]" if report.ok else f"[red]{failed} check(s) failed[/]")
    raise typer.Exit(0 if report.ok else 1)


def register(app: typer.Typer) -> None:
    app.command()(env)
    app.command()(doctor)
