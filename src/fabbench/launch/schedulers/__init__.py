"""Schedulers by name: one class per scheduler, registered with ``@register`` (scheduler.py says
what a scheduler is). A new scheduler is one class; importing its module registers it
(this_host.py, slurm_job.py, mpijob.py, indexed_job.py).

    scheduler    rendered by                   its place (discovery)       a study cell's ranks
    local        (nothing: fabbench run here)  this host, or an emulated   fabbench run --ranks N
                                               site's nodes
    slurm        render slurm: sbatch script   SLURM_JOB_ID, its nodes     an srun step
    mpijob       render k8s, MPI ranks         the operator's hostfile     mpirun over it
    indexed-job  render k8s, spawned ranks     (its pods are ranks)        (no study)

Callers ask the registry: ``get(name)`` (a manifest's place names its scheduler), ``discover``
(the place this process is in), ``rendered`` (the scheduler of a rendered job).
"""

from __future__ import annotations

from collections.abc import Mapping

from fabbench.errors import UsageError
from fabbench.launch.schedulers import indexed_job, mpijob, slurm_job, this_host
from fabbench.launch.schedulers.scheduler import REGISTRY, Place, Scheduler, get, register

__all__ = ["REGISTRY", "Place", "Scheduler", "discover", "get", "indexed_job", "mpijob",
           "register", "rendered", "slurm_job", "studied", "this_host"]


def discover(env: Mapping[str, str]) -> Place:
    """The place this process (its environment ``env``) is in: that of the first scheduler, in
    order, that recognises its allocation; else this host alone."""
    for scheduler in sorted(REGISTRY, key=lambda s: s.order):
        if (place := scheduler.place(env)) is not None:
            return place
    return this_host.Local.alone()


def rendered(command: str, family: str) -> Scheduler:
    """The scheduler whose job `fabbench render <command>` writes for ranks of render family
    ``family`` (launch.launchers: "mpi", "rendezvous"), the first registered."""
    for scheduler in REGISTRY:
        if scheduler.renders == command and family in scheduler.families:
            return scheduler
    raise UsageError(f"no scheduler runs {family} ranks in a job of fabbench render {command}")


def studied() -> tuple[str, ...]:
    """The schedulers a study may run in (a study manifest's place names one)."""
    return tuple(s.name for s in REGISTRY if s.studies)
