"""`fabbench render k8s`: the Job/MPIJob choice, one source of truth for the fabric environment
(the chart's files/fabrics.yaml equals the profiles), quoting of container arguments, bad input."""

from __future__ import annotations

import pytest
import yaml

from conftest import REPO, fabbench
from fabbench.comm.registry import PRIMITIVES
from fabbench.config import RunConfig
from fabbench.fabrics.profile import BUILTIN_DIR
from fabbench.render import Benchmark, K8sJob, chart, render_k8s

CHART = REPO / "charts/fabbench"


@pytest.mark.parametrize("path", sorted(chart.FILES))
def test_chart_data_files_are_generated_from_the_python_sources(path):
    assert (CHART / path).read_text() == chart.generated(path), (
        f"charts/fabbench/{path} is stale: python -m fabbench.render.chart charts/fabbench")


def test_chart_schema_offers_the_profiles_and_primitives_python_knows():
    import json

    props = json.loads((CHART / "values.schema.json").read_text())["properties"]
    assert props["fabric"]["enum"] == sorted(p.stem for p in BUILTIN_DIR.glob("*.toml"))
    assert props["primitive"]["enum"] == ["", *PRIMITIVES]


def job(**kw) -> dict[str, dict]:
    fields = {"fabric": "ethernet", "primitive": "gloo", "device": "cpu", **kw.pop("bench", {})}
    extra = fields.pop("extra_args", ())
    bench = Benchmark(extra_args=extra, config=RunConfig.from_argv(
        [a for key, value in fields.items() for a in ("--" + key.replace("_", "-"), value)]))
    return {d["kind"]: d for d in yaml.safe_load_all(render_k8s(K8sJob(benchmark=bench, **kw)))
            if d}


def test_torch_primitives_get_an_indexed_job_and_headless_service():
    docs = job(nodes=3)
    assert set(docs) == {"Job", "Service"}
    spec = docs["Job"]["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == 3
    assert docs["Service"]["spec"]["clusterIP"] == "None"
    env = {e["name"]: e.get("value") for e in spec["template"]["spec"]["containers"][0]["env"]}
    assert env["MASTER_ADDR"] == "fabbench-0.fabbench" and env["FABBENCH_WORLD_SIZE"] == "3"


def test_gpus_start_ranks_per_pod_with_torchrun():
    docs = job(nodes=2, gpus_per_node=4, bench={"primitive": "nccl", "device": "cuda"})
    container = docs["Job"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["torchrun"] and "--nproc-per-node=4" in container["args"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 4}


def test_mpi_gets_an_mpijob_with_the_profile_on_mpirun():
    docs = job(nodes=2, bench={"primitive": "mpi", "iface": "eth1"})
    assert set(docs) == {"MPIJob"}
    launcher = docs["MPIJob"]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    args = launcher["containers"][0]["args"]
    assert args[:2] == ["--hostfile", "/etc/mpi/hostfile"]
    at = args.index("btl_tcp_if_include")
    assert args[at - 1:at + 2] == ["--mca", "btl_tcp_if_include", "eth1"]


def test_dollar_is_escaped_for_kubernetes():
    docs = job(bench={"extra_args": ("$(HOME)",)})
    args = docs["Job"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "$$(HOME)" in args


@pytest.mark.parametrize("args,message", [
    (["--name", "UPPER"], "DNS-1123"),
    (["--name", "x" * 53], "DNS-1123"),
    (["--rdma-resource", "rdma/a b"], "resource name"),
    (["--node-selector", "novalue"], "KEY=VALUE"),
    (["--results-path", "relative"], "absolute"),
    (["--primitive", "horovod", "--extra-arg", "x", "--master-port", "80"], "--master-port"),
    # on a login node without GPUs: the advice is what to pass, not "a GPU" this host lacks
    (["--primitive", "nccl"], "pass --gpus-per-node N"),
])
def test_bad_input_is_one_line_exit_2(args, message):
    p = fabbench("render", "k8s", *args, timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert message in p.stderr and p.stderr.count("\n") == 1, p.stderr
