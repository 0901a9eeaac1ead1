"""A manifest scanner sites use, checkov (its Kubernetes checks, pinned: .ci/checkov.lock), over
what fabbench gives a cluster: the chart rendered by Helm's own library for every value set in
charts/fabbench/ci, its defaults and the health check's values; `fabbench render k8s` for a
representative set (the Indexed Job of gloo, the check before the job, NCCL with RDMA on the
host network, two MPIJobs). checkov does not know the MPIJob (a custom resource) and would judge
nothing of it: its launcher and workers are scanned as the Job and the Pods the MPI operator
makes of them. One offline run over one folder. Every finding is accepted, with its reason, in
charts/fabbench/scan-accepted.yaml (docs/security.md, "Manifest scan (checkov)"), and every
acceptance still occurs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import fabbench
from integration.manifest_scan import ACCEPTED, Scan, accepted, checkov_path, scan
from integration.test_k8s_health_check import ON as HEALTH_CHECK
from integration.test_k8s_helm import CHART, VALUE_SETS, cli_args, docs, render_chart, values_of

pytestmark = [pytest.mark.together, pytest.mark.integration]

# the value sets whose `fabbench render k8s` output is scanned too
RENDERED = ("ethernet-gloo-cpu", "ethernet-gloo-preflight", "infiniband-nccl-gpu-rdma",
            "ethernet-mpi-cpu", "infiniband-mpi-gpu-rdma")
POD_KINDS = {"Job", "CronJob", "Pod"}


def as_the_operator_makes_them(doc: dict) -> list[dict]:
    """An MPIJob (kubeflow.org/v2beta1) as the MPI operator makes it: the launcher a Job, each
    worker a Pod, from their replica templates; any other object as it is."""
    if doc["kind"] != "MPIJob":
        return [doc]
    name = doc["metadata"]["name"]
    launcher = doc["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    worker = doc["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    return [{"apiVersion": "batch/v1", "kind": "Job",
             "metadata": {"name": f"{name}-launcher", "labels": doc["metadata"].get("labels", {})},
             "spec": {"backoffLimit": 0, "template": launcher}},
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {**worker.get("metadata", {}), "name": f"{name}-worker"},
             "spec": worker["spec"]}]


def write(folder: Path, source: str, manifests: list[dict]) -> list[tuple[str, str]]:
    """Write ``manifests`` to folder/<source>.yaml; the (source, Kind/name) of each pod's."""
    objects = [o for doc in manifests for o in as_the_operator_makes_them(doc)]
    path = folder / f"{source}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return [(source, f"{o['kind']}/{o['metadata']['name']}") for o in objects
            if o["kind"] in POD_KINDS]


@pytest.fixture(scope="module")
def scanned(tmp_path_factory) -> tuple[Scan, list[tuple[str, str]]]:
    """The scan, and the (source, Kind/name) of every object that holds a pod written for it."""
    if not checkov_path().exists():
        pytest.skip(f"checkov not installed at {checkov_path()} (make setup-all installs it: "
                    ".ci/checkov.sh)")
    folder = tmp_path_factory.mktemp("scan")
    floors = tmp_path_factory.mktemp("floors")
    pods = write(folder, "chart/defaults", render_chart({}))
    pods += write(folder, "chart/health-check", render_chart(HEALTH_CHECK))
    for path in VALUE_SETS:
        pods += write(folder, f"chart/{path.stem}", render_chart(values_of(path)))
    for stem in RENDERED:
        p = fabbench("render", "k8s", *cli_args(values_of(CHART / "ci" / f"{stem}.yaml"), floors),
                     timeout=60)
        assert p.returncode == 0, p.stderr
        pods += write(folder, f"render/{stem}", docs(p.stdout))
    return scan(folder), pods


def test_the_scanner_judges_every_pod_written(scanned):
    result, pods = scanned
    sources = ({"chart/defaults", "chart/health-check"} | {f"chart/{p.stem}" for p in VALUE_SETS}
               | {f"render/{stem}" for stem in RENDERED})
    assert {source for source, _ in pods} == sources  # each holds a pod
    assert [p for p in pods if p not in result.scanned] == []


def test_every_finding_is_fixed_or_accepted(scanned):
    result, _ = scanned
    entries = accepted()
    unaccepted = sorted(f for f in result.findings if not any(a.accepts(f) for a in entries))
    assert unaccepted == [], f"findings not in {ACCEPTED.name}:\n" + "\n".join(
        f"  {f.check} ({f.title}): {f.obj} in {f.source}" for f in unaccepted)


def test_every_acceptance_still_occurs(scanned):
    result, _ = scanned
    stale = [f"{a.check} {p}" for a in accepted() for p in a.stale(result.findings)]
    assert stale == [], f"{ACCEPTED.name} accepts what the scan no longer finds: {stale}"


def test_an_image_pinned_by_digest_passes_the_image_checks(scanned):
    """What the acceptance of CKV_K8S_15 and CKV_K8S_43 rests on: a value set that sets
    image.digest (and its `render k8s --image repo@sha256:...`) gives neither finding."""
    result, pods = scanned
    pinned = {f"{where}/{p.stem}" for p in VALUE_SETS if values_of(p).get("image", {}).get("digest")
              for where in ("chart", "render")}
    assert pinned & {source for source, _ in pods} >= {"chart/infiniband-mpi-gpu-rdma",
                                                       "render/infiniband-mpi-gpu-rdma"}
    assert [f for f in result.findings
            if f.source in pinned and f.check in ("CKV_K8S_15", "CKV_K8S_43")] == []
