"""`fabbench emulate run|up|down`: a fabbench command across an emulated cluster of network
namespaces, or one kept standing. Parsing only; fabbench.emulate builds and runs."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from fabbench.emulate import Emulation

emulate_app = typer.Typer(no_args_is_help=True, help=(
    "Run benchmarks across emulated nodes on this host (root).\n\n"
    "A network namespace each (own interface fbnet0, address in 198.18.0.0/15, hostname), veth "
    "links through a bridge, tc shaping rate, delay and loss both ways.\n\n"
    "Examples:\n"
    "    fabbench emulate run --nodes 2 --link 1gbit -- run --primitive mpi\n"
    "    fabbench emulate up --nodes 4 --link 1gbit --delay 50us  # one kept standing"))

# the cluster's shape, the same options for `run` and `up`
Nodes = Annotated[int, typer.Option(help="Emulated nodes (namespaces).")]
LinkRate = Annotated[str, typer.Option(
    "--link", help="Each node's link rate, as tc writes it: 1gbit, 250mbit.")]
Delay = Annotated[str, typer.Option(help="One-way delay of each link, each direction: 50us, "
                                         "1ms.")]
Loss = Annotated[str, typer.Option(help="Packet loss of each link, each direction: 0.1%.")]
SlowNode = Annotated[list[str] | None, typer.Option(
    help="NODE:RATE, one node's link at another rate (nodes count from 0); repeatable.")]
LossyNode = Annotated[list[str] | None, typer.Option(
    help="NODE:LOSS, one node's link with its own loss; repeatable.")]
RanksPerNode = Annotated[int, typer.Option(help="Ranks placed on each node.")]


def _emulation(nodes: int, link: str, delay: str, loss: str, slow_node: list[str] | None,
               lossy_node: list[str] | None, ranks_per_node: int) -> Emulation:
    from fabbench.emulate import make_emulation

    return make_emulation(nodes=nodes, link=link, delay=delay, loss=loss,
                          slow_nodes=tuple(slow_node or ()), lossy_nodes=tuple(lossy_node or ()),
                          ranks_per_node=ranks_per_node)


@emulate_app.command("run", context_settings={"allow_interspersed_args": True})
def run(
    command: Annotated[list[str], typer.Argument(
        help="The fabbench command to run on the cluster, after `--`.", show_default=False)],
    nodes: Nodes = 2, link: LinkRate = "1gbit", delay: Delay = "0", loss: Loss = "0",
    slow_node: SlowNode = None, lossy_node: LossyNode = None, ranks_per_node: RanksPerNode = 1,
    max_time: Annotated[float, typer.Option(
        help="Seconds the command may run before it is stopped.")] = 6 * 3600.0,
    image: Annotated[str | None, typer.Option(
        help="Run the ranks in this image (a .sif for apptainer; a directory or .sqfs for "
        "charliecloud): the host's launcher starts one containerised `fabbench run` per "
        "slot.", show_default=False)] = None,
    runtime: Annotated[str | None, typer.Option(
        help="The container runtime of --image: apptainer or charliecloud.",
        show_default=False)] = None,
) -> None:
    """Run a fabbench command across emulated nodes.

    The cluster is built for the command and removed when it ends, fails or is interrupted.
    Under a study each cell runs on a cluster of this shape (the first N nodes for an N-node
    cell). The old spelling without `run` (`fabbench emulate --nodes 2 -- run ...`) still
    works.

    Examples:
        fabbench emulate run --nodes 2 --link 1gbit -- run --primitive mpi --ops allreduce
        fabbench emulate run --nodes 2 --image fabbench.sif --runtime apptainer
            -- run --primitive mpi  # the ranks in an image
        fabbench emulate run --nodes 4 --link 1gbit --slow-node 3:250mbit
            -- study run quick --out siteB/  # a site with one slow node, for a study
    """
    from fabbench.launch import emulated

    emulation = _emulation(nodes, link, delay, loss, slow_node, lossy_node, ranks_per_node)
    raise typer.Exit(emulated.run_command(emulation, command, max_time, image=image,
                                         runtime=runtime))


@emulate_app.command()
def up(nodes: Nodes = 2, link: LinkRate = "1gbit", delay: Delay = "0", loss: Loss = "0",
       slow_node: SlowNode = None, lossy_node: LossyNode = None,
       ranks_per_node: RanksPerNode = 1) -> None:
    """Build an emulated cluster that stays up until `fabbench emulate down`.

    It prints FABBENCH_EMULATION=FILE: a command run with that variable set runs on the
    cluster.

    Examples:
        fabbench emulate up --nodes 4 --link 1gbit
        fabbench emulate up --nodes 3 --delay 1ms --lossy-node 2:0.5%  # node 2 loses packets
    """
    from fabbench.emulate import session

    cluster = session.up(_emulation(nodes, link, delay, loss, slow_node, lossy_node,
                                    ranks_per_node))
    for n in cluster.nodes:
        print(f"# {n.hostname} {n.address} netns {n.netns}", file=sys.stderr)
    print(f"FABBENCH_EMULATION={cluster.state_file}")


@emulate_app.command()
def down(
    pid: Annotated[int | None, typer.Option(
        help="The holder pid of the cluster to stop (default: the one FABBENCH_EMULATION "
        "names, else the only one standing).")] = None,
    every: Annotated[bool, typer.Option(
        "--all", help="Stop every standing cluster, other users' included.")] = False,
) -> None:
    """Stop a standing emulated cluster and remove what it made.

    Examples:
        fabbench emulate down
        fabbench emulate down --all  # every standing cluster, other users' included
    """
    from fabbench.emulate import session
    from fabbench.errors import UsageError

    if pid is not None and every:
        raise UsageError("emulate down takes --pid or --all, not both")
    stopped = session.down(pid, every=every)
    print(f"fabbench: emulate: stopped {len(stopped)} standing cluster(s)"
          + (f" (holders {', '.join(map(str, stopped))})" if stopped else ""))


WORDS = ("run", "up", "down")


def old_spelling(argv: list[str]) -> list[str]:
    """The command line with `run` put after `emulate` where the old spelling left it out
    (`fabbench emulate --nodes 2 -- run ...`); any other command line as given."""
    if argv[:1] == ["emulate"] and len(argv) > 1 and argv[1] not in (*WORDS, "--help"):
        return ["emulate", "run", *argv[1:]]
    return argv


def register(app: typer.Typer) -> None:
    app.add_typer(emulate_app, name="emulate")
