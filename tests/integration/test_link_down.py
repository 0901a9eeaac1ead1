"""A link that goes down mid-run (issue 36's scenario): on a standing cluster of 2 emulated nodes
at 1 Gbit/s, node 1's link is taken down while an MPI allreduce of 64 MiB runs. The run must
end within 60 s of the fault with rank 0's line as the headline, keep the records written
before the fault and a summary that says why, and leave no process of the run on either node:
Open MPI's abort across nodes can hang for minutes with orted left on the far node, so the
launcher ends the run itself a few seconds after a rank named the fault, and stops whatever
carries the run's marker afterwards."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import fabbench, needs_mpirun, stop
from fabbench.emulate import net

pytestmark = [pytest.mark.integration, pytest.mark.needs_root, needs_mpirun,
              pytest.mark.timeout(300)]


@pytest.fixture
def cluster():
    """A standing 2-node cluster at 1 Gbit/s: (its environment, its nodes' namespaces)."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (.ci/apt-packages.txt)")
    up = fabbench("emulate", "up", "--nodes", "2", "--link", "1gbit", timeout=120)
    found = re.search(r"FABBENCH_EMULATION=(\S+)", up.stdout)
    assert up.returncode == 0 and found, up.stderr
    env = {"FABBENCH_EMULATION": found.group(1)}
    state = json.loads(Path(found.group(1)).read_text())
    try:
        yield env, [n["netns"] for n in state["nodes"]]
    finally:
        down = fabbench("emulate", "down", env=env, timeout=120)
        assert down.returncode == 0, down.stderr
    dead = {pid: objs for pid, objs in net.leftovers().items() if not net.alive(pid)}
    assert not dead, f"emulation objects left behind: {dead}"


def pids_in(netns: str) -> list[str]:
    """The processes in a node's network namespace, as `ps` names them."""
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True,
                         timeout=10, check=False).stdout.split()
    names = []
    for pid in out:
        try:
            names.append(f"{Path(f'/proc/{pid}/comm').read_text().strip()} ({pid})")
        except OSError:
            continue
    return names


def test_a_link_down_mid_run_ends_fast_named_and_leaves_nothing(cluster, tmp_path):
    env, namespaces = cluster
    out = tmp_path / "down.jsonl"
    cmd = [sys.executable, "-m", "fabbench", "run", "--primitive", "mpi", "--ops", "allreduce",
           "--sizes", "1M,64M", "--budget", "5", "--timeout", "5", "--no-ceiling",
           "--out", str(out)]
    run = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    taken: list[float] = []

    def take_down() -> None:  # once the 64 MiB point is being measured
        end = time.monotonic() + 120
        while time.monotonic() < end and run.poll() is None:
            if out.exists() and '"bytes":1048576' in out.read_text():
                time.sleep(2)
                subprocess.run(["ip", "-n", namespaces[1], "link", "set", "fbnet0", "down"],
                               check=True, timeout=10)
                taken.append(time.monotonic())
                return
            time.sleep(0.2)

    thread = threading.Thread(target=take_down)
    thread.start()
    try:
        stdout, stderr = run.communicate(timeout=240)
    finally:
        stop(run)
        thread.join(timeout=10)
    ended = time.monotonic()
    assert taken, f"the run ended before the link went down: {stdout[-2000:]}{stderr[-2000:]}"
    assert run.returncode not in (0, None), stdout[-2000:]
    assert ended - taken[0] < 60, f"ended {ended - taken[0]:.0f} s after the link went down"
    # rank 0 named the fault, and its line comes before the launcher's account
    first = next(line for line in stderr.splitlines() if "timed out" in line)
    assert "rank 0: timed out in allreduce of 67108864 bytes" in first, stderr[-3000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["kind"] == "run" and records[-1]["kind"] == "summary"
    assert any(r["kind"] == "collective" and r["bytes"] == 1048576 for r in records)
    assert records[-1]["ok"] is False and "timed out" in records[-1]["error"]
    for netns in namespaces:
        assert pids_in(netns) == [], f"left running in {netns}: {pids_in(netns)}"
