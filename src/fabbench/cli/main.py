"""The fabbench command line: parse options, call the library, print. No logic lives here."""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from typer.exceptions import Abort, Exit, TyperException

from fabbench import config
from fabbench.cli import (
    emulate,
    floors,
    information,
    model,
    render,
    results,
    study,
    sysinfo,
    tracing,
    tune,
)
from fabbench.errors import FabbenchError, UsageError
from fabbench.procs import Terminated

if TYPE_CHECKING:
    from fabbench.floors.rules import Floors

app = typer.Typer(
    name="fabbench", no_args_is_help=True, add_completion=False,
    pretty_exceptions_enable=False, rich_markup_mode="rich",
    help="""What your network fabric and communication primitive cost data-parallel training.

    Examples:
        fabbench doctor  # is this host ready?
        fabbench run --fabric ethernet --primitive mpi --ranks 2 --out results/eth.jsonl
        fabbench report results/ --html report.html
    """)


def run(*, dry_run: bool, resume: str | None, floors: str | None = None,
        **options: object) -> None:
    """Run a benchmark (collectives, training or halo exchange) on real ranks.

    Outside a job it starts --ranks local ranks; inside one (mpirun, srun, torchrun, a
    Kubernetes job) it is one rank.

    Examples:
        fabbench run --fabric ethernet --primitive mpi --sizes 1K:16M --check
        fabbench run --workload train --model resnet50 --ranks 2 --primitive gloo
        fabbench run --workload pairs --ranks 4 --floors reference  # each node judged
    """
    from fabbench import runner

    argv = tuple(sys.argv)
    judge_by = _floors(floors)  # a bad floors file is refused before anything starts
    if resume:
        outcome = runner.resume(resume, argv)
    else:
        run_config = config.from_parameters(options)  # every option checked: nothing started
        if dry_run:
            print(runner.dry_run(run_config, argv))
            return
        outcome = runner.run(run_config, argv, judge_by)
    if outcome.launched:
        from fabbench.cli.show import show_run

        show_run(outcome.plan.out)
    if outcome.error:
        print(f"fabbench: error: {outcome.error}", file=sys.stderr)
    if judge_by is not None and outcome.launched and outcome.code == 0:
        from fabbench.floors.verify import verify

        verdict = verify(judge_by, [outcome.plan.out])
        print("\n".join(verdict.lines()))
        raise typer.Exit(verdict.exit_code)
    raise typer.Exit(outcome.code)


def _floors(path: str | None) -> Floors | None:
    """The floors file of --floors, read and checked ("reference": the shipped floors)."""
    if path is None:
        return None
    from fabbench.floors.rules import REFERENCE, load

    return load(REFERENCE if path == "reference" else path)


# The options of `run` are the run configuration's fields (fabbench.config), one help panel per
# workload, then the two that are no part of a configuration.
_RUN_ONLY = [
    inspect.Parameter("dry_run", inspect.Parameter.KEYWORD_ONLY, default=False,
                      annotation=Annotated[bool, typer.Option(
                          help="Print what would be set and launched; run nothing.",
                          rich_help_panel="Run")]),
    inspect.Parameter("resume", inspect.Parameter.KEYWORD_ONLY, default=None,
                      annotation=Annotated[str | None, typer.Option(
                          help="Continue the interrupted run in this results file where it "
                          "stopped (its own options; the others given here are ignored).",
                          metavar="FILE", rich_help_panel="Run")]),
    inspect.Parameter("floors", inspect.Parameter.KEYWORD_ONLY, default=None,
                      annotation=Annotated[str | None, typer.Option(
                          help="Judge the run's results against this floors file "
                          "(docs/floors.md; 'reference': the shipped one) when it ends: exit "
                          "1 when a floor fails. Inside a job (a Kubernetes check before "
                          "the job), rank 0 judges and every rank exits with the verdict.",
                          metavar="FILE", rich_help_panel="Run")])]
_RUN_SIGNATURE = inspect.Signature([*config.typer_parameters(), *_RUN_ONLY])
# what Typer reads the options from (mypy knows no __signature__ on a function; Python has it)
run.__signature__ = _RUN_SIGNATURE  # type: ignore[attr-defined]
run.__annotations__ = {p.name: p.annotation for p in _RUN_SIGNATURE.parameters.values()}
app.command()(run)


# Commands that live in their own modules (cli/<name>.py, each with `register(app)`). Those
# modules keep heavy imports inside their command functions, so start-up stays fast.
for _module in (emulate, floors, information, model, render, results, study, sysinfo, tracing,
                tune):
    _module.register(app)


def _help_and_examples(text: str) -> tuple[str, str | None]:
    """A docstring as help, and its closing "Examples:" section as the epilog (None without).

    The help: each paragraph on one line (Typer's rich mode keeps a docstring's line breaks,
    which would break sentences where the source wraps). The section: one example a line,
    ``COMMAND  # what it shows`` (the comment optional), a line indented further continuing
    the one above; the epilog shows each as ``Example: COMMAND  # ...``, ready to paste."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    epilog = None
    if paragraphs[-1].startswith("Examples:"):
        lines = paragraphs.pop().splitlines()[1:]
        indent = len(lines[0]) - len(lines[0].lstrip())
        examples: list[str] = []
        for line in lines:
            if len(line) - len(line.lstrip()) > indent:
                examples[-1] += " " + line.strip()
            else:
                examples.append(line.strip())
        epilog = "\n".join(_example(e) for e in examples)
    return "\n\n".join(" ".join(p.split()) for p in paragraphs), epilog


def _example(line: str) -> str:
    command, _, what = line.partition(" # ")
    return f"Example: [bold]{escape(command.strip())}[/]" + (
        f"  [dim]# {escape(what.strip())}[/]" if what else "")


# `fabbench --help` lists the commands by what their users do with them, in this order
PANELS: dict[str, tuple[str, ...]] = {
    "Measure": ("run", "emulate", "trace"),
    "Analyse": ("report", "compare", "forecast", "from-log"),
    "Accept": ("floors",),
    "Tune": ("tune",),
    "Information": ("env", "doctor", "fabrics", "models", "version"),
    "Schedule": ("render", "study"),
}
PANEL_OF = {name: panel for panel, names in PANELS.items() for name in names}


def _first_sentence(text: str) -> str:
    """A help's first sentence: what the command list shows (the help itself keeps all)."""
    first = text.split("\n\n")[0]
    end = re.search(r"[.!?](?=\s+[A-Z`\[])", first)
    return first[:end.end()] if end else first


def _command_name(command: typer.models.CommandInfo) -> str:
    """The name Typer gives the command (its own rule for a function's name)."""
    callback = command.callback.__name__ if command.callback else ""
    return command.name or typer.main.get_command_name(callback)


def _reflow_help(group: typer.Typer, top: bool = False) -> None:
    for command in group.registered_commands:
        text = command.help or (command.callback.__doc__ if command.callback else None)
        if text:
            command.help, examples = _help_and_examples(text)
            command.epilog = command.epilog or examples
            command.short_help = command.short_help or _first_sentence(command.help)
        if top and not command.hidden:  # an old spelling (cli.options.old_spelling)
            command.rich_help_panel = PANEL_OF[_command_name(command)]
    for sub in group.registered_groups:
        text = sub.help or (sub.typer_instance.info.help if sub.typer_instance else None)
        if isinstance(text, str):  # Typer's default for no help is a sentinel object
            sub.help, examples = _help_and_examples(text)
            sub.epilog = sub.epilog or examples
            sub.short_help = sub.short_help or _first_sentence(sub.help)
        if top:
            sub.rich_help_panel = PANEL_OF[sub.name or ""]
        if sub.typer_instance is not None:
            _reflow_help(sub.typer_instance)


app.info.help, app.info.epilog = _help_and_examples(str(app.info.help))
_reflow_help(app, top=True)


@functools.cache
def _command() -> typer.core.TyperGroup:
    """The command tree Typer builds from `app`, built once per process: building it costs
    several times more than parsing a command line (it matters to in-process callers)."""
    command = typer.main.get_command(app)
    assert isinstance(command, typer.core.TyperGroup)  # an app of several commands
    # listed in PANELS' order (Typer would list every group after every command), old
    # spellings last
    order = [name for names in PANELS.values() for name in names]
    command.commands = dict(sorted(command.commands.items(), key=lambda item: order.index(
        item[0]) if item[0] in order else len(order)))
    return command


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every known failure is one line on stderr and its exit code."""
    argv = emulate.old_spelling(sys.argv[1:] if argv is None else argv)
    try:
        code = _command()(args=argv or ["--help"], standalone_mode=False)
    except TyperException as exc:  # usage errors of the parser: bad option, bad value
        print(f"fabbench: error: {exc.format_message()}", file=sys.stderr)
        _leave(exc.exit_code)
    except Exit as exc:
        _leave(exc.exit_code)
    except (Abort, KeyboardInterrupt):
        print("fabbench: interrupted", file=sys.stderr)
        _leave(130)
    except Terminated as exc:  # what this process started is stopped already (finally blocks)
        print(f"fabbench: stopped by signal {exc.signum}", file=sys.stderr)
        _leave(128 + exc.signum)
    except FabbenchError as exc:
        print(f"fabbench: error: {_one_line(exc)}", file=sys.stderr)
        _leave(exc.exit_code)
    _leave(code)


def _one_line(exc: FabbenchError) -> str:
    """Bad input's message on one line whatever a value in it held (a path with a newline is
    shown with \\n, as its own input was typed); a run-time failure's as it is (it may carry
    the library's own lines)."""
    text = str(exc)
    return text.replace("\r", "\\r").replace("\n", "\\n") if isinstance(exc, UsageError) \
        else text


def _leave(code: object) -> None:
    """sys.exit, except in a process that became a rank of a launched job (launch/rank.py:
    a library's threads may outlive its work): flushed, then os._exit."""
    code = code if isinstance(code, int) else 0
    rank = sys.modules.get("fabbench.launch.rank")
    if rank is not None and rank.entered:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
