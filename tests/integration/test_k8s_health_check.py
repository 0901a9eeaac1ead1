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


def benchmark_of(cronjob: dict) -> dict:
    """The check's benchmark: the pod's init container, which holds no token."""
    (init,) = pod_of(cronjob)["initContainers"]
    assert init["name"] == "fabbench"
    return init


def judge_of(cronjob: dict) -> dict:
    """The check's judge: the pod's container, verify and label-nodes on index 0."""
    (judge,) = pod_of(cronjob)["containers"]
    assert judge["name"] == "judge"
    return judge


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
                             "Service", "ServiceAccount", "ValidatingAdmissionPolicy",
                             "ValidatingAdmissionPolicyBinding"]  # no one-off Job
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
        container = benchmark_of(cron)
        env = {e["name"]: e for e in container["env"]}
        assert env["FABBENCH_WORLD_SIZE"]["value"] == str(nodes)
        assert env["MASTER_ADDR"]["value"] == f"$(FABBENCH_JOB_NAME)-0.{FULLNAME}"
        assert list(env).index("FABBENCH_JOB_NAME") < list(env).index("MASTER_ADDR")
        # the Kubernetes node the records name and label-nodes patches (on the nodes' network
        # every pod's hostname is the machine's, whatever the node is called)
        assert env["FABBENCH_NODE_NAME"] == {
            "name": "FABBENCH_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
        assert env["FABBENCH_RESULTS_TO_LOG"]["value"] == "1"  # an emptyDir: into the log too
        mounts = {m["name"]: m["mountPath"] for m in judge_of(cron)["volumeMounts"]}
        assert mounts["floors"] == "/etc/fabbench"


def test_the_judge_has_resources_of_its_own_and_is_told_its_memory_limit():
    """The judge's requests and limits are healthCheck.judgeResources (default: a memory limit
    that judges 1,024 nodes, test_k8s_judge_at_scale.py), not the launcher's helperResources;
    the container's memory limit reaches fabbench as FABBENCH_MEMORY_LIMIT (the downward API:
    bytes), which bounds its reading engine."""
    default = {"requests": {"cpu": "1", "memory": "1536Mi"}, "limits": {"memory": "1536Mi"}}
    mine = {"requests": {"cpu": "2", "memory": "3Gi"}, "limits": {"cpu": 2, "memory": "3Gi"}}
    for health, resources in (({}, default), ({"judgeResources": mine}, {
            "requests": {"cpu": "2", "memory": "3Gi"}, "limits": {"cpu": "2", "memory": "3Gi"}})):
        values = {**ON, "helperResources": {"limits": {"memory": "64Mi"}},
                  "healthCheck": {**ON["healthCheck"], **health}}
        for cron in by_kind(render_chart(values))["CronJob"]:
            judge = judge_of(cron)
            assert judge["resources"] == resources
            (limit,) = [e for e in judge["env"] if e["name"] == "FABBENCH_MEMORY_LIMIT"]
            assert limit["valueFrom"] == {"resourceFieldRef": {"containerName": judge["name"],
                                                               "resource": "limits.memory"}}
    launcher = [d for d in render_chart({}) if d["kind"] == "MPIJob"][0]
    (container,) = launcher["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"][
        "containers"]
    assert container["resources"]["limits"] == {"memory": "2Gi"}  # helperResources, as before


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
    """The CronJob's pods run the one-off Job's launch in an init container, its --out named
    after the check's Job; then the judge container runs verify and label-nodes."""
    one_off = by_kind(render_chart({k: v for k, v in ON.items() if k != "healthCheck"}))
    job = one_off["Job"][0]["spec"]["template"]["spec"]["containers"][0]
    job_argv = [*job["command"], *job["args"]]
    cron = by_kind(render_chart(ON))["CronJob"][1]  # rack2: the chart's node count
    bench = benchmark_of(cron)
    launch = [*bench["command"], *bench["args"]]
    out = "/results/$(FABBENCH_JOB_NAME)-pairs.jsonl"  # named after the workload
    assert launch[:-2] == job_argv[:-2] and launch[-2:] == ["--out", out]
    assert "--workload" in launch and "pairs" in launch
    judge = judge_of(cron)
    assert judge["command"][:2] == ["/bin/sh", "-c"]
    assert judge["args"] == ["fabbench", out, "fabbench.dev"]
    script = judge["command"][2]
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


def run_pod(tmp_path, cron: dict, index: str, run_rc: int, verdict: int, label_rc: int
            ) -> tuple[int, list[str]]:
    """The check's pod as the kubelet runs it, with a stand-in fabbench: the init container's
    benchmark, then, if it succeeded, the judge's script. Its exit code and the calls made."""
    (tmp_path / "fabbench").write_text(FAKE)
    (tmp_path / "fabbench").chmod(0o755)
    env = {"FABBENCH_NODE_RANK": index, "FABBENCH_JOB_NAME": "fb-fabbench-rack1-29000000"}
    run_env = {**os.environ, **env, "CALLS": str(tmp_path / "calls"), "RUN_RC": str(run_rc),
               "VERDICT": str(verdict), "LABEL_RC": str(label_rc)}
    code = 0
    for container in (benchmark_of(cron), judge_of(cron)):
        argv = [_k8s_expand(w, env) for w in [*container["command"], *container["args"]]]
        code = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False,
                              env=run_env).returncode
        if code:  # a failed init container fails the pod: the judge never starts
            break
    return code, (tmp_path / "calls").read_text().splitlines()


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
    got, made = run_pod(tmp_path, cron, index, run_rc, verdict, label_rc)
    assert got == code
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
    cron = by_kind(render_chart(values))["CronJob"][0]
    code, made = run_pod(tmp_path, cron, "0", 0, 1, 0)
    assert code == 1
    assert made[2] == f"floors label-nodes /tmp/verdict.json --prefix fabbench.dev {words}"


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
    {"enabled": "yes"}, {"deadlineSeconds": 10}, {"bogus": 1},
    {"judgeResources": {"limits": {"memory": "1GB"}}}, {"judgeResources": {"limits": {"gpu": 1}}},
    {"judgeResources": {"limits": {"memory": "0"}}}, {"judgeResources": {"limit": {}}},
    {"judgeResources": {"requests": {"memory": "1Gi\n"}}}])
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


# ---- least privilege (issue 59, class 4) -----------------------------------------------------

def test_only_the_judge_holds_the_labellers_token():
    """The labeller's ServiceAccount (patch on nodes) is no pod's automatic token: the pod
    mounts none, the benchmark (every index's init container) never sees one, and the judge
    alone mounts the labeller's projected token where label-nodes reads it."""
    for cron in by_kind(render_chart(ON))["CronJob"]:
        pod = pod_of(cron)
        assert pod["automountServiceAccountToken"] is False
        assert pod["serviceAccountName"] == f"{FULLNAME}-labeller"
        volumes = {v["name"]: v for v in pod["volumes"]}
        sources = volumes["labeller-token"]["projected"]["sources"]
        assert sources[0] == {"serviceAccountToken": {"path": "token",
                                                      "expirationSeconds": 3600}}
        holders = [c["name"] for c in (*pod["initContainers"], *pod["containers"])
                   if any(m["name"] == "labeller-token" for m in c.get("volumeMounts", ()))]
        assert holders == ["judge"]
        (mount,) = [m for m in judge_of(cron)["volumeMounts"] if m["name"] == "labeller-token"]
        assert mount == {"name": "labeller-token", "readOnly": True,
                         "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}


def test_a_policy_confines_the_labeller_to_its_labels_taint_and_condition():
    """A ValidatingAdmissionPolicy, bound with Deny, matches the labeller's requests to update
    nodes and nodes/status (its username) and holds every change but its own labels, taint and
    condition (test_k8s_chart.py shows the API server refusing the others)."""
    values = {**ON, "healthCheck": {**ON["healthCheck"], "labelPrefix": "health.example.com",
                                    "conditionType": "example.com/Fabric"}}
    kinds = by_kind(render_chart(values))
    (policy,), (binding,) = kinds["ValidatingAdmissionPolicy"], \
        kinds["ValidatingAdmissionPolicyBinding"]
    for doc in (policy, binding):
        validate_manifest(doc)
    assert binding["spec"] == {"policyName": policy["metadata"]["name"],
                               "validationActions": ["Deny"]}
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [{
        "apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
        "resources": ["nodes", "nodes/status"]}]
    assert spec["matchConditions"] == [{
        "name": "the-labeller", "expression": 'request.userInfo.username == '
        f'"system:serviceaccount:bench:{FULLNAME}-labeller"'}]
    assert {v["name"]: v["expression"] for v in spec["variables"]} == {
        "prefix": '"health.example.com/"', "taintKey": '"health.example.com/fabric"',
        "condition": '"example.com/Fabric"', "status": "dyn(object.status)",
        "oldStatus": "dyn(oldObject.status)"}
    checked = " ".join(v["expression"] for v in spec["validations"])
    pairs = [(f"object.{f}", f"oldObject.{f}") for f in (
        "metadata.labels", "metadata.annotations", "spec.taints", "spec.unschedulable",
        "status.conditions")]
    pairs += [(f"variables.status.{f}", f"variables.oldStatus.{f}")
              for f in ("capacity", "allocatable")]
    for new, old in pairs:  # each compared before and after ("oldObject" holds no "object")
        assert new in checked and old in checked, new


def test_the_check_needs_privileged_and_its_containers_no_more_than_restricted():
    """hostNetwork puts the check's pods at Pod Security privileged (NOTES say so); all else
    of them would pass restricted."""
    from integration import pod_security

    assert "pod-security.kubernetes.io/enforce=privileged" in \
        helm_python.Chart.load(str(CHART)).render(ON, name=RELEASE, namespace="bench")[
            "fabbench/templates/NOTES.txt"]
    for cron in by_kind(render_chart(ON))["CronJob"]:
        spec = pod_of(cron)
        assert pod_security.violations(spec, "restricted") == ["hostNetwork=true"]


# ---- a default that judges something (issue 59, class 8) ---------------------------------------

def test_the_check_runs_pairs_unless_told_otherwise():
    """Per-node floors judge the pairs workload: the check runs it by default, whatever the
    one-off benchmark's workload (benchmark.workload's default, collectives, judges no node)."""
    values = {**ON, "benchmark": {}}
    for cron in by_kind(render_chart(values))["CronJob"]:
        launch = benchmark_of(cron)["args"]
        assert launch[launch.index("--workload") + 1] == "pairs"
        assert launch[-1].endswith("-pairs.jsonl")


def rule(workload: str, extra: str = "") -> str:
    return (f'[[rule]]\nid = "r-{workload}"\nsource = "t"\nworkload = "{workload}"\n{extra}'
            'metric = "bw"\nat_least = 0.1\nunit = "GB/s"\n')


HEAD = 'format = "fabbench-floors/1"\nname = "site"\n'


@pytest.mark.parametrize("workload,floors,refused", [
    (None, HEAD + rule("collectives"), "workload collectives can never be judged"),
    (None, HEAD + rule("pairs", "per_node = true\n") + rule("halo"),
     "workload halo can never be judged: the check runs the pairs workload"),
    ("collectives", HEAD + rule("pairs"), "workload pairs can never be judged"),
    ("all", HEAD + rule("pairs"), "give rules of collectives or train"),
    (None, HEAD + "# workload = \"pairs\"\n", "has no rule"),
    (None, HEAD + rule("pairs", "per_node = true\n"), None),
    ("collectives", HEAD + rule("collectives"), None),
    ("all", HEAD + rule("collectives") + rule("train").replace('"bw"', '"throughput"'), None),
])
def test_floors_the_check_can_never_judge_are_refused_at_install(workload, floors, refused):
    health = {**ON["healthCheck"], "floors": floors}
    if workload:
        health["workload"] = workload
    values = {**ON, "benchmark": {}, "healthCheck": health}
    if refused is None:
        assert by_kind(render_chart(values))["CronJob"]
        return
    with pytest.raises(helm_python.HelmError, match=refused) as caught:
        render_chart(values)
    assert "\n" not in str(caught.value).strip()  # one clear line
