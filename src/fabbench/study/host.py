"""Where a study runs: this host alone, or the nodes of a Slurm allocation; and, cell by cell,
why this place cannot run a cell (no GPU, no such fabric hardware, too few nodes, ...).

A cell that cannot run is skipped with that reason written into the manifest, never silently.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabbench.errors import UsageError
from fabbench.launch.launchers import get as launcher_named
from fabbench.launch.launchers import schedulable
from fabbench.procs import run_tool
from fabbench.study.spec import Cell


@dataclass(frozen=True, kw_only=True)
class Place:
    """What the study runs on."""

    scheduler: str        # "local" | "slurm" | "mpijob" (a Kubernetes MPIJob's launcher)
    nodes: int            # nodes the cells may use
    hostnames: tuple[str, ...] = ()
    job_id: str | None = None
    master_addr: str | None = None  # the first node's address (rendezvous of gloo/nccl)
    hostfile: str | None = None     # mpijob: the operator's hostfile of the workers

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "hostnames": list(self.hostnames)}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> Place:
        """The place a study manifest names (its schema requires scheduler and nodes)."""
        return cls(scheduler=data["scheduler"], nodes=data["nodes"],
                   hostnames=tuple(data.get("hostnames", ())), job_id=data.get("job_id"),
                   master_addr=data.get("master_addr"), hostfile=data.get("hostfile"))


def _run(argv: list[str], timeout: float = 20) -> str:
    r = run_tool(argv, timeout)
    if r is None:
        raise UsageError(f"{argv[0]} failed: [Errno 2] No such file or directory: {argv[0]!r}")
    if r.returncode is None:
        raise UsageError(f"{argv[0]} failed: {r.problem}")
    if r.returncode != 0:
        raise UsageError(f"{' '.join(argv)} failed: {r.stderr.strip()[-300:]}")
    return r.stdout


def detect_place(env: dict[str, str] | None = None) -> Place:
    """Inside a Slurm allocation (a batch script or salloc shell, not a job step): its nodes.
    Otherwise this host, one node."""
    from fabbench.emulate.site import SITE_ENV, Site
    from fabbench.launch.discover import discover

    env = dict(os.environ if env is None else env)
    if discover(env) is not None:
        raise UsageError("fabbench study run starts its own launches: run it in the job's "
                         "batch script, not inside a job step (srun/mpirun)")
    if env.get(SITE_ENV):  # `fabbench emulate ... -- study run`: the emulated site's nodes
        nodes = Site.from_json(env[SITE_ENV]).nodes
        return Place(scheduler="local", nodes=nodes,
                     hostnames=tuple(f"node{i}" for i in range(nodes)))
    job = env.get("SLURM_JOB_ID")
    if job:
        nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST", "")
        hosts = tuple(_run(["scontrol", "show", "hostnames", nodelist]).split()) \
            if nodelist else ()
        count = int(env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or len(hosts)
                    or 1)
        addr = None
        if hosts:
            fields = _run(["scontrol", "show", "node", "-o", hosts[0]])
            addr = next((f.split("=", 1)[1] for f in fields.split()
                         if f.startswith("NodeAddr=")), None) or hosts[0]
        return Place(scheduler="slurm", nodes=count, hostnames=hosts, job_id=job,
                     master_addr=addr)
    hostfile = env.get("OMPI_MCA_orte_default_hostfile")
    if hostfile:  # the MPI operator's launcher pod: the workers are in this hostfile
        try:
            lines = Path(hostfile).read_text().splitlines()
        except OSError as exc:
            raise UsageError(f"cannot read the MPIJob's hostfile {hostfile}: "
                             f"{exc.strerror}") from None
        hosts = tuple(ln.split()[0] for ln in lines if ln.strip() and not ln.startswith("#"))
        if not hosts:
            raise UsageError(f"the MPIJob's hostfile {hostfile} names no host")
        return Place(scheduler="mpijob", nodes=len(hosts), hostnames=hosts,
                     master_addr=hosts[0], hostfile=hostfile)
    return Place(scheduler="local", nodes=1)


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
    if cell.link is not None:
        if not host.root:
            return "emulated links (network namespaces, tc) need root"
        if place.scheduler != "local":
            return "emulated links run on one host, not inside an allocation"
    elif cell.nodes > place.nodes:
        where = "this host is one node" if place.scheduler == "local" else \
            f"the allocation has {place.nodes} node(s)"
        return f"needs {cell.nodes} nodes; {where}"
    if cell.nodes > 1 and profile.single_host:
        return f"fabric {profile.name} is single-host; the cell spans {cell.nodes} nodes"
    launcher = launcher_of(cell)
    if place.scheduler != "local" and not schedulable(launcher):
        return (f"{cell.primitive} starts its ranks with {launcher}, which has its own "
                f"rendezvous: {place.scheduler} cannot start it")
    if not host.mpirun and ((launcher_named(launcher).mpi and place.scheduler == "local")
                            or place.scheduler == "mpijob"):
        return "Open MPI's mpirun is not installed"
    if spec.module is not None and spec.module not in host.modules:
        return f"{spec.module} is not installed (the {spec.name} primitive's package)"
    return None
