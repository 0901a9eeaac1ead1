"""`fabbench render slurm --verify FLOORS` on the 4-node emulated Slurm (.ci/slurm/start.sh four:
each node its own namespace, address and hostname, so the pairs workload has a figure per
node): the job runs the benchmark, judges its results against the floors (docs/floors.md) and
exits with verify's code. On the healthy cluster (every link 1 Gbit/s) a floor of 0.03 GB/s per
node gives COMPLETED: a Gloo pair at that rate moved 0.057 GB/s each way at 1 MiB, one pair at a
time; a floor far above the link's rate, FAILED with exit code 1 and every node on a FAIL line.
On a second cluster whose node 3 has a 250 Mbit/s link (its pairs moved 0.0153 GB/s) the same
floor fails the job, and node 3 alone is named, with its margin (−49 %).

The rendered run asks for `--pair-schedule serial`: under Slurm fabbench does not know that the
nodes are namespaces sharing this host's 2 cores, and two pairs at once would measure the CPUs
(docs/methods.md, "Which node is slow")."""

from __future__ import annotations

import re

import pytest

from conftest import fabbench
from integration.test_slurm import FABBENCH, slurm_cluster, submit_and_wait

pytestmark = [pytest.mark.integration, pytest.mark.needs_root]

PAIRS = ["--fabric", "ethernet", "--primitive", "gloo", "--workload", "pairs", "--sizes", "8,1M",
         "--budget", "0.3", "--pair-schedule", "serial", "--timeout", "60", "--iface", "fbnet0",
         "--nodes", "4", "--fabbench-command", FABBENCH]
HEALTHY_FLOOR = 0.03  # GB/s per node: between a 1 Gbit/s pair's 0.057 and 250 Mbit/s' 0.0153
# the slow cluster beside the healthy one: its own directory, ports and emulated nodes
SLOW = {"FABBENCH_SLURM_DIR": "/tmp/fabbench-slurm-four-slow", "FABBENCH_SLURM_PORT": "16867",
        "FABBENCH_SLURM_SLOW_NODE": "3:250mbit"}


def floors(at_least: float) -> str:
    return f"""\
format = "fabbench-floors/1"
name = "test"

[[rule]]
id = "pairs-node-bw"
source = "test: each node's pairs bandwidth at least {at_least} GB/s"
workload = "pairs"
per_node = true
metric = "bw"
at_least = {at_least}
unit = "GB/s"
"""


@pytest.fixture(scope="module")
def four_nodes():
    yield from slurm_cluster("four", FABBENCH=FABBENCH)


def run_job(cluster: dict[str, str], tmp_path, at_least: float) -> dict[str, str]:
    path = tmp_path / "floors.toml"
    path.write_text(floors(at_least))
    results = tmp_path / "results"
    p = fabbench("render", "slurm", *PAIRS, "--results-dir", str(results), "--name", "fb-gate",
                 "--verify", str(path), timeout=60)
    assert p.returncode == 0, p.stderr
    job = submit_and_wait(p.stdout, tmp_path, cluster)
    assert job["NodeList"] == "node[0-3]"
    assert (results / f"{job['id']}-floors.toml").read_text() == path.read_text()
    assert (results / f"{job['id']}-pairs.jsonl").exists()  # named after what it holds
    return job


def failing(job: dict[str, str]) -> set[str]:
    return set(re.findall(r"^FAIL\s+node (node\d)\b", job["log"], re.MULTILINE))


@pytest.mark.parametrize("at_least,state,exit_code", [
    (HEALTHY_FLOOR, "COMPLETED", "0:0"),  # every healthy node meets it
    (1000.0, "FAILED", "1:0"),  # far above the emulated 1 Gbit/s link
])
def test_the_job_exits_with_verifys_code(four_nodes, tmp_path, at_least, state, exit_code):
    job = run_job(four_nodes, tmp_path, at_least)
    assert (job["JobState"], job["ExitCode"]) == (state, exit_code), job["log"]
    assert failing(job) == (set() if state == "COMPLETED" else
                            {"node0", "node1", "node2", "node3"}), job["log"]


@pytest.fixture
def slow_node3():
    yield from slurm_cluster("four", FABBENCH=FABBENCH, **SLOW)


def test_the_slow_node_fails_the_job_and_is_named_alone(slow_node3, tmp_path):
    job = run_job(slow_node3, tmp_path, HEALTHY_FLOOR)
    assert (job["JobState"], job["ExitCode"]) == ("FAILED", "1:0"), job["log"]
    assert failing(job) == {"node3"}, job["log"]
    (line,) = [ln for ln in job["log"].splitlines() if ln.startswith("FAIL")]
    assert re.search(r"-\d+(\.\d+)? ?%", line), line  # its margin below the floor
