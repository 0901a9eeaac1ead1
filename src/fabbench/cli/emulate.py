"""`fabbench emulate`: run a fabbench command across an emulated cluster of network namespaces,
or keep one standing (`up`/`down`)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer


def emulate(
    args: Annotated[list[str] | None, typer.Argument(
        help="`up`, `down`, or `-- COMMAND...`: a fabbench command to run on the cluster.",
        show_default=False)] = None,
    nodes: Annotated[int, typer.Option(help="Emulated nodes (namespaces).")] = 2,
    link: Annotated[str, typer.Option(
        help="Each node's link rate, as tc writes it: 1gbit, 250mbit.")] = "1gbit",
    delay: Annotated[str, typer.Option(
        help="One-way delay of each link, each direction: 50us, 1ms.")] = "0",
    loss: Annotated[str, typer.Option(help="Packet loss of each link, each direction: "
                                           "0.1%.")] = "0",
    slow_node: Annotated[list[str] | None, typer.Option(
        help="NODE:RATE, one node's link at another rate (nodes count from 0); "
        "repeatable.")] = None,
    lossy_node: Annotated[list[str] | None, typer.Option(
        help="NODE:LOSS, one node's link with its own loss; repeatable.")] = None,
    ranks_per_node: Annotated[int, typer.Option(help="Ranks placed on each node.")] = 1,
    max_time: Annotated[float, typer.Option(
        help="Seconds the command may run before it is stopped.")] = 6 * 3600.0,
    image: Annotated[str | None, typer.Option(
        help="Run the ranks in this image (a .sif for apptainer; a directory or .sqfs for "
        "charliecloud): the host's launcher starts one containerised `fabbench run` per "
        "slot.", show_default=False)] = None,
    runtime: Annotated[str | None, typer.Option(
        help="The container runtime of --image: apptainer or charliecloud.",
        show_default=False)] = None,
    pid: Annotated[int | None, typer.Option(
        help="down: the holder pid of the cluster to stop (default: the one "
        "FABBENCH_EMULATION names, else the only one standing).")] = None,
    every: Annotated[bool, typer.Option(
        "--all", help="down: stop every standing cluster, other users' included.")] = False,
) -> None:
    """Emulated nodes on this host, to run benchmarks across (root).

    A network namespace each (own interface fbnet0, address in 198.18.0.0/15, hostname), veth
    links through a bridge, tc shaping rate, delay and loss both ways. Torn down when the
    command ends, fails or is interrupted.

    Example: [bold]fabbench emulate --nodes 2 --link 1gbit -- run --primitive mpi --ops allreduce[/]

    Ranks in an image: [bold]fabbench emulate --nodes 2 --image fabbench.sif --runtime apptainer
    -- run --primitive mpi[/]

    A site for a study (each cell on a cluster of this shape; the first N nodes for an N-node
    cell): [bold]fabbench emulate --nodes 4 --link 1gbit --slow-node 3:250mbit --image
    fabbench.sif --runtime apptainer -- study run sites.toml --out siteB/[/]

    Standing: [bold]fabbench emulate up --nodes 4[/] prints FABBENCH_EMULATION=...; then
    [bold]fabbench emulate down[/].
    """
    from fabbench.emulate import make_emulation, session, site
    from fabbench.errors import UsageError
    from fabbench.launch import containers

    args = list(args or [])
    action = args[0] if args and args[0] in ("up", "down") else "run"
    if action == "down":
        if pid is not None and every:
            raise UsageError("emulate down takes --pid or --all, not both")
        stopped = session.down(pid, every=every)
        print(f"fabbench: emulate: stopped {len(stopped)} standing cluster(s)"
              + (f" (holders {', '.join(map(str, stopped))})" if stopped else ""))
        return
    if pid is not None or every:
        raise UsageError("--pid and --all are for `fabbench emulate down`")
    emulation = make_emulation(nodes=nodes, link=link, delay=delay, loss=loss,
                               slow_nodes=tuple(slow_node or ()),
                               lossy_nodes=tuple(lossy_node or ()),
                               ranks_per_node=ranks_per_node)
    if action == "up":
        cluster = session.up(emulation)
        for n in cluster.nodes:
            print(f"# {n.hostname} {n.address} netns {n.netns}", file=sys.stderr)
        print(f"FABBENCH_EMULATION={cluster.state_file}")
        return
    if max_time <= 0:
        raise UsageError("--max-time must be more than 0 seconds")
    if (image is None) != (runtime is None) or (image is not None and action == "up"):
        raise UsageError("--image and --runtime go together, with `-- run ...` or "
                         "`-- study run ...`")
    try:
        if args[:1] == ["study"]:  # the study's cells each run on a cluster of this shape
            if ranks_per_node != 1:
                raise UsageError("--ranks-per-node: a study's cells set their own ranks per "
                                 "node")
            if image is not None and runtime is not None:  # both or neither (above)
                containers.check_image(runtime, image)
            code = session.run_study(site.Site(emulation=emulation, image=image,
                                               runtime=runtime), args, max_time)
        elif image is None or runtime is None:  # both or neither (above)
            code = session.run_under(emulation, args, max_time)
        else:
            code = containers.run_in_image(emulation, runtime, image, args, max_time)
    except session.Terminated as exc:  # torn down already; the shell's code for the signal
        print(f"fabbench: emulate: stopped by signal {exc.signum}; the cluster is removed",
              file=sys.stderr)
        code = 128 + exc.signum
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command(context_settings={"allow_interspersed_args": True})(emulate)
