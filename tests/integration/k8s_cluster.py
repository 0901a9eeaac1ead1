"""A real Kubernetes cluster for integration tests: .ci/k8s/start.sh on fabbench's emulated nodes,
.ci/k8s/stop.sh after (docs/kubernetes-cluster.md). A test module uses it as a fixture:

    from integration.k8s_cluster import K8S_TIMEOUT_S, k8s_cluster, skip_reason

    pytestmark = [pytest.mark.integration, pytest.mark.needs_root,
                  pytest.mark.timeout(K8S_TIMEOUT_S),
                  pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")]

    @pytest.fixture(scope="module")
    def cluster():
        with k8s_cluster(3, link="1gbit") as c:
            yield c

    def test_x(cluster):
        cluster.kubectl("get", "nodes")                   # CompletedProcess; raises on failure
        cluster.apply(manifest_yaml, namespace="t")      # kubectl apply -f - (str, dict or list)
        cluster.helm("install", "fb", str(CHART), "--set", f"image.digest={cluster.image_digest}")

Every call has a deadline (subprocess timeout); a failed call raises ClusterError with the
command's stderr. Only one cluster runs at a time on a host (start.sh refuses a second).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / ".ci" / "k8s"
STATE_DIR = Path(os.environ.get("FABBENCH_K8S_DIR", "/var/tmp/fabbench-k8s"))
# Deadlines, seconds. The binaries' cold build measured 1070-1600 s on 2 cores (docs/
# kubernetes-cluster.md): its deadline leaves twice that. The image's cold build has its own
# (.ci/image-build.sh, BUILD_TIMEOUT: 1800 for cpu). A start with both cached took 30-60 s.
BUILD_TIMEOUT_S = 3600
IMAGE_TIMEOUT_S = 1800 + 600
START_TIMEOUT_S = 900
STOP_TIMEOUT_S = 300
# A module's first test starts the cluster inside its own timeout (pytest-timeout counts fixtures).
K8S_TIMEOUT_S = BUILD_TIMEOUT_S + IMAGE_TIMEOUT_S + START_TIMEOUT_S + 900


class ClusterError(RuntimeError):
    """A cluster command failed or ran past its deadline."""


class ClusterBusy(ClusterError):
    """start.sh refused: a cluster already runs (or is being started) in its state folder."""


def skip_reason() -> str | None:
    """Why a cluster cannot start here (None: it can)."""
    if os.geteuid() != 0:
        return "a Kubernetes cluster on emulated nodes needs root"
    if not (REPO / ".venv" / "bin" / "fabbench").exists() and not os.environ.get("FABBENCH"):
        return "needs the development environment (make setup: .venv/bin/fabbench)"
    for tool in ("go", "podman", "buildah", "skopeo", "openssl", "ip", "tc", "nsenter"):
        if not _which(tool):
            return f"needs {tool} (go 1.26; .ci/k8s/*.sh install Debian's packages)"
    return None


def _which(tool: str) -> bool:
    return any(os.access(Path(d) / tool, os.X_OK) for d in os.environ.get("PATH", "").split(":"))


def _run(argv: list[str], timeout: float, *, env: dict[str, str] | None = None,
         input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                           env=env, input=input, stdin=None if input is not None else
                           subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"`{shlex.join(argv)}` ran past its deadline of {timeout:g} s; "
                           f"stderr: {_text(exc.stderr)[-3000:]}") from None
    if check and p.returncode != 0:
        raise ClusterError(f"`{shlex.join(argv)}` exited {p.returncode}: "
                           f"{(p.stderr or p.stdout)[-3000:]}")
    return p


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


def parse_env_file(path: Path) -> dict[str, str]:
    """The variables of start.sh's environment file (lines `export NAME=VALUE`, shell-quoted)."""
    env = {}
    for line in path.read_text().splitlines():
        if line.startswith("export "):
            name, _, value = line[len("export "):].partition("=")
            words = shlex.split(value)
            env[name] = words[0] if words else ""
    return env


@dataclass(frozen=True)
class K8sCluster:
    """A running cluster, as start.sh's environment file (FABBENCH_K8S_ENV) describes it."""

    env_file: Path
    env: dict[str, str] = field(repr=False)
    start_s: float = 0.0  # how long start.sh took

    @classmethod
    def from_env_file(cls, path: Path, start_s: float = 0.0) -> K8sCluster:
        return cls(env_file=path, env=parse_env_file(path), start_s=start_s)

    # What start.sh made ------------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[str, ...]:
        """Kubernetes node names, fbk-0..fbk-N-1 (fbk-I is emulated node I)."""
        return tuple(self.env["FABBENCH_K8S_NODES"].split())

    @property
    def node_addresses(self) -> tuple[str, ...]:
        """Each node's InternalIP (its emulated address), in node order."""
        return tuple(self.env["FABBENCH_K8S_NODE_ADDRESSES"].split())

    @property
    def image_repository(self) -> str:
        """fabbench's cpu image in the cluster's registry, e.g. 198.18.0.254:5000/fabbench."""
        return self.env["IMAGE_REPOSITORY"]

    @property
    def image_digest(self) -> str:
        """Its digest, sha256:..."""
        return self.env["IMAGE_DIGEST"]

    @property
    def image(self) -> str:
        """REPOSITORY@DIGEST: what a pod's image field names."""
        return f"{self.image_repository}@{self.image_digest}"

    @property
    def registry(self) -> str:
        return self.env["FABBENCH_K8S_REGISTRY"]

    @property
    def kubeconfig(self) -> str:
        return self.env["KUBECONFIG"]

    @property
    def emulation(self) -> str:
        """The emulated cluster's state file (FABBENCH_EMULATION)."""
        return self.env["FABBENCH_EMULATION"]

    def environ(self, **extra: str) -> dict[str, str]:
        """os.environ plus the cluster's variables: for subprocesses that use kubectl or helm."""
        return {**os.environ, **self.env, **extra}

    # Commands, each with a deadline -------------------------------------------------------------
    def kubectl(self, *args: str, timeout: float = 120, check: bool = True,
                input: str | None = None) -> subprocess.CompletedProcess:
        """`kubectl ARGS` against the cluster (admin); raises ClusterError on failure."""
        return _run([self.env["KUBECTL"], f"--request-timeout={max(int(timeout), 1)}s", *args],
                    timeout, env=self.environ(), input=input, check=check)

    def kubectl_json(self, *args: str, timeout: float = 120) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json", timeout=timeout).stdout)

    def helm(self, *args: str, timeout: float = 300, check: bool = True
             ) -> subprocess.CompletedProcess:
        """`helm ARGS` (v3.22, the cluster's kubeconfig, its own config/cache dirs)."""
        return _run([self.env["HELM"], *args], timeout, env=self.environ(), check=check)

    def apply(self, manifest: str | dict | list, *, namespace: str | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess:
        """`kubectl apply -f -` of YAML text, one object or a list of objects."""
        if not isinstance(manifest, str):
            docs = manifest if isinstance(manifest, list) else [manifest]
            manifest = yaml.safe_dump_all(docs)
        ns = ["-n", namespace] if namespace else []
        return self.kubectl("apply", *ns, "-f", "-", input=manifest, timeout=timeout)

    def wait(self, what: str, condition: str, *, namespace: str | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess:
        """`kubectl wait WHAT --for=CONDITION` (WHAT: "pod/x", "pods --all", "job/j"; CONDITION:
        "condition=Ready", "condition=complete", "delete"), with a deadline; on failure the
        error names the objects' state (kubectl describe)."""
        ns = ["-n", namespace] if namespace else []
        p = self.kubectl("wait", *ns, *what.split(), f"--for={condition}",
                         f"--timeout={int(timeout)}s", timeout=timeout + 30, check=False)
        if p.returncode != 0:
            described = self.kubectl("describe", *ns, *what.split(), check=False, timeout=60)
            raise ClusterError(f"{what} not {condition} within {timeout:g} s: {p.stderr.strip()}\n"
                               f"{described.stdout[-4000:]}")
        return p

    def exec(self, pod: str, *argv: str, namespace: str, timeout: float = 120,
             check: bool = True) -> subprocess.CompletedProcess:
        """Run ARGV in POD's (first) container."""
        return self.kubectl("exec", "-n", namespace, pod, "--", *argv, timeout=timeout,
                            check=check)

    def pull_everywhere(self, timeout: float = 600) -> float:
        """Run the image once on every node (a pod that exits at once), as sites pre-pull a job's
        image: a node's first pod of it otherwise starts as late as its pull and unpack (a
        minute or more over an emulated link on 2 busy cores), which the tests of a chart's job
        would race against its ranks' rendezvous deadline. The seconds it took."""
        t0 = time.monotonic()
        with self.namespace("fbk-prepull") as ns:
            self.apply([{"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": f"pull-{node}", "namespace": ns},
                         "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                                  "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                                  "containers": [{"name": "pull", "image": self.image,
                                                  "command": ["true"]}]}}
                        for node in self.nodes])
            self.wait("pods --all", "jsonpath={.status.phase}=Succeeded", namespace=ns,
                      timeout=timeout)
        return time.monotonic() - t0

    def set_link(self, node: int, rate_bit_s: int) -> None:
        """Emulated node NODE's link (Kubernetes node fbk-NODE) at a new rate, both ways, while
        the cluster runs (fabbench.emulate.net.set_rate)."""
        from fabbench.emulate import cluster as emulated
        from fabbench.emulate import net

        net.set_rate(emulated.load(self.emulation), node, rate_bit_s)

    @contextlib.contextmanager
    def namespace(self, name: str, *, level: str | None = None,
                  delete_timeout: float = 120) -> Iterator[str]:
        """A namespace for one test, deleted (and waited for) afterwards; with ``level``
        (privileged, baseline or restricted) its Pod Security admission enforces that level
        (the label pod-security.kubernetes.io/enforce)."""
        self.kubectl("create", "namespace", name)
        try:
            if level is not None:
                self.kubectl("label", "namespace", name,
                             f"pod-security.kubernetes.io/enforce={level}")
            yield name
        finally:
            self.kubectl("delete", "namespace", name, "--wait=true",
                         f"--timeout={int(delete_timeout)}s", timeout=delete_timeout + 30,
                         check=False)

    def kubectl_as(self, token: str, *args: str, timeout: float = 60,
                   input: str | None = None) -> subprocess.CompletedProcess:
        """`kubectl ARGS` with a bearer token alone (no client certificate, which the API
        server would authenticate first): what that token's user may do. Not checked: the
        caller reads the exit code and the API server's message."""
        return _run([self.env["KUBECTL"], "--kubeconfig=/dev/null",
                     f"--server={self.env['FABBENCH_K8S_API_SERVER']}",
                     f"--certificate-authority={self.env['FABBENCH_K8S_CA']}",
                     f"--token={token}", f"--request-timeout={max(int(timeout), 1)}s", *args],
                    timeout, env={k: v for k, v in self.environ().items() if k != "KUBECONFIG"},
                    input=input, check=False)


def image_for_cluster(timeout: float = IMAGE_TIMEOUT_S) -> str:
    """FABBENCH_K8S_IMAGE, or fabbench's cpu image of this tree (.ci/image-build.sh: found, or
    built under its own deadline): the image start.sh pushes to the cluster's registry."""
    if os.environ.get("FABBENCH_K8S_IMAGE"):
        return os.environ["FABBENCH_K8S_IMAGE"]
    env = {**os.environ, "FLAVOR": "cpu"}
    shared = REPO.parent / "shared" / "wheels"
    if "FABBENCH_TORCH_WHEELS" not in env and shared.is_dir():
        env["FABBENCH_TORCH_WHEELS"] = str(shared)
    p = _run([str(REPO / ".ci" / "image-build.sh")], timeout, env=env)
    return p.stdout.strip().splitlines()[-1]


def raise_background_build() -> None:
    """make test starts build.sh in the background at nice 19, in a process group of its own
    (FABBENCH_K8S_BUILD_PGID, Makefile), to take the cores the rest of the suite leaves idle; a
    test that now waits for it (build.sh's lock) raises the whole group to normal priority."""
    pgid = os.environ.get("FABBENCH_K8S_BUILD_PGID", "")
    if pgid.isdigit():
        subprocess.run(["renice", "-n", "0", "-g", pgid], capture_output=True, timeout=10,
                       check=False)  # gone already (built, or it failed): build.sh says which


def start(nodes: int = 3, *, link: str = "1gbit", slow_nodes: tuple[str, ...] = (),
          image: str | None = None, timeout: float = START_TIMEOUT_S) -> K8sCluster:
    """Build what is missing (binaries, image; each under its own deadline), then start.sh.
    ``slow_nodes``: "I:RATE" each (emulate's --slow-node)."""
    raise_background_build()
    _run([str(K8S / "build.sh")], BUILD_TIMEOUT_S)
    image = image or image_for_cluster()
    argv = [str(K8S / "start.sh"), str(nodes), "--link", link]
    for s in slow_nodes:
        argv += ["--slow-node", s]
    t0 = time.monotonic()
    p = _run(argv, timeout, env={**os.environ, "FABBENCH_K8S_IMAGE": image}, check=False)
    if p.returncode == 1 and p.stderr.startswith("start.sh: a cluster is"):
        raise ClusterBusy(p.stderr.strip())
    if p.returncode != 0:
        raise ClusterError(f"start.sh exited {p.returncode}: {p.stderr[-4000:]}")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("FABBENCH_K8S_ENV=")]
    if not lines:
        raise ClusterError(f"start.sh printed no FABBENCH_K8S_ENV line: {p.stderr[-3000:]}")
    return K8sCluster.from_env_file(Path(lines[-1].split("=", 1)[1]), time.monotonic() - t0)


def stop(timeout: float = STOP_TIMEOUT_S, *, check: bool = True) -> subprocess.CompletedProcess:
    """stop.sh: ends the cluster and removes everything it made (exit 1 names what is left)."""
    return _run([str(K8S / "stop.sh")], timeout, check=check)


@contextlib.contextmanager
def k8s_cluster(nodes: int = 3, *, link: str = "1gbit", slow_nodes: tuple[str, ...] = (),
                image: str | None = None) -> Iterator[K8sCluster]:
    """A cluster for the duration of the block; stopped afterwards, also when starting fails
    midway (start.sh tears down after itself; stop.sh is idempotent). A cluster that was already
    running is not this block's: ClusterBusy, and it is left alone."""
    try:
        cluster = start(nodes, link=link, slow_nodes=slow_nodes, image=image)
    except ClusterBusy:
        raise
    except BaseException:
        stop(check=False)
        raise
    try:
        yield cluster
    finally:
        stop(check=False)
