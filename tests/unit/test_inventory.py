"""What `fabbench env` and every run's provenance say about the libraries' versions."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from fabbench.sysinfo.inventory import (
    container_version,
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
