"""A report and a compare built from real runs on this host (ethernet over loopback TCP vs shared
memory, 2 MPI ranks each, tiny sweeps), checked as images and in a real headless Chromium."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conftest import chromium_screenshot, fabbench

pytestmark = [pytest.mark.integration, pytest.mark.together]

OPS = "allreduce,allgather,sendrecv"
TINY = ["--sizes", "8:64K", "--budget", "0.05", "--ops", OPS, "--timeout", "30"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    if shutil.which("mpirun") is None:
        pytest.skip("Open MPI's mpirun is not installed (.ci/apt-packages.txt: openmpi-bin)")
    folder = tmp_path_factory.mktemp("runs")
    out = {}
    for fabric in ("ethernet", "shm"):
        path = folder / f"{fabric}.jsonl"
        p = fabbench("run", "--fabric", fabric, "--primitive", "mpi", *TINY, "--out", str(path),
                     timeout=240)
        assert p.returncode == 0, p.stderr[-2000:]
        out[fabric] = path
    return out


def _screenshot(html: Path, tmp: Path) -> tuple[Path, str]:
    """Open the page in headless Chromium; return the screenshot and Chromium's log."""
    return chromium_screenshot(html, tmp)


def _check_screenshot(shot: Path, log: str) -> None:
    from matplotlib import image

    # page errors (a broken image, a bad URL, a script error) are logged as CONSOLE lines
    assert not re.findall(r"CONSOLE.*|Uncaught.*|Failed to load resource.*", log)
    assert shot.stat().st_size > 50_000
    pixels = image.imread(shot)
    assert pixels.shape[:2] == (2000, 1280)
    assert pixels[..., :3].std() > 0.05  # not one blank colour
    # the figures are in view: the plot lines' colours (matplotlib's C0 blue and C1 orange)
    rgb = (pixels[..., :3] * 255).round()
    for colour in ((31, 119, 180), (255, 127, 14)):
        assert (abs(rgb - colour).sum(axis=-1) < 30).sum() > 200, colour


def test_report_from_real_runs(runs, tmp_path):
    html, figs, table = tmp_path / "report.html", tmp_path / "figs", tmp_path / "points.csv"
    p = fabbench("report", str(runs["ethernet"]), str(runs["shm"]), "--html", str(html),
                 "--plots", str(figs), "--csv", str(table), timeout=120)
    assert p.returncode == 0, p.stderr
    assert "# ethernet/mpi: allreduce, 2 ranks on 1 node(s), transport ob1/tcp" in p.stdout
    assert "# shm/mpi: sendrecv, 2 ranks on 1 node(s), transport ob1/vader" in p.stdout
    for name in ("busbw", "latency"):
        svg = (figs / f"{name}.svg").read_text()
        for label in ("ethernet/mpi", "shm/mpi", "allreduce", "allgather", "sendrecv"):
            assert label in svg, (name, label)
        assert 'id="series-ethernet/mpi"' in svg and 'id="series-shm/mpi"' in svg
        from matplotlib import image

        pixels = image.imread(figs / f"{name}.png")
        assert pixels.shape[:2] == (390, 1260)  # 3 ops side by side
    assert len(table.read_text().splitlines()) == 1 + 2 * 3 * 14  # 2 runs, 3 ops, 14 sizes
    page = html.read_text()
    assert page.count("data:image/svg+xml;base64,") == 2 and "<script" not in page
    shot, log = _screenshot(html, tmp_path)
    _check_screenshot(shot, log)


def test_compare_from_real_runs(runs, tmp_path):
    html = tmp_path / "compare.html"
    p = fabbench("compare", str(runs["ethernet"]), str(runs["shm"]), "--html", str(html),
                 timeout=120)
    assert p.returncode == 0, p.stderr
    summary = re.search(r"shm/mpi vs ethernet/mpi: (.*)", p.stdout)
    assert summary, p.stdout[-2000:]
    counts = dict((k, int(n)) for n, k in re.findall(r"(\d+) (faster|slower|same)",
                                                     summary.group(1)))
    assert sum(counts.values()) == 3 * 14
    assert "transport" in p.stdout and "ob1/vader" in p.stdout  # provenance that differs
    page = html.read_text()
    assert "Comparison against ethernet/mpi" in page and page.count("data:image/svg") == 3
    shot, log = _screenshot(html, tmp_path)
    _check_screenshot(shot, log)
