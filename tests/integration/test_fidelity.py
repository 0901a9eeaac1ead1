"""The guard rail of fidelity: fabbench and the bare loop of its library, in the same test,
alternating, on real ranks. The band here is loose (0.75-1.33) and a size out of it is compared
again, so that it does not fail on the noise of a loaded machine and always fails on an artefact
of 2x, which is there every time; the tight band (+-3 %) is bench/fidelity.py's, on a quiet
machine. Also: a launcher stopped by SIGTERM stops its ranks."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import psutil
import pytest

from conftest import fabbench, needs_mpirun
from fabbench.fidelity import check
from fabbench.procs import stop_groups
from fabbench.results.reader import read_results

pytestmark = [pytest.mark.integration, needs_mpirun, pytest.mark.timeout(600)]

LOOSE = (0.75, 1.33)
SIZES = {"mpi-tcp": [1 << 20, 4 << 20], "mpi-shm": [1 << 20, 4 << 20],
         # Gloo's time at 1-4 MiB moves by up to 2x from one run to the next on a 2-core VM,
         # the bare loop's and fabbench's alike (0.52-3.07 in bench/fidelity.py runs); at
         # 16 MiB both held within 4 % in every run
         "gloo-tcp": [16 << 20]}


def outside(points: list[check.FidelityPoint]) -> dict[int, str]:
    """The sizes whose ratio left the loose band, and which way."""
    return {p.bytes: "fabbench slower" if p.ratio < LOOSE[0] else "fabbench faster"
            for p in points if not LOOSE[0] <= p.ratio <= LOOSE[1]}


@pytest.mark.parametrize("label", ["mpi-tcp", "mpi-shm", "gloo-tcp"])
def test_fabbench_is_within_a_loose_band_of_the_bare_loop(label):
    """An artefact is in every comparison; noise on a shared 2-core host is not. A size out of
    the band is compared again, independently; it fails when it is out the same way twice."""
    path = check.PATHS[label]
    tries = []
    for _ in range(2):
        points = check.compare(path, "allreduce", SIZES[label], rounds=3,
                               references=path.references[:1])
        assert sorted(p.bytes for p in points) == SIZES[label]
        tries.append(points)
        if not outside(points):
            return
    first, second = (outside(t) for t in tries)
    persistent = {size: way for size, way in second.items() if first.get(size) == way}
    said = "; ".join(f"{p.bytes} B: fabbench {p.fabbench_us:.1f} us, {p.reference} loop "
                     f"{p.ref_us:.1f} us (ratio {p.ratio:.3f})" for t in tries for p in t)
    assert not persistent, f"{label}: a host-side artefact at {sorted(persistent)} B ({said})"


def test_doctor_fidelity_compares_on_this_host_and_says_so():
    """As above: a size out of the loose band the same way in every try is an artefact; out one
    way, then in or out the other way, is noise (CI saw 1M at 0.63, then at 2.67)."""
    seen, ways = [], []
    for _ in range(3):
        p = fabbench("doctor", "--fabric", "shm", "--primitive", "mpi", "--no-smoke",
                     "--fidelity", "--json", timeout=400)
        report = json.loads(p.stdout)
        (fid,) = [c for c in report["checks"] if c["name"] == "fidelity"]
        assert fid["verdict"] in ("pass", "fail"), fid
        assert "C MPI loop" in fid["detail"]
        assert p.returncode == (0 if fid["verdict"] == "pass" else 1)
        ratios = [float(part.split()[-1]) for part in
                  fid["detail"].split(": ", 1)[1].split(";")[:3]]
        assert len(ratios) == 3, fid
        seen.append(fid["detail"])
        # the 8-byte ratio is latency, not bandwidth: shown, not judged here
        ways.append({size: "slower" if r < LOOSE[0] else "faster"
                     for size, r in zip(("1M", "4M"), ratios[1:], strict=True)
                     if not LOOSE[0] <= r <= LOOSE[1]})
        if not ways[-1]:
            return
    persistent = {size: way for size, way in ways[0].items()
                  if all(w.get(size) == way for w in ways[1:])}
    assert not persistent, f"doctor --fidelity: fabbench {persistent} in every try: {seen}"


def test_a_launcher_stopped_by_sigterm_stops_its_ranks_and_closes_the_file(tmp_path):
    out = tmp_path / "r.jsonl"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "fabbench", "run", "--fabric", "ethernet", "--primitive", "mpi",
         "--ops", "allreduce", "--sizes", "1M", "--budget", "60", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and not (out.exists() and out.stat().st_size):
            time.sleep(0.2)  # the run record is written: the ranks measure now
        ranks = [c for c in psutil.Process(launcher.pid).children(recursive=True)
                 if c.cmdline()[1:3] == ["-m", "fabbench.launch.rank"]]
        assert len(ranks) == 2
        launcher.send_signal(signal.SIGTERM)
        _, err = launcher.communicate(timeout=30)
    finally:
        stop_groups([launcher], signal.SIGTERM, 10.0, 5.0)  # the launcher stops its ranks
    assert launcher.returncode == 128 + signal.SIGTERM
    assert "stopped by signal 15" in err and "Traceback" not in err
    gone, alive = psutil.wait_procs(ranks, timeout=10)
    assert not alive
    summary = read_results(out).records[-1]
    assert summary.kind == "summary" and summary.ok is False
    assert "stopped by signal 15" in summary.error
