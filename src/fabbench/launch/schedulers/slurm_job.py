"""A Slurm allocation: `fabbench render slurm` writes its sbatch script (slurm.sbatch.j2, a whole
study in slurm-study.sbatch.j2), each benchmark an srun step as its launcher says
(launch.launchers: srun --mpi=pmix for MPI ranks, a TCP rendezvous at the first node for spawned
ones); a study run in its batch script sees the allocation (SLURM_JOB_ID, its node list) and
starts each cell as such a step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fabbench.errors import UsageError
from fabbench.launch.launchers import Launcher
from fabbench.launch.schedulers.scheduler import Place, Scheduler, register
from fabbench.procs import run_tool


def _run(argv: list[str], timeout: float = 20) -> str:
    """scontrol's output (UsageError in one line when it cannot run or fails)."""
    r = run_tool(argv, timeout)
    if r is None:
        raise UsageError(f"{argv[0]} failed: [Errno 2] No such file or directory: {argv[0]!r}")
    if r.returncode is None:
        raise UsageError(f"{argv[0]} failed: {r.problem}")
    if r.returncode != 0:
        raise UsageError(f"{' '.join(argv)} failed: {r.stderr.strip()[-300:]}")
    return r.stdout


@register
class Slurm(Scheduler):
    name = "slurm"
    renders = "slurm"
    families = frozenset({"mpi", "rendezvous"})
    template = "slurm.sbatch.j2"
    study_template = "slurm-study.sbatch.j2"
    order = 10

    def place(self, env: Mapping[str, str]) -> Place | None:
        """Inside an allocation (a batch script or salloc shell): its nodes, by scontrol, and
        the first one's address."""
        job = env.get("SLURM_JOB_ID")
        if not job:
            return None
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
        return Place(scheduler=self.name, nodes=count, hostnames=hosts, job_id=job,
                     master_addr=addr)

    def step(self, launcher: Launcher, nodes: int, per_node: int) -> list[str]:
        return launcher.slurm(nodes, per_node)

    def task(self) -> list[str]:
        # --ntasks: the job's own SLURM_NTASKS would otherwise ask for its task count on one node
        return ["srun", "--nodes=1", "--ntasks=1"]

    def launch(self, place: Place, launcher: Launcher, *, nodes: int, per_node: int,
               program: Sequence[str], port: int,
               forward: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        """An srun step of the allocation."""
        env = self.meet(place, launcher, port, forward)
        return [*self.step(launcher, nodes, per_node), *program], env
