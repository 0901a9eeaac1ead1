"""The fabbench command line: parse options, call the library, print. No logic lives here."""

from __future__ import annotations

import functools
import inspect
import sys
from typing import Annotated

import typer
from typer.exceptions import Abort, Exit, TyperException

from fabbench import __version__
from fabbench.cli import emulate, model, render, results, study, sysinfo, train
from fabbench.cli.options import Fabric, GpuDirect, Json, Primitive, Ranks, Wire
from fabbench.errors import FabbenchError
from fabbench.procs import Terminated

app = typer.Typer(
    name="fabbench", no_args_is_help=True, add_completion=False,
    pretty_exceptions_enable=False, rich_markup_mode="rich",
    help="What your network fabric and communication primitive cost data-parallel training.")


@app.command()
def run(
    fabric: Fabric = "auto",
    primitive: Primitive = None,
    wire: Wire = "native",
    ranks: Ranks = None,
    horovod_over: Annotated[str | None, typer.Option(
        help="Horovod's controller: mpi or gloo.")] = None,
    ops: Annotated[str | None, typer.Option(
        help="Comma list of allreduce, allgather, reduce_scatter, broadcast, alltoall, "
        "sendrecv. Default: all the primitive has.")] = None,
    sizes: Annotated[str | None, typer.Option(
        help="MIN:MAX[:FACTOR] or a comma list, units K/M/G (1024). Default 8:64M on CPU, "
        "8:1G on GPU; 8,1M for pairs.")] = None,
    dtypes: Annotated[str, typer.Option(help="Comma list: float32, float64, float16, "
                                            "bfloat16.")] = "float32",
    check: Annotated[bool, typer.Option(help="Verify every result; a wrong element fails "
                                             "the run.")] = False,
    device: Annotated[str | None, typer.Option(help="cpu or cuda. Default: cuda when GPUs "
                                                    "are visible.")] = None,
    gpudirect: GpuDirect = "auto",
    timeout: Annotated[float, typer.Option(help="Seconds any operation may take (plus 1 s "
                                                "per 100 MB) before every rank stops.")] = 30.0,
    budget: Annotated[float, typer.Option(help="Measured seconds per point (op, size, "
                                               "dtype).")] = 0.1,
    min_samples: Annotated[int, typer.Option(help="Samples per point, at least.")] = 5,
    max_samples: Annotated[int, typer.Option(help="Samples per point, at most.")] = 200,
    out: Annotated[str | None, typer.Option(
        "--out", "-o", help="Results file (JSON Lines). Default: results/<run id>-...")] = None,
    iface: Annotated[str | None, typer.Option(
        help="Network interface for TCP traffic. Default: lo for local ranks, else the "
        "default route's.")] = None,
    rdma_device: Annotated[str | None, typer.Option(
        help="RDMA device (e.g. mlx5_0). Default: the first active port.")] = None,
    dry_run: Annotated[bool, typer.Option(help="Print what would be set and launched; run "
                                               "nothing.")] = False,
    resume: Annotated[str | None, typer.Option(
        help="Continue the interrupted run in this results file where it stopped (its own "
        "options; the others given here are ignored).", metavar="FILE")] = None,
    workload: Annotated[str, typer.Option(
        help="collectives, train, halo, pairs (node pairs in rounds: finds the slow node), "
        "or all (collectives then train).")] = "collectives",
    model: Annotated[str, typer.Option(help="train: a model of `fabbench models`.")] = "resnet50",
    batch_size: Annotated[int, typer.Option(help="train: samples per rank per step.")] = 32,
    image_size: Annotated[int | None, typer.Option(
        help="train: image side in pixels (multiple of 32), or tokens per sequence for a "
        "transformer. Default: the model's (224; the context).")] = None,
    steps: Annotated[int, typer.Option(help="train: timed steps.")] = 20,
    warmup_steps: Annotated[int, typer.Option(help="train: untimed steps first.")] = 5,
    scaling: Annotated[str | None, typer.Option(
        help="train: rank counts run one after another, e.g. 1,2,4 (1 is added); efficiency "
        "T_n/(n*T_1).")] = None,
    bucket_mb: Annotated[float, typer.Option(
        help="train: DDP bucket size (bucket_cap_mb), also the mpi engine's, MiB.")] = 25.0,
    fusion_mb: Annotated[float | None, typer.Option(
        help="train: Horovod fusion threshold, MiB. Default: Horovod's.")] = None,
    precision: Annotated[str, typer.Option(
        help="train: fp32, bf16 (autocast) or fp16 (autocast + loss scaling, GPU).")] = "fp32",
    cells_per_rank: Annotated[int, typer.Option(help="halo: cells per rank (a cube).")] = 64**3,
    halo_iters: Annotated[int, typer.Option(help="halo: timed iterations.")] = 50,
    ceiling: Annotated[bool | None, typer.Option(
        "--ceiling/--no-ceiling", help="Measure the wire's raw ceiling (iperf3 for ethernet) "
        "between two nodes first. Default: when the ranks span several hosts.",
        show_default=False)] = None,
    pair_schedule: Annotated[str, typer.Option(
        help="pairs: rounds (each round's disjoint pairs at once, as on a real fleet), serial "
        "(one pair at a time, the others wait) or auto (serial on an emulated cluster, whose "
        "nodes share this host's CPUs; rounds otherwise).")] = "auto",
    ceiling_seconds: Annotated[float, typer.Option(
        help="Seconds of each ceiling measurement.")] = 2.0,
) -> None:
    """Run a benchmark (collectives, training or halo exchange) on real ranks.

    Outside a job it starts --ranks local ranks; inside one (mpirun, srun, torchrun, a
    Kubernetes job) it is one rank.

    Example: [bold]fabbench run --fabric ethernet --primitive mpi --sizes 1K:16M --check[/]
    """
    from fabbench import runner

    options = runner.RunOptions(
        fabric=fabric, primitive=primitive, horovod_over=horovod_over, wire=wire, ranks=ranks,
        ops=ops, sizes=sizes, dtypes=dtypes, check=check, device=device, gpudirect=gpudirect,
        timeout_s=timeout, budget_s=budget, min_samples=min_samples, max_samples=max_samples,
        out=out, iface=iface, rdma_device=rdma_device, argv=tuple(sys.argv), workload=workload,
        model=model, batch_size=batch_size, image_size=image_size, steps=steps,
        warmup_steps=warmup_steps, scaling=scaling, bucket_mb=bucket_mb, fusion_mb=fusion_mb,
        precision=precision, cells_per_rank=cells_per_rank, halo_iters=halo_iters,
        ceiling=ceiling, ceiling_s=ceiling_seconds,
        pair_schedule=pair_schedule)
    if dry_run:
        print(runner.dry_run(options))
        return
    outcome = runner.resume(resume, tuple(sys.argv)) if resume else runner.run(options)
    if outcome.launched:
        from fabbench.cli.show import show_run

        show_run(outcome.plan.out)
    if outcome.error:
        print(f"fabbench: error: {outcome.error}", file=sys.stderr)
    raise typer.Exit(outcome.code)


@app.command()
def fabrics(json_out: Json = False) -> None:
    """List the fabric profiles on the search path.

    Example: [bold]fabbench fabrics[/]
    """
    from fabbench.cli.show import show_fabrics

    show_fabrics(json_out)


@app.command()
def version() -> None:
    """Print fabbench's version."""
    print(__version__)


# Commands that live in their own modules (cli/<name>.py, each with `register(app)`). Those
# modules keep heavy imports inside their command functions, so start-up stays fast.
for _module in (emulate, model, render, results, study, sysinfo, train):
    _module.register(app)


def _paragraphs(text: str) -> str:
    """A docstring as help: each paragraph on one line. Typer's rich mode keeps a docstring's
    line breaks, which would break sentences and example commands where the source wraps."""
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(text).split("\n\n"))


def _reflow_help(group: typer.Typer) -> None:
    for command in group.registered_commands:
        text = command.help or (command.callback.__doc__ if command.callback else None)
        if text:
            command.help = _paragraphs(text)
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _reflow_help(sub.typer_instance)


_reflow_help(app)


@functools.cache
def _command() -> typer.core.TyperGroup:
    """The command tree Typer builds from `app`, built once per process: building it costs
    several times more than parsing a command line (it matters to in-process callers)."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every known failure is one line on stderr and its exit code."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        code = _command()(args=argv or ["--help"], standalone_mode=False)
    except TyperException as exc:  # usage errors of the parser: bad option, bad value
        print(f"fabbench: error: {exc.format_message()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except Exit as exc:
        sys.exit(exc.exit_code)
    except (Abort, KeyboardInterrupt):
        print("fabbench: interrupted", file=sys.stderr)
        sys.exit(130)
    except Terminated as exc:  # what this process started is stopped already (finally blocks)
        print(f"fabbench: stopped by signal {exc.signum}", file=sys.stderr)
        sys.exit(128 + exc.signum)
    except FabbenchError as exc:
        print(f"fabbench: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
