"""Docker, the engine the Dockerfile is named for (issue 47): a real Docker Engine builds, runs,
pushes and pulls the cpu image.

The engine is Debian's docker.io (Docker Engine 20.10), a daemon of the test's own started once
for the module by .ci/docker/start.sh: its socket, exec root and pid file in the test's folder,
its data root in $FABBENCH_CACHE/docker (a second run reuses every layer), its own mount
namespace (its /etc/docker and /run are folders of its own), no bridge, no iptables. At the end
.ci/docker/stop.sh stops it and the module checks that nothing remains: no process naming its
folder, no mount under it, no cgroup of its containers, the folder gone, no iptables rule or
chain of Docker's, no docker0 link. test_stop_leaves_nothing_after_a_killed_daemon checks the
same after a failure (dockerd SIGKILLed with a container running).

The image is built by `ENGINE=docker .ci/image-build.sh` (BuildKit, from the same Dockerfile,
context and base image as podman's build, cached by the same content tag). The image's own checks
(image_checks.py, shared with podman's build in test_image.py) run on it with `docker run`; its
package manifests and its files equal those of podman's build, its layers do not. The Docker lines
of docs/containers.md run as a user types them (the image's name replaced by the tested tag, a
short sweep appended to a run), the image is pushed to the session's TLS registry and pulled by
digest, and a run by that reference records the digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import ssl
import stat
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO
from fabbench.results.reader import read_results
from fabbench.sysinfo.inventory import image_id
from integration.image_checks import *  # noqa: F403  (the checks: pytest collects them here)
from integration.image_checks import Image, manifest_of, sh

BUILD_TIMEOUT_S = 5400  # a cold build (test_image.py's figure); cached afterwards
# docker.io's own client (20.10: BuildKit built in); the machine's may be another
DOCKER = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else shutil.which("docker") or ""
SHORT = ["--sizes", "8,64K", "--ops", "allreduce,broadcast", "--budget", "0.05", "--timeout", "60"]
DOCS = REPO / "docs" / "containers.md"
IMAGE_IN_DOCS = "localhost/fabbench:cpu"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.together,
    pytest.mark.podman,  # one podman store: these modules run one at a time
    pytest.mark.timeout(BUILD_TIMEOUT_S + 1200),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a Docker Engine)"),
    *[pytest.mark.skipif(shutil.which(tool) is None, reason=f"needs {tool} ({why})")
      for tool, why in (("dockerd", "apt-get install docker.io: .ci/apt-packages.txt"),
                        ("podman", "the base image, and the build Docker's is compared with"),
                        ("debootstrap", "the base image"))],
]


# ---- the engine ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Engine:
    folder: Path
    env: dict[str, str]  # DOCKER_HOST (start.sh's line), DOCKER_CONFIG (a client folder of its own)

    def __call__(self, *args: object, timeout: float = 600) -> subprocess.CompletedProcess:
        return sh([DOCKER, *map(str, args)], timeout, env=self.env)


def cgroup_of(folder: Path) -> str:
    """The cgroup parent start.sh gives the containers of a folder's daemon."""
    return "fabbench-docker-" + hashlib.sha256(str(folder).encode()).hexdigest()[:12]


def naming(word: str) -> list[str]:
    """The processes with an argument holding WORD."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(word.encode() in arg for arg in args):
            found.append(f"{cmdline.parent.name}: {b' '.join(args).decode(errors='replace')}")
    return found


def dockers_rules() -> list[str]:
    """Docker's iptables chains and rules (DOCKER, DOCKER-USER, DOCKER-ISOLATION-...), every
    table."""
    saved = sh(["iptables-save"], 60)
    assert saved.returncode == 0, saved.stderr
    return [line for line in saved.stdout.splitlines() if "docker" in line.lower()]


def leftovers(folder: Path) -> dict[str, list[str]]:
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
              if line.split()[4].startswith(f"{folder}/") or line.split()[4] == str(folder)]
    left = {"processes": naming(f"{folder}/"), "mounts": mounts,
            "cgroups": [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/{cgroup_of(folder)}")],
            "files": [str(folder)] if folder.exists() else [],
            "links": [name for name in os.listdir("/sys/class/net") if name == "docker0"]}
    return {what: found for what, found in left.items() if found}


@contextmanager
def docker_engine(folder: Path, client: Path, data: Path | None = None) -> Iterator[Engine]:
    """Start a Docker Engine in FOLDER (its data root DATA, default start.sh's), yield it, stop it
    and check that nothing of it remains, whatever happened inside."""
    env = {**os.environ, "DOCKER_CONFIG": str(client)}
    if data is not None:
        env["FABBENCH_DOCKER_DATA"] = str(data)
    rules = dockers_rules()
    started = sh([str(REPO / ".ci/docker/start.sh"), str(folder)], 180, env=env)
    if started.returncode == 3:
        pytest.skip(f"dockerd cannot start here: {started.stderr.strip().splitlines()[-1]}")
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        line = started.stdout.strip().splitlines()[-1]
        assert line == f"DOCKER_HOST=unix://{folder}/docker.sock", started.stdout
        yield Engine(folder, {**env, "DOCKER_HOST": line.split("=", 1)[1]})
    finally:
        stopped = sh([str(REPO / ".ci/docker/stop.sh"), str(folder)], 180, env=env)
        assert stopped.returncode == 0, stopped.stderr[-3000:]
        assert leftovers(folder) == {}
        assert dockers_rules() == rules


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> Iterator[Engine]:
    with docker_engine(tmp_path_factory.mktemp("dockerd"),
                       tmp_path_factory.mktemp("docker-client")) as started:
        yield started


def load_base(engine: Engine) -> None:
    """podman's Debian base into the engine, as image-build.sh does (containers/base-image.sh)."""
    res = sh([str(REPO / "containers/base-image.sh")], 900,
             env={**engine.env, "ENGINE": "docker", "DOCKER": DOCKER})
    assert res.returncode == 0, res.stdout + res.stderr


def test_stop_leaves_nothing_after_a_killed_daemon(tmp_path_factory):
    """A daemon of its own (own folder and data root) with a container running is SIGKILLed, as
    a crash would end it; stop.sh still ends its containerd, the shim and the container's
    process, removes the cgroups and the folder, and leaves no mount and no rule."""
    folder = tmp_path_factory.mktemp("dockerd-killed")
    data = tmp_path_factory.mktemp("docker-data-killed")
    try:
        with docker_engine(folder, tmp_path_factory.mktemp("docker-client-killed"), data) as eng:
            load_base(eng)
            run = eng("run", "-d", "--name", "fabbench-sleeper", "localhost/debian:bookworm",
                      "sleep", "600", timeout=120)
            assert run.returncode == 0, run.stderr
            inside = int(eng("inspect", "--format", "{{.State.Pid}}", "fabbench-sleeper",
                             timeout=60).stdout)
            assert inside > 0 and Path(f"/proc/{inside}").exists()
            daemon = int((folder / "docker.pid").read_text())
            os.kill(daemon, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while Path(f"/proc/{daemon}").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert Path(f"/proc/{inside}").exists(), "the container ended with its daemon"
        assert not Path(f"/proc/{inside}").exists()
    finally:
        shutil.rmtree(data, ignore_errors=True)


# ---- the image ----------------------------------------------------------------------------------

def build(engine: Engine, *args: str) -> subprocess.CompletedProcess:
    return sh([str(REPO / ".ci/image-build.sh"), *args], BUILD_TIMEOUT_S,
              env={**engine.env, "ENGINE": "docker", "FLAVOR": "cpu", "DOCKER": DOCKER})


@dataclass(frozen=True)
class DockerImage(Image):
    """The Docker-built image: its layers mounted read-only (rootfs) for reading its files, its
    commands run by `docker run` with the flags docs/containers.md gives Docker users."""

    engine: Engine

    def run(self, argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
        return self.engine("run", "--rm", *FLAGS, "-v", f"{self.work}:{self.workdir}",
                           "--entrypoint", argv[0], self.tag, *argv[1:], timeout=timeout)


def documented_docker_lines() -> list[str]:
    """The Docker lines of docs/containers.md's `sh` blocks (`text` blocks are not run)."""
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", DOCS.read_text(), flags=re.S):
        lines += [ln.strip() for ln in block.splitlines()
                  if ln.strip().startswith(("docker ", "ENGINE=docker "))]
    return lines


def documented(*words: str) -> str:
    found = [ln for ln in documented_docker_lines() if all(w in ln for w in words)]
    assert len(found) == 1, (words, found)
    return found[0]


def user_flags() -> list[str]:
    """The --shm-size and --ulimit flags docs/containers.md gives Docker users, from its run
    line."""
    flags: list[str] = []
    value = False  # the word after a flag given without "="
    for word in shlex.split(documented("docker run", "--fabric ethernet")):
        if value or word.startswith(("--shm-size", "--ulimit")):
            flags.append(word)
            value = not value and "=" not in word
    return flags


FLAGS = user_flags()


@contextmanager
def overlay(lower: list[str], where: Path) -> Iterator[Path]:
    """The layers LOWER (top first) mounted read-only at WHERE, as the engine stacks them."""
    res = sh(["mount", "-t", "overlay", "overlay", "-o", "ro,lowerdir=" + ":".join(lower),
              str(where)], 120)
    assert res.returncode == 0, res.stderr
    try:
        yield where
    finally:
        sh(["umount", str(where)], 120)


@pytest.fixture(scope="module")
def built(engine) -> str:
    res = build(engine)
    assert res.returncode == 0, res.stderr[-6000:]
    tag = res.stdout.strip().splitlines()[-1]
    said = re.search(r"built \S+ in (\d+)s|cached: \S+", res.stderr)
    print(f"docker build: {said.group(0) if said else '?'}")
    # the tests' own store keeps this tree's image and a bounded build cache, not every tag
    # ever built (each is 1.3 GB)
    listed = engine("images", "--format", "{{.Repository}}:{{.Tag}}", "localhost/fabbench",
                    timeout=60)
    for ref in set(listed.stdout.split()) - {tag, "localhost/fabbench:cpu"}:
        engine("rmi", ref, timeout=120)
    engine("builder", "prune", "-f", "--keep-storage", "6GB", timeout=300)
    return tag


@pytest.fixture(scope="module")
def image(engine, built, tmp_path_factory) -> Iterator[DockerImage]:
    inspect = engine("image", "inspect", built, timeout=120)
    assert inspect.returncode == 0, inspect.stderr
    info = json.loads(inspect.stdout)[0]
    config, graph = info["Config"], info["GraphDriver"]
    assert graph["Name"] == "overlay2", graph
    lower = [graph["Data"]["UpperDir"], *graph["Data"]["LowerDir"].split(":")]
    work = tmp_path_factory.mktemp("docker-image-work")
    work.chmod(0o777)  # the image's user (1000) writes its results there
    env = dict(item.split("=", 1) for item in config.get("Env", []))
    with overlay(lower, tmp_path_factory.mktemp("docker-rootfs")) as rootfs:
        yield DockerImage(tag=built, rootfs=rootfs, work=work, env=env,
                          user=config.get("User") or "0:0",
                          workdir=config.get("WorkingDir") or "/",
                          entrypoint=config.get("Entrypoint") or [], engine=engine)


@pytest.fixture(scope="module")
def podman_image() -> Iterator[tuple[str, Path]]:
    """podman's build of the same tree (test_image.py's; cached by the same tag), mounted."""
    res = sh([str(REPO / ".ci/image-build.sh")], BUILD_TIMEOUT_S,
             env={**os.environ, "FLAVOR": "cpu", "ENGINE": "podman"})
    assert res.returncode == 0, res.stderr[-6000:]
    tag = res.stdout.strip().splitlines()[-1]
    mounted = sh(["podman", "image", "mount", tag], 300)
    assert mounted.returncode == 0, mounted.stderr
    try:
        yield tag, Path(mounted.stdout.strip())
    finally:
        sh(["podman", "image", "unmount", tag], 120)


def test_built_by_buildkit_from_podmans_base_under_the_same_tag(engine, image, podman_image):
    """BuildKit built every Dockerfile step (its history comment), on the very base podman's build
    has (same image id, same layer), under the tag podman's build of this tree has; asked
    again, the script finds it cached."""
    history = engine("history", "--no-trunc", "--format", "{{.Comment}}", image.tag, timeout=60)
    assert history.returncode == 0, history.stderr
    assert "buildkit.dockerfile.v0" in history.stdout.split(), history.stdout
    ids = [engine("image", "inspect", "--format", "{{.Id}}", "localhost/debian:bookworm",
                  timeout=60).stdout.strip(),
           "sha256:" + sh(["podman", "image", "inspect", "--format", "{{.Id}}",
                           "localhost/debian:bookworm"], 60).stdout.strip()]
    assert ids[0] == ids[1] != "sha256:", ids
    assert layers(engine, image.tag)[0] == podman_layers(podman_image[0])[0]
    assert image.tag == podman_image[0]
    tag = build(engine, "--tag")
    assert tag.returncode == 0 and tag.stdout.strip() == image.tag, tag.stdout + tag.stderr
    again = build(engine)
    assert again.returncode == 0 and f"cached: {image.tag}" in again.stderr, again.stderr


def layers(engine: Engine, tag: str) -> list[str]:
    res = engine("image", "inspect", "--format", "{{json .RootFS.Layers}}", tag, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def podman_layers(tag: str) -> list[str]:
    res = sh(["podman", "image", "inspect", "--format", "{{json .RootFS.Layers}}", tag], 60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


# ---- the same contents --------------------------------------------------------------------------

def packages(rootfs: Path) -> dict[str, dict[str, str]]:
    """Debian's packages (dpkg's status) and the venv's Python distributions, with versions."""
    debs = {}
    for entry in (rootfs / "var/lib/dpkg/status").read_text().split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): (.*)$", entry, re.M))
        if "install ok installed" in fields.get("Status", ""):
            debs[f"{fields['Package']}:{fields.get('Architecture', '')}"] = fields["Version"]
    site = next((rootfs / "opt/fabbench/venv/lib").glob("python3*/site-packages"))
    wheels = {}
    for info in site.glob("*.dist-info"):
        meta = (info / "METADATA").read_text(errors="replace")
        wheels[re.search(r"^Name: (.*)$", meta, re.M)[1].lower()] = \
            re.search(r"^Version: (.*)$", meta, re.M)[1]
    return {"debian": debs, "python": wheels}


def test_package_manifests_equal_podmans(image, podman_image):
    """The build manifest (containers/manifest.sh) and the packages installed are the same as in
    podman's build; only the manifest's build time and the commit it was built at may differ."""
    docker_manifest, podman_manifest = manifest_of(image), json.loads(
        (podman_image[1] / "etc/fabbench/build.json").read_text())
    assert docker_manifest["components"] == podman_manifest["components"]
    when = ("created", "vcs_ref")
    assert ({k: v for k, v in docker_manifest["image"].items() if k not in when}
            == {k: v for k, v in podman_manifest["image"].items() if k not in when})
    docker_packages, podman_packages = packages(image.rootfs), packages(podman_image[1])
    assert len(docker_packages["debian"]) > 100 and "torch" in docker_packages["python"]
    assert docker_packages == podman_packages


# What two builds of one recipe write differently however alike: the build manifest's time, files
# that record when they were made (logs, the package tools' backups and caches), and in each
# compiled Python file (.pyc) the 4 bytes of its header that hold its source's mtime (pip gives
# every file it installs the time of the install; the header's magic, flags and source size and
# all the code after the header must be equal).
BUILD_TIME = re.compile(r"^(etc/fabbench/build\.json|var/log/.*|var/cache/(debconf|ldconfig)/.*"
                        r"|var/lib/dpkg/.*-old|etc/shadow-?|etc/gshadow-?)$")
PYC_MTIME = slice(8, 12)
# buildah leaves the empty files it binds over in a RUN step: /etc/hosts, and the trust store
# podman's builds lent with -v (before the build secret) at the path python-stack.sh reads, in
# podman's cached layers; BuildKit leaves none
BUILDAH_MOUNT_POINTS = {"etc/hosts", "usr/local/share/fabbench",
                        "usr/local/share/fabbench/build-ca.crt"}


def content(path: Path, rel: str) -> str | None:
    """The sha256 of a file's bytes as two builds of one recipe must share them (None: a
    BUILD_TIME file)."""
    if BUILD_TIME.match(rel):
        return None
    data = path.read_bytes()
    if rel.endswith(".pyc"):
        data = data[:PYC_MTIME.start] + data[PYC_MTIME.stop:]
    return hashlib.sha256(data).hexdigest()


def tree(root: Path) -> dict[str, tuple]:
    """Every path under ROOT: its type, mode, owner and group, a file's size and content, a
    link's target."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            st = path.lstat()
            rel = str(path.relative_to(root))
            what: tuple = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid,
                           st.st_gid)
            if stat.S_ISREG(st.st_mode):
                digest = content(path, rel)
                what += (st.st_size if digest else None, digest)
            elif stat.S_ISLNK(st.st_mode):
                what += (os.readlink(path),)
            found[rel] = what
    return found


def test_layers_differ_and_contents_equal_podmans(engine, image, podman_image):
    """Two engines, two sets of layers (each writes its own tar of each step, with its own times);
    the same files, byte for byte, with the same modes and owners, but for the build-time
    records of BUILD_TIME."""
    docker_layers, theirs = layers(engine, image.tag), podman_layers(podman_image[0])
    assert docker_layers[0] == theirs[0]  # the base
    assert docker_layers[1:] != theirs[1:]
    ours, podmans = tree(image.rootfs), tree(podman_image[1])
    assert len(ours) > 20000
    only_podmans = set(podmans) - set(ours)
    assert only_podmans <= BUILDAH_MOUNT_POINTS and set(ours) <= set(podmans), \
        (sorted(only_podmans), sorted(set(ours) - set(podmans)))
    assert all(podmans[p][4:5] in ((), (0,)) for p in only_podmans), \
        [(p, podmans[p]) for p in only_podmans]  # a folder, or an empty file
    differ = sorted(path for path in ours if ours[path] != podmans[path])
    assert differ == [], ([(p, ours[p], podmans[p]) for p in differ[:20]], len(differ))
    print(f"contents: {len(ours)} paths equal; layers: docker {len(docker_layers)}, podman "
          f"{len(theirs)}, {len(set(docker_layers) & set(theirs))} shared")


# ---- as a user types it -------------------------------------------------------------------------

def as_typed(engine: Engine, line: str, tag: str, cwd: Path, timeout: float = 900
             ) -> subprocess.CompletedProcess:
    """A documented line run by bash in CWD, the image's name replaced by TAG."""
    line = re.sub(rf"{re.escape(IMAGE_IN_DOCS)}(?![-\w])", tag, line.split("  #")[0])
    return sh(["bash", "-c", line], timeout, env=engine.env, cwd=cwd)


def test_every_documented_docker_line_is_run_here():
    lines = documented_docker_lines()
    used = {documented("ENGINE=docker", "image-build.sh"),
            documented("docker run", "--fabric ethernet"),
            documented("docker run", "--primitive nccl")}
    assert set(lines) == used, lines


def test_the_documented_build_line_prints_the_tag(engine, built):
    res = as_typed(engine, documented("ENGINE=docker", "image-build.sh"), built, REPO, 120)
    assert res.returncode == 0 and res.stdout.strip().splitlines()[-1] == built, res.stderr


def test_docker_run_as_a_user_types_it_writes_results_on_the_bind_mount(engine, image,
                                                                         tmp_path):
    """`docker run --rm --shm-size ... --ulimit ... -v "$PWD:/work" IMAGE run --fabric ethernet`
    in a folder the image's user may write: 2 ranks, a valid results file in that folder, the
    record naming Docker and carrying the image's build manifest."""
    tmp_path.chmod(0o777)
    res = as_typed(engine, documented("docker run", "--fabric ethernet") + " " + " ".join(SHORT),
                   image.tag, tmp_path)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    files = list(tmp_path.rglob("*.jsonl"))
    assert len(files) == 1, (files, res.stdout[-2000:])
    results = read_results(files[0])  # validated against the schema
    run, summary = results.records[0], results.records[-1]
    assert run.ranks == 2 and run.fabric == "ethernet" and run.transport == "ob1/tcp", run
    assert run.provenance.container == "docker"
    assert run.provenance.build == manifest_of(image)
    assert summary.ok is True and len(results.of_kind("collective")) == 4
    print(f"results: {files[0].name}; image {run.provenance.image}")
    assert engine("ps", "-aq", timeout=60).stdout.strip() == ""  # --rm removed it


def test_nccl_without_a_gpu_is_refused_in_one_line_naming_gpus_all(engine, image, tmp_path):
    res = as_typed(engine, documented("docker run", "--primitive nccl"), image.tag, tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    # Docker's own client line where the host had forwarding off when the daemon started
    # (net.ipv4.ip_forward=0 on a fresh host, until podman's first bridge turns it on): not
    # fabbench's output
    lines = [line for line in res.stderr.splitlines() if line.strip()
             and not line.startswith("WARNING: IPv4 forwarding is disabled.")]
    assert len(lines) == 1 and "--gpus all" in lines[0], lines
    assert "no GPU visible in this container" in lines[0], lines
    print(f"refusal: {lines[0]}")


# ---- a registry ---------------------------------------------------------------------------------

def served_digest(registry, name: str, tag: str) -> str:
    """The digest of the manifest the registry serves for NAME:TAG, over TLS verified with its
    CA."""
    req = urllib.request.Request(registry.url(f"/v2/{name}/manifests/{tag}"), headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    context = ssl.create_default_context(cafile=str(registry.ca))
    with urllib.request.urlopen(req, timeout=60, context=context) as r:
        return "sha256:" + hashlib.sha256(r.read()).hexdigest()


def test_push_to_the_tls_registry_pull_by_digest_and_run_records_it(engine, image, registry,
                                                                    tmp_path):
    """`docker push` to the session's TLS registry (its CA where a site puts it,
    certs.d/HOST:PORT/ca.crt under the engine's /etc/docker), the digest it prints is what the
    registry serves; the tag removed, `docker pull NAME@DIGEST` gives back the same image (its
    layers are still in the engine's store: only the manifest and config come over), and a run by
    that reference records the digest and the image's id."""
    certs = engine.folder / "etc" / "certs.d" / registry.host
    certs.mkdir(parents=True)
    shutil.copy(registry.ca, certs / "ca.crt")
    name, tag = "fabbench-docker", image.tag.rsplit(":", 1)[1]
    pushed_ref = f"{registry.host}/{name}:{tag}"
    assert engine("tag", image.tag, pushed_ref, timeout=60).returncode == 0
    start = time.monotonic()
    push = engine("push", pushed_ref, timeout=1800)
    assert push.returncode == 0, push.stdout + push.stderr
    digest = re.search(r"digest: (sha256:[0-9a-f]{64})", push.stdout)[1]
    print(f"push: {time.monotonic() - start:.0f}s, {digest}")
    assert served_digest(registry, name, tag) == digest
    assert engine("rmi", pushed_ref, timeout=60).returncode == 0
    by_digest = f"{registry.host}/{name}@{digest}"
    try:
        pull = engine("pull", by_digest, timeout=900)
        assert pull.returncode == 0, pull.stdout + pull.stderr
        assert f"Digest: {digest}" in pull.stdout, pull.stdout
        same = [engine("image", "inspect", "--format", "{{.Id}}", ref, timeout=60).stdout
                for ref in (by_digest, image.tag)]
        assert same[0] == same[1] != "", same
        tmp_path.chmod(0o777)
        run = engine("run", "--rm", *FLAGS, "-v", f"{tmp_path}:/work", "-e",
                     f"FABBENCH_IMAGE_REF={by_digest}", by_digest, "run", "--fabric", "ethernet",
                     *SHORT, timeout=900)
        assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
        files = list(tmp_path.rglob("*.jsonl"))
        assert len(files) == 1, files
        prov = read_results(files[0]).records[0].provenance
        assert prov.image is not None
        assert prov.image.digest == digest and prov.image.ref == by_digest, prov.image
        assert prov.image.id == image_id(manifest_of(image)) == image_id(prov.build)
        print(f"recorded image: {prov.image}")
    finally:
        engine("rmi", by_digest, timeout=60)
