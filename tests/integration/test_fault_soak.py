"""bench/fault_soak.py, small (issue 36's stream of runs with faults in some of them): a clean
baseline run, then a faulted run and a clean one after it, on one standing cluster of 2 emulated
nodes; the bench must judge both as expected and find nothing left running at the end. The
figures come from the bench at full size (50 runs, 10 faults; docs/faults.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import needs_mpirun

pytestmark = [pytest.mark.integration, pytest.mark.needs_root, needs_mpirun,
              pytest.mark.timeout(300)]
BENCH = Path(__file__).resolve().parents[2] / "bench" / "fault_soak.py"


def test_a_small_stream_with_a_fault_ends_as_expected_and_leaves_nothing():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    res = subprocess.run([sys.executable, str(BENCH), "--runs", "2", "--faulted", "1",
                          "--baseline", "1", "--faults", "rank-kill", "--seed", "3"],
                         capture_output=True, text=True, timeout=280, check=False)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    assert "rank-kill at +" in out and "leftovers at the end: none" in out, out[-4000:]
    assert out.rstrip().endswith("verdict: as expected"), out[-4000:]


def test_bad_arguments_are_refused_before_any_cluster():
    res = subprocess.run([sys.executable, str(BENCH), "--runs", "2", "--faulted", "3"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2 and "--faulted not in 0..--runs" in res.stderr, res.stderr
