"""Shared fixtures: the real CLI, run as a subprocess of this environment's Python; and the
rules of the two folders: tests/unit is fast and starts nothing, every test in
tests/integration is marked `integration`, and a test marked as needing root or a GPU is
skipped, with that reason, where it has neither. tests/unit and tests/integration are
packages (a basename may repeat across them): a test borrows a sibling's helpers as
`from integration.test_slurm import ...`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: the share of each property test's examples a run draws: FABBENCH_TEST_EXAMPLES, a fraction
#: (`make test-fast` draws a fifth, for a quick loop; `make test` and CI every one)
EXAMPLES_SHARE = float(os.environ.get("FABBENCH_TEST_EXAMPLES", "1") or "1")


#: given to a job a test starts outside fabbench's launcher (torchrun of a plain script): Gloo
#: keeps to the loopback interface, as fabbench's ethernet profile has it on one host; else it
#: takes the host name's address, which is not the loopback
LOOPBACK_ENV = {"GLOO_SOCKET_IFNAME": "lo"}


def property_examples(n: int) -> int:
    """A property test's max_examples: ``n``, or its share (never fewer than 20)."""
    return n if EXAMPLES_SHARE >= 1 else max(20, round(n * EXAMPLES_SHARE))


def fabbench(*args: str, timeout: float = 180, env: dict | None = None,
             cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """Run `python -m fabbench ARGS` and return the completed process (never hangs: past
    ``timeout`` it is stopped as :func:`stop` does, and TimeoutExpired raised)."""
    proc = subprocess.Popen([sys.executable, "-m", "fabbench", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        stop(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def stop(proc: subprocess.Popen, grace_s: float = 15.0) -> None:
    """End a fabbench process a test started, if it still runs: SIGTERM first, so that its
    launcher stops the ranks and daemons it started (a SIGKILL would leave an mpirun in its
    own session running), SIGKILL after ``grace_s``; reaped either way."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.communicate(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate(timeout=60)


@pytest.fixture
def run_cli():
    return fabbench


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run the CLI in this process (fast; no ranks): its exit code, stdout and stderr."""
    from fabbench.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


needs_mpirun = pytest.mark.skipif(not have("mpirun"), reason="needs Open MPI's mpirun")


def horovod_available() -> bool:
    try:
        import horovod.torch  # noqa: F401
    except ImportError:
        return False
    return True


def pytest_collection_modifyitems(config, items):
    from fabbench.sysinfo.gpus import gpus_visible

    misplaced = []
    for item in items:
        folder = Path(str(item.fspath)).relative_to(REPO / "tests").parts[0]
        marked = item.get_closest_marker("integration") is not None
        if (folder == "integration") != marked:
            misplaced.append(f"{item.nodeid}: " + ("in tests/integration without the "
                                                   "integration mark" if not marked else
                                                   "marked integration in tests/unit"))
        if item.get_closest_marker("needs_root") and os.geteuid() != 0:
            item.add_marker(pytest.mark.skip(reason="needs root"))
        if (item.get_closest_marker("needs_gpu") or item.get_closest_marker("gpu")) \
                and not gpus_visible():
            item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU (none visible)"))
    if misplaced:
        raise pytest.UsageError("tests in the wrong folder or unmarked:\n  "
                                + "\n  ".join(misplaced))


CHROMIUM = "/usr/bin/chromium"


def chromium_screenshot(html: Path, folder: Path, width: int = 1280, height: int = 2000
                        ) -> tuple[Path, str]:
    """Open the page in headless Chromium; return the screenshot and Chromium's log (page
    errors are logged there as CONSOLE lines)."""
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (.ci/apt-packages.txt: chromium)")
    shot = folder / f"{html.stem}.png"
    p = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={folder / 'chromium-profile'}",
         "--enable-logging=stderr", "--v=0", f"--screenshot={shot}",
         f"--window-size={width},{height}", html.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    return shot, p.stderr
