"""The chart's health check on a cluster with one slow node (issues 43 and 46): the session's
four emulated nodes at 1 Gbit/s (conftest.k8s), node 2's link at 100 Mbit/s in this module. Its
CronJob, triggered once with healthCheck.taint, labels fbk-2 alone fail, sets its FabricHealthy
condition False (reason PairsNodeBw, the FAIL line as message) and taints it, the others True
and untainted, and the check's Job fails; a later check that fbk-2 passes removes the taint.

Four nodes, not three: a node's figure is the median of its pairs, and with three nodes each
healthy node has one healthy and one slow pair, whose median is their mean (about the floor);
with four, two healthy pairs of three carry the median."""

from __future__ import annotations

import pytest

from integration.k8s_cluster import K8S_TIMEOUT_S, K8sCluster, skip_reason
from integration.test_k8s_chart import (
    HEALTH_FLOOR_GBYTE_S,
    health_check,
    preflight_job,
    uninstall_leaves_nothing,
    why,
)

pytestmark = [pytest.mark.integration, pytest.mark.needs_root,
              pytest.mark.timeout(K8S_TIMEOUT_S),
              pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")]

SLOW, SLOW_BIT_S = "fbk-2", 100_000_000
SLOW_GBYTE_S = SLOW_BIT_S / 8 / 1e9  # what node 2's link can carry at most


@pytest.fixture(scope="module")
def cluster(k8s: K8sCluster) -> K8sCluster:
    k8s.set_link(2, SLOW_BIT_S)
    return k8s


def test_the_slow_node_alone_is_labelled_fail_tainted_and_the_check_fails(cluster, tmp_path):
    assert SLOW_GBYTE_S < HEALTH_FLOOR_GBYTE_S  # the slow node cannot pass, whatever the noise
    with cluster.namespace("health", level="privileged") as ns:
        end, health = health_check(cluster, ns, tmp_path, taint=True)
        assert end[0] == "Failed", f"{end} | {why(cluster, ns, 'job-name=check-now')}"
        verdicts = {n: h.verdict for n, h in health.items()}
        assert verdicts == {n: "fail" if n == SLOW else "pass" for n in cluster.nodes}, health
        figure = float((health[SLOW].figure or "nan").removesuffix("GBps"))
        assert figure <= SLOW_GBYTE_S * 1.05, health  # the link's own limit, measured
        bad = health[SLOW].condition
        assert (bad["status"], bad["reason"]) == ("False", "PairsNodeBw"), bad
        assert bad["message"].startswith(f"FAIL       node {SLOW}: sendrecv 8M: pairs bw"), bad
        assert {n for n, h in health.items() if h.tainted} == {SLOW}
        assert all(h.condition["status"] == "True" for n, h in health.items() if n != SLOW)
        yaml_excerpt = cluster.kubectl("get", "node", SLOW, "-o", "yaml").stdout
        print("\n".join(ln for ln in yaml_excerpt.splitlines()
                        if "FabricHealthy" in ln or "fabbench.dev" in ln or "PairsNodeBw" in ln
                        or "NoSchedule" in ln))
        uninstall_leaves_nothing(cluster, ns)
    # a later check the slow node passes (a floor under its link) takes the taint away; 1 MiB
    # pairs suffice for that (what it shows is the taint's removal, not the figure)
    with cluster.namespace("health-again", level="privileged") as ns:
        end, health = health_check(cluster, ns, tmp_path, floor=SLOW_GBYTE_S / 4, taint=True,
                                   sizes="1M")
        assert end[0] == "Complete", f"{end} | {why(cluster, ns, 'job-name=check-now')}"
        assert not any(h.tainted for h in health.values()), health
        good = health[SLOW].condition
        assert (good["status"], good["reason"]) == ("True", "AllRulesPassed"), good
        uninstall_leaves_nothing(cluster, ns)


def test_a_training_job_whose_check_meets_the_slow_node_never_starts(cluster, tmp_path):
    """The chart's check before the job (preflight) on all four nodes: the allreduce's ring runs
    through fbk-2's link, below the floor; rank 0 judges, every pod's init container ends 1,
    so no pod starts the job's own container, and the Job fails; rank 0's pod's termination
    message is the FAIL line. Runs after the health check's tests, which left fbk-2
    untainted."""
    with cluster.namespace("preflight", level="restricted") as ns:
        run = preflight_job(cluster, ns, tmp_path, len(cluster.nodes))
        assert run.end[0] == "Failed", run.end
        assert sorted(run.checks) == list(range(len(cluster.nodes))), run.checks
        assert all(c.get("exitCode") == 1 for c in run.checks.values()), run.checks
        assert not any(run.started.values()), run.started
        assert run.checks[0]["message"].startswith(
            "FAIL       rule allreduce-bw: allreduce 16M float32: collectives busbw"), run.checks
        assert all("missed the floors" in c["message"] for i, c in run.checks.items() if i)
        uninstall_leaves_nothing(cluster, ns)
