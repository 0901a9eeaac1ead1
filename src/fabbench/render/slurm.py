"""An sbatch script for a SlurmJob: the fabric profile's environment exported, one srun per
benchmark (`srun --mpi=pmix` for MPI and Horovod; a TCP rendezvous at the allocation's first node
for Gloo and NCCL), in a container (Apptainer, Charliecloud, Pyxis) or with fabbench installed on
the nodes.

Charliecloud's ch-run shares the host's /dev, /proc and /sys with the container and cannot bind
over them, so the fabric's device binds are left to that sharing (and said so in the script); a
bind's destination must exist in the image (ch-run creates none in a read-only image), so the
results directory is bound at /mnt/0, one of the ten mount points Charliecloud images carry."""

from __future__ import annotations

from fabbench import __version__
from fabbench.render.context import SlurmJob
from fabbench.render.engine import render
from fabbench.render.fabric import fabric_env

PORT_BASE = 20000  # MASTER_PORT = PORT_BASE + (job id mod 4000) * 10 + benchmark index
CH_SHARED = ("/dev", "/proc", "/sys")  # ch-run binds these from the host itself
CH_RESULTS = "/mnt/0"  # where ch-run binds the results directory in the image


def _shared_by_ch_run(bind: str) -> bool:
    src, _, dst = bind.partition(":")
    return all(any(p == top or p.startswith(top + "/") for top in CH_SHARED)
               for p in (src, dst or src))


def _step(job: SlurmJob, index: int) -> dict:
    bench = job.benchmarks[index]
    fab = fabric_env(bench.fabric, bench.backend, bench.wire, gpudirect=bench.gpudirect,
                     iface=bench.iface,
                     rdma_device=bench.rdma_device)
    srun = ["srun", "--kill-on-bad-exit=1", f"--nodes={job.nodes}",
            f"--ntasks-per-node={job.ntasks_per_node}"]
    if bench.launch == "mpi":
        srun.append("--mpi=pmix")
    binds = list(dict.fromkeys([*fab.profile.device_files(bench.wire), *job.binds]))
    mounts = [b if ":" in b else f"{b}:{b}" for b in binds]  # pyxis takes SRC:DST
    return {"bench": bench, "fabric": fab, "srun": srun, "binds": binds, "mounts": mounts,
            "ch_binds": [b for b in binds if not _shared_by_ch_run(b)],
            "ch_shared": [b for b in binds if _shared_by_ch_run(b)],
            "command": [job.fabbench_command, *bench.run_args()]}


def render_slurm(job: SlurmJob) -> str:
    steps = [_step(job, i) for i in range(len(job.benchmarks))]
    return render("slurm.sbatch.j2", job=job, steps=steps, version=__version__,
                  port_base=PORT_BASE, ch_results=CH_RESULTS)
