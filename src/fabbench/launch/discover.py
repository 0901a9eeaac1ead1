"""Who am I? Rank, world size and local rank from the environment of the launcher that started
this process, and a refusal when a launcher started it but its place cannot be told.

Every launcher family fabbench can meet is known here, innermost first (a launcher started by
another one, torchrun inside an srun step say, sets its own variables beside the outer one's; the
inner one is the world this process belongs to):

  Open MPI's mpirun      OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE / OMPI_COMM_WORLD_LOCAL_RANK
  MVAPICH's mpirun_rsh   MV2_COMM_WORLD_RANK / MV2_COMM_WORLD_SIZE / MV2_COMM_WORLD_LOCAL_RANK
  hydra, PMI-1, PMI-2    PMI_RANK / PMI_SIZE / MPI_LOCALRANKID (MPICH, Intel MPI; srun --mpi=pmi2)
  horovodrun             HOROVOD_RANK / HOROVOD_SIZE / HOROVOD_LOCAL_RANK
  torchrun               RANK / WORLD_SIZE / LOCAL_RANK
  srun (a job step)      SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID
  PMIx                   PMIX_RANK (the size only from FABBENCH_WORLD_SIZE)
  Kubernetes Indexed Job JOB_COMPLETION_INDEX (the size from FABBENCH_WORLD_SIZE)
"""

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
    rank_var: str = "FABBENCH_RANK"  # the variables that said so, for messages
    size_var: str = "FABBENCH_WORLD_SIZE"

    def as_dict(self) -> dict:
        return {"rank": self.rank, "size": self.size, "local_rank": self.local_rank}

    @property
    def announced(self) -> str:
        """"PMI_RANK=1, PMI_SIZE=2 (hydra/PMI)": what the launcher said, as it said it."""
        return f"{self.rank_var}={self.rank}, {self.size_var}={self.size} ({self.launcher})"


@dataclass(frozen=True)
class Family:
    launcher: str
    rank_var: str
    size_var: str
    local_var: str
    distinctive: bool = True  # its rank variable alone says "a launcher started me"


FAMILIES = (
    Family("mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    Family("mvapich", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK"),
    Family("hydra/PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    Family("horovodrun", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK"),
    # RANK alone is too common a name to mean anything; torchrun sets WORLD_SIZE with it
    Family("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", distinctive=False),
    Family("srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    Family("pmix", "PMIX_RANK", "FABBENCH_WORLD_SIZE", "FABBENCH_LOCAL_RANK"),
    Family("kubernetes", "JOB_COMPLETION_INDEX", "FABBENCH_WORLD_SIZE", "FABBENCH_LOCAL_RANK"),
)
_NOT_A_STEP = (None, "", "batch", "extern", "4294967294", "4294967295")


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise UsageError(f"environment variable {name}={env[name]!r} is not an integer") from None


def _in_batch_shell(family: Family, env: Mapping[str, str]) -> bool:
    """A Slurm batch script's own shell has SLURM_PROCID=0 but is no job step; only a step
    (SLURM_STEP_ID set, as srun sets it) is a launched rank."""
    return family.launcher == "srun" and env.get(
        "SLURM_STEP_ID", env.get("SLURM_STEPID")) in _NOT_A_STEP


def discover(env: Mapping[str, str] | None = None) -> RankEnv | None:
    """The rank this process is, or None when no launcher started it (then fabbench launches).

    Raises UsageError when a launcher's rank variable is set but this process cannot be placed
    (no world size beside it, or a rank outside the world): such a process must not start ranks
    of its own, which is what "outside a job" would mean.
    """
    env = os.environ if env is None else env
    unplaced = []
    for f in FAMILIES:
        if f.rank_var not in env or _in_batch_shell(f, env):
            continue
        if f.size_var not in env:
            if f.distinctive:
                unplaced.append(f)
            continue
        rank, size = _int(env, f.rank_var), _int(env, f.size_var)
        local = _int(env, f.local_var) if f.local_var in env else 0
        if not 0 <= rank < size:
            raise UsageError(f"{f.rank_var}={rank} is not a rank of a world of "
                             f"{f.size_var}={size}")
        return RankEnv(rank, size, local, f.launcher, f.rank_var, f.size_var)
    if unplaced:
        f = unplaced[0]
        raise UsageError(
            f"{f.rank_var}={env[f.rank_var]} says {f.launcher} started this process, but "
            f"nothing gives the world size ({f.size_var} is not set): fabbench cannot place "
            "this rank and will not launch ranks of its own inside a job; set "
            f"FABBENCH_WORLD_SIZE, or start it with mpirun, srun or torchrun")
    return None
