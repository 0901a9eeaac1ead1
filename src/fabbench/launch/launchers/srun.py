"""Slurm's srun: a job step's tasks are ranks (SLURM_PROCID); fabbench's Slurm jobs start each
benchmark as an srun step, and the launchers whose ranks a scheduler can start say which."""

from __future__ import annotations

from collections.abc import Mapping

from fabbench.launch.launchers.launcher import Launcher, RankVars, register

# SLURM_STEP_ID of no job step: a batch script's own shell (SLURM_PROCID=0 there too)
_NOT_A_STEP = (None, "", "batch", "extern", "4294967294", "4294967295")


@register
class Srun(Launcher):
    name = "srun"
    rank_vars = RankVars("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")
    order = 60
    node_vars = (("SLURM_STEP_NUM_NODES", "the srun step"), ("SLURM_NNODES", "the srun step"))
    # what Slurm placed the step on (a site may run several slurmd on one host on purpose)
    node_name_var = "SLURMD_NODENAME"

    def placed(self, env: Mapping[str, str]) -> bool:
        """Only a job step (SLURM_STEP_ID set, as srun sets it) is a launched rank."""
        return env.get("SLURM_STEP_ID", env.get("SLURM_STEPID")) not in _NOT_A_STEP

    @staticmethod
    def step(nodes: int, per_node: int, *, mpi: str | None = None) -> list[str]:
        """An srun step of ``per_node`` tasks on each of ``nodes`` nodes (``mpi``: its --mpi
        plugin, pmix for MPI ranks)."""
        argv = ["srun", "--kill-on-bad-exit=1", f"--nodes={nodes}",
                f"--ntasks-per-node={per_node}"]
        return [*argv, f"--mpi={mpi}"] if mpi else argv
