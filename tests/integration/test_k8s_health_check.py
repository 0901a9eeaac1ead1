"""The chart's health check (healthCheck.enabled), rendered by Helm's own library: per node group
a CronJob of an Indexed Job running the chart's benchmark, then `fabbench floors verify` against
the floors (a ConfigMap) and `fabbench floors label-nodes`, with a ServiceAccount whose
ClusterRole may get and patch nodes and nothing else; every manifest validated against
Kubernetes' schemas (kubernetes-validate --strict). The pod's script is run here with a
stand-in fabbench: the run, then on index 0 verify and the labels, and the exit code each step
leaves."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import tomllib

from integration.test_k8s_helm import CHART, FULLNAME, RELEASE, render_chart, validate_manifest

helm_python = pytest.importorskip("helm_python", reason="needs helm-python-sdk (dev extra)")

pytestmark = [pytest.mark.together, pytest.mark.integration]

FLOORS = """\
format = "fabbench-floors/1"
name = "site"

[[rule]]
id = "pairs-node-bw"
source = "test"
workload = "pairs"
per_node = true
metric = "bw"
at_least = 0.1
unit = "GB/s"
"""
ON = {"primitive": "gloo", "nodes": 3, "nodeSelector": {"site": "a"},
      "benchmark": {"workload": "pairs"},
      "healthCheck": {"enabled": True, "floors": FLOORS, "schedule": "*/30 * * * *",
                      "nodeGroups": [{"name": "rack1", "nodeSelector": {"rack": "1"}, "nodes": 4},
                                     {"name": "rack2", "nodeSelector": {"rack": "2"}}]}}


def by_kind(manifests: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for doc in manifests:
        out.setdefault(doc["kind"], []).append(doc)
    return out


def pod_of(cronjob: dict) -> dict:
    return cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def test_disabled_renders_the_one_off_job_only():
    kinds = sorted(d["kind"] for d in render_chart({"primitive": "gloo"}))
    assert kinds == ["Job", "Service"]
    assert sorted(d["kind"] for d in render_chart({})) == ["MPIJob"]


def test_enabled_renders_a_cronjob_per_group_and_validates():
    manifests = render_chart(ON)
    for doc in manifests:
        validate_manifest(doc)
    kinds = by_kind(manifests)
    assert sorted(kinds) == ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "CronJob",
                             "Service", "ServiceAccount"]  # no one-off Job
    assert [c["metadata"]["name"] for c in kinds["CronJob"]] == [f"{FULLNAME}-rack1",
                                                                 f"{FULLNAME}-rack2"]
    assert kinds["ConfigMap"][0]["data"] == {"floors.toml": FLOORS}
    tomllib.loads(kinds["ConfigMap"][0]["data"]["floors.toml"])
    for cron, nodes, rack in zip(kinds["CronJob"], (4, 3), ("1", "2"), strict=True):
        assert cron["spec"]["schedule"] == "*/30 * * * *"
        assert cron["spec"]["concurrencyPolicy"] == "Forbid"
        job = cron["spec"]["jobTemplate"]["spec"]
        assert job["completionMode"] == "Indexed" and job["completions"] == nodes
        pod = pod_of(cron)
        assert pod["nodeSelector"] == {"site": "a", "rack": rack}  # the group's over the chart's
        assert pod["hostNetwork"] is True  # the nodes' own wire
        assert pod["serviceAccountName"] == f"{FULLNAME}-labeller"
        anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
        assert anti[0]["labelSelector"]["matchLabels"]["fabbench.dev/group"] == f"rack{rack}"
        container = pod["containers"][0]
        env = {e["name"]: e for e in container["env"]}
        assert env["FABBENCH_WORLD_SIZE"]["value"] == str(nodes)
        assert env["MASTER_ADDR"]["value"] == f"$(FABBENCH_JOB_NAME)-0.{FULLNAME}"
        assert list(env).index("FABBENCH_JOB_NAME") < list(env).index("MASTER_ADDR")
        # the Kubernetes node the records name and label-nodes patches (on the nodes' network
        # every pod's hostname is the machine's, whatever the node is called)
        assert env["FABBENCH_NODE_NAME"] == {
            "name": "FABBENCH_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
        assert env["FABBENCH_RESULTS_TO_LOG"]["value"] == "1"  # an emptyDir: into the log too
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert mounts["floors"] == "/etc/fabbench"


def test_the_labeller_may_get_and_patch_nodes_only():
    kinds = by_kind(render_chart(ON))
    (role,), (binding,), (account,) = (kinds["ClusterRole"], kinds["ClusterRoleBinding"],
                                       kinds["ServiceAccount"])
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes", "nodes/status"],
                              "verbs": ["get", "patch"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": "bench"}]
    assert "bench" in role["metadata"]["name"]  # one per release and namespace
    assert {pod_of(c)["serviceAccountName"] for c in kinds["CronJob"]} == \
        {account["metadata"]["name"]}


def test_the_check_tolerates_its_own_taint():
    """A node the check tainted must be checked again, or it never loses the taint (the
    cluster test found the next check's pod Pending on it)."""
    for cron in by_kind(render_chart(ON))["CronJob"]:
        assert pod_of(cron)["tolerations"] == [{"key": "fabbench.dev/fabric",
                                                "operator": "Exists"}]


def test_the_check_runs_the_charts_benchmark():
    """The CronJob's pods run the one-off Job's launch, less its --out (the script names the
    results file after the check's Job), then verify and label-nodes."""
    one_off = by_kind(render_chart({k: v for k, v in ON.items() if k != "healthCheck"}))
    job = one_off["Job"][0]["spec"]["template"]["spec"]["containers"][0]
    job_argv = [*job["command"], *job["args"]]
    cron = by_kind(render_chart(ON))["CronJob"][1]  # rack2: the chart's node count
    container = pod_of(cron)["containers"][0]
    assert container["command"][:2] == ["/bin/sh", "-c"]
    fb, out, prefix, *launch = container["args"]
    assert (fb, prefix) == ("fabbench", "fabbench.dev")
    assert out == "/results/$(FABBENCH_JOB_NAME)-pairs.jsonl"  # named after the workload
    assert job_argv[-2] == "--out" and launch == job_argv[:-2]
    assert "--workload" in launch and "pairs" in launch
    script = container["command"][2]
    assert "floors verify --floors /etc/fabbench/floors.toml" in script
    assert "--json /tmp/verdict.json" in script
    assert "floors label-nodes /tmp/verdict.json" in script


def _k8s_expand(word: str, env: dict[str, str]) -> str:
    """What Kubernetes makes of a command word: $(VAR) expanded, $$ a '$'."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), word)


FAKE = """#!/bin/sh
echo "$*" >> "$CALLS"
case "$1 $2" in
  "run "*) exit "$RUN_RC" ;;
  "floors verify")
    [ "$VERDICT" = 0 ] || echo "FAIL node n2: pairs bw 0.03 GB/s"; exit "$VERDICT" ;;
  "floors label-nodes") exit "$LABEL_RC" ;;
esac
exit 99
"""


@pytest.mark.parametrize("index,run_rc,verdict,label_rc,code,calls", [
    ("0", 0, 0, 0, 0, ["run", "floors verify", "floors label-nodes"]),
    ("0", 0, 1, 0, 1, ["run", "floors verify", "floors label-nodes"]),  # failing nodes labelled
    ("0", 0, 2, 0, 2, ["run", "floors verify"]),  # bad input: nothing to label
    ("0", 3, 0, 0, 3, ["run"]),  # the run failed: nothing to judge
    ("0", 0, 0, 1, 1, ["run", "floors verify", "floors label-nodes"]),  # labels not set: fails
    ("1", 0, 0, 0, 0, ["run"]),  # not index 0: the results are not here
])
def test_the_pods_script(tmp_path, index, run_rc, verdict, label_rc, code, calls):
    cron = by_kind(render_chart({**ON, "fabbenchCommand": str(tmp_path / "fabbench")}))[
        "CronJob"][0]
    container = pod_of(cron)["containers"][0]
    (tmp_path / "fabbench").write_text(FAKE)
    (tmp_path / "fabbench").chmod(0o755)
    env = {"FABBENCH_NODE_RANK": index, "FABBENCH_JOB_NAME": "fb-fabbench-rack1-29000000"}
    argv = [_k8s_expand(w, env) for w in [*container["command"], *container["args"]]]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False, env={
        **os.environ, **env, "CALLS": str(tmp_path / "calls"), "RUN_RC": str(run_rc),
        "VERDICT": str(verdict), "LABEL_RC": str(label_rc)})
    assert p.returncode == code, p.stderr
    made = (tmp_path / "calls").read_text().splitlines()
    assert [c.split()[0] if c.startswith("run ") else " ".join(c.split()[:2])
            for c in made] == calls
    out = "/results/fb-fabbench-rack1-29000000-pairs.jsonl"
    assert made[0].endswith(f"--out {out}")
    if len(made) > 1:
        assert made[1] == (f"floors verify --floors /etc/fabbench/floors.toml {out} "
                           "--json /tmp/verdict.json")
    if len(made) > 2:
        assert made[2] == ("floors label-nodes /tmp/verdict.json --prefix fabbench.dev "
                           "--condition FabricHealthy")


@pytest.mark.parametrize("health,words", [
    ({"taint": True}, "--condition FabricHealthy --taint --taint-effect NoSchedule"),
    ({"taint": True, "taintEffect": "NoExecute", "conditionType": "example.com/Fabric",
      "dryRun": True},
     "--condition example.com/Fabric --taint --taint-effect NoExecute --dry-run"),
])
def test_the_taint_and_dry_run_reach_label_nodes(tmp_path, health, words):
    values = {**ON, "fabbenchCommand": str(tmp_path / "fabbench"),
              "healthCheck": {**ON["healthCheck"], **health}}
    container = pod_of(by_kind(render_chart(values))["CronJob"][0])["containers"][0]
    (tmp_path / "fabbench").write_text(FAKE)
    (tmp_path / "fabbench").chmod(0o755)
    env = {"FABBENCH_NODE_RANK": "0", "FABBENCH_JOB_NAME": "fb-fabbench-rack1-29000000"}
    argv = [_k8s_expand(w, env) for w in [*container["command"], *container["args"]]]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False, env={
        **os.environ, **env, "CALLS": str(tmp_path / "calls"), "RUN_RC": "0",
        "VERDICT": "1", "LABEL_RC": "0"})
    assert p.returncode == 1, p.stderr
    label = (tmp_path / "calls").read_text().splitlines()[2]
    assert label == f"floors label-nodes /tmp/verdict.json --prefix fabbench.dev {words}"


def test_names_stay_within_kubernetes_limits():
    """A long release name: each CronJob within 48 characters (its Jobs add 9, their pods'
    host names <job>-<index> stay within 63), the groups' names kept whole."""
    values = {**ON, "fullnameOverride": "a" * 52}
    names = [c["metadata"]["name"] for c in by_kind(render_chart(values))["CronJob"]]
    assert [len(n) for n in names] == [48, 48]  # the full name trimmed to 42, "-rack1"
    assert [n.split("-")[-1] for n in names] == ["rack1", "rack2"]


@pytest.mark.parametrize("change,message", [
    ({"primitive": "mpi"}, "a CronJob cannot start"),
    ({"primitive": ""}, "a CronJob cannot start"),
    ({"study": "quick"}, "not a study"),
    ({"healthCheck": {**ON["healthCheck"], "floors": "  \n"}}, "healthCheck.floors is empty"),
    ({"healthCheck": {**ON["healthCheck"], "nodeGroups": [{"name": "a"}, {"name": "a"}]}},
     "named twice"),
    ({"healthCheck": {**ON["healthCheck"], "conditionType": "Fabric Healthy"}},
     "conditionType"),
    ({"healthCheck": {**ON["healthCheck"], "conditionType": "x'; rm -rf /; '"}},
     "conditionType"),
    ({"healthCheck": {**ON["healthCheck"], "taintEffect": "NoWay"}}, "taintEffect"),
    ({"healthCheck": {**ON["healthCheck"], "taint": "yes"}}, "taint"),
])
def test_the_chart_refuses_what_cannot_run(change, message):
    with pytest.raises(helm_python.HelmError, match=message):
        render_chart({**ON, **change})


@pytest.mark.parametrize("bad", [
    {"labelPrefix": "Fabbench.dev"}, {"labelPrefix": "a/b"}, {"schedule": "hourly"},
    {"nodeGroups": []}, {"nodeGroups": [{"name": "Rack_1"}]},
    {"nodeGroups": [{"name": "r" * 21}]}, {"nodeGroups": [{"nodeSelector": {}}]},
    {"nodeGroups": [{"name": "a", "nodes": 0}]}, {"nodeGroups": [{"name": "a", "x": 1}]},
    {"enabled": "yes"}, {"deadlineSeconds": 10}, {"bogus": 1}])
def test_the_schema_rejects_bad_health_check_values(bad):
    with pytest.raises(helm_python.HelmValuesError):
        render_chart({**ON, "healthCheck": {**ON["healthCheck"], **bad}})


def test_helm_lint_is_clean_with_the_health_check():
    report = helm_python.lint(str(CHART), ON, strict=True, namespace="bench")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_notes_say_where_the_verdicts_are():
    out = helm_python.Chart.load(str(CHART)).render(ON, name=RELEASE, namespace="bench")
    notes = next(text for name, text in out.items() if name.endswith("NOTES.txt"))
    assert f"{FULLNAME}-rack1 (4 node(s), rack=1)" in notes
    assert "kubectl get nodes -L fabbench.dev/verdict -L fabbench.dev/figure" in notes
