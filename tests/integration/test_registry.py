"""Publish once, pull anywhere (issue 24): a TLS registry on loopback, the publish script
(.ci/publish.sh) against it, the cpu image and the SIF pulled by digest with Podman, Apptainer
(`docker://...@sha256:` and `oras://`) and Charliecloud (`ch-image pull`), each run, and the same
image id (and the digest) found in every results file; the failures of a pull (registry down,
unknown digest, a certificate that does not verify, a signature that does not match) each give
one line and a non-zero exit and leave nothing half-pulled.

The image and the SIF are the ones test_image.py and test_apptainer.py build (same cache keys:
.ci/image-build.sh, .ci/apptainer.sh sif); nothing is rebuilt here when they are cached. After
every test: the registry stopped, its port free, no pulled image left (each pull goes to a
temporary folder or is removed from podman's storage).
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import urllib.request
from pathlib import Path

import pytest

from integration.oci_registry import REGISTRY_BIN, answers, port_is_free, tls_registry

pytestmark = [
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.skipif(not Path(REGISTRY_BIN).exists(),
                       reason="needs docker-registry (.ci/apt-packages.txt)"),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl"),
]


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """One TLS registry for the session (certificate made here, port free afterwards)."""
    with tls_registry(tmp_path_factory.mktemp("registry")) as reg:
        yield reg
    assert port_is_free(reg.port)


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
