"""Who am I? Rank, world size and local rank from the environment of the launcher that started
this process (its origin), and a refusal when a launcher started it but its place cannot be
told.

Each registered launcher names the variables it sets (launch.launchers: its ``rank_vars``); they
are read innermost first (its ``order``: a launcher started by another one, torchrun inside an
srun step say, sets its own variables beside the outer one's; the inner one is the world this
process belongs to).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from fabbench.errors import UsageError
from fabbench.launch.launchers import REGISTRY, Launcher, RankVars


@dataclass(frozen=True)
class RankEnv:
    rank: int
    size: int
    local_rank: int
    origin: str  # the launcher that started this rank
    rank_var: str = "FABBENCH_RANK"  # the variables that said so, for messages
    size_var: str = "FABBENCH_WORLD_SIZE"

    def as_dict(self) -> dict[str, int]:
        return {"rank": self.rank, "size": self.size, "local_rank": self.local_rank}

    @property
    def announced(self) -> str:
        """"PMI_RANK=1, PMI_SIZE=2 (hydra/PMI)": what the launcher said, as it said it."""
        return f"{self.rank_var}={self.rank}, {self.size_var}={self.size} ({self.origin})"


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise UsageError(f"environment variable {name}={env[name]!r} is not an integer") from None


def _launchers() -> list[tuple[Launcher, RankVars]]:
    """The launchers that set rank variables, innermost first."""
    return sorted(((x, x.rank_vars) for x in REGISTRY if x.rank_vars is not None),
                  key=lambda pair: pair[0].order)


def discover(env: Mapping[str, str] | None = None) -> RankEnv | None:
    """The rank this process is, or None when no launcher started it (then fabbench launches).

    Raises UsageError when a launcher's rank variable is set but this process cannot be placed
    (no world size beside it, or a rank outside the world): such a process must not start ranks
    of its own, which is what "outside a job" would mean.
    """
    env = os.environ if env is None else env
    unplaced = []
    for launcher, v in _launchers():
        if v.rank not in env or not launcher.placed(env):
            continue
        if v.size not in env:
            if v.distinctive:
                unplaced.append((launcher, v))
            continue
        rank, size = _int(env, v.rank), _int(env, v.size)
        local = _int(env, v.local) if v.local in env else 0
        if not 0 <= rank < size:
            raise UsageError(f"{v.rank}={rank} is not a rank of a world of {v.size}={size}")
        return RankEnv(rank, size, local, launcher.name, v.rank, v.size)
    if unplaced:
        launcher, v = unplaced[0]
        raise UsageError(
            f"{v.rank}={env[v.rank]} says {launcher.name} started this process, but "
            f"nothing gives the world size ({v.size} is not set): fabbench cannot place "
            "this rank and will not launch ranks of its own inside a job; set "
            f"FABBENCH_WORLD_SIZE, or start it with mpirun, srun or torchrun")
    return None
