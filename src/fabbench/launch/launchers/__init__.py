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
container runtime (launch.runtimes); the rendezvous ports, launch.ports.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from fabbench.errors import UsageError
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
           "ranks_across", "register", "schedulable", "scheduled", "spawn", "srun", "torchrun"]

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
    """Can a scheduler (Slurm, Kubernetes) start ranks of this launcher's kind?"""
    return get(launcher).render_family is not None


def scheduled(scheduler: str, launcher: str, *, nodes: int, per_node: int,
              program: Sequence[str], master_addr: str, port: int, hostfile: str | None = None,
              forward: Mapping[str, str] = MappingProxyType({})
              ) -> tuple[list[str], dict[str, str]]:
    """The launch of ``program`` in a Slurm allocation ("slurm": an srun step) or in an MPI
    operator's launcher pod ("mpijob": mpirun over the workers' hostfile), and the environment
    it adds (the rendezvous of spawned ranks at ``master_addr``:``port``, then ``forward``:
    variables every rank gets, which mpirun exports with -x).

    Raises UsageError for a launcher a scheduler cannot start (horovodrun)."""
    how = get(launcher)
    if not schedulable(launcher):
        raise UsageError(f"{launcher} has its own rendezvous: {scheduler} cannot start it")
    env = {**how.rendezvous(master_addr, port), **forward}
    if scheduler == "mpijob":
        if hostfile is None:
            raise UsageError("an MPIJob launch needs the operator's hostfile")
        return [*mpirun.over_hostfile(hostfile, nodes * per_node, per_node=per_node,
                                      exports=list(env), as_root=True),
                *program], env
    if scheduler == "slurm":
        return [*how.slurm(nodes, per_node), *program], env
    raise UsageError(f"unknown scheduler {scheduler!r}")
