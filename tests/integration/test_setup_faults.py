"""The set-up's own faults (issue 36, part 5), each real, none mocked:

- a pull cut off mid-transfer (a TCP proxy in front of the TLS registry resets every connection
  after 4 MiB from the registry, so podman's retries are cut too), a pull whose registry goes
  silent mid-transfer (pull.sh's deadline ends it), and a layer whose stored bytes were changed
  (the registry serves them, the digest no longer matches): with each of the four pulls, one line
  `[pull] ERROR: <cause> (REF): <the runtime's word>`, exit 1, and nothing left: no partial
  folder, no podman image, name or digest, no podman download folder, no ch-image storage;
- a stopped image build (.ci/podman-build.sh, the code path of .ci/image-build.sh, with a tiny
  recipe): SIGTERM/SIGINT to the script or its process group and its deadline leave no build
  container, no process of its RUN step and no run folder; after a SIGKILL of the script the next
  build removes what it left and says so in one line;
- the Apptainer of the Debian sid root pinned: a root whose version differs from the pin stops
  .ci/apptainer.sh with one line (the root is not rebuilt: an environment override of the pin).

The image pulled here is made for this module (oci_registry.push_image: one uncompressed layer
of 16 MiB of random bytes, and a SIF built from it): no runtime has its layer, so every pull really
downloads it (podman skips a layer it already holds, and it holds every layer of the published
fabbench image: it built them). docs/faults-setup.md has the measured times.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO
from integration.oci_registry import (
    REGISTRY_BIN,
    Registry,
    blob_path,
    cutting_proxy,
    push_image,
    tampered,
)
from integration.test_registry import USER, clean_env, pull, sh, user_dir  # noqa: F401  (fixture)

pytestmark = [
    pytest.mark.together,
    pytest.mark.podman,  # one podman store: these modules run one at a time
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.timeout(2400),  # a first sid root or base image (debootstrap) in a fixture
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (podman storage, namespaces)"),
    pytest.mark.skipif(not Path(REGISTRY_BIN).exists(),
                       reason="needs docker-registry (.ci/apt-packages.txt)"),
    *[pytest.mark.skipif(shutil.which(tool) is None, reason=f"needs {tool} ({why})")
      for tool, why in (("openssl", "the registry's certificate"), ("podman", "pulls, builds"),
                        ("buildah", "lists build containers"), ("skopeo", "reads manifests"),
                        ("ch-run", "charliecloud-runtime"), ("debootstrap", "the sid root"))],
]

CUT_AFTER = 4 << 20   # bytes from the registry per connection before the proxy cuts it
LAYER_BYTES = 16 << 20
PULL_DEADLINE_S = 120  # pull.sh --timeout for a cut or changed pull: each ended in < 5 s here
STALL_DEADLINE_S = 10  # pull.sh --timeout for a registry gone silent (a cut pull ended in < 5 s)
BASE = "localhost/debian:bookworm"  # containers/base-image.sh


@dataclass(frozen=True)
class Fresh:
    registry: Registry
    oci: str            # HOST/NAME@sha256:... (HOST: the registry's; a proxy's replaces it)
    layer: str          # the image's only layer
    sif: str            # oras://HOST/NAME@sha256:...
    sif_layer: str      # the SIF itself, as a blob


@pytest.fixture(scope="module")
def fresh(registry) -> Fresh:
    """An image and a SIF no runtime here has: made for this module, pushed to the registry."""
    root = sh([REPO / ".ci/apptainer.sh", "root"], 1800)  # the sid root and its user
    assert root.returncode == 0, root.stderr[-3000:]
    name = f"fabbench-fault-{uuid.uuid4().hex[:8]}"
    digest, layer = push_image(registry, name, "1", {"fault/blob": os.urandom(LAYER_BYTES),
                                                     "fault/hello": b"hello\n"})
    home = Path(os.path.expanduser(f"~{USER}"))
    work = home / f"{name}-sif"
    work.mkdir()
    try:
        shutil.copy(registry.ca, work / "ca.crt")
        shutil.chown(work, USER, USER)
        shutil.chown(work / "ca.crt", USER, USER)
        for args in (["build", "fault.sif", f"docker://{registry.host}/{name}@{digest}"],
                     ["push", "fault.sif", f"oras://{registry.host}/{name}-sif:1"]):
            res = sh([REPO / ".ci/apptainer.sh", "exec", "--bind", f"{work}:/w", "--cwd", "/w",
                      "--", "env", "SSL_CERT_FILE=/w/ca.crt", "apptainer", *args], 600)
            assert res.returncode == 0, (args, res.stderr[-3000:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    raw = sh(["skopeo", "inspect", "--raw", "--cert-dir", registry.cert_dir,
              f"docker://{registry.host}/{name}-sif:1"], 120)
    assert raw.returncode == 0, raw.stderr
    sif_digest = "sha256:" + hashlib.sha256(raw.stdout.encode()).hexdigest()
    return Fresh(registry, f"{registry.host}/{name}@{digest}", layer,
                 f"oras://{registry.host}/{name}-sif@{sif_digest}",
                 json.loads(raw.stdout)["layers"][0]["digest"])


PULLS = ["podman", "apptainer-docker", "apptainer-oras", "charliecloud"]
CASES = {"interrupted": "the transfer was cut off",
         "tampered-blob": "a blob does not match its digest",
         "stalled": f"the pull did not finish in {STALL_DEADLINE_S}s (--timeout)"}


def podman_leftovers() -> set[str]:
    """podman's download folders: pull.sh gives podman a TMPDIR of its own, /var/tmp/
    .partial-podman.*, where podman keeps a blob while it downloads it (and, stopped, leaves it)."""
    return {p.name for p in Path("/var/tmp").glob(".partial-podman.*")}


@pytest.mark.parametrize("how", PULLS)
@pytest.mark.parametrize("case", list(CASES))
def test_a_cut_changed_or_stalled_pull_is_one_line_and_leaves_nothing(
        fresh, case, how, user_dir):  # noqa: F811
    reg = fresh.registry
    runtime = how.split("-")[0]
    ref = fresh.sif if how == "apptainer-oras" else fresh.oci
    if how == "apptainer-docker":
        ref = f"docker://{ref}"
    out = None if runtime == "podman" else user_dir / "pulled"
    listing = ["podman", "images", "--all", "--digests", "--no-trunc", "--format",
               "{{.ID}} {{.Repository}}:{{.Tag}} {{.Digest}}"]
    podman_before = podman_leftovers()
    deadline = STALL_DEADLINE_S if case == "stalled" else PULL_DEADLINE_S

    def run(ref: str):
        res = pull(runtime, ref, out, "--cert-dir", reg.cert_dir, "--timeout", str(deadline))
        return res, time.monotonic()

    if case == "tampered-blob":
        stored = blob_path(reg, fresh.sif_layer if how == "apptainer-oras" else fresh.layer)
        original = hashlib.sha256(stored.read_bytes()).hexdigest()
        with tampered(stored, stored.stat().st_size // 2):
            res, _ = run(ref)
        assert hashlib.sha256(stored.read_bytes()).hexdigest() == original  # put back
        blob = fresh.sif_layer if how == "apptainer-oras" else fresh.layer
        # the runtime (or pull.sh's check of ch-image's download) named the layer it downloaded
        assert blob.removeprefix("sha256:")[:12] in res.stderr, res.stderr
        seconds = ""
    else:
        with cutting_proxy(reg.port, CUT_AFTER, stall=case == "stalled") as proxy:
            res, ended = run(ref.replace(reg.host, proxy.host))
        assert proxy.cuts, f"the proxy cut nothing ({proxy.connections} connections)"
        seconds = f"{ended - proxy.cuts[0]:.1f}s from the first cut to the exit, " \
                  f"{len(proxy.cuts)} cut(s) of {proxy.connections} connection(s)"
        if case == "interrupted":
            assert ended - proxy.cuts[0] < 60, seconds
    print(f"{case} {how}: {seconds} {res.stderr.strip()}")
    assert res.returncode == 1, res.stderr[-3000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"[pull] ERROR: {CASES[case]} ("), lines
    assert re.search(r"\): \S", lines[0]), lines  # the runtime's word after the cause
    assert res.stdout == ""
    assert list(user_dir.iterdir()) == []  # no image, no partial one, no ch-image storage
    name = fresh.oci.split("/", 1)[1].split("@")[0]
    digests = {fresh.oci.split("@")[1], fresh.layer}
    left = [line for line in sh(listing, 60).stdout.splitlines()
            if name in line or any(d in line for d in digests)]
    assert left == [], left  # no podman image, name or digest of it
    assert podman_leftovers() <= podman_before


# ---- a stopped image build ----------------------------------------------------------------------

BUILD = REPO / ".ci" / "podman-build.sh"


@dataclass
class Build:
    proc: subprocess.Popen
    tag: str
    marker: str       # the RUN step's sleep: `sleep <marker>`, unique to this build
    containers: set[str]  # the build containers it made


def build_containers() -> dict[str, str]:
    res = sh(["buildah", "containers", "--json"], 60)
    assert res.returncode == 0, res.stderr
    return {c["id"]: c["containername"] for c in json.loads(res.stdout or "null") or []}


def step_processes(marker: str) -> list[str]:
    """The RUN step's own process, `sleep MARKER` (not the shell or buildah's exec around it)."""
    res = sh(["pgrep", "-af", f"^sleep {re.escape(marker)}$"], 30)
    return res.stdout.splitlines()


def run_folders(marker: str) -> list[Path]:
    """buildah's run folders (config.json of a RUN step) of this build's RUN step."""
    found = []
    for cfg in Path(os.environ.get("TMPDIR", "/var/tmp")).glob("buildah*/config.json"):
        try:
            if marker in " ".join(json.loads(cfg.read_text())["process"]["args"]):
                found.append(cfg.parent)
        except (OSError, ValueError, KeyError):
            pass
    return found


@pytest.fixture
def podman_base():
    res = sh([REPO / "containers/base-image.sh"], 1800)
    assert res.returncode == 0, res.stderr[-3000:]


def start_build(tmp_path: Path, timeout_s: int = 600, group: bool = False) -> Build:
    """podman-build.sh with a recipe whose RUN sleeps; returns once the step runs."""
    marker = f"{600 + (uuid.uuid4().int % 10**6) / 10**7:.7f}"  # sleep 600.0123456
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {BASE}\nRUN echo started && sleep {marker}\n")
    tag = f"localhost/fabbench-stopped-build:{uuid.uuid4().hex[:8]}"
    before = set(build_containers())
    proc = subprocess.Popen(
        [str(BUILD), "--timeout", str(timeout_s), "--isolation", "chroot", "--network", "host",
         "--layers", "-t", tag, str(ctx)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=clean_env(), start_new_session=group)
    deadline = time.monotonic() + 120
    while not step_processes(marker):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the RUN step did not start in 120 s"
        time.sleep(0.5)
    made = set(build_containers()) - before
    assert made, "the build made no build container"
    return Build(proc, tag, marker, made)


def nothing_left(build: Build) -> None:
    assert not set(build_containers()) & build.containers, build_containers()
    assert step_processes(build.marker) == []
    assert run_folders(build.marker) == []
    assert sh(["podman", "image", "exists", build.tag], 60).returncode == 1  # no image


@pytest.mark.parametrize("how", ["TERM-script", "INT-script", "TERM-group", "deadline"])
def test_a_stopped_build_leaves_no_build_container(podman_base, tmp_path, how):
    build = start_build(tmp_path, timeout_s=25 if how == "deadline" else 600,
                        group=how.endswith("group"))
    try:
        start = time.monotonic()
        sig = signal.SIGINT if how.startswith("INT") else signal.SIGTERM
        if how.endswith("script"):
            build.proc.send_signal(sig)
        elif how.endswith("group"):
            os.killpg(build.proc.pid, sig)
        _, err = build.proc.communicate(timeout=120)
        seconds = time.monotonic() - start
    finally:
        if build.proc.poll() is None:
            build.proc.kill()
            build.proc.communicate()
    print(f"{how}: ended {seconds:.1f}s after the signal; {err.strip().splitlines()[-1]}")
    # its own lines (a line about what an earlier, killed build left may come first)
    mine = [line for line in err.splitlines() if line.startswith("[podman-build]")
            and not line.startswith("[podman-build] removed ")]
    if how == "deadline":
        assert build.proc.returncode == 124, err[-3000:]
        assert mine == ["[podman-build] podman build did not finish in 25s (--timeout): stopped, "
                        "its build containers removed"], err[-3000:]
    else:
        assert build.proc.returncode == 128 + sig, err[-3000:]
        assert len(mine) == 1 and mine[0].startswith(
            f"[podman-build] stopped by {sig.name} after"), err[-3000:]
        assert seconds < 30, seconds
    nothing_left(build)


def test_after_a_killed_build_the_next_build_removes_what_it_left(podman_base, tmp_path):
    (tmp_path / "killed").mkdir()
    build = start_build(tmp_path / "killed")
    build.proc.send_signal(signal.SIGKILL)  # the script only: podman follows (parent-death)
    build.proc.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while sh(["pgrep", "-f", f"FABBENCH_BUILD_ID={build.proc.pid}-"], 30).returncode == 0:
        assert time.monotonic() < deadline, "podman outlived the killed script"
        time.sleep(0.5)
    # what a dead build leaves, for real: its containers and its RUN step's process
    assert build.containers <= set(build_containers())
    assert step_processes(build.marker) != []

    ctx = tmp_path / "next"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {BASE}\nRUN true\n")
    tag = f"localhost/fabbench-next-build:{uuid.uuid4().hex[:8]}"
    try:
        res = sh([BUILD, "--timeout", "600", "--isolation", "chroot", "--network", "host",
                  "--layers", "-t", tag, ctx], 660)
        assert res.returncode == 0, res.stderr[-3000:]
        mine = [line for line in res.stderr.splitlines() if line.startswith("[podman-build]")]
        assert len(mine) == 1, res.stderr[-3000:]
        assert re.match(r"\[podman-build\] removed \d+ build container\(s\) that stopped builds "
                        r"left: ", mine[0]), mine
        assert f"(build {build.proc.pid}-" in mine[0], mine
        nothing_left(build)
    finally:
        sh(["podman", "rmi", "--force", tag], 120)


def test_bad_arguments_of_podman_build_are_one_line_and_exit_2():
    for argv in (["--timeout", "soon", "."], ["--timeout"], []):
        res = sh([BUILD, *argv], 60)
        assert res.returncode == 2, (argv, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr


# ---- the Apptainer of the sid root, pinned ------------------------------------------------------

def test_a_sid_root_with_another_apptainer_stops_with_one_line():
    pinned = re.search(r"^SID_APPTAINER_VERSION=(\S+)$",
                       (REPO / ".ci/apptainer.sh").read_text(), re.M)[1]
    ok = sh([REPO / ".ci/apptainer.sh", "root"], 1800)
    assert ok.returncode == 0, ok.stderr[-3000:]  # the root has the pinned version
    root = Path(ok.stdout.strip().splitlines()[-1])
    assert (root / ".fabbench-done").read_text().strip() == f"apptainer version {pinned}"
    stamp = (root / ".fabbench-done").stat().st_mtime
    for argv in (["root"], ["exec", "--", "true"]):
        moved = sh([REPO / ".ci/apptainer.sh", *argv], 120,
                   env=clean_env(FABBENCH_SID_APPTAINER_VERSION="9.9.9"))
        assert moved.returncode == 1, moved.stderr
        lines = moved.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"[apptainer] ERROR: Debian sid gave apptainer {pinned} "), lines
        assert "the tests were run with 9.9.9 (FABBENCH_SID_APPTAINER_VERSION)" in lines[0]
        assert "update the pin" in lines[0]
    assert (root / ".fabbench-done").stat().st_mtime == stamp  # not rebuilt



# ---- make test's whole-suite timeout ------------------------------------------------------------

SLOW_SUITE = '''
import subprocess
import sys
import pytest

@pytest.fixture(scope="session")
def cold_build():
    subprocess.run(["sleep", "{marker}"], check=True)

def test_quick():
    pass

def test_needs_the_image(cold_build):
    pass
'''


def test_a_suite_stopped_by_make_tests_timeout_says_where_in_one_line(tmp_path):
    """`timeout N pytest` (make test's recipe) on a suite whose fixture hangs, with the
    integration conftest's hooks (tests/integration/suite_stop.py): pytest's own exit line names
    the test, the phase and the fixture, the summary says what ran, exit 124, nothing left."""
    marker = f"{300 + (uuid.uuid4().int % 10**6) / 10**7:.7f}"
    (tmp_path / "test_slow.py").write_text(SLOW_SUITE.format(marker=marker))
    start = time.monotonic()
    res = sh(["timeout", "10", sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
              "-p", "integration.conftest", "-q", "--rootdir", tmp_path, tmp_path / "test_slow.py"],
             120, env=clean_env(PYTHONPATH=str(REPO / "tests")), cwd=tmp_path)
    seconds = time.monotonic() - start
    out = res.stdout + res.stderr
    assert res.returncode == 124, out[-3000:]
    assert seconds < 30, seconds
    stops = [line for line in out.splitlines() if "[tests] stopped by SIGTERM" in line]
    assert len(stops) == 1, out[-3000:]
    assert ("during test_slow.py::test_needs_the_image (setup, setting up fixture cold_build): "
            "`make test` sends it when a phase of the suite runs past its deadline") in stops[0]
    assert "1 passed" in out, out[-3000:]
    assert step_processes(marker) == []
