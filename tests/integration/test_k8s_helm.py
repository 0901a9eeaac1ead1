"""Kubernetes manifests from `fabbench render k8s` and from the Helm chart, rendered by Helm's own
library (helm-python-sdk) for every value set in charts/fabbench/ci, linted, validated against
Kubernetes' schemas (kubernetes-validate --strict), the MPIJob against the kubeflow v2beta1 API
fields; the chart's schema rejects bad values; chart and `fabbench render k8s` give equal jobs,
the image (pinned by digest, or this version's flavour) and what the ranks are told of it
included."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from conftest import REPO, fabbench
from fabbench import __version__
from fabbench.option_fields import number_text
from fabbench.render.chart import chart_options
from fabbench.sysinfo.inventory import image_reference
from integration import pod_security

helm_python = pytest.importorskip("helm_python", reason="needs helm-python-sdk (dev extra)")
kv = pytest.importorskip("kubernetes_validate", reason="needs kubernetes-validate (dev extra)")
jsonschema = pytest.importorskip("jsonschema")

pytestmark = [pytest.mark.together, pytest.mark.integration]

CHART = REPO / "charts" / "fabbench"
VALUE_SETS = sorted((CHART / "ci").glob("*.yaml"))
RELEASE = "fb"
FULLNAME = "fb-fabbench"  # the chart's fullname for release "fb"

# The kubeflow.org/v2beta1 MPIJob API (mpi-operator pkg/apis/kubeflow/v2beta1/types.go): the
# fields of MPIJobSpec, RunPolicy and ReplicaSpec; pod templates are checked as v1 PodTemplates.
_REPLICA = {"type": "object", "additionalProperties": False, "required": ["template"],
            "properties": {"replicas": {"type": "integer", "minimum": 0},
                           "restartPolicy": {"enum": ["Always", "OnFailure", "Never",
                                                      "ExitCode"]},
                           "template": {"type": "object"}}}
MPIJOB_V2BETA1 = {
    "type": "object", "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "kubeflow.org/v2beta1"}, "kind": {"const": "MPIJob"},
        "metadata": {"type": "object"}, "status": {"type": "object"},
        "spec": {"type": "object", "additionalProperties": False,
                 "required": ["mpiReplicaSpecs"],
                 "properties": {
                     "slotsPerWorker": {"type": "integer", "minimum": 1},
                     "runLauncherAsWorker": {"type": "boolean"},
                     "sshAuthMountPath": {"type": "string"},
                     "launcherCreationPolicy": {"enum": ["AtStartup", "WaitForWorkersReady"]},
                     "mpiImplementation": {"enum": ["OpenMPI", "Intel", "MPICH"]},
                     "runPolicy": {"type": "object", "additionalProperties": False, "properties": {
                         "cleanPodPolicy": {"enum": ["None", "Running", "All"]},
                         "ttlSecondsAfterFinished": {"type": "integer"},
                         "activeDeadlineSeconds": {"type": "integer"},
                         "backoffLimit": {"type": "integer"},
                         "schedulingPolicy": {"type": "object"},
                         "suspend": {"type": "boolean"}, "managedBy": {"type": "string"}}},
                     "mpiReplicaSpecs": {"type": "object", "additionalProperties": False,
                                         "required": ["Launcher", "Worker"],
                                         "properties": {"Launcher": _REPLICA,
                                                        "Worker": _REPLICA}}}}}}


def validate_manifest(doc: dict) -> None:
    version = kv.latest_version()
    if doc["kind"] == "MPIJob":
        jsonschema.validate(doc, MPIJOB_V2BETA1)
        for role, spec in doc["spec"]["mpiReplicaSpecs"].items():
            kv.validate({"apiVersion": "v1", "kind": "PodTemplate",
                         "metadata": {"name": f"{doc['metadata']['name']}-{role.lower()}"},
                         "template": spec["template"]}, version, strict=True)
        return
    kv.validate(doc, version, strict=True)


def docs(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


def render_chart(values: dict) -> list[dict]:
    out = helm_python.Chart.load(str(CHART)).render(values, name=RELEASE, namespace="bench")
    return [d for name, text in sorted(out.items()) if not name.endswith("NOTES.txt")
            for d in docs(text)]


def values_of(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def test_helm_lint_is_clean():
    report = helm_python.lint(str(CHART), strict=True)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("path", VALUE_SETS, ids=lambda p: p.stem)
def test_chart_value_sets_pass_strict_validation(path):
    manifests = render_chart(values_of(path))
    kinds = sorted(d["kind"] for d in manifests)
    assert kinds in (["Job", "Service"], ["ConfigMap", "Job", "Service"], ["MPIJob"])
    for doc in manifests:
        validate_manifest(doc)
        if doc["kind"] in ("Job", "MPIJob"):  # no pod privileged; /dev/shm in memory
            text = yaml.safe_dump(doc)
            assert "privileged: true" not in text and "medium: Memory" in text


def test_default_values_render_and_validate():
    for doc in render_chart({}):
        validate_manifest(doc)


def test_value_sets_cover_the_matrix():
    sets = [values_of(p) for p in VALUE_SETS]
    assert {v["fabric"] for v in sets} >= {"ethernet", "infiniband", "omnipath"}
    assert {v["primitive"] for v in sets} >= {"mpi", "gloo", "nccl", "horovod"}
    assert any(v.get("gpusPerNode") for v in sets) and any(not v.get("gpusPerNode") for v in sets)
    assert any(v.get("rdma") for v in sets) and any(v.get("hostNetwork") for v in sets)


@pytest.mark.parametrize("bad", [
    {"bogus": 1}, {"fabric": "token-ring"}, {"nodes": 0}, {"nodes": "2"},
    {"gpusPerNode": -1}, {"primitive": "ucc"}, {"image": {"repository": "x", "tag": "a b",
                                                          "pullPolicy": "Always"}},
    {"benchmark": {"label": "Bad_Label"}}, {"benchmark": {"extraArgs": "--check"}},
    {"results": {"path": "relative"}}, {"hostNetwork": "yes"}, {"masterPort": 80},
    {"rdma": {"resource": "rdma/a b"}}, {"fullnameOverride": "UPPER"},
    {"gpudirect": "yes"}, {"gpudirect": True}, {"image": {"digest": "sha256:abc"}},
    {"image": {"digest": "0123456789abcdef" * 4}}, {"image": {"tag": ":x"}},
    {"results": {"hostPath": "relative"}}, {"results": {"hostPath": "/a b"}},
    {"preflight": {"sizes": "1 M"}}, {"preflight": {"budget": 0}}, {"preflight": {"x": 1}},
    {"preflight": {"enabled": "yes"}},
    # issue 59: what reaches a shell, a comment or the nodes' own directories
    {"iface": "$(touch /tmp/x)"}, {"iface": "eth0\n"}, {"rdmaDevice": "mlx5_0;id"},
    {"results": {"hostPath": "/"}}, {"results": {"hostPath": "/etc"}},
    {"results": {"hostPath": "/var/lib/kubelet"}}, {"results": {"hostPath": "/srv/../etc"}},
    {"results": {"hostPath": "/srv/x/"}}, {"results": {"hostPath": "/root/.ssh"}},
    {"results": {"path": "/results/../etc"}}, {"shmSize": "0"}, {"shmSize": "1GB"},
    {"shmSize": "1Gi\n"}, {"nodeSelector": {"gpu": "a/b"}}, {"nodeSelector": {"bad key": "x"}},
    {"nodeSelector": {"gpu": "x\n# y"}}, {"image": {"repository": "a;b"}},
    {"image": {"repository": "Repo/fb"}}, {"image": {"tag": "x\n"}},
    {"healthCheck": {"schedule": "* * * * * *"}}, {"healthCheck": {"schedule": "60 * * * *"}},
    {"healthCheck": {"schedule": "0 * * * *\n"}}, {"benchmark": {"sizes": "abc"}},
    {"benchmark": {"label": "a\n"}}, {"fullnameOverride": "fb\n"},
    {"fabbenchCommand": "fabbench\r"}, {"results": {"claim": "a..b"}},
])
def test_schema_rejects_bad_values(bad):
    with pytest.raises(helm_python.HelmValuesError):
        render_chart(bad)


@pytest.mark.parametrize("bad,message", [
    ({"fabric": "shm", "nodes": 2}, "one host only"),
    ({"primitive": "nccl"}, "GPU"),
    ({"primitive": "mpi", "gpudirect": "on"}, "GPU buffers"),
    ({"primitive": "nccl", "gpusPerNode": 1, "gpudirect": "on"}, "no GPUDirect for nccl"),
    ({"fabric": "infiniband", "wire": "tcp", "primitive": "nccl", "gpusPerNode": 1,
      "gpudirect": "on"}, "no GPUDirect"),
    ({"benchmark": {"extraArgs": ["--budget=1"]}}, "--budget is an option fabbench declares"),
    ({"benchmark": {"extraArgs": ["--no-check"]}}, "set its value \\(check\\)"),
    ({"results": {"claim": "pvc", "hostPath": "/srv/x"}}, "set one"),
    ({"preflight": {"enabled": True, "floors": "x"}}, "mpi runs as an MPIJob"),
    ({"primitive": "gloo", "preflight": {"enabled": True}}, "preflight.floors is empty"),
    ({"primitive": "gloo", "preflight": {"enabled": True, "floors": "x"},
      "healthCheck": {"enabled": True, "floors": "x"}}, "enable one of them"),
])
def test_chart_refuses_impossible_settings(bad, message):
    with pytest.raises(helm_python.HelmError, match=message):
        render_chart(bad)


def cli_args(values: dict, tmp_path: Path | None = None) -> list[str]:
    """The `fabbench render k8s` options for chart values (a floors file of the check before
    the job written under ``tmp_path``)."""
    v = {"nodes": 2, "gpusPerNode": 0, **values}
    b = v.get("benchmark", {})
    args = ["--name", FULLNAME, "--nodes", str(v["nodes"]), "--gpus-per-node",
            str(v["gpusPerNode"])]
    if v.get("primitive"):
        args += ["--primitive", v["primitive"]]
    # every run option the values set, by its flag (the chart's defaults are render's)
    for option in chart_options():
        where = b if option.get("in") else v
        value = where.get(option.get("value"))
        if value is None or value == "":
            continue
        if option["kind"] == "switch":
            args.append(option["flag"] if value else option["negative"])
        else:
            args += [option["flag"], number_text(value) if isinstance(value, float)
                     else str(value)]
    args += [f"--extra-arg={a}" for a in b.get("extraArgs", [])]
    if v.get("rdma", {}).get("resource"):
        args += ["--rdma-resource", v["rdma"]["resource"], "--rdma-per-node",
                 str(v["rdma"].get("perNode", 1))]
    if v.get("hostNetwork"):
        args.append("--host-network")
    if v.get("preflight", {}).get("enabled"):
        assert tmp_path is not None, "the check before the job needs its floors in a file"
        floors = tmp_path / "preflight.toml"
        floors.write_text(v["preflight"]["floors"])
        args += ["--preflight", str(floors)]
    for key, value in v.get("nodeSelector", {}).items():
        args += ["--node-selector", f"{key}={value}"]
    if v.get("results", {}).get("claim"):
        args += ["--results-claim", v["results"]["claim"]]
    if v.get("results", {}).get("hostPath"):
        args += ["--results-host-path", v["results"]["hostPath"]]
    image = v.get("image", {})
    if image:  # the chart's: repository@digest, else repository:tag (default: the flavour's)
        repo = image.get("repository", "fabbench")
        tag = image.get("tag") or f"{__version__}-{'cuda' if v['gpusPerNode'] else 'cpu'}"
        args += ["--image", f"{repo}@{image['digest']}" if image.get("digest") else
                 f"{repo}:{tag}"]
    return args


def normalised(manifests: list[dict]) -> dict[str, dict]:
    """By kind, without what only says who rendered it (Helm's chart and managed-by labels)."""
    out = {}
    for doc in manifests:
        doc = copy.deepcopy(doc)

        def strip(obj):
            if isinstance(obj, dict):
                labels = obj.get("labels")
                if isinstance(labels, dict):
                    labels.pop("helm.sh/chart", None)
                    labels.pop("app.kubernetes.io/managed-by", None)
                for value in obj.values():
                    strip(value)
            elif isinstance(obj, list):
                for value in obj:
                    strip(value)
        strip(doc)
        out[doc["kind"]] = doc
    return out


@pytest.mark.parametrize("path", VALUE_SETS, ids=lambda p: p.stem)
def test_render_k8s_and_chart_give_equal_jobs(path, tmp_path):
    values = values_of(path)
    p = fabbench("render", "k8s", *cli_args(values, tmp_path), timeout=60)
    assert p.returncode == 0, p.stderr
    rendered = docs(p.stdout)
    for doc in rendered:
        validate_manifest(doc)
    assert normalised(rendered) == normalised(render_chart(values))


def test_hostile_extra_args_stay_literal_in_both():
    hostile = ["$(HOME)", "`id`", "a'b\"c", "x\ny"]
    values = {"primitive": "gloo", "benchmark": {"extraArgs": hostile}}
    chart = normalised(render_chart(values))["Job"]
    args = chart["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-len(hostile) - 2:-2] == ["$$(HOME)", "`id`", "a'b\"c", "x\ny"]
    p = fabbench("render", "k8s", *cli_args(values), timeout=60)
    assert normalised(docs(p.stdout))["Job"] == chart


def _container(manifests: list[dict]) -> dict:
    """The container whose environment the ranks get: the Job's, or the MPIJob launcher's
    (mpirun passes it on with -x)."""
    by_kind = normalised(manifests)
    if "Job" in by_kind:
        return by_kind["Job"]["spec"]["template"]["spec"]["containers"][0]
    spec = by_kind["MPIJob"]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    return spec["containers"][0]


@pytest.mark.parametrize("fabric,primitive", [("infiniband", "nccl"), ("infiniband", "mpi"),
                                              ("omnipath", "mpi")])
@pytest.mark.parametrize("mode", ["on", "off"])
def test_gpudirect_renders_as_the_profile_says(fabric, primitive, mode):
    """The chart's pods get the profile's [primitive.X.gpudirect.<mode>] over the section, and
    `fabbench run --gpudirect <mode>` (which checks what the library reports)."""
    from fabbench.fabrics.profile import load_profile

    profile = load_profile(fabric)
    fixed = {k: v for k, v in profile.settings(primitive).env.items() if "{" not in v}
    want = {k: v for k, v in profile.settings(primitive, "native", mode).env.items()
            if "{" not in v}
    assert want != fixed  # the switch changes something
    values = {"fabric": fabric, "primitive": primitive, "gpusPerNode": 2, "gpudirect": mode}
    chart = render_chart(values)
    container = _container(chart)
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    assert {k: env.get(k) for k in want} == want
    args = container["args"]
    assert args[args.index("--gpudirect") + 1] == mode
    p = fabbench("render", "k8s", *cli_args(values), timeout=60)
    assert p.returncode == 0, p.stderr
    assert normalised(docs(p.stdout)) == normalised(chart)


def images(manifests: list[dict]) -> set[str]:
    """The image of every container of the manifests' pods."""
    out = set()
    for doc in manifests:
        spec = doc["spec"]
        pods = [r["template"]["spec"] for r in spec["mpiReplicaSpecs"].values()] \
            if doc["kind"] == "MPIJob" else [spec["template"]["spec"]] \
            if doc["kind"] == "Job" else []
        out |= {c["image"] for pod in pods for c in pod["containers"]}
    return out


DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize("primitive", ["gloo", "mpi"])
def test_a_digest_pins_the_image_and_every_rank_is_told(primitive):
    """image.digest: every pod runs repository@digest (the tag unused), and the ranks get that
    reference as FABBENCH_IMAGE_REF (an MPIJob's through its launcher's mpirun -x), from which
    a run records the digest it was pulled by; `render k8s --image` writes the same."""
    ref = f"registry.example/fabbench@{DIGEST}"
    values = {"primitive": primitive,
              "image": {"repository": "registry.example/fabbench", "tag": "unused",
                        "digest": DIGEST}}
    chart = render_chart(values)
    for doc in chart:
        validate_manifest(doc)
    assert images(chart) == {ref}
    container = _container(chart)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["FABBENCH_IMAGE_REF"] == ref
    assert image_reference(None, env).get("digest") == DIGEST
    if primitive == "mpi":
        args = container["args"]
        assert "FABBENCH_IMAGE_REF" in [args[i + 1] for i, a in enumerate(args) if a == "-x"]
    p = fabbench("render", "k8s", *cli_args(values), timeout=60)
    assert p.returncode == 0, p.stderr
    assert "--image" in cli_args(values) and normalised(docs(p.stdout)) == normalised(chart)
    out = helm_python.Chart.load(str(CHART)).render(values, name=RELEASE, namespace="bench")
    notes = next(text for name, text in out.items() if name.endswith("NOTES.txt"))
    assert f"in the image {ref} (each results file records it)." in notes


@pytest.mark.parametrize("values,flavour", [
    ({}, "cpu"), ({"primitive": "gloo"}, "cpu"), ({"primitive": "nccl", "gpusPerNode": 2}, "cuda"),
    ({"primitive": "mpi", "gpusPerNode": 1}, "cuda"), ({"study": "quick"}, "cpu")])
def test_the_default_tag_is_the_flavour_the_job_needs(values, flavour):
    """image.tag "": the chart's appVersion in the cuda flavour when the job asks for GPUs,
    else the cpu one; a tag the site names is kept."""
    want = f"fabbench:{__version__}-{flavour}"
    chart = render_chart(values)
    assert images(chart) == {want}
    env = {e["name"]: e.get("value") for e in _container(chart)["env"]}
    assert env["FABBENCH_IMAGE_REF"] == want
    named = render_chart({**values, "image": {"repository": "site/fabbench", "tag": "nightly"}})
    assert images(named) == {"site/fabbench:nightly"}


def notes(values: dict) -> str:
    out = helm_python.Chart.load(str(CHART)).render(values, name=RELEASE, namespace="bench")
    return next(text for name, text in out.items() if name.endswith("NOTES.txt"))


def pod_specs(manifests: list[dict]) -> dict[str, dict]:
    """Every pod template's spec: the Job's ("fabbench"), the MPIJob's by role."""
    out = {}
    for doc in manifests:
        if doc["kind"] == "MPIJob":
            for role, r in doc["spec"]["mpiReplicaSpecs"].items():
                out[role] = r["template"]["spec"]
        elif doc["kind"] == "Job":
            out["fabbench"] = doc["spec"]["template"]["spec"]
    return out


NODE_NAME = {"name": "FABBENCH_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath":
                                                                       "spec.nodeName"}}}


@pytest.mark.parametrize("path", VALUE_SETS, ids=lambda p: p.stem)
def test_every_pod_that_runs_ranks_is_told_its_node(path):
    """FABBENCH_NODE_NAME from the downward API in the Job's pods and the MPIJob's workers
    (where the image's sshd hands it to the ranks): the records name the Kubernetes nodes."""
    specs = pod_specs(render_chart(values_of(path)))
    ranks = specs.get("fabbench") or specs["Worker"]
    assert NODE_NAME in ranks["containers"][0]["env"]


@pytest.mark.parametrize("results,to_log", [
    ({}, True), ({"claim": "pvc1"}, False), ({"hostPath": "/srv/fabbench"}, False)])
@pytest.mark.parametrize("primitive", ["gloo", "mpi"])
def test_results_on_an_emptydir_go_to_the_log_and_notes_say_how_to_read_them(
        results, to_log, primitive):
    """With the chart's defaults the results volume is an emptyDir: rank 0 is told to write
    the file into its log (an MPIJob's through mpirun -x), and NOTES.txt gives the exact
    command that reads it back: rank 0's pod's log, or the MPIJob launcher's."""
    values = {"primitive": primitive, "results": results}
    manifests = render_chart(values)
    for doc in manifests:
        validate_manifest(doc)
    container = _container(manifests)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env.get("FABBENCH_RESULTS_TO_LOG") == "1") == to_log
    if primitive == "mpi":
        args = container["args"]
        exported = [args[i + 1] for i, a in enumerate(args) if a == "-x"]
        assert ("FABBENCH_RESULTS_TO_LOG" in exported) == to_log
    text = notes(values)
    reads = {"gloo": "kubectl logs -n bench -l batch.kubernetes.io/job-name=fb-fabbench,"
                     "batch.kubernetes.io/job-completion-index=0 --tail=-1 | fabbench from-log - "
                     "-o results.jsonl",
             "mpi": "kubectl logs -n bench job/fb-fabbench-launcher | fabbench from-log - -o "
                    "results.jsonl"}[primitive]
    assert (reads in text) == to_log
    assert "kubectl cp" not in text  # a completed pod cannot be exec'd into
    if results.get("hostPath"):
        assert "/srv/fabbench/fb-fabbench-collectives.jsonl" in text
        volume = next(v for v in pod_specs(manifests)["fabbench" if primitive == "gloo"
                                                       else "Worker"]["volumes"]
                      if v["name"] == "results")
        assert volume["hostPath"] == {"path": "/srv/fabbench", "type": "DirectoryOrCreate"}
    p = fabbench("render", "k8s", *cli_args(values), timeout=60)
    assert p.returncode == 0, p.stderr
    assert normalised(docs(p.stdout)) == normalised(manifests)


def test_the_mpijob_workers_run_the_images_sshd_as_root():
    """The chart's default primitive (mpi): the workers start the image's fabbench-sshd
    (containers/sshd.sh: host keys made in the pod), not the operator's /usr/sbin/sshd -De,
    which finds no host key; launcher and workers run as root, where the operator mounts its
    keys (sshAuthMountPath); the launcher starts once every worker is ready."""
    (mpijob,) = render_chart({})
    spec = mpijob["spec"]
    assert spec["sshAuthMountPath"] == "/root/.ssh"
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    specs = pod_specs([mpijob])
    assert specs["Worker"]["containers"][0]["command"] == ["/usr/local/sbin/fabbench-sshd",
                                                           "serve"]
    for role in ("Launcher", "Worker"):
        assert specs[role]["securityContext"] == {"runAsUser": 0, "runAsGroup": 0,
                                                  "seccompProfile": {"type": "RuntimeDefault"}}


# ---- least privilege and Pod Security (issue 59, classes 4 and 6) ------------------------------

def documented_level(values: dict) -> str:
    """The Pod Security level docs/security.md names for a release's pods: privileged for the
    nodes' network, a node's directory or a fabric that registers memory (IPC_LOCK); baseline
    for an MPIJob (root sshd); restricted for the Indexed Job."""
    v = {"fabric": "ethernet", "wire": "native", "primitive": "", "gpusPerNode": 0, **values}
    rdma = v["fabric"] in ("infiniband", "omnipath") and v["wire"] == "native"
    if (v.get("healthCheck", {}).get("enabled") or v.get("hostNetwork")
            or v.get("results", {}).get("hostPath") or rdma):
        return "privileged"
    primitive = v["primitive"] or ("nccl" if v["gpusPerNode"] else "mpi")
    return "baseline" if primitive in ("mpi", "horovod") or v.get("study") else "restricted"


def all_pod_specs(manifests: list[dict]) -> dict[str, dict]:
    """Every pod template's spec by name: the Job's, the MPIJob's by role, a CronJob's."""
    out = pod_specs(manifests)
    for doc in manifests:
        if doc["kind"] == "CronJob":
            out[doc["metadata"]["name"]] = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return out


def ranks_container(spec: dict) -> dict:
    return next(c for c in pod_security.containers(spec)
                if c["name"] in ("fabbench", "worker"))


@pytest.mark.parametrize("path", VALUE_SETS, ids=lambda p: p.stem)
def test_every_pod_is_admitted_at_the_level_the_docs_name_and_no_stricter(path, tmp_path):
    """Each value set's pods, from the chart and from `fabbench render k8s`, pass Pod Security
    at the level docs/security.md names for them (NOTES.txt says which), and that level is the
    strictest they can pass: the gloo/NCCL Job restricted, the MPIJob baseline, RDMA, the
    nodes' network and a node's directory privileged."""
    values = values_of(path)
    level = documented_level(values)
    assert f"pod-security.kubernetes.io/enforce={level}" in notes(values)
    p = fabbench("render", "k8s", *cli_args(values, tmp_path), timeout=60)
    assert p.returncode == 0, p.stderr
    for manifests in (render_chart(values), docs(p.stdout)):
        specs = pod_specs(manifests)
        assert specs
        for role, spec in specs.items():
            assert pod_security.violations(spec, level) == [], role
            assert pod_security.lowest_level(spec) == level or role == "Launcher", role


@pytest.mark.parametrize("fabric,wire,lock", [
    ("ethernet", "native", False), ("infiniband", "native", True), ("infiniband", "tcp", False),
    ("omnipath", "native", True), ("omnipath", "tcp", False)])
@pytest.mark.parametrize("primitive,gpus", [("gloo", 0), ("mpi", 0), ("nccl", 1)])
def test_ranks_lock_memory_only_where_the_fabric_registers_it(fabric, wire, lock, primitive,
                                                               gpus):
    """IPC_LOCK (which only Pod Security privileged admits) in the ranks' containers only on
    a fabric whose native wire registers memory with the NIC (RDMA: the profile's devices)."""
    values = {"fabric": fabric, "wire": wire, "primitive": primitive, "gpusPerNode": gpus}
    for role, spec in pod_specs(render_chart(values)).items():
        for c in pod_security.containers(spec):
            added = (c.get("securityContext", {}).get("capabilities") or {}).get("add") or []
            assert added == (["IPC_LOCK"] if lock and role != "Launcher" else []), (role, c)


@pytest.mark.parametrize("values", [
    {"primitive": "gloo"},
    {"primitive": "gloo", "preflight": {"enabled": True, "floors": "x"}},
    {"primitive": "nccl", "gpusPerNode": 4}])
def test_the_indexed_jobs_pods_run_as_the_images_user_on_a_read_only_root(values):
    """The gloo/NCCL Job and its check before the job: uid/gid 1000 (values), no capability,
    a read-only root filesystem, the places they write on volumes: /tmp (the check's
    /tmp/preflight.*, HOME and TMPDIR), /dev/shm, the results."""
    spec = pod_specs(render_chart(values))["fabbench"]
    assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1000,
                                       "runAsGroup": 1000, "fsGroup": 1000,
                                       "seccompProfile": {"type": "RuntimeDefault"}}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["tmp"] == {"name": "tmp", "emptyDir": {}}
    names = [c["name"] for c in pod_security.containers(spec)]
    assert names == (["preflight", "fabbench"] if "preflight" in values else ["fabbench"])
    for c in pod_security.containers(spec):
        assert c["securityContext"] == {"allowPrivilegeEscalation": False,
                                        "readOnlyRootFilesystem": True,
                                        "capabilities": {"drop": ["ALL"]}}
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        assert {"/tmp": "tmp", "/dev/shm": "dshm", "/results": "results"}.items() <= \
            mounts.items()
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert (env["HOME"], env["TMPDIR"]) == ("/tmp", "/tmp")
    if "preflight" in values:
        script = spec["initContainers"][0]["command"][2]
        assert "/tmp/preflight.log" in script  # written under the /tmp volume
    custom = render_chart({**values, "securityContext": {"runAsUser": 2000, "runAsGroup": 3000,
                                                         "fsGroup": 3000}})
    sc = pod_specs(custom)["fabbench"]["securityContext"]
    assert (sc["runAsUser"], sc["runAsGroup"], sc["fsGroup"]) == (2000, 3000, 3000)


@pytest.mark.parametrize("values", [{}, {"primitive": "gloo"}, {"study": "quick"},
                                    {"primitive": "horovod", "hostNetwork": True}])
def test_no_pod_of_the_benchmark_holds_a_service_account_token(values):
    """The ranks, the MPIJob's launcher and workers talk to no Kubernetes API: no token."""
    specs = pod_specs(render_chart(values))
    assert specs
    for role, spec in specs.items():
        assert spec["automountServiceAccountToken"] is False, role
        assert "serviceAccountName" not in spec, role


def test_resources_default_and_give_guaranteed_qos_with_whole_cores():
    """Requests and limits of CPU and memory as values with defaults; limits equal to the
    requests in whole cores make the pods Guaranteed (a static CPU manager pins the ranks);
    GPUs and RDMA devices join the limits."""
    spec = pod_specs(render_chart({"primitive": "gloo"}))["fabbench"]
    assert spec["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "16Gi"}}
    whole = {"requests": {"cpu": 4, "memory": "32Gi"}, "limits": {"cpu": 4, "memory": "32Gi"}}
    values = {"primitive": "nccl", "gpusPerNode": 8, "resources": whole,
              "rdma": {"resource": "rdma/hca", "perNode": 2}, "fabric": "infiniband"}
    spec = pod_specs(render_chart(values))["fabbench"]
    got = spec["containers"][0]["resources"]
    assert got == {"requests": {"cpu": "4", "memory": "32Gi"},
                   "limits": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": 8,
                              "rdma/hca": 2}}
    assert {k: got["limits"][k] for k in ("cpu", "memory")} == got["requests"]  # Guaranteed
    launcher = pod_specs(render_chart({}))["Launcher"]["containers"][0]
    assert launcher["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"},
                                     "limits": {"memory": "2Gi"}}


@pytest.mark.parametrize("values,where", [
    ({"primitive": "gloo"}, "job"), ({"primitive": "gloo", "deadlineSeconds": 45}, "job"),
    ({}, "mpijob"), ({"deadlineSeconds": 600}, "mpijob")])
def test_a_job_whose_pods_cannot_be_created_ends_at_a_deadline(values, where):
    """A Job whose pods Pod Security or a quota refuses (never created) or that no node takes
    ends at deadlineSeconds (the MPIJob: its launcher's); NOTES say where the reason is."""
    (job,) = [d for d in render_chart(values) if d["kind"] in ("Job", "MPIJob")]
    deadline = values.get("deadlineSeconds", 3600)
    if where == "job":
        assert job["spec"]["activeDeadlineSeconds"] == deadline
        assert f"kubectl describe job {FULLNAME} -n bench" in notes(values)
        assert "DeadlineExceeded" in notes(values)
    else:
        assert job["spec"]["runPolicy"]["activeDeadlineSeconds"] == deadline
        assert f"kubectl describe mpijob {FULLNAME} -n bench" in notes(values)
    assert "violates PodSecurity" in notes(values)


@pytest.mark.parametrize("bad", [
    {"resources": {"requests": {"cpu": "one"}}}, {"resources": {"limits": {"gpu": 1}}},
    {"resources": {"requests": {"memory": "1K"}}}, {"helperResources": {"x": {}}},
    {"resources": {"limits": {"memory": "0"}}}, {"helperResources": {"requests": {"cpu": "0m"}}},
    {"securityContext": {"runAsUser": 0}}, {"securityContext": {"privileged": True}},
    {"deadlineSeconds": 0}, {"deadlineSeconds": "1h"}])
def test_the_schema_rejects_bad_security_values(bad):
    good = {"resources": {"requests": {"cpu": "500m", "memory": "1.5Gi"},
                          "limits": {"cpu": 2, "memory": "4G"}},
            "helperResources": {"requests": {"cpu": "1"}}, "deadlineSeconds": 30,
            "securityContext": {"runAsUser": 4242, "runAsGroup": 4242, "fsGroup": 4242}}
    assert render_chart({"primitive": "gloo", **good})  # the new values, each accepted
    with pytest.raises(helm_python.HelmValuesError):
        render_chart({"primitive": "gloo", **good, **bad})
