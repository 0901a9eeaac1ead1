"""The world a rank got, checked against the world its launcher announced, before anything is
written: a launcher that says N ranks and a communicator of another size (every process a
singleton, "rank 0 of 1", when the MPI library does not speak the launcher's PMI), or two
processes that claim one rank, fail every rank at start-up with one line naming both numbers."""

from __future__ import annotations

import os
import socket
from collections import Counter

from fabbench.comm.base import Communicator
from fabbench.errors import RunError
from fabbench.launch.discover import RankEnv

MPI_BASED = ("mpi", "horovod")


class WorldMismatch(RunError):
    """The communicator's world is not the one the launcher announced."""


def check_world(me: RankEnv, primitive: str, comm: Communicator) -> None:
    """Raises WorldMismatch on every rank of a wrong world (a collective: all ranks call it)."""
    if comm.size != me.size:
        raise WorldMismatch(f"the launcher announced {me.size} ranks ({me.announced}) but "
                            f"{primitive} came up with a world of {comm.size}: "
                            + _size_cause(me, primitive, comm.size))
    if comm.size == 1:
        return
    claims = comm.gather_objects((me.rank, socket.gethostname(), os.getpid()))
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
        raise WorldMismatch(f"{primitive} made rank {i} of the process that {me.launcher} calls "
                            f"rank {r} ({me.rank_var}={r}): the launcher's variables are not "
                            "this communicator's (nested launchers?)")


def _size_cause(me: RankEnv, primitive: str, got: int) -> str:
    if got == 1 and primitive in MPI_BASED:
        return ("every process is a singleton ('rank 0 of 1'): the MPI library did not reach "
                f"the {me.launcher} launcher's process manager; start MPI ranks with the mpirun "
                "of the same MPI, or srun --mpi=pmix with an MPI built with PMIx")
    return (f"{me.size_var} is not this communicator's world (variables inherited from an outer "
            "job, or a launcher inside another one)")
