"""An sbatch script that runs a whole study in one allocation: the batch script runs
`fabbench study run`, which sees the allocation (SLURM_JOB_ID, its node list) and starts every
cell as an srun step on the allocation's nodes (srun --mpi=pmix for MPI and Horovod, a TCP
rendezvous at the first node for Gloo and NCCL). Cells that need more nodes than the allocation
has are skipped by the study with that reason."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabbench import __version__
from fabbench.errors import UsageError
from fabbench.launch import schedulers
from fabbench.render import names
from fabbench.render.jinja_env import render
from fabbench.study.spec import BUILTIN_DIR, Study, find_study, load_study


@dataclass(frozen=True, kw_only=True)
class StudyJob:
    study: str          # the name, or the absolute path of a study file not on the search path
    study_name: str
    cells: int
    name: str = "fabbench-study"
    nodes: int
    tasks_per_node: int
    gpus_per_node: int = 0
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    results_dir: str = "results"
    fabbench_command: str = "fabbench"

    def __post_init__(self) -> None:
        names.dns1123(self.name, "--name")
        names.positive(self.nodes, "--nodes")
        names.positive(self.tasks_per_node, "--tasks-per-node", most=1024)
        names.positive(self.gpus_per_node, "--gpus-per-node", zero=True, most=64)


def study_job(study: str, *, nodes: int | None, tasks_per_node: int | None, runtime: str,
              **kw: Any) -> StudyJob:
    """The job of a study; ``kw``: StudyJob's other fields (checked by StudyJob)."""
    if runtime != "none":
        raise UsageError("render slurm --study runs `fabbench study run` in the batch script, "
                         "which starts each cell with srun: it needs --runtime none (fabbench "
                         "installed on the nodes)")
    s: Study = load_study(study)
    path = find_study(study)
    # a study shipped in the package goes by name; a site's file by its absolute path
    ref = s.name if path.parent == BUILTIN_DIR or not (study.endswith(".toml") or "/" in study) \
        else str(Path(path).resolve())
    return StudyJob(study=ref, study_name=s.name, cells=len(s.cells),
                    nodes=nodes or max(c.nodes for c in s.cells),
                    tasks_per_node=tasks_per_node or max(c.ranks_per_node for c in s.cells),
                    **kw)


def render_study_slurm(job: StudyJob) -> str:
    slurm = schedulers.get("slurm")
    assert slurm.study_template is not None  # Slurm's own
    return render(slurm.study_template, folder=slurm.templates, job=job, version=__version__)
