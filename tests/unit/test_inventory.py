"""What `fabbench env` and every run's provenance say about the libraries' versions."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from fabbench.sysinfo.inventory import (
    container_version,
    image_id,
    image_identity,
    image_reference,
    library_versions,
    summary_rows,
    ucx_version,
)

DEBIAN_UCX_1_13 = """# Version 1.13.1
# Git branch '<unknown>', revision 0000000
# Configured with: --build=x86_64-linux-gnu --prefix=/usr --enable-mt --with-verbs
"""
UCX_1_16 = """# Library version: 1.16.0
# Library path: /opt/fabric/lib/libucs.so.0
# API headers version: 1.16.0
# Git branch '', revision 02432d3
"""


@pytest.mark.parametrize("text,version", [(DEBIAN_UCX_1_13, "1.13.1"), (UCX_1_16, "1.16.0"),
                                          ("ucx_info: not found", None), (None, None)])
def test_ucx_version_from_ucx_info(text, version):
    assert ucx_version(text) == version


@pytest.mark.skipif(shutil.which("ucx_info") is None,
                    reason="UCX's ucx_info is not installed (.ci/apt-packages.txt: ucx-utils)")
def test_ucx_version_where_ucx_is_installed():
    versions = library_versions()
    assert re.fullmatch(r"\d+\.\d+(\.\d+)*", versions["ucx"] or ""), versions
    rows = dict(summary_rows({"versions": versions}))
    assert rows["version ucx"] == versions["ucx"]


def test_container_version_of_apptainer_from_the_image_labels(tmp_path):
    (tmp_path / ".singularity.d").mkdir()
    (tmp_path / ".singularity.d/labels.json").write_text(json.dumps(
        {"org.label-schema.usage.apptainer.version": "1.4.5", "other": "x"}))
    found = container_version("apptainer", tmp_path)
    assert found["container_version"] == "1.4.5"
    assert "the apptainer that built the image" in found["container_version_source"]
    assert container_version("apptainer", tmp_path / "nothing") == {}


def test_container_version_of_podman_from_containerenv(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run/.containerenv").write_text('engine="podman-4.3.1"\nname="x"\n')
    assert container_version("podman", tmp_path) == {
        "container_version": "4.3.1", "container_version_source": "/run/.containerenv engine"}
    assert container_version(None, tmp_path) == {}


MANIFEST = {"schema": "fabbench-build/1",
            "image": {"flavor": "cpu", "version": "0.1.0", "vcs_ref": "abc1234",
                      "inputs": "0123456789ab", "created": "2026-11-24T01:00:00+00:00"},
            "components": {"openmpi": {"version": "4.1.4", "source": "debian"}}}
DIGEST = "sha256:" + "9b" * 32


def test_image_id_is_the_manifest_s_hash_and_nothing_else():
    first = image_id(MANIFEST)
    assert re.fullmatch(r"0\.1\.0-cpu-[0-9a-f]{16}", first)
    # the same manifest read anywhere (key order differs) is the same image
    assert image_id(json.loads(json.dumps(MANIFEST, sort_keys=False))) == first
    assert image_id(dict(reversed(list(MANIFEST.items())))) == first
    for key, value in (("inputs", "ba9876543210"), ("vcs_ref", "def5678"),
                       ("created", "2026-11-24T02:00:00+00:00")):
        other = json.loads(json.dumps(MANIFEST))
        other["image"][key] = value
        assert image_id(other) != first, key
    other = json.loads(json.dumps(MANIFEST))
    other["components"]["openmpi"]["version"] = "4.1.5"
    assert image_id(other) != first


def test_image_reference_from_podman_apptainer_or_the_launcher(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run/.containerenv").write_text(
        f'engine="podman-4.3.1"\nimage="127.0.0.1:5000/fabbench@{DIGEST}"\nimageid="x"\n')
    assert image_reference("podman", {}, tmp_path) == {
        "ref": f"127.0.0.1:5000/fabbench@{DIGEST}", "ref_source": "/run/.containerenv image",
        "digest": DIGEST}
    (tmp_path / ".singularity.d").mkdir()
    (tmp_path / ".singularity.d/Singularity").write_text(
        f"bootstrap: docker\nfrom: 127.0.0.1:5000/fabbench@{DIGEST}\n")
    found = image_reference("apptainer", {}, tmp_path)
    assert found["ref"] == f"docker://127.0.0.1:5000/fabbench@{DIGEST}"
    assert found["digest"] == DIGEST and "Singularity" in found["ref_source"]
    # a SIF built from a local archive knows no registry: the launcher's word, by tag (no digest)
    (tmp_path / ".singularity.d/Singularity").write_text(
        "Bootstrap: docker-archive\nFrom: fabbench-cpu.tar\n")
    env = {"FABBENCH_IMAGE_REF": "oras://127.0.0.1:5000/fabbench-sif:0.1.0-cpu"}
    assert image_reference("apptainer", env, tmp_path) == {
        "ref": env["FABBENCH_IMAGE_REF"],
        "ref_source": "FABBENCH_IMAGE_REF (set by whoever started the container)"}
    assert image_reference("charliecloud", {}, tmp_path) == {}


def test_image_identity_in_env_output(tmp_path):
    assert image_identity(None, None, {}, tmp_path) is None
    env = {"FABBENCH_IMAGE_REF": f"127.0.0.1:5000/fabbench@{DIGEST}"}
    image = image_identity(MANIFEST, "charliecloud", env, tmp_path)
    assert image["id"] == image_id(MANIFEST) and image["digest"] == DIGEST
    assert (image["version"], image["flavor"], image["vcs_ref"], image["inputs"]) == (
        "0.1.0", "cpu", "abc1234", "0123456789ab")
    rows = dict(summary_rows({"image": image}))
    assert rows["image"] == f"{image['id']} from 127.0.0.1:5000/fabbench@{DIGEST}"
    assert dict(summary_rows({}))["image"] == "none (not in the fabbench image)"
