"""`fabbench render slurm --verify FLOORS` on the 4-node emulated Slurm (.ci/slurm/start.sh four:
each node its own namespace, address and hostname, so the pairs workload has a figure per
node): the job runs the benchmark, judges its results against the floors (docs/floors.md) and
exits with verify's code: COMPLETED with floors the run meets; FAILED, exit code 1, with a
floor far above the emulated link's rate, the failing nodes named on FAIL lines of its output."""

from __future__ import annotations

import re

import pytest

from conftest import fabbench
from integration.test_slurm import FABBENCH, slurm_cluster, submit_and_wait

pytestmark = [pytest.mark.integration, pytest.mark.needs_root]

PAIRS = ["--fabric", "ethernet", "--primitive", "gloo", "--workload", "pairs", "--sizes", "64K",
         "--budget", "0.05", "--timeout", "60", "--iface", "fbnet0", "--nodes", "2",
         "--fabbench-command", FABBENCH]


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


@pytest.mark.parametrize("at_least,state,exit_code", [
    (0.0001, "COMPLETED", "0:0"),  # every healthy run meets it
    (1000.0, "FAILED", "1:0"),  # far above the emulated 1 Gbit/s link
])
def test_the_job_exits_with_verifys_code(four_nodes, tmp_path, at_least, state, exit_code):
    path = tmp_path / "floors.toml"
    path.write_text(floors(at_least))
    results = tmp_path / "results"
    p = fabbench("render", "slurm", *PAIRS, "--results-dir", str(results), "--name", "fb-gate",
                 "--verify", str(path), timeout=60)
    assert p.returncode == 0, p.stderr
    job = submit_and_wait(p.stdout, tmp_path, four_nodes)
    assert (job["JobState"], job["ExitCode"]) == (state, exit_code), job["log"]
    assert job["NodeList"] == "node[0-1]"
    assert (results / f"{job['id']}-floors.toml").read_text() == path.read_text()
    failing = set(re.findall(r"^FAIL\s+node (node\d)\b", job["log"], re.MULTILINE))
    assert failing == (set() if state == "COMPLETED" else {"node0", "node1"}), job["log"]
