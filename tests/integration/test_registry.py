"""Publish once, pull anywhere (issue 24): a TLS registry on loopback, the publish script
(.ci/publish.sh) against it, the cpu image and the SIF pulled by digest with Podman, Apptainer
(`docker://...@sha256:` and `oras://`) and Charliecloud (`ch-image pull`), each run, and the same
image id (and the digest) found in every results file; the failures of a pull (registry down,
unknown digest, a certificate that does not verify, a signature that does not match) each give
one line and a non-zero exit and leave nothing half-pulled. A transfer cut off or gone silent and
a blob that no longer matches its digest are in test_setup_faults.py, with an image of their
own: podman holds every layer of the published one (it built them) and would download none.

The image and the SIF are the ones test_image.py and test_apptainer.py build (same cache keys:
.ci/image-build.sh, .ci/apptainer.sh sif); nothing is rebuilt here when they are cached. After
every test: the registry stopped, its port free, no pulled image left (each pull goes to a
temporary folder or is removed from podman's storage).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import ssl
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO
from fabbench.results.reader import read_results
from fabbench.results.records import Provenance
from fabbench.sysinfo.inventory import image_id
from integration.oci_registry import REGISTRY_BIN, answers, free_port, port_is_free, tls_registry
from integration.test_podman_run import podman_run

BUILD_TIMEOUT_S = 5400 + 2400  # a cold image and SIF build (test_image.py, test_apptainer.py)
USER = "fabbench-user"  # .ci/apptainer.sh's unprivileged user

pytestmark = [
    pytest.mark.together,
    pytest.mark.podman,  # one podman store: these modules run one at a time
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.timeout(BUILD_TIMEOUT_S + 1800),
    pytest.mark.skipif(not Path(REGISTRY_BIN).exists(),
                       reason="needs docker-registry (.ci/apt-packages.txt)"),
    *[pytest.mark.skipif(shutil.which(tool) is None, reason=f"needs {tool} ({why})")
      for tool, why in (("openssl", "the registry's certificate, the signing keys"),
                        ("podman", "builds and runs the image"), ("skopeo", "pushes it"),
                        ("runc", "podman runs containers with it here"),
                        ("ch-run", "charliecloud-runtime"), ("debootstrap", "the sid root"))],
]
TINY = ["run", "--fabric", "ethernet", "--sizes", "8,64K", "--ops", "allreduce,broadcast",
        "--budget", "0.05", "--timeout", "60"]
# what must not leak from this process into a container or a pull (ch-run and Apptainer pass the
# environment through)
LEAKS = ("PYTHONPATH", "VIRTUAL_ENV", "OMPI_", "PMIX_", "PMI_", "SLURM_", "HOROVOD_", "RANK",
         "WORLD_SIZE", "LOCAL_RANK", "MASTER_", "FABBENCH_", "APPTAINER", "SINGULARITY")


def clean_env(**extra: str) -> dict[str, str]:
    keep = {"FABBENCH_CACHE"}
    return {**{k: v for k, v in os.environ.items() if k in keep or not k.startswith(LEAKS)},
            "USER": os.environ.get("USER") or "root", **extra}


def sh(argv: list[str], timeout: float, env: dict[str, str] | None = None, **kw
       ) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout, check=False, env=env or clean_env(), **kw)


# the registry and the published image are session fixtures (tests/integration/conftest.py):
# test_two_sites.py pulls the same digest


def test_registry_serves_v2_over_verified_tls_only(registry):
    with urllib.request.urlopen(registry.url(), timeout=10,
                                context=ssl.create_default_context(cafile=str(registry.ca))) as r:
        assert r.status == 200
        assert r.headers["Docker-Distribution-Api-Version"] == "registry/2.0"
    # the machine's trust store does not know the certificate
    assert not answers(registry.url(), ca=None)


def test_registry_stops_and_frees_its_port_after_a_failure(tmp_path):
    with pytest.raises(RuntimeError, match="boom"), tls_registry(tmp_path / "r") as reg:
        assert answers(reg.url(), reg.ca)
        raise RuntimeError("boom")
    assert port_is_free(reg.port)
    assert not answers(reg.url(), reg.ca, timeout=1)
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "r" / "config.yml")],
                          capture_output=True, text=True, timeout=30, check=False)
    assert left.returncode == 1, left.stdout  # no such process


# ---- publish ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Published:
    registry: object
    tag: str            # the local podman image
    oci: str            # HOST/fabbench@sha256:...
    sif: str            # oras://HOST/fabbench-sif@sha256:...
    pushed: list[tuple[str, str, str]]  # (oci|sif, ref, digest) as printed
    version: str
    commit: str         # the commit publish tagged (HEAD when it ran)
    image_id: str       # the id every results file must name
    keys: Path          # key.pem, pub.pem (the signer's), other.pem (someone else's)
    seconds: float


def keypair(folder: Path, name: str) -> None:
    for argv in (["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                  "-out", folder / f"{name}.pem"],
                 ["openssl", "pkey", "-in", folder / f"{name}.pem", "-pubout", "-out",
                  folder / f"{name}-pub.pem"]):
        res = sh(argv, 60)
        assert res.returncode == 0, res.stderr


def manifest_digest(ref: str, cert_dir: Path) -> str:
    raw = sh(["skopeo", "inspect", "--raw", "--cert-dir", cert_dir, f"docker://{ref}"], 120)
    assert raw.returncode == 0, raw.stderr
    return "sha256:" + hashlib.sha256(raw.stdout.encode()).hexdigest()


def test_publish_pushes_immutable_tags_and_prints_every_digest(published):
    reg = published.registry
    version, commit = published.version, published.commit
    assert version == re.search(r'^version = "(.+)"', (REPO / "pyproject.toml").read_text(),
                                re.M)[1]
    assert sh(["git", "-C", REPO, "cat-file", "-e", f"{commit}^{{commit}}"], 30).returncode == 0
    oci_digest = published.oci.split("@")[1]
    expected = {("oci", f"{reg.host}/fabbench:{version}-cpu"),
                ("oci", f"{reg.host}/fabbench:cpu-{commit}"),
                ("sif", f"oras://{reg.host}/fabbench-sif:{version}-cpu"),
                ("sif", f"oras://{reg.host}/fabbench-sif:cpu-{commit}")}
    assert {(kind, ref) for kind, ref, _ in published.pushed} == expected
    for kind, ref, digest in published.pushed:
        # what the registry serves under that tag is what was printed
        assert manifest_digest(ref.removeprefix("oras://"), reg.cert_dir) == digest, ref
        if kind == "oci":
            assert digest == oci_digest
    assert published.sif.split("@")[1] in {d for k, _, d in published.pushed if k == "sif"}
    # no moving tag without --release
    moving = sh(["skopeo", "inspect", "--raw", "--cert-dir", reg.cert_dir,
                 f"docker://{reg.host}/fabbench:cpu"], 120)
    assert moving.returncode != 0 and "manifest unknown" in moving.stderr.lower()


def test_publish_never_overwrites_an_immutable_tag(published):
    """A tag that already names another image is refused (one line, exit 1), nothing pushed."""
    reg = published.registry
    other = f"{reg.host}/elsewhere/fabbench:{published.version}-cpu"
    base = sh(["skopeo", "copy", "-q", "--dest-cert-dir", reg.cert_dir,
               "containers-storage:localhost/debian:bookworm", f"docker://{other}"], 600)
    assert base.returncode == 0, base.stderr
    res = sh([REPO / ".ci/publish.sh", "--registry", f"{reg.host}/elsewhere", "--cert-dir",
              reg.cert_dir, "--no-sif"], 900)
    assert res.returncode == 1, res.stderr[-3000:]
    errors = [line for line in res.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "immutable tags are never overwritten" in errors[0], errors
    assert res.stdout.strip() == ""
    assert manifest_digest(other, reg.cert_dir) != published.oci.split("@")[1]


def test_publish_bad_arguments_are_one_line_and_exit_2(tmp_path):
    for argv, word in ((["--flavor", "gpu", "--registry", "r:1"], "cpu or cuda"),
                       ([], "--registry"), (["--registry", "r:1", "--cert-dir", tmp_path],
                                            "ca.crt"), (["--nope"], "unknown argument")):
        res = sh([REPO / ".ci/publish.sh", *argv], 60)
        assert res.returncode == 2 and word in res.stderr, (argv, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr


# ---- pull and run -----------------------------------------------------------------------------

@pytest.fixture
def user_dir() -> Iterator[Path]:
    """A folder in the Apptainer user's home, owned by the user; removed afterwards (the user and
    the sid root exist: publish made the SIF with them)."""
    home = Path(os.path.expanduser(f"~{USER}"))
    work = home / f"fabbench-registry-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    shutil.chown(work, USER, USER)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def pull(runtime: str, ref: str, out: Path | None, *extra) -> subprocess.CompletedProcess:
    return sh([REPO / ".ci/pull.sh", runtime, ref, *([out] if out else []), *extra], 1800)


def apptainer(args: list, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return sh([REPO / ".ci/apptainer.sh", "exec", "--cwd", cwd, "--", "apptainer", *args], 900,
              env=env)


def only_results(folder: Path, output: str) -> Provenance:
    files = list(folder.rglob("*.jsonl"))
    assert len(files) == 1, (files, output[-3000:])
    results = read_results(files[0])  # validated against the schema
    run, summary = results.records[0], results.records[-1]
    assert run.fabric == "ethernet" and run.ranks == 2, run
    assert summary.kind == "summary" and summary.ok is True, summary
    return run.provenance


RUNTIMES = ["podman", "apptainer-docker", "apptainer-oras", "charliecloud"]


@pytest.mark.parametrize("how", RUNTIMES)
def test_pull_by_digest_and_run(published, how, user_dir, tmp_path):
    """Pull by digest, run `run --fabric ethernet` (2 local ranks), and find the published image's
    id and digest in the results file's provenance."""
    reg = published.registry
    oci_digest = published.oci.split("@")[1]
    if how == "podman":
        got = pull("podman", published.oci, None, "--cert-dir", reg.cert_dir)
        try:
            assert got.returncode == 0, got.stderr
            pulled_id = sh(["podman", "image", "inspect", "--format", "{{.Id}}", published.oci],
                           60)
            local_id = sh(["podman", "image", "inspect", "--format", "{{.Id}}", published.tag], 60)
            # the registry gave back the image that was pushed (same config): the cached build
            assert pulled_id.stdout.strip() == local_id.stdout.strip() != ""
            work = tmp_path / "w"
            res, _ = podman_run(published.oci, work, TINY, {"FABBENCH_IMAGE_REF": published.oci})
        finally:
            # the name the pull gave the image, removed (it held every earlier build's image in
            # the store after its tag was gone); the build's own tags keep the image
            sh(["podman", "rmi", published.oci], 120)
        assert sh(["podman", "image", "exists", published.tag], 60).returncode == 0
        assert published.oci.split("@")[0] not in sh(
            ["podman", "images", "--format", "{{.Repository}}"], 60).stdout
        assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
        prov, digest = only_results(work, res.stdout), oci_digest
    elif how.startswith("apptainer"):
        if how == "apptainer-docker":
            ref, out, digest = f"docker://{published.oci}", user_dir / "fabbench", oci_digest
            got = pull("apptainer", ref, out, "--cert-dir", reg.cert_dir)
            env, run = clean_env(), [out]
        else:
            ref, out = published.sif, user_dir / "fabbench.sif"
            digest = ref.split("@")[1]
            got = pull("apptainer", ref, out, "--cert-dir", reg.cert_dir,
                       "--verify-key", published.keys / "key-pub.pem")
            # a SIF knows no registry: the launcher says where it came from
            env, run = clean_env(FABBENCH_IMAGE_REF=ref), ["--unsquash", out]
        assert got.returncode == 0, got.stderr[-3000:]
        assert got.stdout.strip() == str(out) and out.exists()
        work = user_dir / "w"
        work.mkdir()
        shutil.chown(work, USER, USER)
        res = apptainer(["run", *run, *TINY], work, env=env)
        assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
        prov = only_results(work, res.stdout)
        assert prov.container == "apptainer"
    else:
        out = tmp_path / "fabbench"
        try:
            got = pull("charliecloud", published.oci, out, "--cert-dir", reg.cert_dir)
            assert got.returncode == 0, got.stderr[-3000:]
            assert not list(tmp_path.glob(".partial-*"))  # ch-image's storage is gone
            work = tmp_path / "w"
            work.mkdir()
            res = sh(["ch-run", "--set-env", "-b", f"{work}:/mnt/0", "-c", "/mnt/0", out, "--",
                      "fabbench", *TINY], 600, env=clean_env(FABBENCH_IMAGE_REF=published.oci))
        finally:
            shutil.rmtree(out, ignore_errors=True)  # the pulled image (1.4 GB)
        assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
        prov, digest = only_results(work, res.stdout), oci_digest
        assert prov.container == "charliecloud"
    image = prov.image
    assert image is not None
    assert image.id == published.image_id, image
    assert image.id == image_id(prov.build)  # computed inside, from the image's manifest
    assert image.digest == digest, image
    assert image.ref is not None and image.ref.endswith(f"@{digest}")
    if how == "apptainer-docker":  # Apptainer itself knew where it pulled from
        assert image.ref_source is not None
        assert image.ref_source.startswith("/.singularity.d/Singularity"), image


# ---- failures of a pull -----------------------------------------------------------------------

FAILURES = ["registry-down", "unknown-digest", "untrusted-certificate", "wrong-signature"]
PULLS = ["podman", "apptainer-docker", "apptainer-oras", "charliecloud"]


@pytest.mark.parametrize("how", PULLS)
@pytest.mark.parametrize("case", FAILURES)
def test_a_failed_pull_is_one_line_and_leaves_nothing(published, how, case, user_dir):
    reg = published.registry
    if case == "wrong-signature" and how != "apptainer-oras":
        pytest.skip("only a SIF carries a signature")
    ref = published.sif if how == "apptainer-oras" else published.oci
    if how == "apptainer-docker":
        ref = f"docker://{ref}"
    certs = ["--cert-dir", reg.cert_dir]
    if case == "registry-down":
        ref = ref.replace(reg.host, f"127.0.0.1:{free_port()}")
        expected = "the registry does not answer"
    elif case == "unknown-digest":
        ref = ref.split("@")[0] + "@sha256:" + "0" * 64
        expected = "the registry has no such image"
    elif case == "untrusted-certificate":
        certs = []  # the machine's trust store does not know the registry's certificate
        expected = "the registry's certificate does not verify"
    else:
        certs += ["--verify-key", published.keys / "other-pub.pem"]
        expected = "the signature does not match"
    runtime = how.split("-")[0]
    out = None if runtime == "podman" else user_dir / "pulled"
    listing = ["podman", "images", "--digests", "--no-trunc", "--format",
               "{{.ID}} {{.Repository}}:{{.Tag}} {{.Digest}}"]
    before = sh(listing, 60).stdout
    res = pull(runtime, ref, out, *certs)
    assert res.returncode == 1, res.stderr[-3000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"[pull] ERROR: {expected} ("), lines
    assert res.stdout == ""
    assert list(user_dir.iterdir()) == []  # no image, no partial one
    # podman: no image, name or digest more than before (`podman image exists REF@DIGEST` says
    # yes for any local image with that digest, whichever registry the name says)
    assert sh(listing, 60).stdout == before
