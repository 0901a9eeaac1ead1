"""The chart's `fabbench run` arguments, rendered by Helm's own library from
files/run-options.yaml (generated from fabbench.config), equal RunConfig.to_argv() for generated
configurations: the chart, Slurm, Kubernetes and the study write one argv
(tests/unit/test_config.py checks the others). The chart's whole launch line (mpirun over the
operator's hostfile, torchrun, or the rank alone), filled in from files/launchers.yaml, equals
the launchers' (launch.launchers.pod.Pod.launch, as `fabbench render k8s` writes it)."""

from __future__ import annotations

import re

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import REPO
from fabbench.config import RunConfig, fields
from fabbench.errors import UsageError
from fabbench.option_fields import COUNTS, NAMES
from fabbench.render.chart import chart_options
from fabbench.render.context import Benchmark, K8sJob
from fabbench.render.k8s import pod_argv
from unit.test_config import configs, renderable, slurm_args

helm_python = pytest.importorskip("helm_python", reason="needs helm-python-sdk (dev extra)")

pytestmark = [pytest.mark.together, pytest.mark.integration]

CHART = REPO / "charts" / "fabbench"


def chart_values(c: RunConfig) -> dict:
    """The chart's values for a renderable configuration."""
    values: dict = {"fabric": c.fabric, "primitive": c.primitive, "benchmark": {},
                    "gpusPerNode": 4 if c.device == "cuda" else 0,
                    "nodes": 1 if c.fabric == "shm" else 2}
    carried = [f for f in fields() if not f.option.placed]
    for option, f in zip(chart_options(), carried, strict=True):
        assert option["flag"] == f.option.flag
        if "value" not in option:
            continue
        value = f.get(c)
        if f.option.kind in (NAMES, COUNTS):
            value = "" if value is None else f.option.kind.write(value)
        elif value is None and f.option.kind.name == "text":
            value = ""
        (values[option["in"]] if option["in"] else values)[option["value"]] = value
    return values


def chart_launch(values: dict) -> list[str]:
    """The command and arguments of the container that starts the ranks, as the manifest holds
    them (Kubernetes' syntax): the Job's pod, or the MPIJob's launcher."""
    out = helm_python.Chart.load(str(CHART)).render(values, name="fb", namespace="bench")
    for name, text in sorted(out.items()):
        for doc in yaml.safe_load_all(text) if not name.endswith("NOTES.txt") else ():
            if doc and doc["kind"] in ("Job", "MPIJob"):
                pod = doc["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"] \
                    if doc["kind"] == "MPIJob" else doc["spec"]["template"]["spec"]
                [container] = pod["containers"]
                return [*container["command"], *container["args"]]
    raise AssertionError("no Job or MPIJob in the chart's manifests")


def chart_args(values: dict) -> list[str]:
    out = helm_python.Chart.load(str(CHART)).render(values, name="fb", namespace="bench")
    for name, text in sorted(out.items()):
        if name.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if not doc:
                continue
            spec = doc["spec"]
            pods = [r["template"]["spec"] for r in spec["mpiReplicaSpecs"].values()] \
                if doc["kind"] == "MPIJob" else [spec["template"]["spec"]] \
                if doc["kind"] == "Job" else []
            for pod in pods:
                for container in pod["containers"]:
                    args = [a.replace("$$", "$") for a in container.get("args", [])]
                    if "run" in args:
                        return args[args.index("run") + 1:args.index("--out")]
    raise AssertionError("no `fabbench run` in the chart's manifests")


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(configs())
def test_the_chart_writes_the_configuration_argv(c):
    r = renderable(c)
    assume(r is not None)
    assume(r.iface is None or re.fullmatch(r"[A-Za-z0-9_.:@-]{0,15}", r.iface))  # the schema's
    try:
        slurm_args(r)  # what the fabric's profile has not (a wire, GPUDirect settings)
    except UsageError:
        assume(False)
    assert chart_args(chart_values(r)) == r.to_argv()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(configs(), st.sampled_from([1, 2, 8]), st.integers(1, 3))
def test_the_chart_launches_as_the_launcher_table(c, gpus, nodes):
    """For any configuration, GPUs per node (one: torchrun is left out) and node count, the
    chart's launch line is the table's, word for word, the profile's MCA parameters and
    exported variables included."""
    r = renderable(c)
    assume(r is not None)
    assume(r.iface is None or re.fullmatch(r"[A-Za-z0-9_.:@-]{0,15}", r.iface))
    try:
        slurm_args(r)
    except UsageError:
        assume(False)
    values = chart_values(r)
    values["gpusPerNode"] = gpus if r.device == "cuda" else 0
    values["nodes"] = 1 if r.fabric == "shm" else nodes
    job = K8sJob(name="fb-fabbench", nodes=values["nodes"], gpus_per_node=values["gpusPerNode"],
                 benchmark=Benchmark(config=r))
    assert chart_launch(values) == pod_argv(job)


def _launch_cases():
    from fabbench.fabrics.profile import WIRES, load_profile
    from fabbench.render.chart import chart_profiles

    for fabric in sorted(chart_profiles()):
        profile = load_profile(fabric)
        for wire in WIRES:
            if wire != "native" and wire not in profile.wires:
                continue
            for primitive in ("mpi", "gloo", "nccl", "horovod"):
                for gpus in (0, 1, 4):
                    if primitive == "nccl" and not gpus:
                        continue
                    for gpudirect in ("auto", "on", "off") if gpus else ("auto",):
                        yield fabric, wire, primitive, gpus, gpudirect


@pytest.mark.parametrize("fabric,wire,primitive,gpus,gpudirect", list(_launch_cases()))
def test_every_fabric_wire_and_primitive_launches_as_the_table(fabric, wire, primitive, gpus,
                                                                 gpudirect):
    """Every fabric, wire and primitive, on 0, 1 and 4 GPUs per pod, with the interface and RDMA
    device named (the profile's placeholders filled: its variables exported with -x): the
    chart's launch line is the table's; a job Python refuses, the chart refuses too."""
    nodes = 1 if fabric == "shm" else 2
    argv = ["--fabric", fabric, "--wire", wire, "--primitive", primitive,
            "--device", "cuda" if gpus else "cpu", "--gpudirect", gpudirect,
            "--iface", "eth1", "--rdma-device", "mlx5_1"]
    if primitive == "horovod":
        argv += ["--horovod-over", "mpi"]
    c = RunConfig.from_argv(argv)
    values = {**chart_values(c), "gpusPerNode": gpus, "nodes": nodes}
    try:
        want = pod_argv(K8sJob(name="fb-fabbench", nodes=nodes, gpus_per_node=gpus,
                               benchmark=Benchmark(config=c)))
    except UsageError:
        with pytest.raises(helm_python.HelmError):
            chart_launch(values)
        return
    assert chart_launch(values) == want
