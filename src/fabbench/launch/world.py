"""The world a rank got, checked against the world its launcher announced, before anything is
written: a launcher that says N ranks and a communicator of another size (every process a
singleton, "rank 0 of 1", when the MPI library does not speak the launcher's PMI), or two
processes that claim one rank, fail every rank at start-up with one line naming both numbers.

Nodes too: a job that announces N nodes and whose ranks all came up on fewer hosts is a wrong world
(Open MPI under the MPI Operator does this and reports success: mpi-operator #731, #842). What a
job announces, the first that is set: FABBENCH_EXPECT_NODES (said explicitly: a rendered job, a
user), then the variables of the rank's origin (its launcher's ``node_vars``: mpirun's map,
the srun step's nodes).

A rank's node is FABBENCH_NODE_NAME when set (the chart's pods get the Kubernetes node's name,
spec.nodeName, through the downward API: a pod's hostname is the pod's, or on the node's network
the host's, which need not be the node's name); else its origin's name for the node when it has
one (srun's SLURMD_NODENAME); else its hostname. The records name each rank's host by it
(launch.rank), so that a verdict's nodes are the nodes `fabbench floors label-nodes` patches
(records name a rank's host by FABBENCH_NODE_NAME or the hostname: host_name). Every rank
gathers every rank's announcement, so all take the same decision (an ssh-started rank may not see
the variables its launcher's host had)."""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Mapping

from fabbench.comm import primitives
from fabbench.comm.base import Communicator
from fabbench.errors import RunError, UsageError
from fabbench.launch import launchers
from fabbench.launch.discover import RankEnv


class WorldMismatch(RunError):
    """The communicator's world is not the one the launcher announced."""


# the node's name as the scheduler knows it (the chart: the Kubernetes node, spec.nodeName)
NODE_NAME_ENV = "FABBENCH_NODE_NAME"

# (variable, what it is): said explicitly, before the origin's own (a launcher's node_vars)
EXPECT_NODES = ("FABBENCH_EXPECT_NODES", "said explicitly")


def announced_nodes(me: RankEnv | None, env: Mapping[str, str] | None = None
                    ) -> tuple[int, str] | None:
    """(N, "VAR=N, what") for the nodes this rank's job announces, or None when it says nothing.

    Raises UsageError when FABBENCH_EXPECT_NODES is not a whole number of at least 1."""
    env = os.environ if env is None else env
    # only the origin's own: an allocation's size says nothing about an mpirun inside it
    own = launchers.get(me.origin).node_vars if me is not None else ()
    for var, what in (EXPECT_NODES, *own):
        value = env.get(var)
        if value is None or value == "":
            continue
        try:
            count = int(value)
        except ValueError:
            count = 0
        if count < 1:
            if var == "FABBENCH_EXPECT_NODES":
                raise UsageError(f"FABBENCH_EXPECT_NODES={value!r} is not a node count (a whole "
                                 "number, at least 1)")
            continue  # a launcher's own variable we cannot read: it announces nothing
        return count, f"{var}={count}, {what}"
    return None


def host_name(env: Mapping[str, str] | None = None) -> str:
    """What the records call this rank's host: FABBENCH_NODE_NAME (the Kubernetes node), else
    the hostname."""
    env = os.environ if env is None else env
    return env.get(NODE_NAME_ENV) or socket.gethostname()


def node_name(me: RankEnv, env: Mapping[str, str] | None = None) -> str:
    """The node this rank runs on: FABBENCH_NODE_NAME, else its origin's name for it (Slurm's
    under srun), else the hostname."""
    env = os.environ if env is None else env
    if env.get(NODE_NAME_ENV):
        return env[NODE_NAME_ENV]
    var = launchers.get(me.origin).node_name_var
    if var is not None and env.get(var):
        return env[var]
    return socket.gethostname()


def check_world(me: RankEnv, primitive: str, comm: Communicator,
                env: Mapping[str, str] | None = None, *, over: str | None = None) -> None:
    """Raises WorldMismatch on every rank of a wrong world (a collective: all ranks call it).
    ``over``: the controller a primitive runs over (Horovod's), as the plan names it."""
    env = os.environ if env is None else env
    announced = announced_nodes(me, env)  # bad input stops before the collective below
    if comm.size != me.size:
        raise WorldMismatch(f"the launcher announced {me.size} ranks ({me.announced}) but "
                            f"{primitive} came up with a world of {comm.size}: "
                            + _size_cause(me, primitive, over, comm.size))
    if comm.size == 1:
        return
    gathered = comm.gather_objects((me.rank, socket.gethostname(), os.getpid(),
                                    node_name(me, env), announced))
    claims = [(rank, host, pid) for rank, host, pid, _, _ in gathered]
    said = [rank for rank, _, _ in claims]
    count = Counter(said)
    twice = sorted(r for r, n in count.items() if n > 1)
    if twice:
        where = ", ".join(f"{host} pid {pid}" for r, host, pid in claims if r == twice[0])
        missing = sorted(set(range(comm.size)) - set(said))
        raise WorldMismatch(
            f"{count[twice[0]]} processes claim rank {twice[0]} of "
            f"{me.size} ({me.rank_var}={twice[0]}: {where})"
            + (f" and none claims rank {missing[0]}" if missing else "")
            + f"; {primitive} numbered them 0 to {comm.size - 1}: the launcher's variables are "
            "not this job's (inherited from an outer job, or set by hand)")
    wrong = [(i, r) for i, r in enumerate(said) if i != r]
    if wrong:
        i, r = wrong[0]
        raise WorldMismatch(f"{primitive} made rank {i} of the process that {me.origin} calls "
                            f"rank {r} ({me.rank_var}={r}): the launcher's variables are not "
                            "this communicator's (nested launchers?)")
    _check_nodes(gathered, comm.size)


def _check_nodes(gathered: list[tuple[int, str, int, str, tuple[int, str] | None]],
                 size: int) -> None:
    """The job's nodes against the nodes its ranks came up on (the same list on every rank)."""
    said = [a for *_, a in gathered if a is not None]
    if not said:
        return
    expected, source = max(said)
    nodes = sorted({node for _, _, _, node, _ in gathered})
    if len(nodes) >= min(expected, size):  # fewer ranks than nodes cannot fill every node
        return
    where = ", ".join(nodes[:4]) + (", ..." if len(nodes) > 4 else "")
    raise WorldMismatch(
        f"the job announced {expected} nodes ({source}) but its {size} ranks came up on "
        f"{len(nodes)} host{'s' if len(nodes) != 1 else ''} ({where}): the launcher did not "
        "start the ranks on the job's nodes (a hostfile or agent that runs everything locally?)")


def _size_cause(me: RankEnv, primitive: str, over: str | None, got: int) -> str:
    if got == 1 and launchers.get(primitives.get(primitive).launcher(over)).mpi:
        return ("every process is a singleton ('rank 0 of 1'): the MPI library did not reach "
                f"the {me.origin} launcher's process manager; start MPI ranks with the mpirun "
                "of the same MPI, or srun --mpi=pmix with an MPI built with PMIx")
    return (f"{me.size_var} is not this communicator's world (variables inherited from an outer "
            "job, or a launcher inside another one)")
