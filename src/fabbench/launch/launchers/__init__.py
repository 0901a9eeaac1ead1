"""Launchers by name: one class per launcher, registered with ``@register`` (base.py says what a
launcher is). A new launcher is one class; importing its module registers it.

Who starts the ranks of a primitive (comm.primitives names its launcher) and where:

    launcher    this host, emulated nodes        Slurm                  Kubernetes pod
    mpirun      mpirun with the profile's MCA    srun --mpi=pmix        mpirun over the MPI
                parameters                                              operator's hostfile
    spawn       one process per rank, a TCP      srun + MASTER_ADDR/    torchrun in a pod of
                rendezvous (torchrun's vars)     PORT (the port rule)   several ranks
    horovodrun  horovodrun --gloo                (its own rendezvous: not rendered)

and the launchers whose ranks fabbench only recognises (srun, torchrun, kubernetes, mvapich,
hydra/PMI, pmix): launch.discover reads each one's variables. Around a rank's command, the
container runtime (launch.runtimes); the rendezvous ports, launch.ports; the schedulers whose
jobs start them (Slurm, an MPIJob, an Indexed Job), launch.schedulers.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from fabbench.launch.launchers import horovodrun, mpirun, pmi, pod, spawn, srun, torchrun
from fabbench.launch.launchers.launcher import (
    REGISTRY,
    Launcher,
    LauncherRegistry,
    LaunchSpec,
    PodLaunch,
    RankVars,
    Ready,
    Where,
    get,
    register,
)
from fabbench.plan import Plan, RunState, rank_env

if TYPE_CHECKING:
    from fabbench.emulate.cluster import Cluster
    from fabbench.launch.settings import Resolved

__all__ = ["REGISTRY", "RANK_MODULE", "Launcher", "LaunchSpec", "PodLaunch", "RankVars", "Ready",
           "LauncherRegistry", "Where", "get", "horovodrun", "launch_spec", "mpirun", "pmi", "pod",
           "ranks_across", "register", "schedulable", "spawn", "srun", "torchrun"]

RANK_MODULE = (sys.executable, "-m", "fabbench.launch.rank")


def launch_spec(plan: Plan, resolved: Resolved, program: Sequence[str] = RANK_MODULE,
                state: RunState | None = None,
                forward: Mapping[str, str] = MappingProxyType({})) -> LaunchSpec:
    """The ranks of ``plan`` (and its launch's ``state``; None: a fresh launch's) on this host,
    or across the emulated cluster this process runs under, each running ``program``:
    fabbench's rank module, or (the fidelity check) a reference loop started exactly as
    fabbench's ranks are. ``forward``: variables every rank gets besides the plan's, on other
    (emulated) nodes too (mpirun exports them with -x)."""
    from fabbench import emulate

    return get(plan.launcher).local(plan, resolved, Where(cluster=emulate.current()), program,
                                    {**forward, **rank_env(plan, state or RunState())})


def ranks_across(cluster: Cluster, launcher: str, program: Sequence[str],
                 env: Mapping[str, str]) -> LaunchSpec:
    """``program`` in every slot of ``cluster``, started from this host by ``launcher`` (mpirun
    over the cluster's hostfile and agent, exporting ``env``; or a spawn, the rendezvous at
    node 0), with ``env`` and no profile of fabbench's: emulate's containerised ranks
    (launch/containers.py), whose own fabbench applies the profile inside the image."""
    return get(launcher).across(cluster, program, env)


def schedulable(launcher: str) -> bool:
    """Can a scheduler (Slurm, Kubernetes) start ranks of this launcher's kind? (How each does:
    launch.schedulers.)"""
    return get(launcher).render_family is not None

