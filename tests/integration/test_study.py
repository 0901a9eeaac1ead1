"""Studies end to end on this host: `quick` with local ranks and its report in headless
Chromium; a study stopped mid-way and resumed ends with the cells of one run straight through;
two study directories compared cell by cell."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, chromium_screenshot, fabbench

pytestmark = [pytest.mark.integration, pytest.mark.together]

STUDIES = REPO / "tests/fixtures/studies"
TINY = str(STUDIES / "tiny.toml")


def _manifest(directory: Path) -> dict:
    return json.loads((directory / "study.json").read_text())


def _cells(directory: Path) -> dict[str, str]:
    return {c["id"]: c["status"] for c in _manifest(directory)["cells"]}


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    if shutil.which("mpirun") is None:
        pytest.skip("Open MPI's mpirun is not installed (.ci/apt-packages.txt: openmpi-bin)")
    out = tmp_path_factory.mktemp("straight") / "study"
    p = fabbench("study", "run", TINY, "--out", str(out), timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return out


def test_straight_through(straight):
    doc = _manifest(straight)
    cells = {c["id"]: c for c in doc["cells"]}
    assert len(cells) == 8
    ran = [c for c in cells.values() if c["axes"]["primitive"] == "mpi"]
    assert {c["status"] for c in ran} == {"ok"}
    for c in ran:
        assert (straight / c["file"]).is_file() and c["wall_s"] > 0
    nccl = [c for c in cells.values() if c["axes"]["primitive"] == "nccl"]
    if not Path("/dev/nvidia0").exists():
        assert {c["status"] for c in nccl} == {"skipped"}
        assert all("needs a GPU" in c["reason"] for c in nccl)


def test_stopped_midway_then_resumed(straight, tmp_path):
    out = tmp_path / "study"
    proc = subprocess.Popen([sys.executable, "-m", "fabbench", "study", "run", TINY, "--out",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        end = time.monotonic() + 300
        while time.monotonic() < end:  # one cell finished, the next one running
            if (out / "study.json").exists():
                statuses = list(_cells(out).values())
                if "ok" in statuses and "running" in statuses:
                    break
            if proc.poll() is not None:
                pytest.fail(f"the study ended before it could be stopped: {proc.stdout.read()}")
            time.sleep(0.3)
        else:
            pytest.fail("no cell finished within 300 s")
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == 1, output
    assert "study stopped by SIGTERM (continue with --resume)" in output
    midway = _cells(out)
    assert "ok" in midway.values() and "failed" in midway.values(), midway
    assert set(midway.values()) != {"ok", "skipped"}

    again = fabbench("study", "run", TINY, "--out", str(out), timeout=600)
    assert again.returncode == 2 and "not empty" in again.stderr  # never over a study
    p = fabbench("study", "run", TINY, "--out", str(out), "--resume", timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert _cells(out) == _cells(straight)
    ok_before = [k for k, v in midway.items() if v == "ok"]
    for cell in _manifest(out)["cells"]:  # cells done before the stop were not run again
        if cell["id"] in ok_before:
            assert cell["attempts"] == 1
    stopped = [k for k, v in midway.items() if v == "failed"]
    assert _manifest(out)["cells"][[c["id"] for c in _manifest(out)["cells"]].index(
        stopped[0])]["attempts"] == 2


def test_compare_two_study_directories(straight, tmp_path):
    big = tmp_path / "big"
    p = fabbench("study", "run", str(STUDIES / "tiny-big-halo.toml"), "--out", str(big),
                 "--only", "halo-shm-*", timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    p = fabbench("compare", str(straight), str(big), timeout=120)
    assert p.returncode == 0, p.stderr
    assert re.search(r"halo-shm-mpi-n1 \(halo\): B is [\d.]+ % slower", p.stdout), p.stdout
    assert "options.cells_per_rank" in p.stdout and "2097152" in p.stdout
    assert "only in A: allreduce-ethernet-mpi-n1" in p.stdout
    j = json.loads(fabbench("compare", str(straight), str(big), "--json", timeout=120).stdout)
    assert j["different"] == ["halo-shm-mpi-n1: halo"]
    assert j["provenance_diff"]["options.cells_per_rank"] == ["4096", "2097152"]


@pytest.mark.timeout(900)
def test_quick_end_to_end(tmp_path):
    """The shipped `quick` study with local ranks, its report, and the page in Chromium."""
    if shutil.which("mpirun") is None:
        pytest.skip("Open MPI's mpirun is not installed (.ci/apt-packages.txt: openmpi-bin)")
    out = tmp_path / "quick"
    t0 = time.monotonic()
    p = fabbench("study", "run", "quick", "--out", str(out), timeout=600)
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert took < 600
    assert "about" in p.stderr and "left" in p.stderr  # the estimate of the time left
    r = fabbench("report", str(out), timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("Answer:")[1].splitlines()
    heads = [ln.strip("• ").strip() for ln in lines[1:4]]
    for what in ("gpt-tiny", "halo", "allreduce 1M"):
        assert any(h.startswith(f"{what}: ") for h in heads), heads
    for h in heads:
        assert re.search(r"significant|no samples", h), h
    answer = json.loads((out / "report.json").read_text())
    assert answer["counts"]["ok"] == 12
    assert {g["what"] for g in answer["groups"]} == {"gpt-tiny", "halo", "allreduce 1M"}
    for g in answer["groups"]:
        assert len(g["rows"]) == 4 and sum(r["best"] for r in g["rows"]) == 1
        for row in g["rows"]:
            assert row["samples"] >= 10
    html = out / "report.html"
    page = html.read_text()
    assert "<script" not in page and page.count("data:image/svg+xml;base64,") == 2
    for h in answer["headline"]:
        assert h.replace("'", "&#39;") in page
    shot, log = chromium_screenshot(html, tmp_path, height=3000)
    assert not re.findall(r"CONSOLE.*|Uncaught.*|Failed to load resource.*", log)
    from matplotlib import image

    pixels = image.imread(shot)
    assert pixels.shape[:2] == (3000, 1280)
    rgb = (pixels[..., :3] * 255).round()
    # the figures are drawn: the best cells' green bars (matplotlib C2) and the forecast (C0)
    for colour in ((44, 160, 44), (31, 119, 180)):
        assert (abs(rgb - colour).sum(axis=-1) < 30).sum() > 200, colour
    (Path("/tmp") / "fabbench-study-screenshot.png").write_bytes(shot.read_bytes())
