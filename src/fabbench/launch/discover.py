"""Who am I? Rank, world size and local rank from the environment of the launcher that started
this process: mpirun (Open MPI), srun (Slurm with PMIx or PMI2), torchrun, horovodrun, a
Kubernetes Indexed Job, or fabbench's own local launcher."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from fabbench.errors import UsageError


@dataclass(frozen=True)
class RankEnv:
    rank: int
    size: int
    local_rank: int
    launcher: str

    def as_dict(self) -> dict:
        return {"rank": self.rank, "size": self.size, "local_rank": self.local_rank}


# (launcher, rank var, size var, local rank var); the first whose rank and size are set wins
_SOURCES = (
    ("mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("horovodrun", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK"),
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ("srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    ("pmix", "PMIX_RANK", "FABBENCH_WORLD_SIZE", "FABBENCH_LOCAL_RANK"),
    ("kubernetes", "JOB_COMPLETION_INDEX", "FABBENCH_WORLD_SIZE", "FABBENCH_LOCAL_RANK"),
)


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise UsageError(f"environment variable {name}={env[name]!r} is not an integer") from None


def discover(env: Mapping[str, str] | None = None) -> RankEnv | None:
    """The rank this process is, or None when no launcher started it (then fabbench launches).

    A Slurm batch script's own shell has SLURM_PROCID=0 but is no job step; only a step
    (SLURM_STEP_ID set, as srun sets it) counts as a launched rank.
    """
    env = os.environ if env is None else env
    for launcher, rank_var, size_var, local_var in _SOURCES:
        if rank_var not in env or size_var not in env:
            continue
        if launcher == "srun" and env.get("SLURM_STEP_ID", env.get("SLURM_STEPID")) in (
                None, "", "batch", "4294967294"):
            continue
        rank, size = _int(env, rank_var), _int(env, size_var)
        local = _int(env, local_var) if local_var in env else 0
        if not 0 <= rank < size:
            raise UsageError(f"{rank_var}={rank} is not a rank of a world of {size_var}={size}")
        return RankEnv(rank, size, local, launcher)
    return None
