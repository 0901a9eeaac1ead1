"""An sbatch script for a SlurmJob (launch.schedulers.slurm_job: its template and steps; another
batch scheduler's script from its own): the fabric profile's environment exported, one srun per
benchmark (launch.launchers: `srun --mpi=pmix` for MPI and Horovod; a TCP rendezvous at the
allocation's first node, at launch.ports' port, for Gloo and NCCL), in a container
(launch.runtimes: Apptainer, Charliecloud, Pyxis) or with fabbench installed on the nodes. In a
container every rank is told the image's reference (FABBENCH_IMAGE_REF), exported by the script:
srun passes its environment to the steps, and each runtime into the container.

With a floors file (SlurmJob.verify), the script copies it beside the results at its start and,
after the benchmarks, runs `fabbench floors verify` on their results as one more step (in the
same container), then exits with verify's code: a health-check job, or a prolog's gate."""

from __future__ import annotations

from fabbench import __version__
from fabbench.comm import primitives
from fabbench.errors import UsageError
from fabbench.launch import launchers, ports, runtimes, schedulers
from fabbench.launch.schedulers import Scheduler
from fabbench.launch.words import Shell, shell_line
from fabbench.render.context import REFERENCE_FLOORS, SlurmJob, rendered_over
from fabbench.render.fabric import fabric_env
from fabbench.render.jinja_env import render

RESULTS_DIR = Shell('"$results_dir"')  # the script's variables (slurm.sbatch.j2)
OUT = "out"


def _step(job: SlurmJob, index: int, scheduler: Scheduler) -> dict[str, object]:
    """One benchmark's exports and its launch (the scheduler's step): lines of bash, joined by
    continuation."""
    bench = job.benchmarks[index]
    cfg = bench.config
    fab = fabric_env(cfg.fabric, bench.backend, cfg.wire, gpudirect=cfg.gpudirect,
                     iface=cfg.iface, rdma_device=cfg.rdma_device)
    spec = primitives.get(cfg.primitive or "")  # named: Benchmark checks it
    launcher = spec.launcher(rendered_over(spec, cfg.horovod_over))
    binds = tuple(dict.fromkeys([*fab.profile.device_files(cfg.wire), *job.binds]))
    wrapped = runtimes.runtime(job.runtime).wrap(runtimes.Container(
        image=job.image or "", results=RESULTS_DIR, binds=binds, gpus=bool(job.gpus_per_node)))
    out = Shell(f'"${OUT}"') if wrapped.results is None else \
        Shell(f'"{wrapped.results}/${{{OUT}##*/}}"')
    lines = [shell_line(["launch", *scheduler.step(launchers.get(launcher), job.nodes,
                                                   job.ntasks_per_node)])]
    if wrapped.words:
        lines.append(shell_line(wrapped.words))
    lines.append(shell_line([job.fabbench_command, *bench.run_args(), "--out", out]))
    notes = [*wrapped.notes, *([wrapped.gpu_note] if index == 0 and wrapped.gpu_note else [])]
    return {"bench": bench, "fabric": fab, "launch": lines, "notes": notes}


def _verify(job: SlurmJob, scheduler: Scheduler) -> dict[str, object] | None:
    """The acceptance step: the floors file (copied to the results directory at the job's start,
    where every runtime sees it; the shipped reference floors by name) and `fabbench floors verify`
    of every benchmark's results, one task on the first node, in the benchmarks' container."""
    if job.verify is None:
        return None
    wrapped = runtimes.runtime(job.runtime).wrap(runtimes.Container(
        image=job.image or "", results=RESULTS_DIR))
    inside = wrapped.results or "$results_dir"  # the results directory, as the step sees it
    copied = job.verify != REFERENCE_FLOORS
    floors = Shell(f'"{inside}/$job_id-floors.toml"') if copied else REFERENCE_FLOORS
    outs = [Shell(f'"{inside}/$job_id-{b.label}.jsonl"') for b in job.benchmarks]
    lines = [shell_line(["launch", *scheduler.task()])]
    if wrapped.words:
        lines.append(shell_line(wrapped.words))
    lines.append(shell_line([job.fabbench_command, "floors", "verify", "--floors", floors, *outs]))
    return {"given": job.verify, "copied": copied, "launch": lines}


def render_slurm(job: SlurmJob, scheduler: str = "slurm") -> str:
    """The batch script of ``job`` for ``scheduler`` (launch.schedulers): Slurm's sbatch
    script, or another batch scheduler's from its own template, each benchmark its step."""
    batch = schedulers.get(scheduler)
    if batch.template is None:
        raise UsageError(f"{scheduler} has no batch script to render")
    steps = [_step(job, i, batch) for i in range(len(job.benchmarks))]
    return render(batch.template, folder=batch.templates, job=job, steps=steps,
                  version=__version__, image_env=job.image_env, verify=_verify(job, batch),
                  port_base=ports.rendezvous_port_shell("job_id"))
