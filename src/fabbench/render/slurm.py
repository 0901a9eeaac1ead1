"""An sbatch script for a SlurmJob: the fabric profile's environment exported, one srun per
benchmark (`srun --mpi=pmix` for MPI and Horovod; a TCP rendezvous at the allocation's first node
for Gloo and NCCL), in a container (Apptainer, Pyxis) or with fabbench installed on the nodes."""

from __future__ import annotations

from fabbench import __version__
from fabbench.render.context import DEVICE_BINDS, SlurmJob
from fabbench.render.engine import render
from fabbench.render.fabric import fabric_env

PORT_BASE = 20000  # MASTER_PORT = PORT_BASE + (job id mod 4000) * 10 + benchmark index


def _step(job: SlurmJob, index: int) -> dict:
    bench = job.benchmarks[index]
    fab = fabric_env(bench.fabric, bench.backend, bench.wire, iface=bench.iface,
                     rdma_device=bench.rdma_device)
    srun = ["srun", "--kill-on-bad-exit=1", f"--nodes={job.nodes}",
            f"--ntasks-per-node={job.ntasks_per_node}"]
    if bench.launch == "mpi":
        srun.append("--mpi=pmix")
    devices = DEVICE_BINDS[fab.profile.hardware] if bench.wire == "native" else ()
    binds = [*devices, *job.binds]
    mounts = [b if ":" in b else f"{b}:{b}" for b in binds]  # pyxis takes SRC:DST
    return {"bench": bench, "fabric": fab, "srun": srun, "binds": binds, "mounts": mounts,
            "command": [job.fabbench_command, *bench.run_args()]}


def render_slurm(job: SlurmJob) -> str:
    steps = [_step(job, i) for i in range(len(job.benchmarks))]
    return render("slurm.sbatch.j2", job=job, steps=steps, version=__version__,
                  port_base=PORT_BASE)
