"""The chart's `fabbench run` arguments, rendered by Helm's own library from
files/run-options.yaml (generated from fabbench.config), equal RunConfig.to_argv() for generated
configurations: the chart, Slurm, Kubernetes and the study write one argv
(tests/unit/test_config.py checks the others)."""

from __future__ import annotations

import re

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings

from conftest import REPO
from fabbench.config import COUNTS, NAMES, RunConfig, fields
from fabbench.errors import UsageError
from fabbench.render.chart import chart_options
from unit.test_config import configs, renderable, slurm_args

helm_python = pytest.importorskip("helm_python", reason="needs helm-python-sdk (dev extra)")

pytestmark = [pytest.mark.integration]

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
