"""`fabbench tune`: parsing only; the library searches (fabbench.tune)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from fabbench.cli.options import run_options
from fabbench.tune.quick import DEFAULTS, QUICK, QUICK_REPEATS, REPEATS


def register(app: typer.Typer) -> None:
    @app.command()
    @run_options(defaults=DEFAULTS)
    def tune(
        ctx: typer.Context,
        directory: Annotated[Path, typer.Argument(
            help="The tune's directory: its launches, their results and what it writes.",
            show_default=False)],
        repeats: Annotated[int, typer.Option(
            help="Launches of each setting, alternating with the others (at least 2).")] =
        REPEATS,
        quick: Annotated[bool, typer.Option(
            help=f"About 5 minutes on 2 nodes: --repeats {QUICK_REPEATS}, --sizes "
            f"{QUICK['sizes']}, --budget {QUICK['budget']}, where not given; settings that do "
            "not hold are not narrowed and compared again.")] = False,
        deadline: Annotated[float, typer.Option(
            help="Seconds the whole tune may take; then it stops (continue with "
            "--resume).")] = 3600.0,
        resume: Annotated[bool, typer.Option(
            help="Continue the tune in DIRECTORY where it stopped (the same options).")] =
        False,
        **options: object,
    ) -> None:
        """Find the library settings that reach the wire.

        Each setting the fabric's profile lists in its tune tables tried against the ones
        chosen so far, in alternating launches, judged by compare's rule (95 % interval and
        test); a setting that changed the transport is refused. Writes
        DIRECTORY/<fabric>-tuned.toml (use it as --fabric), Open MPI's coll_tuned rules file
        and NCCL's tuner CSV where they apply (docs/tuning.md).

        Examples:
            fabbench tune tune-eth/ --fabric ethernet --primitive mpi --quick
            fabbench tune tune-eth/ --fabric ethernet --primitive mpi --resume
            fabbench run --fabric tune-eth/ethernet-tuned.toml --primitive mpi  # tuned
        """
        from fabbench.cli.show_tune import TuneProgress
        from fabbench.config import from_parameters
        from fabbench.tune import publish
        from fabbench.tune.quick import quick as quick_options
        from fabbench.tune.search import NARROWINGS, Tuner

        if quick:  # what the command line gave keeps its value, even one equal to the default
            given = {name for name in (*QUICK, "repeats")
                     if getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE"}
            options, repeats = quick_options(options, repeats, given)
        config = from_parameters(options)
        with TuneProgress() as progress:
            tuner = Tuner(config, directory, repeats=repeats, deadline_s=deadline,
                          resume=resume, narrowings=0 if quick else NARROWINGS,
                          progress=progress.update)
            outcome = tuner.run()
        written = publish.write(outcome)
        print(publish.summary(outcome), end="")
        for path in written:
            print(f"wrote {path}")
        sys.stdout.flush()
        # 1: the tuned settings did not hold against the default (nothing written)
        raise typer.Exit(0 if outcome.holds or outcome.final is None else 1)
