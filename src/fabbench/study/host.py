"""Where a study runs: this host alone, or the nodes of an allocation (its scheduler, from
launch.schedulers, recognises it); and, cell by cell, why this place cannot run a cell (no GPU,
no such fabric hardware, too few nodes, a launcher the scheduler cannot start, ...).

A cell that cannot run is skipped with that reason written into the manifest, never silently.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass

from fabbench.errors import UsageError
from fabbench.launch import schedulers
from fabbench.launch.launchers import get as launcher_named
from fabbench.launch.schedulers import Place
from fabbench.study.spec import Cell

__all__ = ["Host", "Place", "detect_place", "launcher_of", "why_not"]


def detect_place(env: dict[str, str] | None = None) -> Place:
    """The allocation this process is in, as its scheduler recognises it (launch.schedulers:
    a Slurm allocation's batch script or salloc shell, an MPIJob's launcher pod, an emulated
    site); otherwise this host, one node. Never inside a job step: the study starts its own."""
    from fabbench.launch.discover import discover

    env = dict(os.environ if env is None else env)
    if discover(env) is not None:
        raise UsageError("fabbench study run starts its own launches: run it in the job's "
                         "batch script, not inside a job step (srun/mpirun)")
    return schedulers.discover(env)


@dataclass(frozen=True)
class Host:
    """What this host has, looked at once."""

    gpus: bool
    root: bool
    mpirun: bool
    modules: frozenset[str]  # the primitives' own packages (registry: module) installed here

    @classmethod
    def look(cls) -> Host:
        from fabbench.comm import primitives
        from fabbench.sysinfo.gpus import gpus_visible

        wanted = {p.module for p in map(primitives.get, primitives.PRIMITIVES)
                  if p.module is not None}
        return cls(gpus=gpus_visible(), root=os.geteuid() == 0,
                   mpirun=shutil.which("mpirun") is not None,
                   modules=frozenset(m for m in wanted if importlib.util.find_spec(m)))


def launcher_of(cell: Cell) -> str:
    """How the cell's ranks are started (comm.primitives: mpirun, spawn or horovodrun)."""
    from fabbench.comm import primitives

    return primitives.get(cell.primitive).launcher(cell.options.get("horovod_over"))


def why_not(cell: Cell, host: Host, place: Place) -> str | None:
    """The reason this place cannot run the cell, or None when it can."""
    from fabbench.comm import primitives
    from fabbench.fabrics.detect import require_hardware
    from fabbench.fabrics.profile import load_profile

    if cell.device == "cuda" and not host.gpus:
        what = f"{cell.primitive} moves GPU buffers" if primitives.get(cell.primitive).gpu_only \
            else \
            "GPUDirect RDMA moves GPU buffers" if cell.gpudirect == "on" else "device cuda"
        return f"needs a GPU ({what}); none is visible on this host"
    spec = primitives.get(cell.primitive)
    if cell.gpudirect == "on" and not spec.gpudirect:
        return f"{spec.name} has no GPUDirect RDMA path (it stages GPU buffers through the host)"
    profile = load_profile(cell.fabric)
    try:
        require_hardware(profile, str(cell.options.get("wire", "native")))
    except UsageError as exc:
        return str(exc)
    from fabbench.emulate.site import current as emulated_site

    site = emulated_site()
    if site is not None and (why := site.why_not(cell.nodes, cell.link)):
        return why
    scheduler = schedulers.get(place.scheduler)
    if cell.link is not None:
        if not host.root:
            return "emulated links (network namespaces, tc) need root"
        if scheduler.allocates:
            return "emulated links run on one host, not inside an allocation"
    elif cell.nodes > place.nodes:
        return f"needs {cell.nodes} nodes; {scheduler.where(place)}"
    if cell.nodes > 1 and profile.single_host:
        return f"fabric {profile.name} is single-host; the cell spans {cell.nodes} nodes"
    launcher = launcher_named(launcher_of(cell))
    if not scheduler.starts(launcher):
        return (f"{cell.primitive} starts its ranks with {launcher.name}, which has its own "
                f"rendezvous: {place.scheduler} cannot start it")
    if not host.mpirun and scheduler.needs_mpirun(launcher):
        return "Open MPI's mpirun is not installed"
    if spec.module is not None and spec.module not in host.modules:
        return f"{spec.module} is not installed (the {spec.name} primitive's package)"
    return None
