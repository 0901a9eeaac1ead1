"""fabbench doctor's smoke test: two real ranks, and the fabric's transport really selected."""

from __future__ import annotations

import pytest

from conftest import cli, needs_mpirun
from fabbench import doctor as d

pytestmark = [pytest.mark.together, pytest.mark.integration, needs_mpirun]


def test_doctor_smoke_test_selects_the_requested_transport(capsys):
    code, out, _ = cli(capsys, "doctor", "--fabric", "shm")
    assert "pass  smoke test      2 ranks, allreduce 8 B and 64 KiB over ob1/vader" in out
    assert code == 0


def test_doctor_smoke_test_over_the_ucx_stack():
    report = d.doctor(d.DoctorOptions(fabric="infiniband", wire="tcp"))
    smoke = report.checks[-1]
    assert smoke.name == "smoke test" and smoke.verdict == "pass", smoke
    assert "ucx/tcp" in smoke.detail
