"""A scheduler added from outside the package, through its extension point alone
(``launch.schedulers.register``): a toy Flux, one class in this file with a batch-script template
of its own, and nothing else of fabbench edited. fabbench then lists it, renders a job's batch
script from its template (each benchmark its step, as it says), discovers its allocation from
the environment (FLUX_JOB_ID) where a study runs, starts a study cell's ranks in it, and writes
a study manifest naming it; a second scheduler of its name is refused, and after the test the
registry is as before."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from fabbench.config import RunConfig
from fabbench.errors import UsageError
from fabbench.launch import schedulers
from fabbench.launch.launchers import Launcher
from fabbench.launch.schedulers import Place, Scheduler, register
from fabbench.render import Benchmark, SlurmJob, render_slurm
from fabbench.study import manifest
from fabbench.study.host import detect_place
from fabbench.study.run import _start_manifest, cell_entry, command
from fabbench.study.spec import load_study

TEMPLATE = """\
#!/bin/bash
# Flux batch script of {{ job.name }}, rendered by fabbench {{ version }}
# flux: --nodes={{ job.nodes }}
launch() { "$@"; }
{% for step in steps %}
# {{ step.bench.label }}
{{ step.launch | join(" \\\\\\n  ") }}
{% endfor %}
"""
FLUX = {"FLUX_JOB_ID": "f7Nq", "FLUX_JOB_NNODES": "3"}


@pytest.fixture
def flux(tmp_path):
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "flux.sh.j2").write_text(TEMPLATE)
    before = schedulers.REGISTRY.names()
    with schedulers.REGISTRY.scoped():

        @register
        class Flux(Scheduler):
            """Flux's allocation: `flux run` steps, known by FLUX_JOB_ID."""

            name = "flux"
            renders = "flux"
            families = frozenset({"mpi", "rendezvous"})
            template = "flux.sh.j2"
            templates = folder
            order = 5

            def place(self, env: Mapping[str, str]) -> Place | None:
                job = env.get("FLUX_JOB_ID")
                return None if not job else Place(
                    scheduler=self.name, nodes=int(env.get("FLUX_JOB_NNODES", "1")),
                    job_id=job, master_addr="flux0")

            def port(self, place: Place, index: int) -> int:
                return 29400 + index  # its job ids are not numbers (f7Nq)

            def step(self, launcher: Launcher, nodes: int, per_node: int) -> list[str]:
                return ["flux", "run", f"--nodes={nodes}", f"--tasks-per-node={per_node}",
                        *(["-o", "pmi=pmix"] if launcher.mpi else [])]

            def launch(self, place: Place, launcher: Launcher, *, nodes: int, per_node: int,
                       program: Sequence[str], port: int,
                       forward: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
                env = self.meet(place, launcher, port, forward)
                return [*self.step(launcher, nodes, per_node), *program], env

        yield Flux
    assert schedulers.REGISTRY.names() == before


def test_it_is_registered_and_listed(flux):
    assert isinstance(schedulers.get("flux"), flux)
    assert schedulers.REGISTRY.names()[-1] == "flux"
    assert "flux" in schedulers.studied()
    assert schedulers.rendered("flux", "mpi") is schedulers.get("flux")


def test_it_renders_a_batch_script_from_its_own_template(flux):
    def bench(primitive: str) -> Benchmark:
        return Benchmark(label=primitive, config=RunConfig(fabric="ethernet", primitive=primitive,
                                                           device="cpu"))

    script = render_slurm(SlurmJob(name="fb", nodes=2, benchmarks=(bench("mpi"), bench("gloo"))),
                          scheduler="flux")
    assert script.startswith("#!/bin/bash\n# Flux batch script of fb, rendered by fabbench ")
    assert "# flux: --nodes=2\n" in script and "#SBATCH" not in script
    mpi, gloo = script.split("# mpi\n")[1].split("# gloo\n")
    assert mpi.startswith("launch flux run --nodes=2 --tasks-per-node=1 -o pmi=pmix \\\n  ")
    assert gloo.startswith("launch flux run --nodes=2 --tasks-per-node=1 \\\n  fabbench run ")


def test_its_allocation_is_discovered_and_runs_a_studys_cells(flux, tmp_path, monkeypatch):
    monkeypatch.delenv("FABBENCH_IMAGE_REF", raising=False)
    place = detect_place(FLUX)
    assert place == Place(scheduler="flux", nodes=3, job_id="f7Nq", master_addr="flux0")
    # its order (5) before Slurm's: a Flux job inside a Slurm allocation is Flux's
    assert schedulers.discover({**FLUX, "SLURM_JOB_ID": "9", "SLURM_NNODES": "1"}) == place
    study = load_study("quick")
    cell = study.cell("allreduce-ethernet-gloo-n1")
    argv, env = command(cell, tmp_path / "c.jsonl", place, 0)
    assert argv[:4] == ["flux", "run", "--nodes=1", "--tasks-per-node=2"]
    assert argv[4:7] == [sys.executable, "-m", "fabbench"]
    assert env == {"MASTER_ADDR": "flux0", "MASTER_PORT": "29400"}
    doc = _start_manifest(study, place, [cell_entry(cell, argv)])
    manifest.write(tmp_path, doc)  # checked against the manifest's schema: flux is a place
    assert manifest.read(tmp_path).place == place


def test_a_second_scheduler_of_its_name_is_refused(flux):
    with pytest.raises(UsageError, match="scheduler 'flux' is registered twice"):
        register(type("Again", (Scheduler,), {"name": "flux"}))


def test_gone_after_its_test(tmp_path):
    assert "flux" not in schedulers.REGISTRY
    assert schedulers.discover(FLUX) == Place(scheduler="local", nodes=1)
    with pytest.raises(UsageError, match="unknown scheduler 'flux'"):
        render_slurm(SlurmJob(benchmarks=(Benchmark(config=RunConfig(
            fabric="ethernet", primitive="gloo", device="cpu")),)), scheduler="flux")
    place = Place(scheduler="flux", nodes=1)
    study = load_study("quick")
    doc = _start_manifest(study, place, [])
    with pytest.raises(UsageError, match="flux"):
        manifest.write(tmp_path, doc)
    assert not (tmp_path / Path(manifest.NAME)).exists()
