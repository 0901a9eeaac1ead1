"""Options shared by several commands, declared once: those of the run configuration come from
its fields (fabbench.config), so `fabbench render` and `fabbench sysinfo` say what `fabbench run`
says."""

from __future__ import annotations

from typing import Annotated

import typer

from fabbench.config import typer_annotation

Fabric = typer_annotation("fabric")
Primitive = typer_annotation("primitive")
Wire = typer_annotation("wire")
GpuDirect = typer_annotation("gpudirect")
Json = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
