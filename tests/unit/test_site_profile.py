"""A site's profile under another name gets what a shipped one gets: decisions come from profile
data, never from a fabric's name. roce.toml here is infiniband.toml with only its name changed,
placed on the profile search path ($FABBENCH_PROFILE_PATH); report, render and doctor must treat
it exactly as infiniband."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fabbench import doctor as d
from fabbench.fabrics.profile import BUILTIN_DIR, load_profile
from fabbench.render import K8sJob, SlurmJob, render_k8s, render_slurm
from fabbench.render.from_options import benchmark
from fabbench.results.link import link_of
from fabbench.results.runs import load
from unit.test_records import replaced

FIXTURES = Path(__file__).parents[1] / "fixtures"
TREES = FIXTURES / "sysfs"
SITE_A = FIXTURES / "runs" / "siteA-ib.jsonl"
UCX_INFO_IB = "#      Transport: tcp\n#      Transport: rc_verbs\n#      Transport: rc_mlx5\n"
OMPI_INFO = ("Open MPI: 4.1.4\n MCA pml: ucx (MCA v2.1.0)\n MCA pml: ob1 (MCA v2.1.0)\n"
             " MCA btl: tcp (MCA v2.1.0)\n MCA btl: vader (MCA v2.1.0)\n")


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """A site profile directory holding roce.toml, a renamed copy of infiniband.toml."""
    text = (BUILTIN_DIR / "infiniband.toml").read_text()
    assert text.count('name = "infiniband"') == 1
    (tmp_path / "roce.toml").write_text(text.replace('name = "infiniband"', 'name = "roce"'))
    monkeypatch.setenv("FABBENCH_PROFILE_PATH", str(tmp_path))
    return tmp_path


def _results_as(tmp_path: Path, fabric: str) -> Path:
    """SITE_A's results with the run's fabric renamed and its port at 200 Gb/s (so the port
    rate, 200, and the fastest interface, ib0 at 100, give different links)."""
    lines = SITE_A.read_text().splitlines()
    run = json.loads(lines[0])
    run["fabric"] = fabric
    run.pop("profile_link", None)  # a record of a fabbench before profile_link: the profile decides
    run["provenance"]["rdma"][0].update(rate="200 Gb/sec (4X HDR)", rate_gbps=200.0)  # fabbench/1
    out = tmp_path / f"{fabric}.jsonl"
    out.write_text("\n".join([json.dumps(run), *lines[1:]]) + "\n")
    return out


def test_report_reads_the_link_of_a_site_profile_from_its_data(site, tmp_path, monkeypatch):
    (ib,) = load([_results_as(tmp_path, "infiniband")])
    (roce,) = load([_results_as(tmp_path, "roce")])
    assert link_of(ib.run).speed_gbit_s == link_of(roce.run).speed_gbit_s == 200  # the port rate
    assert link_of(roce.run).what.startswith("mlx5_0 port 1")
    # the profile decides: without roce.toml on the path the interface is all that is known
    monkeypatch.setenv("FABBENCH_PROFILE_PATH", "")
    assert link_of(roce.run).speed_gbit_s == 100 and link_of(roce.run).what.startswith("ib0")


def test_a_run_record_carries_the_link_data_of_its_profile(site, tmp_path, monkeypatch):
    (roce,) = load([_results_as(tmp_path, "roce")])
    profile = load_profile("roce")
    recorded = replaced(roce.run, profile_link={"hardware": profile.hardware,
                                                **profile.link.to_json()})
    monkeypatch.setenv("FABBENCH_PROFILE_PATH", "")  # e.g. reported at another site
    assert link_of(recorded).speed_gbit_s == 200


def test_report_cli_shows_link_efficiency_for_the_site_profile(site, tmp_path, capsys):
    from fabbench.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(_results_as(tmp_path, "roce"))])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert "of the 200 Gb/s link (mlx5_0 port 1" in out


def test_render_binds_and_mounts_the_devices_of_a_site_profile(site):
    for runtime, needle in (("apptainer", "--bind /dev/infiniband"),
                            ("pyxis", "/dev/infiniband:/dev/infiniband")):
        text = {f: render_slurm(SlurmJob(nodes=2, runtime=runtime, image="fb.sif", benchmarks=(
                    benchmark(fabric=f, primitive="mpi", gpus_per_node=0),)))
                for f in ("infiniband", "roce")}
        assert needle in text["roce"]
        assert text["roce"].replace("roce", "infiniband") == text["infiniband"]
    tcp = render_slurm(SlurmJob(nodes=2, runtime="apptainer", image="fb.sif", benchmarks=(
        benchmark(fabric="roce", primitive="mpi", wire="tcp", gpus_per_node=0),)))
    assert "/dev/infiniband" not in tcp  # the tcp wire needs no device


def test_kubernetes_manifests_name_the_devices_of_a_site_profile(site):
    text = {f: render_k8s(K8sJob(nodes=2, benchmark=benchmark(fabric=f, primitive="gloo",
                                                              gpus_per_node=0)))
            for f in ("infiniband", "roce", "ethernet")}
    assert "needs /dev/infiniband in the pods: give --rdma-resource" in text["roce"]
    assert text["roce"].replace("roce", "infiniband") == text["infiniband"]
    assert "/dev/" not in text["ethernet"].replace("/dev/shm", "")
    with_plugin = render_k8s(K8sJob(nodes=2, rdma_resource="rdma/hca_shared_devices_a",
                                    benchmark=benchmark(fabric="roce", primitive="mpi",
                                                        gpus_per_node=0)))
    assert "come from the device plugin's resource rdma/hca_shared_devices_a" in with_plugin
    assert yaml.safe_load_all(with_plugin)


def _tools(argv: list[str]) -> tuple[int, str] | None:
    return {"ucx_info": (0, UCX_INFO_IB), "ompi_info": (0, OMPI_INFO),
            "mpirun": (0, "mpirun (Open MPI) 4.1.4")}.get(argv[0])


@pytest.mark.parametrize("tree", ["ib-mlx5", "roce", "eth-only", "opa-hfi1"])
@pytest.mark.parametrize("wire,primitive", [("native", "mpi"), ("native", "gloo"),
                                            ("tcp", "mpi"), ("native", "horovod")])
def test_doctor_runs_the_same_checks_for_a_site_profile(site, tree, wire, primitive):
    def checks(fabric: str) -> list[tuple[str, str, str, str | None]]:
        report = d.doctor(d.DoctorOptions(fabric=fabric, wire=wire, primitive=primitive,
                                          root=str(TREES / tree), smoke=False),
                          run=_tools, env={}, addresses={"ib0": ["10.1.0.5"],
                                                         "eno1": ["10.0.0.5"]})
        assert report.fabric == fabric
        # the fabric's own name in a text ("the roce stack runs over TCP") is its name
        return [(c.name, c.verdict, c.detail.replace(fabric, "infiniband"),
                 c.fix.replace(fabric, "infiniband") if c.fix else None)
                for c in report.checks]

    ib, roce = checks("infiniband"), checks("roce")
    assert roce == ib
    names = [c[0] for c in roce]
    assert names[0] == "devices" and ("device files" in names) == (wire == "native")
    assert "UCX" in names and "memlock" in names
