"""The chart's MPIJob, its ssh part, in real containers of the cpu image (podman run with runc,
NOTES) without a cluster: what the Kubeflow MPI Operator v0.8.0 adds to the chart's pods is
added here as it adds it (pkg/controller/mpi_job_controller.go):

  - its ssh Secret: an ECDSA P-521 key in PEM ("EC PRIVATE KEY") as id_rsa, its public key as
    id_rsa.pub and authorized_keys, mounted at the MPIJob's sshAuthMountPath (/root/.ssh) with
    mode 0600, laid out as the kubelet lays out a Secret volume (a world-writable directory, each
    file a symlink into ..data, a link to a timestamped folder);
  - its hostfile, `<job>-worker-N.<job>.<ns>.svc slots=K`, and the launcher's variables
    (OMPI_MCA_orte_keep_fqdn_hostnames, OMPI_MCA_orte_default_hostfile, OMPI_MCA_plm_rsh_args);
  - the workers' names, which the cluster's DNS would resolve (here --add-host).

The workers run the chart's worker command (the image's fabbench-sshd), the launcher the chart's
mpirun line; rank 0 runs on worker 0, and its results come back out of the launcher's output
with `fabbench from-log`, naming the nodes the workers were told (FABBENCH_NODE_NAME, which the
image's sshd hands to the ranks' sessions). Every address is in 198.18.0.0/15 (a podman network
of this test's own, removed afterwards, as are the containers)."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path

import pytest
import yaml

from conftest import REPO, fabbench
from integration.test_podman_run import (
    image,  # noqa: F401  (the fixture: the cpu image)
    sh,
)
from integration.test_podman_run import pytestmark as podman_needs

helm_python = pytest.importorskip("helm_python", reason="needs helm-python-sdk (dev extra)")

SUBNET = "198.18.241.0/24"
JOB, NS = "fb-fabbench", "bench"

pytestmark = [
    *podman_needs, pytest.mark.together,
    pytest.mark.podman,  # one podman store: these modules run one at a time
    pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                       reason="needs ssh-keygen (the operator's kind of key)")]


def podman(*args: str, timeout: float = 300):
    return sh(["podman", "--runtime", "runc", *args], timeout)


def operator_secret(folder: Path) -> Path:
    """The operator's ssh Secret as the kubelet mounts it at /root/.ssh (defaultMode 0600)."""
    made = folder / "made"
    made.mkdir(parents=True)
    key = made / "key"
    res = sh(["ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-f",
              str(key)], 60)
    assert res.returncode == 0, res.stderr
    assert key.read_text().startswith("-----BEGIN EC PRIVATE KEY-----")
    volume = folder / "ssh"
    stamp = volume / "..2026_11_27_09_00_00.000000001"
    stamp.mkdir(parents=True)
    public = Path(f"{key}.pub").read_text()
    for name, text in (("id_rsa", key.read_text()), ("id_rsa.pub", public),
                       ("authorized_keys", public)):
        (stamp / name).write_text(text)
        (stamp / name).chmod(0o600)
        (volume / name).symlink_to(f"..data/{name}")
    (volume / "..data").symlink_to(stamp.name)
    volume.chmod(0o777)
    return volume


def chart_mpijob() -> dict:
    out = helm_python.Chart.load(str(REPO / "charts/fabbench")).render(
        {"benchmark": {"ops": "allreduce", "sizes": "8,64K", "budget": 0.02}},
        name="fb", namespace=NS)
    (doc,) = [d for name, text in out.items() if not name.endswith("NOTES.txt")
              for d in yaml.safe_load_all(text) if d]
    assert doc["kind"] == "MPIJob" and doc["metadata"]["name"] == JOB
    return doc


def test_the_launchers_mpirun_reaches_the_workers_sshd_as_the_operator_sets_it_up(
        image, tmp_path):  # noqa: F811  (the fixture imported above)
    tagged, _ = image
    spec = chart_mpijob()["spec"]
    assert spec["sshAuthMountPath"] == "/root/.ssh"
    worker_pod = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    launcher_pod = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    worker, launcher = worker_pod["containers"][0], launcher_pod["containers"][0]
    assert worker_pod["securityContext"]["runAsUser"] == 0
    secret = operator_secret(tmp_path)
    hosts = [f"{JOB}-worker-{i}.{JOB}.{NS}.svc" for i in range(2)]
    addresses = [f"198.18.241.{10 + i}" for i in range(2)]
    nodes = ["k8s-node-1", "k8s-node-2"]
    (tmp_path / "mpi").mkdir()
    (tmp_path / "mpi" / "hostfile").write_text("".join(f"{h} slots=1\n" for h in hosts))
    add_hosts = [a for h, ip in zip(hosts, addresses, strict=True) for a in ("--add-host",
                                                                            f"{h}:{ip}")]
    tag = uuid.uuid4().hex[:8]
    network, names = f"fabbench-test-{tag}", [f"fabbench-test-{tag}-w{i}" for i in range(2)]
    common = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", "--network",
              network, "--user", "0", "-v", f"{secret}:/root/.ssh:ro", *add_hosts]
    made = podman("network", "create", "--subnet", SUBNET, network)
    assert made.returncode == 0, made.stderr
    try:
        for i, name in enumerate(names):
            # the chart's worker container: allowPrivilegeEscalation false, IPC_LOCK added
            started = podman("run", "-d", "--name", name, "--ip", addresses[i], *common,
                             "--security-opt", "no-new-privileges", "--cap-add", "IPC_LOCK",
                             "-e", f"FABBENCH_NODE_NAME={nodes[i]}",
                             "--entrypoint", worker["command"][0], tagged,
                             *worker["command"][1:], timeout=120)
            assert started.returncode == 0, started.stderr
        _wait_for_sshd(names)
        worker_log = podman("logs", names[0]).stdout + podman("logs", names[0]).stderr
        assert "host keys made for this container; sshd on port 2222" in worker_log
        assert f"FABBENCH_NODE_NAME={nodes[0]}" in worker_log

        env = {e["name"]: e["value"] for e in launcher["env"]}
        env.update({"OMPI_MCA_orte_keep_fqdn_hostnames": "true",  # the operator's
                    "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
                    "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
                    "OMPI_MCA_orte_set_default_slots": "1", "K_MPI_JOB_ROLE": "launcher"})
        given = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
        # first the ssh the operator's set-up relies on: a session on a worker, by its name
        probe = podman("run", "--rm", *common, *given, "--entrypoint", "ssh", tagged, hosts[1],
                       "echo $FABBENCH_NODE_NAME; command -v fabbench orted", timeout=120)
        assert probe.returncode == 0, probe.stderr
        assert probe.stdout.split() == [nodes[1], "/opt/fabbench/venv/bin/fabbench",
                                        "/usr/bin/orted"], probe.stdout
        assert probe.stderr == ""  # no known_hosts warning in mpirun's output
        run = podman("run", "--rm", *common, "-v", f"{tmp_path / 'mpi'}:/etc/mpi:ro", *given,
                     "--entrypoint", launcher["command"][0], tagged, *launcher["args"],
                     timeout=600)
        assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
    finally:
        for name in names:
            podman("rm", "-f", "--time", "5", name)
        podman("network", "rm", "-f", network)
    (tmp_path / "launcher.log").write_text(run.stdout)
    back = fabbench("from-log", str(tmp_path / "launcher.log"), "-o",
                    str(tmp_path / "results.jsonl"), timeout=60)
    assert back.returncode == 0, back.stderr
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text()
               .splitlines()]
    first, summary = records[0], records[-1]
    assert summary["ok"] is True and first["ranks"] == 2 and first["nodes"] == 2
    assert first["rank_hosts"] == nodes  # the Kubernetes nodes, not the pods' hostnames
    assert first["interface"] == "eth0" and first["transport"] == "ob1/tcp"
    found = f"iface=eth0 (holds {addresses[0]}, the source address of the route to mpirun's host"
    assert any(p.startswith(found) for p in first["picked"]), first["picked"]
    assert "fabbench: rank 1: node k8s-node-2 (FABBENCH_NODE_NAME)" in run.stderr


def _wait_for_sshd(names: list[str], deadline_s: float = 30) -> None:
    end = time.monotonic() + deadline_s
    for name in names:
        while True:
            up = podman("exec", name, "/bin/sh", "-c", "test -s /run/sshd.pid", timeout=30)
            if up.returncode == 0:
                break
            assert time.monotonic() < end, (podman("logs", name).stderr, up.stderr)
            time.sleep(0.5)
