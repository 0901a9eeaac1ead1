"""Acceptance floors on emulated nodes (issue 34), the short form of bench/floors_gate.py: a
baseline (floors half the median) from two healthy pairs runs of 4 nodes at 1 Gbit/s, a
further healthy run verified against it (exit 0, every node passing), and the same cluster with
node 3's link at 100 Mbit/s failing with exit 1, naming node 3 and only node 3 with its margin,
through `fabbench run --floors` and through `fabbench verify`. A rule on the transport class
fails the run whose transport is not the required one, naming both; the reference floors place
the run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import fabbench, needs_mpirun
from fabbench.emulate import net

pytestmark = [pytest.mark.integration, pytest.mark.needs_root, pytest.mark.timeout(900)]

# Node 3's link in the slow cluster. At 250 Mbit/s (a quarter of the wire) its pairs figure was
# 0.29-0.45 of the healthy median, and a healthy node's in that cluster fell to 0.59 of it (this
# stop's make test: 4 ranks on 2 cores, the slow pair's ranks beside the fast pair's): too close
# for a floor between them. At 100 Mbit/s the slow node's share is a tenth of the wire.
SLOW = "100mbit"
PAIRS = ["--primitive", "mpi", "--workload", "pairs", "--sizes", "8,1M", "--no-ceiling",
         "--timeout", "30"]


@pytest.fixture(autouse=True)
def _root_and_no_leftovers():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:  # all in .ci/apt-packages.txt: missing is a failure
            pytest.fail(f"{tool} is not installed (.ci/apt-packages.txt)")
    yield
    dead = {pid: objs for pid, objs in net.leftovers().items() if not net.alive(pid)}
    assert not dead, f"emulation objects left behind: {dead}"


def emulated_run(out: Path, *extra: str, slow: bool = False) -> object:
    shape = ["--slow-node", f"3:{SLOW}"] if slow else []
    return fabbench("emulate", "--nodes", "4", "--link", "1gbit", *shape, "--max-time", "300",
                    "--", "run", *PAIRS, "--out", str(out), *extra, timeout=400)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A floors file made from two healthy runs."""
    d = tmp_path_factory.mktemp("site")
    runs = []
    for i in range(2):
        out = d / f"base-{i}.jsonl"
        p = emulated_run(out)
        assert p.returncode == 0, p.stderr[-3000:]
        runs.append(str(out))
    floors = d / "site.toml"
    # floors half the median, not the default 10 % below: in a CI run (d4f8f8a) beside the
    # cluster's Go build a healthy node's pairs figure came 20 % under the baseline's median,
    # and a healthy node beside the slow one 41 % under it (0.0605 of 0.1023 GB/s); the slow
    # node's tenth of the wire still fails by far (its margin below)
    p = fabbench("baseline", *runs, "--out", str(floors), "--below", "0.5")
    assert p.returncode == 0, p.stderr
    assert "rules from 2 file(s)" in p.stdout
    return floors


def test_a_healthy_run_passes_and_the_slow_node_alone_fails(site, tmp_path):
    text = site.read_text()
    assert "per_node = true" in text and 'workload = "pairs"' in text
    assert text.count("[[baseline.run]]") == 2

    healthy = tmp_path / "healthy.jsonl"
    assert emulated_run(healthy).returncode == 0
    p = fabbench("verify", "--floors", str(site), str(healthy), "--json",
                 str(tmp_path / "healthy.json"))
    assert p.returncode == 0, p.stdout
    verdict = json.loads((tmp_path / "healthy.json").read_text())
    assert verdict["ok"] and sorted(n["node"] for n in verdict["nodes"]) == [
        "node0", "node1", "node2", "node3"]
    assert all(n["status"] == "pass" for n in verdict["nodes"])

    slow = tmp_path / "slow.jsonl"
    gate = emulated_run(slow, "--floors", str(site), slow=True)
    assert gate.returncode == 1, gate.stdout[-3000:] + gate.stderr[-3000:]
    failing = [line for line in gate.stdout.splitlines() if line.startswith("FAIL")]
    assert failing and all(line.startswith("FAIL       node node3:") for line in failing)
    assert "margin -" in failing[0] and "confirmed" in failing[0]
    assert "failed node(s): node3 (exit 1)" in gate.stdout

    p = fabbench("verify", "--floors", str(site), str(slow), "--json",
                 str(tmp_path / "slow.json"))
    assert p.returncode == 1
    nodes = {n["node"]: n for n in json.loads((tmp_path / "slow.json").read_text())["nodes"]}
    assert [n for n, v in nodes.items() if v["status"] == "fail"] == ["node3"]
    # 100 Mbit/s of 1 Gbit/s: a tenth of the wire; node3's pairs figure is not a tenth of the
    # healthy one (its partner's link, the cores the namespaces share), but far under half of it
    assert nodes["node3"]["margin"] < -0.3


def test_a_transport_rule_names_the_required_and_the_found(site, tmp_path):
    run = sorted(site.parent.glob("base-*.jsonl"))[0]
    floors = tmp_path / "ib.toml"
    floors.write_text('format = "fabbench-floors/1"\nname = "ib only"\n[[rule]]\nid = "ib"\n'
                      'source = "site policy: training traffic on InfiniBand"\n'
                      'workload = "pairs"\nrequire_transport = ["ib", "ib-gdr"]\n')
    p = fabbench("verify", "--floors", str(floors), str(run))
    assert p.returncode == 1
    assert "transport ob1/tcp (class tcp); required: ib or ib-gdr" in p.stdout


@needs_mpirun
@pytest.mark.parametrize("at_least,code", [(1000.0, 1), (1e-6, 0)])
def test_inside_a_job_rank_0_judges_and_every_rank_ends_with_the_verdict(tmp_path, at_least,
                                                                          code):
    """`fabbench run --floors` as the ranks of a job (here mpirun's; a Kubernetes pod's check
    before the job is the same): rank 0 judges its results and prints the verdict, rank 1 gets
    the verdict's exit code over the communicator and says where the FAIL lines are."""
    floors = tmp_path / "floors.toml"
    floors.write_text('format = "fabbench-floors/1"\nname = "in the job"\n[[rule]]\n'
                      'id = "allreduce-bw"\nsource = "test"\nworkload = "collectives"\n'
                      'op = "allreduce"\nsize = "1M"\nmetric = "busbw"\n'
                      f'at_least = {at_least}\nunit = "GB/s"\n')
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    out = tmp_path / "r.jsonl"
    p = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", *root,
                        sys.executable, "-m", "fabbench", "run", "--primitive", "mpi", "--fabric",
                        "ethernet", "--iface", "lo", "--ops", "allreduce", "--sizes", "1M",
                        "--budget", "0.05", "--timeout", "30", "--out", str(out), "--floors",
                        str(floors)], capture_output=True, text=True, timeout=120, check=False)
    told = "fabbench: rank 1: rank 0's results missed the floors of"
    assert p.returncode == code, p.stdout[-2000:] + p.stderr[-2000:]
    assert p.stdout.count("# floors ") == 1, p.stdout  # rank 0 alone judges
    if code:
        assert "\nFAIL       rule allreduce-bw: allreduce 1M float32" in p.stdout
        assert "verdict: 1 failed, 0 passed" in p.stdout and told in p.stderr, p.stderr
    else:
        assert "verdict: 0 failed, 1 passed" in p.stdout and told not in p.stderr
