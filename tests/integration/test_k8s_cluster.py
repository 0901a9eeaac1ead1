"""The project's own Kubernetes cluster (.ci/k8s, docs/kubernetes-cluster.md), the session's
(conftest.k8s), with node 2's link at 100 Mbit/s: four emulated nodes Ready under their names and
addresses; pods reach each other across nodes by IP and through
a Service name (CoreDNS); they run fabbench's image by digest; every address is in 198.18.0.0/15;
pod-to-pod throughput between nodes is the emulated link's; a second start is refused; and after
stop.sh nothing of the cluster is left."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from integration.k8s_cluster import (
    BUILD_TIMEOUT_S,
    K8S,
    K8S_TIMEOUT_S,
    STATE_DIR,
    STOP_TIMEOUT_S,
    K8sCluster,
    image_for_cluster,
    skip_reason,
    stop,
)

pytestmark = [pytest.mark.integration, pytest.mark.needs_root,
              pytest.mark.timeout(K8S_TIMEOUT_S),
              pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")]

RANGE = ipaddress.ip_network("198.18.0.0/15")
LINK_BIT_S = 1e9  # every node's link
SLOW_NODE, SLOW_BIT_S = 2, 100_000_000  # fbk-2's, in this module
NS = "fbk-test"
POD_TIMEOUT_S = 300  # a pull of the image (~1 GB) over a 100 Mbit/s link fits


def test_a_start_stopped_midway_leaves_nothing():
    """First in the module, before its cluster: start.sh, sent SIGTERM once the API server is up,
    tears down what it made (emulated nodes, daemons, cgroups) and exits non-zero."""
    if (STATE_DIR / "state.env").exists():
        pytest.skip(f"a cluster runs in {STATE_DIR}")
    # the binaries and the image first, each under its own deadline (as start() does)
    subprocess.run([str(K8S / "build.sh")], capture_output=True, timeout=BUILD_TIMEOUT_S,
                   check=True)
    env = {**os.environ, "FABBENCH_K8S_IMAGE": image_for_cluster()}
    proc = subprocess.Popen([str(K8S / "start.sh"), "2"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = []
    try:
        end = time.monotonic() + 300
        while time.monotonic() < end:
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            if line.startswith("[k8s-start] kube-apiserver ("):
                break
        assert seen and seen[-1].startswith("[k8s-start] kube-apiserver ("), "".join(seen)
        holder = re.search(r"on fbbr(\d+) ", "".join(seen))[1]
        proc.terminate()
        _, err = proc.communicate(timeout=STOP_TIMEOUT_S + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "start failed: tearing down" in err, err
    left = [f"netns {n}" for n in _lines(["ip", "netns", "list"])
            if n.startswith(f"fabbench-{holder}-")]
    left += [f"cgroup {c}" for c in _cgroups()]
    left += [f"mount {m}" for m in _mounts_under(str(STATE_DIR))]
    left += [f"process {p}" for p in _processes_of(_bin_dir())]
    left += ["state.env"] if (STATE_DIR / "state.env").exists() else []
    assert not left, f"left after an interrupted start: {left}\n{err[-3000:]}"


def _bin_dir() -> str:
    """The folder build.sh puts the binaries in."""
    return subprocess.run([str(K8S / "build.sh"), "--dir"], capture_output=True, text=True,
                          timeout=30, check=True).stdout.strip()


@pytest.fixture(scope="module")
def cluster(k8s: K8sCluster) -> K8sCluster:
    k8s.set_link(SLOW_NODE, SLOW_BIT_S)
    return k8s


def _pod(name: str, node: str, image: str, command: str, *, labels: dict | None = None,
         port: int | None = None) -> dict:
    container: dict[str, Any] = {"name": "main", "image": image, "command": ["sh", "-c", command],
                 "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath":
                                                                     "spec.nodeName"}}}]}
    if port:
        container["readinessProbe"] = {"tcpSocket": {"port": port}, "periodSeconds": 1}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                     "terminationGracePeriodSeconds": 1, "containers": [container]}}


SERVER = ("mkdir -p /tmp/www && echo hello-from-$NODE >/tmp/www/index.html && "
          "(python3 -m http.server 8080 --directory /tmp/www & iperf3 -s -p 5201 & wait)")


@pytest.fixture(scope="module")
def pods(cluster: K8sCluster):
    """A server (HTTP on 8080, iperf3 on 5201) on fbk-0 behind Service `web`, a client on fbk-1
    and one on the slow node fbk-2, all running fabbench's image by digest."""
    with cluster.namespace(NS):
        cluster.apply([
            _pod("server", "fbk-0", cluster.image, SERVER, labels={"app": "web"}, port=8080),
            _pod("client", "fbk-1", cluster.image, "sleep 3600"),
            _pod("client-slow", f"fbk-{SLOW_NODE}", cluster.image, "sleep 3600"),
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
             "spec": {"selector": {"app": "web"},
                      "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}])
        t0 = time.monotonic()
        cluster.wait("pods --all", "condition=Ready", namespace=NS, timeout=POD_TIMEOUT_S)
        print(f"k8s: 3 pods Ready (image pulled over the links) in {time.monotonic() - t0:.0f} s")
        yield {p["metadata"]["name"]: p for p in
               cluster.kubectl_json("get", "pods", "-n", NS)["items"]}


def _in_range(address: str) -> bool:
    return ipaddress.ip_address(address) in RANGE


def _py(cluster: K8sCluster, pod: str, code: str, timeout: float = 60) -> str:
    return cluster.exec(pod, "python3", "-c", code, namespace=NS, timeout=timeout).stdout.strip()


GET = """
import sys, time, urllib.request
end = time.monotonic() + 30
while True:
    try:
        print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode().strip())
        break
    except OSError:
        if time.monotonic() > end:
            raise
        time.sleep(0.5)
"""


def _get(cluster: K8sCluster, pod: str, url: str) -> str:
    """The body at URL, fetched in POD; retried for 30 s: kube-proxy programs a Service's rules
    on each node a moment after its endpoint is Ready (until then the node has no route to it)."""
    return cluster.exec(pod, "python3", "-c", GET, url, namespace=NS, timeout=60).stdout.strip()


def test_four_nodes_ready_with_their_names_and_emulated_addresses(cluster):
    nodes = cluster.kubectl_json("get", "nodes")["items"]
    by_name = {n["metadata"]["name"]: n for n in nodes}
    assert sorted(by_name) == [f"fbk-{i}" for i in range(4)] == list(cluster.nodes)
    for i, name in enumerate(cluster.nodes):
        status = by_name[name]["status"]
        ready = {c["type"]: c["status"] for c in status["conditions"]}["Ready"]
        internal = [a["address"] for a in status["addresses"] if a["type"] == "InternalIP"]
        assert ready == "True", (name, status["conditions"])
        assert internal == [cluster.node_addresses[i]] and _in_range(internal[0]), internal
        assert status["nodeInfo"]["kubeletVersion"] == "v1.36.3"
        assert status["nodeInfo"]["containerRuntimeVersion"] == "containerd://2.4.2"


def test_the_mpi_operator_runs_and_helm_answers(cluster):
    crd = cluster.kubectl_json("get", "crd", "mpijobs.kubeflow.org")
    assert "v2beta1" in [v["name"] for v in crd["spec"]["versions"] if v["served"]]
    deploy = cluster.kubectl_json("get", "deployment", "mpi-operator", "-n", "mpi-operator")
    assert deploy["status"].get("availableReplicas") == 1
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == \
        cluster.env["MPI_OPERATOR_IMAGE"]
    assert "v3.22.0" in cluster.helm("version", "--short", timeout=30).stdout


def test_a_pod_reaches_a_pod_on_another_node_by_its_ip(cluster, pods):
    server, client = pods["server"], pods["client"]
    assert server["spec"]["nodeName"] == "fbk-0" and client["spec"]["nodeName"] == "fbk-1"
    ip = server["status"]["podIP"]
    assert _get(cluster, "client", f"http://{ip}:8080/") == "hello-from-fbk-0"


def test_a_service_name_resolves_through_coredns_to_a_pod_on_another_node(cluster, pods):
    service = cluster.kubectl_json("get", "service", "web", "-n", NS)
    resolved = _py(cluster, "client", "import socket; print(socket.gethostbyname('web'))")
    assert resolved == service["spec"]["clusterIP"]
    assert ipaddress.ip_address(resolved) in ipaddress.ip_network(
        cluster.env["FABBENCH_K8S_SERVICE_CIDR"])
    for url in ("http://web/", f"http://web.{NS}.svc.cluster.local/"):
        assert _get(cluster, "client", url) == "hello-from-fbk-0", url


def test_pods_run_fabbenchs_image_by_digest(cluster, pods):
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", cluster.image_digest)
    for name, pod in pods.items():
        assert pod["spec"]["containers"][0]["image"] == cluster.image
        image_id = pod["status"]["containerStatuses"][0]["imageID"]
        assert image_id == cluster.image, (name, image_id)


def test_every_node_pod_and_service_address_is_in_198_18_0_0_15(cluster, pods):
    outside = []
    for node in cluster.kubectl_json("get", "nodes")["items"]:
        outside += [f"node {node['metadata']['name']} {a['address']}"
                    for a in node["status"]["addresses"] if a["type"].endswith("IP")
                    and not _in_range(a["address"])]
        outside += [f"node {node['metadata']['name']} podCIDR {c}"
                    for c in node["spec"].get("podCIDRs", [])
                    if not ipaddress.ip_network(c).subnet_of(RANGE)]
    for pod in cluster.kubectl_json("get", "pods", "-A")["items"]:
        name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        outside += [f"pod {name} {ip['ip']}" for ip in pod["status"].get("podIPs", [])
                    if not _in_range(ip["ip"])]
        outside += [f"pod {name} host {ip['ip']}" for ip in pod["status"].get("hostIPs", [])
                    if not _in_range(ip["ip"])]
    for svc in cluster.kubectl_json("get", "services", "-A")["items"]:
        outside += [f"service {svc['metadata']['name']} {ip}"
                    for ip in svc["spec"].get("clusterIPs", []) if ip != "None"
                    and not _in_range(ip)]
    assert not outside, outside


def _iperf(cluster: K8sCluster, client: str, server_ip: str) -> float:
    p = cluster.exec(client, "iperf3", "-c", server_ip, "-p", "5201", "-t", "5", "-J",
                     namespace=NS, timeout=60)
    return json.loads(p.stdout)["end"]["sum_received"]["bits_per_second"]


def test_pod_to_pod_throughput_is_the_emulated_links(cluster, pods):
    ip = pods["server"]["status"]["podIP"]
    fast = _iperf(cluster, "client", ip)
    slow = _iperf(cluster, "client-slow", ip)
    print(f"k8s: pod-to-pod fbk-1 -> fbk-0 {fast / 1e6:.0f} Mbit/s (links 1 Gbit/s), "
          f"fbk-{SLOW_NODE} -> fbk-0 {slow / 1e6:.0f} Mbit/s (its link 100 Mbit/s)")
    assert 0.6 * LINK_BIT_S < fast < 1.02 * LINK_BIT_S, fast
    assert 0.6 * SLOW_BIT_S < slow < 1.02 * SLOW_BIT_S, slow


def test_a_second_start_is_refused_in_one_line(cluster):
    p = subprocess.run([str(K8S / "start.sh"), "3"], capture_output=True, text=True,
                       timeout=120, check=False, stdin=subprocess.DEVNULL)
    assert p.returncode == 1, p.stderr
    assert p.stderr.count("\n") == 1 and "already running" in p.stderr, p.stderr
    assert cluster.kubectl("get", "nodes").returncode == 0


def _mounts_under(path: str) -> list[str]:
    return [ln.split()[4] for ln in Path("/proc/self/mountinfo").read_text().splitlines()
            if ln.split()[4].startswith(path + "/")]


def _cgroups() -> list[str]:
    found = []
    for ln in Path("/proc/self/mounts").read_text().splitlines():
        _, where, fstype = ln.split()[:3]
        if fstype in ("cgroup", "cgroup2"):
            found += [str(d) for d in Path(where).glob("fbk-*") if d.is_dir()]
    return found


CLIENTS = ("kubectl", "helm", "ctr")  # others may be running these; the rest are daemons


def _processes_of(bin_dir: str) -> list[str]:
    """The cluster's daemons still running (their executables are in bin_dir)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                exe = os.readlink(d / "exe")
            except OSError:
                continue
            if exe.startswith(bin_dir + "/") and Path(exe).name not in CLIENTS:
                found.append(f"{d.name} {exe}")
    return found


def _lines(argv: list[str]) -> list[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30,
                          check=False).stdout.splitlines()


def test_stop_leaves_nothing_of_the_cluster(cluster):
    """Last of the session's cluster tests (conftest.K8S_LAST): stops the session's cluster
    (the fixture's stop.sh then finds nothing)."""
    holder = cluster.env["FABBENCH_K8S_EMULATION_HOLDER"]
    bin_dir = cluster.env["FABBENCH_K8S_BIN"]
    before_paths = set((STATE_DIR / "before" / "host-paths").read_text().split())
    private_before = [ln.split()[0] for ln in
                      (STATE_DIR / "before" / "propagation").read_text().splitlines()
                      if ln.endswith(" private")]
    assert _processes_of(bin_dir) and _mounts_under(str(STATE_DIR)) and _cgroups()
    t0 = time.monotonic()
    p = stop()
    print(f"k8s: stop.sh took {time.monotonic() - t0:.0f} s")
    left = [f"process {p}" for p in _processes_of(bin_dir)]
    left += [f"mount {m}" for m in _mounts_under(str(STATE_DIR))]
    left += [f"cgroup {c}" for c in _cgroups()]
    left += [f"netns {n}" for n in _lines(["ip", "netns", "list"])
             if n.startswith(f"fabbench-{holder}-")]
    left += [f"link {ln}" for ln in _lines(["ip", "-o", "link", "show"])
             if re.search(rf": fb(br{holder}|v{holder}n\d+)[@:]", ln)]
    left += [f"iptables {r}" for r in _lines(["iptables-save"])
             if re.search(r"KUBE-|198\.19\.|fbk", r)]
    left += [f"host path {h}" for h in ("/var/lib/kubelet", "/var/lib/cni", "/var/log/containers",
                                        "/var/log/pods", "/usr/libexec/kubernetes",
                                        "/run/containerd", "/opt/containerd")
             if Path(h).exists() and h not in before_paths]
    left += [f"CNI result {r}" for r in Path("/var/lib/cni/results").glob("fbk-*")]
    left += [f"emulation holder {holder}"] if Path(f"/proc/{holder}").exists() else []
    now = dict(ln.rsplit(" ", 1) for ln in _lines(["findmnt", "-rno", "TARGET,PROPAGATION"]))
    left += [f"mount {t} {now[t]} (was private)" for t in private_before
             if now.get(t, "private") != "private"]
    assert not left, f"left after stop.sh: {left}\n{p.stderr[-2000:]}"
    assert not (STATE_DIR / "state.env").exists()
    q = stop()  # idempotent
    assert q.returncode == 0, q.stderr
