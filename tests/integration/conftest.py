"""Session fixtures of the integration tests that more than one module uses: the TLS registry on
loopback and the image published to it (.ci/publish.sh), so that test_registry.py (pull with
each runtime) and test_two_sites.py (two sites pull the same digest) publish once a session."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator

import pytest

from conftest import REPO
from fabbench.sysinfo.inventory import image_id
from integration.k8s_cluster import K8sCluster, k8s_cluster
from integration.module_times import (  # noqa: F401  (hooks: the time per module at the end)
    pytest_runtest_logreport,
    pytest_sessionstart,
    pytest_terminal_summary,
)
from integration.oci_registry import port_is_free, tls_registry
from integration.suite_stop import (  # noqa: F401  (hooks: one line when make test's timeout stops the suite)
    pytest_collection_finish,
    pytest_fixture_setup,
    pytest_runtest_call,
    pytest_runtest_protocol,
    pytest_runtest_setup,
    pytest_runtest_teardown,
)
from integration.test_apptainer import image_manifest
from integration.test_registry import BUILD_TIMEOUT_S, Published, clean_env, keypair, sh

# The modules that use the Kubernetes cluster run last, in this order: make test builds the
# cluster's binaries in the background while the rest of the suite runs (Makefile), and the
# cluster's start waits for that build. test_k8s_cluster.py's first test starts and interrupts a
# cluster of its own before the session's starts; its test of stop.sh ends the session's, last.
K8S_MODULES = ("test_k8s_cluster.py", "test_k8s_chart.py", "test_k8s_slow_node.py")
K8S_LAST = "test_k8s_cluster.py::test_stop_leaves_nothing_of_the_cluster"


def pytest_collection_modifyitems(items):
    def last(item):
        name = item.path.name
        if item.nodeid.endswith(K8S_LAST):
            return len(K8S_MODULES) + 1
        return K8S_MODULES.index(name) + 1 if name in K8S_MODULES else 0
    items.sort(key=last)  # stable: every other test keeps its place


@pytest.fixture(scope="session")
def k8s() -> Iterator[K8sCluster]:
    """One Kubernetes cluster for the session's three cluster modules, started when the first
    asks (its start and stop, and the image's pull on every node, are a minute or more each):
    four emulated nodes at 1 Gbit/s, the image pulled on each. A module sets the link of node 2
    (fbk-2) to what it needs (K8sCluster.set_link): the cluster's and the slow node's modules
    100 Mbit/s, the chart's 1 Gbit/s like the others."""
    with k8s_cluster(4, link="1gbit") as cluster:
        print(f"k8s: start.sh took {cluster.start_s:.0f} s; the image pulled on every node in "
              f"{cluster.pull_everywhere():.0f} s")
        yield cluster


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """One TLS registry for the session (certificate made here, port free afterwards)."""
    folder = tmp_path_factory.mktemp("registry")
    try:
        with tls_registry(folder) as reg:
            yield reg
        assert port_is_free(reg.port)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # its storage holds every pushed blob




@pytest.fixture(scope="session")
def published(registry, tmp_path_factory) -> Published:
    keys = tmp_path_factory.mktemp("keys")
    keypair(keys, "key")
    keypair(keys, "other")
    start = time.monotonic()
    res = sh([REPO / ".ci/publish.sh", "--registry", registry.host, "--cert-dir",
              registry.cert_dir, "--sign-key", keys / "key.pem"], BUILD_TIMEOUT_S + 1200,
             env=clean_env(FLAVOR="cpu"))
    seconds = time.monotonic() - start
    assert res.returncode == 0, res.stderr[-6000:]
    lines = res.stdout.strip().splitlines()
    pushed = [tuple(line.split()[1:]) for line in lines if line.startswith("pushed ")]
    oci = next(line.split()[1] for line in lines if line.startswith("oci "))
    sif = next(line.split()[1] for line in lines if line.startswith("sif "))
    tag = re.search(r"\[publish\] image (\S+)", res.stderr).group(1)
    version, commit = re.search(r"\[publish\] version (\S+) commit (\S+)", res.stderr).groups()
    print(f"publish: {seconds:.0f}s; {oci}; {sif}")
    return Published(registry, tag, oci, sif, pushed, version, commit,
                     image_id(image_manifest(tag)), keys, seconds)


