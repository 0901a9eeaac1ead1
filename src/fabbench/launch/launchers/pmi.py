"""Launchers fabbench meets but never starts ranks with: other MPIs' process managers. It reads
their variables to place a rank they started."""

from __future__ import annotations

from fabbench.launch.launchers.launcher import Launcher, RankVars, register


@register
class Mvapich(Launcher):
    name = "mvapich"  # MVAPICH's mpirun_rsh
    rank_vars = RankVars("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE",
                         "MV2_COMM_WORLD_LOCAL_RANK")
    order = 20


@register
class Hydra(Launcher):
    name = "hydra/PMI"  # hydra, PMI-1, PMI-2: MPICH, Intel MPI; srun --mpi=pmi2
    rank_vars = RankVars("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID")
    order = 30


@register
class Pmix(Launcher):
    name = "pmix"  # the size only from FABBENCH_WORLD_SIZE
    rank_vars = RankVars("PMIX_RANK", "FABBENCH_WORLD_SIZE", "FABBENCH_LOCAL_RANK")
    order = 70
