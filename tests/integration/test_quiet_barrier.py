"""A rank that waits long for the others keeps no core busy (Communicator.quiet_barrier).

Open MPI's Barrier polls while it waits (yielding when oversubscribed, but polling), and on an
emulated cluster, whose nodes share this host's CPUs, the waiting ranks of `--pair-schedule
serial` and of the ceiling measurement would take CPU from the ranks being measured. Two ranks:
rank 0 arrives one second late; rank 1's CPU time in the wait is compared for both barriers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import needs_mpirun

pytestmark = [pytest.mark.integration, needs_mpirun]

LATE_S = 1.0

SCRIPT = f"""
import json, pathlib, sys, time
from fabbench.comm.mpi import MpiComm
comm = MpiComm(device="cpu")
if comm.rank == 0:
    time.sleep({LATE_S})
cpu, wall = time.process_time(), time.monotonic()
getattr(comm, sys.argv[1])()
done = {{"cpu_s": time.process_time() - cpu, "wall_s": time.monotonic() - wall}}
# a file per rank: mpirun interleaves the ranks' stdout
pathlib.Path(sys.argv[2], f"rank{{comm.rank}}.json").write_text(json.dumps(done))
comm.close()
"""


def waiting_rank(kind: str, tmp_path) -> dict:
    script = tmp_path / "wait.py"
    script.write_text(SCRIPT)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    p = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", *root,
                        "--mca", "btl", "self,tcp", "--mca", "pml", "ob1",
                        "--mca", "btl_tcp_if_include", "lo", sys.executable, str(script), kind,
                        str(tmp_path)], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    waiter = json.loads((tmp_path / "rank1.json").read_text())
    assert waiter["wall_s"] > 0.8 * LATE_S  # it did wait for rank 0
    return waiter


def test_quiet_barrier_waits_without_a_busy_core(tmp_path):
    quiet = waiting_rank("quiet_barrier", tmp_path)
    assert quiet["cpu_s"] < 0.2 * LATE_S, quiet


def test_mpi_barrier_polls_which_is_why_quiet_barrier_exists(tmp_path):
    # the contrast that shows the test above can tell: Open MPI's Barrier spends CPU waiting
    polled = waiting_rank("barrier", tmp_path)
    assert polled["cpu_s"] > 0.3 * LATE_S, polled
