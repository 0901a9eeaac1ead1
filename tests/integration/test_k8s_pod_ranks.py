"""What the chart's pods run, run here as real ranks without a cluster: the command, arguments
and environment of the rendered Indexed Job's pods (gloo) and of the MPIJob's launcher (mpi),
the downward API's values filled in as the kubelet would (FABBENCH_NODE_NAME: two made-up node
names on this one host), the rendezvous name pointed at this host (no cluster DNS here). With
the chart's defaults nothing names an interface, the results volume is an emptyDir, and:

  - each rank finds its interface itself and says which and why (stderr, the run record);
  - rank 0 writes the finished results file into its log (an MPIJob's: mpirun's output, the
    launcher's log), and `fabbench from-log` reads it back out of that log, checked;
  - the records name each rank's host by its Kubernetes node, not its hostname.

What only a cluster shows (DNS, the kubelet's log, the MPI operator's ssh) is the cluster
tests' (tests/integration/test_k8s_cluster.py)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, fabbench, needs_mpirun, stop

helm_python = pytest.importorskip("helm_python", reason="needs helm-python-sdk (dev extra)")

pytestmark = [pytest.mark.together, pytest.mark.integration]

BENCH = {"ops": "allreduce", "sizes": "8,4K", "budget": 0.02, "ceiling": False}
NODES = ("k8s-node-a", "k8s-node-b")


def rendered(values: dict) -> dict:
    out = helm_python.Chart.load(str(REPO / "charts/fabbench")).render(
        values, name="fb", namespace="bench")
    import yaml

    docs = [d for name, text in out.items() if not name.endswith("NOTES.txt")
            for d in yaml.safe_load_all(text) if d]
    return {d["kind"]: d for d in docs}


def expand(word: str, env: dict[str, str]) -> str:
    """A container word as Kubernetes runs it: $(VAR) expanded, $$ a '$'."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), word)


def pod_env(container: dict, fields: dict[str, str]) -> dict[str, str]:
    """The container's variables, each downward-API one given by ``fields`` (its fieldPath)."""
    env = {}
    for e in container["env"]:
        if "value" in e:
            env[e["name"]] = expand(e["value"], env)
        else:
            env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def argv(container: dict, env: dict[str, str], out: Path) -> list[str]:
    words = [expand(w, env) for w in [*container["command"], *container["args"]]]
    i = words.index("--out")
    assert words[i + 1] == "/results/fb-fabbench-collectives.jsonl"
    return [*words[:i + 1], str(out), *words[i + 2:]]


def fabbench_cmd() -> str:
    return str(Path(sys.executable).with_name("fabbench"))


def test_the_indexed_jobs_pods_with_the_charts_defaults(tmp_path):
    job = rendered({"primitive": "gloo", "benchmark": BENCH})["Job"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert "--iface" not in container["args"]
    procs, port = [], str(_free_port())
    for index, node in enumerate(NODES):
        fields = {"metadata.annotations['batch.kubernetes.io/job-completion-index']": str(index),
                  "spec.nodeName": node}
        env = pod_env(container, fields)
        assert env["MASTER_ADDR"] == "fb-fabbench-0.fb-fabbench"
        assert env["FABBENCH_RESULTS_TO_LOG"] == "1"
        # the kubelet sets JOB_COMPLETION_INDEX; the Service's name needs cluster DNS
        env.update(JOB_COMPLETION_INDEX=str(index), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        words = argv(container, env, tmp_path / f"pod{index}" / "r.jsonl")
        words[0] = fabbench_cmd() if words[0] == "fabbench" else words[0]
        procs.append(subprocess.Popen(words, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env={**_clean_env(), **env}))
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=180))
        finally:
            stop(p)
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    log0, err0 = outs[0]
    assert "-----BEGIN FABBENCH RESULTS" not in outs[1][0]  # rank 0 alone
    for rank, (_, err) in enumerate(outs):
        assert f"fabbench: rank {rank}: node {NODES[rank]} (FABBENCH_NODE_NAME)" in err
        assert (f"fabbench: rank {rank}: iface=lo (holds 127.0.0.1, the source address of the "
                "route to MASTER_ADDR 127.0.0.1)") in err
    run = _read_back(log0, tmp_path, tmp_path / "pod0" / "r.jsonl")
    assert run["profile_env"]["GLOO_SOCKET_IFNAME"] == "lo" and run["interface"] == "lo"
    assert run["rank_hosts"] == list(NODES) and run["nodes"] == 2


@needs_mpirun
def test_the_mpijobs_launcher_with_the_charts_defaults(tmp_path):
    """mpirun as the launcher runs it (its hostfile here: this host, two slots); the ranks get
    the node's name as the worker's sshd gives it to its sessions (here: the launcher's
    environment, which mpirun's local ranks inherit)."""
    mpijob = rendered({"benchmark": BENCH})["MPIJob"]
    container = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    env = pod_env(container, {})
    assert env["FABBENCH_RESULTS_TO_LOG"] == "1" and "OMPI_MCA_btl_tcp_if_include" not in env
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("localhost slots=2\n")
    words = argv(container, env, tmp_path / "worker0" / "r.jsonl")
    assert words[:3] == ["mpirun", "--hostfile", "/etc/mpi/hostfile"]
    words[2] = str(hostfile)
    words[words.index("fabbench")] = fabbench_cmd()
    env["FABBENCH_NODE_NAME"] = NODES[0]
    p = subprocess.Popen(words, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**_clean_env(), **env})
    try:
        log, err = p.communicate(timeout=180)
    finally:
        stop(p)
    assert p.returncode == 0, err
    assert re.search(r"fabbench: rank 1: iface=\S+ \(holds \S+, the source address of the route "
                     r"to mpirun's host \(OMPI_MCA_orte_hnp_uri\)", err), err
    run = _read_back(log, tmp_path, tmp_path / "worker0" / "r.jsonl")
    found = run["interface"]
    assert run["profile_env"]["OMPI_MCA_btl_tcp_if_include"] == found
    assert run["rank_hosts"] == [NODES[0]] * 2 and run["nodes"] == 1


def _read_back(log: str, tmp_path: Path, written: Path) -> dict:
    """`fabbench from-log` of the log: the file rank 0 wrote, byte for byte; its run record."""
    (tmp_path / "pod.log").write_text(log)
    p = fabbench("from-log", str(tmp_path / "pod.log"), "-o", str(tmp_path / "back.jsonl"),
                 timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"wrote {tmp_path / 'back.jsonl'} (")
    assert (tmp_path / "back.jsonl").read_bytes() == written.read_bytes()
    records = [json.loads(line) for line in written.read_text().splitlines()]
    assert records[-1]["kind"] == "summary" and records[-1]["ok"]
    run = records[0]
    assert any(p.startswith("hosts=the nodes' names from FABBENCH_NODE_NAME (rank 0's: "
                            f"{NODES[0]}; its hostname: {socket.gethostname()})")
               for p in run["picked"]), run["picked"]
    assert any(p.startswith("iface=") for p in run["picked"])
    return run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _clean_env() -> dict[str, str]:
    """This process's environment less any launcher's or fabbench's (a test runner's own)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("OMPI_", "PMI", "SLURM_", "FABBENCH_", "MASTER_"))
            and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
