"""The chart's health check on a cluster with one slow node (issue 43): three emulated nodes at
1 Gbit/s, node 2's link at 250 Mbit/s (.ci/k8s/start.sh --slow-node 2:250mbit); the CronJob
triggered once labels fbk-2 alone fail, the others pass, and the check's Job fails."""

from __future__ import annotations

import pytest

from integration.k8s_cluster import K8S_TIMEOUT_S, k8s_cluster, skip_reason
from integration.test_k8s_chart import health_check, uninstall_leaves_nothing, why

pytestmark = [pytest.mark.integration, pytest.mark.needs_root,
              pytest.mark.timeout(K8S_TIMEOUT_S),
              pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")]


@pytest.fixture(scope="module")
def cluster():
    with k8s_cluster(3, link="1gbit", slow_nodes=("2:250mbit",)) as c:
        yield c


def test_the_slow_node_alone_is_labelled_fail_and_the_check_fails(cluster, tmp_path):
    with cluster.namespace("health") as ns:
        end, labels = health_check(cluster, ns, tmp_path)
        assert end[0] == "Failed", f"{end} | {why(cluster, ns, 'job-name=check-now')}"
        verdicts = {n: v for n, (v, _) in labels.items()}
        assert verdicts == {"fbk-0": "pass", "fbk-1": "pass", "fbk-2": "fail"}, labels
        uninstall_leaves_nothing(cluster, ns)
