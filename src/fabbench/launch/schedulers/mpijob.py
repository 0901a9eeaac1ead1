"""A Kubernetes MPIJob (kubeflow.org/v2beta1, the MPI operator): `fabbench render k8s` writes
one for MPI ranks (k8s-mpijob.yaml.j2: a launcher pod that runs mpirun over the hostfile the
operator writes, workers that run the image's sshd as root). A study run in its launcher pod
sees that hostfile (OMPI_MCA_orte_default_hostfile) and starts each cell with mpirun over it,
spawned ranks too (their rendezvous at the first worker, exported with -x)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from fabbench.errors import UsageError
from fabbench.launch.launchers import Launcher, mpirun
from fabbench.launch.schedulers.scheduler import Place, Scheduler, register

HOSTFILE_ENV = "OMPI_MCA_orte_default_hostfile"  # set by the operator in the launcher pod


@register
class MPIJob(Scheduler):
    name = "mpijob"
    renders = "k8s"
    families = frozenset({"mpi"})
    template = "k8s-mpijob.yaml.j2"
    order = 20

    def place(self, env: Mapping[str, str]) -> Place | None:
        """In the launcher pod: the workers named in the operator's hostfile."""
        hostfile = env.get(HOSTFILE_ENV)
        if not hostfile:
            return None
        try:
            lines = Path(hostfile).read_text().splitlines()
        except OSError as exc:
            raise UsageError(f"cannot read the MPIJob's hostfile {hostfile}: "
                             f"{exc.strerror}") from None
        hosts = tuple(ln.split()[0] for ln in lines if ln.strip() and not ln.startswith("#"))
        if not hosts:
            raise UsageError(f"the MPIJob's hostfile {hostfile} names no host")
        return Place(scheduler=self.name, nodes=len(hosts), hostnames=hosts,
                     master_addr=hosts[0], hostfile=hostfile)

    def needs_mpirun(self, launcher: Launcher) -> bool:
        return True  # every cell's ranks are started by mpirun over the hostfile

    def launch(self, place: Place, launcher: Launcher, *, nodes: int, per_node: int,
               program: Sequence[str], port: int,
               forward: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        """mpirun over the workers' hostfile, exporting (-x) what the ranks get."""
        env = self.meet(place, launcher, port, forward)
        if place.hostfile is None:
            raise UsageError("an MPIJob launch needs the operator's hostfile")
        return [*mpirun.over_hostfile(place.hostfile, nodes * per_node, per_node=per_node,
                                      exports=list(env), as_root=True), *program], env
