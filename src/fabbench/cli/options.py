"""Options shared by several commands, declared once: those of the run configuration come from
its fields (fabbench.config), so `fabbench render` and `fabbench sysinfo` say what `fabbench run`
says."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Annotated, Any

import typer

from fabbench.config import typer_annotation, typer_parameters

Fabric = typer_annotation("fabric")
Primitive = typer_annotation("primitive")
Wire = typer_annotation("wire")
GpuDirect = typer_annotation("gpudirect")
Json = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def run_options(*, placed: bool = True, defaults: Mapping[str, Any] | None = None
                ) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A command that takes every option of the run configuration (fabbench.config), after its
    own and in their help panels, as `fabbench run` does; it gets them in ``**options``, for
    fabbench.config.from_parameters. ``placed``/``defaults``: as config.typer_parameters."""
    def wrap(command: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values()
               if p.kind is not inspect.Parameter.VAR_KEYWORD]
        signature = inspect.Signature([*own, *typer_parameters(placed=placed,
                                                               defaults=defaults)])
        command.__signature__ = signature  # type: ignore[attr-defined]  # what Typer reads
        command.__annotations__ = {p.name: p.annotation
                                   for p in signature.parameters.values()}
        return command
    return wrap


# Old spellings of moved commands are kept, hidden, until this release; their help says where
# each went (`fabbench verify --help`). docs/cli.md lists them.
ALIASES_UNTIL = "0.2"


def old_spelling(app: typer.Typer, old: str, new: str, command: Callable[..., None]) -> None:
    """Register ``command`` once more on ``app`` as ``old``, hidden from the command list, with
    a first help line that names its new spelling ``fabbench NEW``. It runs as the new one."""
    doc = inspect.cleandoc(command.__doc__ or "")
    app.command(old, hidden=True, help=(
        f"Now `fabbench {new}`; this spelling goes in fabbench {ALIASES_UNTIL}.\n\n{doc}"))(command)
