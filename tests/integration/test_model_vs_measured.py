"""The model against measurement on emulated clusters, with a looser bound than the benchmark's
target (bench/model_vs_measured.py: 15 %) so that a busy CI host stays green: the allreduce at
4 nodes predicted from a 2-node fit within 40 %. (The training what-if's comparison is in the
benchmark only: on a loaded 2-core host the emulated nodes' compute, sharing the cores, swings
more than the network costs.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, needs_mpirun

pytestmark = [
    pytest.mark.integration, needs_mpirun,
    pytest.mark.skipif(os.geteuid() != 0, reason="emulated nodes need root (network "
                       "namespaces, tc)"),
    pytest.mark.skipif(not all(shutil.which(t) for t in ("ip", "tc", "iperf3")),
                       reason="needs iproute2 (ip, tc) and iperf3 (.ci/apt-packages.txt)"),
]


def test_model_predicts_the_emulated_measurement(tmp_path):
    rows_file = tmp_path / "rows.json"
    p = subprocess.run([sys.executable, str(REPO / "bench" / "model_vs_measured.py"), "--quick",
                        "--json", str(rows_file)], capture_output=True, text=True, timeout=900,
                       check=False)
    assert p.returncode in (0, 1), p.stderr[-3000:]  # 1: a benchmark target missed
    rows = json.loads(rows_file.read_text())
    allreduce = [r for r in rows if r["what"] == "allreduce"]
    assert allreduce, p.stdout
    for r in allreduce:
        assert r["nodes"] == 4 and r["bytes"] >= 1 << 20
        assert abs(r["error"]) <= 0.40, p.stdout
