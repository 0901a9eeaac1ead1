"""The Helm chart on a real Kubernetes cluster (issue 43): the helm binary installs
charts/fabbench on the session's cluster (conftest.k8s: .ci/k8s/start.sh, four emulated nodes,
every link at 1 Gbit/s in this module), the kubelets pull the cpu image by digest from the
cluster's TLS registry, and the pods measure across the shaped links.

- the Indexed Job (gloo) on 2 and 3 nodes: Complete, one pod per node, the results read back out
  of rank 0's log (`fabbench from-log`), judged by `fabbench verify`, the records' node names the
  kubelets' nodes, busbw at the largest size against the link;
- `helm install` with nothing set but the image: the default primitive (mpi) as an MPIJob, which
  the mpi-operator runs over the image's sshd: Succeeded, the launcher's hostfile, the results;
- the health check: its CronJob triggered once (`kubectl create job --from=cronjob/...`) labels
  every node of the healthy cluster pass, with its figure (test_k8s_slow_node.py: one slow node);
- failures that end: a digest the registry does not have, more nodes than the cluster has, a rank
  killed mid-run, each ending with its reason in one line within its deadline;
- `helm uninstall` leaves nothing of the release.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from integration.k8s_cluster import K8S_TIMEOUT_S, K8sCluster, skip_reason

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "fabbench"
FABBENCH = REPO / ".venv" / "bin" / "fabbench"
RELEASE = "fabbench"  # the chart's fullname is the release's name when it holds "fabbench"
LINK_GBYTE_S = 1e9 / 8 / 1e9  # the emulated link, 1 Gbit/s, in GB/s
# The least share of the link a healthy gloo job must show at 16 MiB. Three pods' reductions
# share two cores with the cluster's daemons: CI under load measured 0.28 of the link on 3 nodes
# (0.43 here, quiet). What the link alone allows is the upper bound, 1.05 of it, that shows the
# bytes crossed the shaped link; this one only refuses a job that barely moved.
GLOO_LEAST = 0.15
SWEEP = {"ops": "allreduce", "sizes": "1M,16M", "budget": 0.3}
JOB_DEADLINE_S = 300

pytestmark = [pytest.mark.integration, pytest.mark.needs_root,
              pytest.mark.timeout(K8S_TIMEOUT_S),
              pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")]


@pytest.fixture(scope="module")
def cluster(k8s: K8sCluster) -> K8sCluster:
    k8s.set_link(2, 10**9)  # test_k8s_slow_node.py's slow node, at the others' rate here
    return k8s


# ---- helpers ----------------------------------------------------------------------------------

def image_values(cluster: K8sCluster) -> dict:
    return {"image": {"repository": cluster.image_repository, "digest": cluster.image_digest}}


def install(cluster: K8sCluster, ns: str, values: dict, tmp_path: Path, *extra: str,
            timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
    """`helm install fabbench charts/fabbench -n NS -f VALUES EXTRA...`."""
    f = tmp_path / f"values-{ns}.yaml"
    f.write_text(yaml.safe_dump(values))
    return cluster.helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(f), *extra,
                        timeout=timeout, check=check)


def uninstall_leaves_nothing(cluster: K8sCluster, ns: str) -> None:
    cluster.helm("uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "120s", timeout=180)
    deadline = time.monotonic() + 120
    kinds = "jobs,cronjobs,pods,services,configmaps,serviceaccounts,mpijobs"
    while True:
        left = cluster.kubectl("get", kinds, "-n", ns, "-l",
                               f"app.kubernetes.io/instance={RELEASE}", "-o", "name").stdout.split()
        roles = [r for r in cluster.kubectl("get", "clusterroles,clusterrolebindings", "-o",
                                            "name").stdout.split() if f"{ns}-{RELEASE}" in r]
        if not left and not roles:
            return
        assert time.monotonic() < deadline, f"helm uninstall left {left + roles}"
        time.sleep(2)


def pods_of(cluster: K8sCluster, ns: str, selector: str) -> list[dict]:
    return cluster.kubectl_json("get", "pods", "-n", ns, "-l", selector)["items"]


def why(cluster: K8sCluster, ns: str, selector: str) -> str:
    """One line: each pod's phase and the reason its container or its scheduling gives."""
    parts = []
    for pod in pods_of(cluster, ns, selector):
        said = [pod["status"].get("phase", "?")]
        for c in pod["status"].get("conditions", []):
            if c["type"] == "PodScheduled" and c["status"] == "False":
                said.append(f"{c.get('reason')}: {c.get('message')}")
        failed = False
        for cs in (pod["status"].get("initContainerStatuses", [])
                   + pod["status"].get("containerStatuses", [])):
            for state in ("waiting", "terminated"):
                s = cs.get("state", {}).get(state)
                if s and s.get("reason") not in (None, "Completed"):
                    said.append(f"{s['reason']}: {s.get('message', '')}"
                                f"{' exit ' + str(s['exitCode']) if 'exitCode' in s else ''}")
                failed = failed or bool(s and s.get("exitCode"))
        if failed:  # what the rank said last
            said.append("its log ends: " + cluster.kubectl(
                "logs", "-n", ns, pod["metadata"]["name"], "--tail=4", check=False,
                timeout=60).stdout.strip()[-600:])
        parts.append(f"{pod['metadata']['name']} {'; '.join(x.strip() for x in said)}")
    return " | ".join(parts).replace("\n", " ")


def job_end(cluster: K8sCluster, ns: str, job: str, timeout: float) -> tuple[str, str]:
    """("Complete" | "Failed", the condition's reason and message), waiting at most TIMEOUT s."""
    deadline = time.monotonic() + timeout
    while True:
        status = cluster.kubectl_json("get", "job", job, "-n", ns).get("status", {})
        for c in status.get("conditions", []):
            if c["type"] in ("Complete", "Failed") and c["status"] == "True":
                return c["type"], f"{c.get('reason', '')}: {c.get('message', '')}"
        if time.monotonic() > deadline:
            pytest.fail(f"job {job} neither complete nor failed in {timeout:g} s: "
                        f"{why(cluster, ns, f'batch.kubernetes.io/job-name={job}')}")
        time.sleep(2)


def from_log(log: str, out: Path) -> list[dict]:
    p = subprocess.run([str(FABBENCH), "from-log", "-", "-o", str(out)], input=log, text=True,
                       capture_output=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    return [json.loads(line) for line in out.read_text().splitlines()]


def index0_log(cluster: K8sCluster, ns: str, job: str, *, check: bool = True) -> str:
    return cluster.kubectl("logs", "-n", ns, "-l", f"batch.kubernetes.io/job-name={job},"
                           "batch.kubernetes.io/job-completion-index=0", "--tail=-1",
                           check=check).stdout


def busbw_at(records: list[dict], op: str, size: int) -> float:
    (rec,) = [r for r in records if r["kind"] == "collective" and r["op"] == op
              and r["bytes"] == size]
    return rec["busbw_gbyte_s"]


def verify(results: Path, floors: str, tmp_path: Path) -> subprocess.CompletedProcess:
    f = tmp_path / "floors.toml"
    f.write_text(floors)
    return subprocess.run([str(FABBENCH), "verify", "--floors", str(f), str(results)],
                          capture_output=True, text=True, timeout=120, check=False)


def links_floor(size: str, at_least: float) -> str:
    return ('format = "fabbench-floors/1"\nname = "k8s test"\n[[rule]]\nid = "allreduce-bw"\n'
            'source = "a share of the emulated 1 Gbit/s link"\nworkload = "collectives"\n'
            f'op = "allreduce"\nsize = "{size}"\nmetric = "busbw"\nat_least = {at_least}\n'
            'unit = "GB/s"\n')


# ---- the Indexed Job ------------------------------------------------------------------------

@pytest.mark.parametrize("nodes", [2, 3])
def test_the_gloo_job_completes_one_pod_per_node_and_its_results_come_back(
        cluster, tmp_path, nodes):
    with cluster.namespace(f"gloo{nodes}", level="restricted") as ns:
        values = {**image_values(cluster), "primitive": "gloo", "nodes": nodes,
                  "benchmark": SWEEP}
        t0 = time.monotonic()
        install(cluster, ns, values, tmp_path)
        end = job_end(cluster, ns, RELEASE, JOB_DEADLINE_S)
        took = time.monotonic() - t0
        assert end[0] == "Complete", f"{end} | {why(cluster, ns, 'job-name=' + RELEASE)}"

        pods = pods_of(cluster, ns, f"batch.kubernetes.io/job-name={RELEASE}")
        where = {int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]):
                 p["spec"]["nodeName"] for p in pods}
        assert len(pods) == nodes and len(set(where.values())) == nodes, where  # one per node
        for p in pods:  # pulled by digest from the cluster's registry
            (status,) = p["status"]["containerStatuses"]
            assert status["imageID"].endswith(cluster.image_digest), status["imageID"]

        records = from_log(index0_log(cluster, ns, RELEASE), tmp_path / "gloo.jsonl")
        run = records[0]
        assert run["kind"] == "run" and records[-1]["kind"] == "summary"
        assert records[-1]["ok"], records[-1]
        assert (run["primitive"], run["ranks"], run["nodes"]) == ("gloo", nodes, nodes)
        assert run["rank_hosts"] == [where[i] for i in range(nodes)]  # the kubelets' nodes
        assert run["interface"] == "eth0" and run["transport"], run["transport"]
        assert run["provenance"]["image"], "the image reference is recorded"
        bw = busbw_at(records, "allreduce", 16 << 20)
        print(f"gloo on {nodes} nodes: Complete in {took:.0f} s (install to end); nodes "
              f"{where}; transport {run['transport']} on {run['interface']}; allreduce busbw "
              f"1M {busbw_at(records, 'allreduce', 1 << 20):.4f}, 16M {bw:.4f} GB/s "
              f"(link {LINK_GBYTE_S:.3f})")
        assert GLOO_LEAST * LINK_GBYTE_S < bw < 1.05 * LINK_GBYTE_S, bw
        judged = verify(tmp_path / "gloo.jsonl", links_floor("16M", GLOO_LEAST * LINK_GBYTE_S),
                        tmp_path)
        assert judged.returncode == 0, judged.stdout + judged.stderr
        uninstall_leaves_nothing(cluster, ns)


# ---- the MPIJob, the chart's default --------------------------------------------------------

def test_nothing_set_but_the_image_runs_the_default_mpijob(cluster, tmp_path):
    with cluster.namespace("defaults", level="baseline") as ns:
        t0 = time.monotonic()
        install(cluster, ns, image_values(cluster), tmp_path)
        rendered = cluster.kubectl_json("get", "mpijob", RELEASE, "-n", ns)
        assert rendered["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
        launcher = f"{RELEASE}-launcher"
        deadline = time.monotonic() + 120
        while cluster.kubectl("get", "job", launcher, "-n", ns, check=False).returncode != 0:
            assert time.monotonic() < deadline, "the mpi-operator made no launcher Job in 120 s"
            time.sleep(2)
        # the workers' nodes, while they run (cleanPodPolicy Running: gone once the job ends)
        workers = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods_of(
            cluster, ns, f"training.kubeflow.org/job-name={RELEASE},"
            "training.kubeflow.org/job-role=worker")}
        end = job_end(cluster, ns, launcher, 900)
        took = time.monotonic() - t0
        everyone = f"training.kubeflow.org/job-name={RELEASE}"
        assert end[0] == "Complete", f"{end} | {why(cluster, ns, everyone)}"
        cluster.wait(f"mpijob/{RELEASE}", "condition=Succeeded", namespace=ns, timeout=60)

        hostfile = cluster.kubectl_json("get", "configmap", f"{RELEASE}-config", "-n",
                                        ns)["data"]["hostfile"]
        assert hostfile.split() == [f"{RELEASE}-worker-0.{RELEASE}.{ns}.svc", "slots=1",
                                    f"{RELEASE}-worker-1.{RELEASE}.{ns}.svc", "slots=1"], hostfile
        log = cluster.kubectl("logs", "-n", ns, f"job/{launcher}", "--tail=-1").stdout
        records = from_log(log, tmp_path / "mpi.jsonl")
        run = records[0]
        assert records[-1]["ok"], records[-1]
        assert (run["primitive"], run["ranks"], run["nodes"]) == ("mpi", 2, 2)
        assert run["rank_hosts"] == [workers[f"{RELEASE}-worker-0"],
                                     workers[f"{RELEASE}-worker-1"]], (run["rank_hosts"], workers)
        assert run["transport"] == "ob1/tcp", run["transport"]
        sizes = sorted({r["bytes"] for r in records if r["kind"] == "collective"})
        bw = busbw_at(records, "allreduce", sizes[-1])
        print(f"default MPIJob: Succeeded in {took:.0f} s; hostfile {hostfile!r}; workers "
              f"{workers}; transport {run['transport']}; {len(records) - 2} records; allreduce "
              f"busbw at {sizes[-1] >> 20} MiB {bw:.4f} GB/s (link {LINK_GBYTE_S:.3f})")
        assert 0.2 * LINK_GBYTE_S < bw < 1.05 * LINK_GBYTE_S, bw
        uninstall_leaves_nothing(cluster, ns)


# ---- failures that end ------------------------------------------------------------------------

def failed_install(cluster: K8sCluster, ns: str, values: dict, tmp_path: Path, what: str
                   ) -> str:
    """helm install --wait of a release that cannot become ready: helm fails within its 15 s and
    the release is failed; the pods' reason, in one line (the kubelet says it within seconds)."""
    t0 = time.monotonic()
    p = install(cluster, ns, values, tmp_path, "--wait", "--wait-for-jobs", "--timeout", "15s",
                timeout=150, check=False)
    took = time.monotonic() - t0
    reason = why(cluster, ns, f"batch.kubernetes.io/job-name={RELEASE}")
    print(f"{what}: helm exit {p.returncode} in {took:.0f} s "
          f"({p.stderr.strip().splitlines()[-1:]}); pods: {reason}")
    assert p.returncode != 0 and took < 90
    status = json.loads(cluster.helm("status", RELEASE, "-n", ns, "-o", "json").stdout)
    assert status["info"]["status"] == "failed", status["info"]
    return reason


def test_a_digest_the_registry_lacks_fails_the_release_naming_the_pull(cluster, tmp_path):
    with cluster.namespace("baddigest", level="restricted") as ns:
        values = {**image_values(cluster), "primitive": "gloo", "benchmark": SWEEP}
        values["image"]["digest"] = "sha256:" + "0" * 64
        reason = failed_install(cluster, ns, values, tmp_path, "wrong digest")
        assert "ErrImagePull" in reason or "ImagePullBackOff" in reason, reason
        uninstall_leaves_nothing(cluster, ns)


def scheduling_refusals(cluster: K8sCluster, ns: str) -> list[str]:
    events = cluster.kubectl_json("get", "events", "-n", ns,
                                  "--field-selector", "reason=FailedScheduling")["items"]
    return [f"{e['involvedObject']['name']}: {e['message']}" for e in events]


def test_more_nodes_than_the_cluster_has_fails_naming_the_scheduler(cluster, tmp_path):
    """One rank's pod per node: the last pod of a run on one node more than the cluster has is
    not scheduled (the scheduler says why), and those that started end at the rendezvous's
    deadline (benchmark.timeout), so the Job fails instead of waiting for a node."""
    with cluster.namespace("toomany", level="restricted") as ns:
        nodes = len(cluster.nodes) + 1
        values = {**image_values(cluster), "primitive": "gloo", "nodes": nodes,
                  "benchmark": {**SWEEP, "timeout": 10}}
        t0 = time.monotonic()
        install(cluster, ns, values, tmp_path)
        end = job_end(cluster, ns, RELEASE, 240)
        took = time.monotonic() - t0
        refused = scheduling_refusals(cluster, ns)
        print(f"{nodes} nodes on {len(cluster.nodes)}: job {end} {took:.0f} s after install; "
              f"scheduler: {refused[:1]}; pods: "
              f"{why(cluster, ns, f'batch.kubernetes.io/job-name={RELEASE}')}")
        assert end[0] == "Failed", end
        assert any(f"0/{len(cluster.nodes)} nodes are available" in r
                   and "anti-affinity" in r for r in refused), refused
        uninstall_leaves_nothing(cluster, ns)


def rank_pid(ns: str, job: str, index: int) -> int | None:
    """The pid, on this host, of the fabbench rank of JOB's index INDEX (a pod's processes are
    this machine's processes, in the node's namespaces)."""
    want = {f"FABBENCH_NODE_RANK={index}".encode(), f"MASTER_ADDR={job}-0.{job}".encode()}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = set((proc / "environ").read_bytes().split(b"\0"))
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if want <= env and any(a.endswith(b"fabbench") for a in argv[:2]) and b"run" in argv:
            return int(proc.name)
    return None


def test_a_rank_killed_mid_run_fails_the_job_and_its_peers_end(cluster, tmp_path):
    with cluster.namespace("killed", level="restricted") as ns:
        values = {**image_values(cluster), "primitive": "gloo", "nodes": 2,
                  "benchmark": {"ops": "allreduce", "sizes": "64M", "budget": 20, "timeout": 20}}
        install(cluster, ns, values, tmp_path)
        deadline = time.monotonic() + 180
        while (pid := rank_pid(ns, RELEASE, 1)) is None:
            assert time.monotonic() < deadline, why(cluster, ns, "job-name=" + RELEASE)
            time.sleep(1)
        time.sleep(10)  # past the rendezvous, inside the 64 MiB point's 20 s
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        end = job_end(cluster, ns, RELEASE, 120)
        took = time.monotonic() - t0
        reason = why(cluster, ns, f"batch.kubernetes.io/job-name={RELEASE}")
        print(f"rank 1 killed: job {end} {took:.0f} s later; pods: {reason}")
        assert end[0] == "Failed", end
        # index 0 ends too, naming its peer, rather than waiting out the sweep
        deadline = time.monotonic() + 60
        while any(p["status"].get("phase") in ("Pending", "Running") for p in pods_of(
                cluster, ns, f"batch.kubernetes.io/job-name={RELEASE}")):
            assert time.monotonic() < deadline, why(cluster, ns, "job-name=" + RELEASE)
            time.sleep(2)
        uninstall_leaves_nothing(cluster, ns)


# ---- the health check -------------------------------------------------------------------------

# A node's pairs figure is the median of its pairs' bandwidth at the largest size. The floor,
# 0.02 GB/s, lies well above what test_k8s_slow_node.py's slow node, a 100 Mbit/s link, can carry
# at all (0.0125 GB/s: it fails whatever the noise) and well below what gloo measured for healthy
# nodes, the pairs' figures and a 16 MiB allreduce's busbw being partly the CPU's: pairs
# 0.057-0.063 GB/s on 3 healthy nodes, 0.044-0.050 beside a slow node on an idle host,
# 0.034-0.040 while an image build shared the 2 cores; the allreduce on 3 nodes 0.036 in CI under
# load. (A 250 Mbit/s slow node, 0.03125 GB/s at most, left a floor between it and the loaded
# healthy figures 10 % wide.)
HEALTH_FLOOR_GBYTE_S = 0.02


def pairs_floors(at_least: float) -> str:
    return ('format = "fabbench-floors/1"\nname = "k8s test"\n[[rule]]\nid = "pairs-node-bw"\n'
            'source = "a share of the emulated 1 Gbit/s link"\nworkload = "pairs"\n'
            f'per_node = true\nmetric = "bw"\nat_least = {at_least}\nunit = "GB/s"\n')


@dataclass(frozen=True)
class NodeHealth:
    """What the check left on a node: its labels, its condition, fabbench's taint."""

    verdict: str | None
    figure: str | None
    condition: dict
    tainted: bool


def node_health(cluster: K8sCluster) -> dict[str, NodeHealth]:
    out = {}
    for node in cluster.kubectl_json("get", "nodes")["items"]:
        got = node["metadata"]["labels"]
        condition = next((c for c in node["status"].get("conditions", [])
                          if c["type"] == "FabricHealthy"), {})
        tainted = any(t.get("key") == "fabbench.dev/fabric"
                      for t in node["spec"].get("taints") or [])
        out[node["metadata"]["name"]] = NodeHealth(got.get("fabbench.dev/verdict"),
                                                   got.get("fabbench.dev/figure"), condition,
                                                   tainted)
    return out


def health_check(cluster: K8sCluster, ns: str, tmp_path: Path, *,
                 floor: float = 0.0, taint: bool = False, sizes: str = "1M,8M"
                 ) -> tuple[tuple[str, str], dict[str, NodeHealth]]:
    """Install the chart's health check on every node and trigger its CronJob once, as a site
    does (`kubectl create job --from=cronjob/...`): the Job's end, and what it left on each
    node."""
    values = {**image_values(cluster), "primitive": "gloo", "nodes": len(cluster.nodes),
              "benchmark": {"workload": "pairs", "sizes": sizes, "budget": 0.3},
              "healthCheck": {"enabled": True,
                              "floors": pairs_floors(floor or HEALTH_FLOOR_GBYTE_S),
                              "schedule": "0 0 1 1 *", "deadlineSeconds": JOB_DEADLINE_S,
                              "taint": taint}}
    install(cluster, ns, values, tmp_path)
    (cron,) = cluster.kubectl_json("get", "cronjobs", "-n", ns)["items"]
    t0 = time.monotonic()
    cluster.kubectl("create", "job", "-n", ns, "check-now",
                    f"--from=cronjob/{cron['metadata']['name']}")
    end = job_end(cluster, ns, "check-now", JOB_DEADLINE_S + 60)
    took = time.monotonic() - t0
    health = node_health(cluster)
    shown = cluster.kubectl("get", "nodes", "-L", "fabbench.dev/verdict", "-L",
                            "fabbench.dev/figure").stdout
    verdicts = [ln for ln in index0_log(cluster, ns, "check-now", check=False).splitlines()
                if ln.startswith(("PASS", "FAIL", "verdict:", "labelled", "node "))]
    conditions = "\n".join(f"{n}: FabricHealthy={h.condition.get('status')} "
                           f"({h.condition.get('reason')}) tainted={h.tainted}"
                           for n, h in sorted(health.items()))
    print(f"health check on {len(cluster.nodes)} nodes: {end} {took:.0f} s after the trigger\n"
          + "\n".join(verdicts) + f"\n{shown}{conditions}")
    return end, health


def test_the_health_check_labels_every_healthy_node_pass(cluster, tmp_path):
    with cluster.namespace("health", level="privileged") as ns:
        end, health = health_check(cluster, ns, tmp_path)
        assert end[0] == "Complete", f"{end} | {why(cluster, ns, 'job-name=check-now')}"
        assert {n: h.verdict for n, h in health.items()} == dict.fromkeys(cluster.nodes, "pass")
        for h in health.values():  # e.g. 0.06203GBps, a label value's characters
            assert h.figure and h.figure.endswith("GBps"), health
            assert float(h.figure.removesuffix("GBps")) >= HEALTH_FLOOR_GBYTE_S, health
            assert (h.condition["status"], h.condition["reason"]) == ("True", "AllRulesPassed")
            assert not h.tainted
        labeller_is_confined(cluster, ns)
        uninstall_leaves_nothing(cluster, ns)


def labeller_is_confined(cluster: K8sCluster, ns: str) -> None:
    """The labeller's token (kubectl create token), as the judge container holds it: the API
    server refuses it another label, another taint, another condition and a cordon (the
    release's ValidatingAdmissionPolicy), and lets it set and remove its own."""
    token = cluster.kubectl("create", "token", f"{RELEASE}-labeller", "-n", ns,
                            "--duration=10m").stdout.strip()
    node = cluster.nodes[0]
    status = ["--subresource=status", "--type=strategic"]

    def condition(kind: str, message: str) -> str:
        return json.dumps({"status": {"conditions": [{
            "type": kind, "status": "True", "reason": "AllRulesPassed", "message": message,
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})

    refused = {
        "label": ["label", "node", node, "example.com/other=1"],
        "taint": ["taint", "node", node, "example.com/other=1:NoSchedule"],
        "condition": ["patch", "node", node, *status, "-p", condition("OtherHealthy", "x")],
        "annotation": ["annotate", "node", node, "example.com/other=1"],
        "allocatable": ["patch", "node", node, "--subresource=status", "--type=merge", "-p",
                        '{"status": {"allocatable": {"example.com/other": "5"}}}'],
        "cordon": ["cordon", node]}  # kubectl cordon says the refusal but exits 0
    allowed = {
        "own label": ["label", "node", node, "fabbench.dev/probe=1"],
        "own label removed": ["label", "node", node, "fabbench.dev/probe-"],
        "own taint": ["taint", "node", node, "fabbench.dev/fabric=fail:NoSchedule"],
        "own taint removed": ["taint", "node", node, "fabbench.dev/fabric-"],
        "own condition": ["patch", "node", node, *status, "-p",
                          condition("FabricHealthy", "fabbench verdict: pass")]}
    said = {}
    for what, argv in refused.items():
        p = cluster.kubectl_as(token, *argv)
        said[what] = p.stderr.strip()
        assert p.returncode != 0 or what == "cordon", (what, p.stderr)
        assert "ValidatingAdmissionPolicy" in p.stderr, (what, p.stderr)
        assert "denied request: the fabbench labeller may" in p.stderr, (what, p.stderr)
    for what, argv in allowed.items():
        p = cluster.kubectl_as(token, *argv)
        assert p.returncode == 0, (what, p.stderr)
    after = node_health(cluster)[node]
    assert not after.tainted and after.condition["type"] == "FabricHealthy"
    got = cluster.kubectl_json("get", "node", node)
    assert "example.com/other" not in got["metadata"]["labels"]
    assert "example.com/other" not in got["metadata"].get("annotations", {})
    assert "example.com/other" not in got["status"]["allocatable"]
    assert not got["spec"].get("unschedulable")
    (policy,) = [p for p in cluster.kubectl_json("get", "validatingadmissionpolicies")["items"]
                 if p["metadata"]["name"] == f"{ns}-{RELEASE}-node-labeller"]
    assert not policy["status"]["typeChecking"].get("expressionWarnings"), policy["status"]
    print("the labeller's token, refused by the API server:\n" + "\n".join(
        f"  {what}: {line}" for what, line in said.items()))


# ---- Pod Security and deadlines (issue 59, class 6) --------------------------------------------

def pods_of_manifests(text: str) -> list[dict]:
    """Each pod template of rendered manifests as a Pod (the Job's, the MPIJob's by role)."""
    out = []
    for doc in (d for d in yaml.safe_load_all(text) if d):
        if doc["kind"] == "Job":
            templates = {"job": doc["spec"]["template"]}
        elif doc["kind"] == "MPIJob":
            templates = {role.lower(): r["template"]
                         for role, r in doc["spec"]["mpiReplicaSpecs"].items()}
        else:
            continue
        for role, template in templates.items():
            out.append({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"{doc['metadata']['name']}-{role}"},
                        "spec": {**template["spec"], "restartPolicy": "Never"}})
    return out


def test_the_api_server_admits_every_pod_at_the_level_the_docs_name(cluster, tmp_path):
    """Every pod of the chart's ci/ value sets, created (server-side dry run) in namespaces
    whose Pod Security admission enforces each level: admitted at the level NOTES and
    docs/security.md name, refused one level stricter (the API server's message printed)."""
    from integration.pod_security import LEVELS
    from integration.test_k8s_helm import VALUE_SETS, documented_level, values_of

    refusals = []
    with contextlib.ExitStack() as stack:
        spaces = {lv: stack.enter_context(cluster.namespace(f"pss-{lv}", level=lv))
                  for lv in LEVELS}
        for path in VALUE_SETS:
            level = documented_level(values_of(path))
            text = cluster.helm("template", RELEASE, str(CHART), "-f", str(path)).stdout
            for pod in pods_of_manifests(text):
                name = f"{path.stem} {pod['metadata']['name']}"
                ok = cluster.kubectl("apply", "--dry-run=server", "-n", spaces[level], "-f",
                                     "-", input=json.dumps(pod), check=False)
                assert ok.returncode == 0, (name, level, ok.stderr)
                stricter = LEVELS[LEVELS.index(level) + 1:]
                if stricter and not pod["metadata"]["name"].endswith("launcher"):
                    no = cluster.kubectl("apply", "--dry-run=server", "-n", spaces[stricter[0]],
                                         "-f", "-", input=json.dumps(pod), check=False)
                    assert no.returncode != 0 and "violates PodSecurity" in no.stderr, name
                    refusals.append(f"{name} ({level}) in {stricter[0]}: "
                                    f"{no.stderr.strip()[:400]}")
    print("refused one level stricter than documented:\n" + "\n".join(refusals))


def test_a_job_whose_pods_cannot_be_created_fails_at_its_deadline(cluster, tmp_path):
    """A quota of no pods: the Job's pods are never created; it fails at deadlineSeconds
    (DeadlineExceeded) and its events say why (FailedCreate, the quota). And a namespace
    that enforces a stricter level than the release needs is refused at install, in one
    line naming both."""
    deadline = 30
    with cluster.namespace("nopods", level="restricted") as ns:
        cluster.apply({"apiVersion": "v1", "kind": "ResourceQuota",
                       "metadata": {"name": "none"}, "spec": {"hard": {"pods": "0"}}},
                      namespace=ns)
        values = {**image_values(cluster), "primitive": "gloo", "benchmark": SWEEP,
                  "deadlineSeconds": deadline}
        t0 = time.monotonic()
        install(cluster, ns, values, tmp_path)
        end = job_end(cluster, ns, RELEASE, deadline + 90)
        took = time.monotonic() - t0
        events = cluster.kubectl_json("get", "events", "-n", ns, "--field-selector",
                                      "reason=FailedCreate")["items"]
        said = sorted({e["message"] for e in events})
        print(f"pods=0 quota: job {end} {took:.0f} s after install (deadline {deadline} s); "
              f"FailedCreate: {said[:1]}")
        assert end[0] == "Failed" and end[1].startswith("DeadlineExceeded"), end
        assert took < deadline + 60, took
        assert any("exceeded quota" in m for m in said), said
        assert not pods_of(cluster, ns, f"batch.kubernetes.io/job-name={RELEASE}")
        uninstall_leaves_nothing(cluster, ns)

        # the MPIJob (root sshd: baseline) in this restricted namespace: refused at install
        p = install(cluster, ns, image_values(cluster), tmp_path, check=False)
        print(f"MPIJob into a restricted namespace: helm exit {p.returncode}: "
              f"{p.stderr.strip()}")
        assert p.returncode != 0
        assert (f"namespace {ns} enforces Pod Security restricted, and these pods need "
                "baseline") in p.stderr, p.stderr


# ---- the check before the job -----------------------------------------------------------------

# A training Job (gpt-tiny, gloo) with the chart's preflight: each pod's init container runs a
# 16 MiB allreduce across the Job's pods, judged against a floor on its busbw. A ring's busbw is
# its slowest link's at most, so the floor (HEALTH_FLOOR_GBYTE_S, above the 0.0125 GB/s a
# 100 Mbit/s link carries) fails any ring through the slow node, whatever the noise.
TRAIN = {"workload": "train", "model": "gpt-tiny", "batchSize": 4, "imageSize": 64, "steps": 4,
         "warmupSteps": 1}


@dataclass(frozen=True)
class Preflight:
    """A training Job with its check before the job, as it ended."""

    end: tuple[str, str]
    took_s: float  # helm install to the Job's end
    checks: dict[int, dict]  # per completion index: the init container's terminated state
    started: dict[int, bool]  # per index: whether the job's own container ever started
    log0: str  # index 0's init container's log


def preflight_job(cluster: K8sCluster, ns: str, tmp_path: Path, nodes: int) -> Preflight:
    values = {**image_values(cluster), "primitive": "gloo", "nodes": nodes, "benchmark": TRAIN,
              "preflight": {"enabled": True, "sizes": "16M", "budget": 0.5,
                            "floors": links_floor("16M", HEALTH_FLOOR_GBYTE_S)}}
    t0 = time.monotonic()
    install(cluster, ns, values, tmp_path)
    end = job_end(cluster, ns, RELEASE, JOB_DEADLINE_S)
    took = time.monotonic() - t0
    checks, started, log0 = {}, {}, ""
    deadline = time.monotonic() + 60  # the pods' final statuses, once the kubelets report them
    while True:
        pods = pods_of(cluster, ns, f"batch.kubernetes.io/job-name={RELEASE}")
        for p in pods:
            index = int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
            (init,) = p["status"].get("initContainerStatuses") or [{}]
            checks[index] = init.get("state", {}).get("terminated", {})
            (main,) = p["status"].get("containerStatuses") or [{}]
            state = main.get("state", {})
            started[index] = "running" in state or "startedAt" in state.get("terminated", {})
            if index == 0:
                log0 = cluster.kubectl("logs", "-n", ns, p["metadata"]["name"], "-c",
                                       "preflight", "--tail=-1", check=False).stdout
        if len(checks) == nodes and all(checks.values()) or time.monotonic() > deadline:
            break
        time.sleep(2)
    said = "\n".join(ln for ln in log0.splitlines() if ln.startswith(("PASS", "FAIL", "verdict")))
    print(f"training Job with its check before the job on {nodes} nodes: {end} {took:.0f} s "
          f"after install; the checks (s): "
          + ", ".join(f"{i}: exit {c.get('exitCode')} in {_seconds(c):.1f}"
                      for i, c in sorted(checks.items()))
          + f"; the job's own containers started: {started}\n{said}")
    return Preflight(end, took, checks, started, log0)


def _seconds(terminated: dict) -> float:
    """A terminated container's run, from its startedAt to its finishedAt."""
    from datetime import datetime

    if not terminated.get("startedAt") or not terminated.get("finishedAt"):
        return float("nan")
    at = [datetime.fromisoformat(terminated[k].replace("Z", "+00:00"))
          for k in ("startedAt", "finishedAt")]
    return (at[1] - at[0]).total_seconds()


def test_a_training_job_runs_after_its_check_passes(cluster, tmp_path):
    with cluster.namespace("preflight", level="restricted") as ns:
        run = preflight_job(cluster, ns, tmp_path, 3)
        assert run.end[0] == "Complete", f"{run.end} | {why(cluster, ns, 'job-name=' + RELEASE)}"
        assert all(c.get("exitCode") == 0 for c in run.checks.values()), run.checks
        assert all(run.started.values()), run.started
        assert "verdict: 0 failed, 1 passed" in run.log0, run.log0
        records = from_log(index0_log(cluster, ns, RELEASE), tmp_path / "train.jsonl")
        assert records[-1]["kind"] == "summary" and records[-1]["ok"], records[-1]
        assert any(r["kind"] == "train" for r in records)
        uninstall_leaves_nothing(cluster, ns)
