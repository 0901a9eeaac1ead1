"""The Helm chart with `--set study=quick`: an MPIJob whose launcher runs `fabbench study run
quick` (every cell an mpirun over the workers), rendered by Helm's own library and validated
against Kubernetes' schemas and the MPIJob v2beta1 fields. No cluster runs here."""

from __future__ import annotations

import pytest

pytest.importorskip("helm_python", reason="needs helm-python-sdk (dev extra)")
pytest.importorskip("kubernetes_validate", reason="needs kubernetes-validate (dev extra)")

from integration.test_k8s_helm import FULLNAME, render_chart, validate_manifest  # noqa: E402

pytestmark = [pytest.mark.together, pytest.mark.integration]


def test_chart_renders_a_study_launcher():
    manifests = render_chart({"study": "quick", "primitive": "gloo", "nodes": 2})
    for doc in manifests:
        validate_manifest(doc)
    kinds = [d["kind"] for d in manifests]
    assert kinds == ["MPIJob"], kinds  # the study launches its own cells: no Indexed Job
    launcher = manifests[0]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    container = launcher["containers"][0]
    assert container["command"] == ["fabbench"]
    assert container["args"] == ["study", "run", "quick", "--out",
                                 f"/results/{FULLNAME}-study-quick"]
    assert manifests[0]["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2


@pytest.mark.parametrize("bad", ["Quick", "quick; rm -rf /", 3])
def test_chart_schema_rejects_a_bad_study_name(bad):
    with pytest.raises(Exception, match="study"):
        render_chart({"study": bad})
