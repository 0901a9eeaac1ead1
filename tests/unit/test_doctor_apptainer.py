"""doctor inside Apptainer: two ranks of the container over shared memory, the transport that
ran, or the fix (Apptainer without setuid: a user namespace per `apptainer exec`)."""

from __future__ import annotations

from fabbench import doctor as d


def test_shared_memory_that_works_names_its_transport(monkeypatch):
    seen = []

    def smoke(o, primitive):
        seen.append((o.fabric, o.wire, primitive))
        return d.Check("smoke test", d.PASS, "2 ranks, allreduce 8 B and 64 KiB over ob1/vader "
                       "(the profile accepts ob1/vader)")

    monkeypatch.setattr(d, "smoke_test", smoke)
    check = d.check_shared_memory_in_apptainer(d.DoctorOptions(fabric="ethernet", wire="tcp"))
    assert seen == [("shm", "native", "mpi")]
    assert check.verdict == d.PASS and "2 ranks of this container" in check.detail
    assert "ob1/vader" in check.detail


def test_shared_memory_that_fails_names_the_fix(monkeypatch):
    monkeypatch.setattr(d, "smoke_test", lambda o, p: d.Check(
        "smoke test", d.FAIL, "2-rank allreduce failed: vader could not attach", None))
    check = d.check_shared_memory_in_apptainer(d.DoctorOptions())
    assert check.verdict == d.FAIL and "vader could not attach" in check.detail
    assert "--sharens" in check.fix and "one container" in check.fix
