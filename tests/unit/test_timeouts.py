"""`make test`'s whole-suite timeout covers a cold image build (docs/faults-setup.md): the numbers
read from the Makefile and the scripts, against the times measured on the development machine
(2 cores), so that neither can drift past the other unnoticed.

The cold build runs inside pytest, in the first module fixture that needs the image, under
`timeout $(TEST_TIMEOUT)`. A build that hangs must end by its own deadline (BUILD_TIMEOUT, one
line, its build containers removed) while the rest of the suite still fits; the tests' own waits
for the build must be longer than that deadline, so that the script's line reports it.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Measured 2026-11-26 (docs/faults-setup.md), seconds, while other work shared the 2 cores.
MEASURED_S = {
    "base image (debootstrap)": 44,
    "the sid root (debootstrap, Apptainer)": 45,
    "cold cpu image build": 896,
    # the image cached: test it, push it, build the SIF cold (about 750 s of it), sign, push it
    "publish (tests/integration/conftest.py)": 845,
    # the suite with the image cached: "1570 passed, 21 skipped in 29 min 38 s" (CI of 8a68ede)
    "the rest of the suite": 1778,
}
SAFETY = 2.0  # the cpu build's deadline is at least this many cold builds


def make_test_timeout() -> int:
    return int(re.search(r"^TEST_TIMEOUT \?= (\d+)$", (REPO / "Makefile").read_text(), re.M)[1])


def build_deadline(flavor: str) -> int:
    text = (REPO / ".ci" / "image-build.sh").read_text()
    return int(re.search(rf"\b{flavor.upper()}_BUILD_TIMEOUT=(\d+)\b", text)[1])


def test_make_test_runs_pytest_under_test_timeout():
    recipe = (REPO / "Makefile").read_text().split("\ntest: setup-all\n", 1)[1].split("\n\n", 1)[0]
    assert "timeout $(TEST_TIMEOUT) $(VENV)/bin/python -m pytest" in recipe


def test_the_cpu_build_deadline_leaves_room_for_a_slow_cold_build():
    assert build_deadline("cpu") >= SAFETY * MEASURED_S["cold cpu image build"]


def test_a_cold_make_test_fits_in_test_timeout_even_with_the_build_at_its_deadline():
    rest = sum(s for what, s in MEASURED_S.items() if what != "cold cpu image build")
    measured = rest + MEASURED_S["cold cpu image build"]
    at_deadline = rest + build_deadline("cpu")
    assert measured < at_deadline <= make_test_timeout(), (measured, at_deadline,
                                                              make_test_timeout())


def test_the_tests_wait_longer_for_the_build_than_its_deadline():
    """Each integration module that builds the image waits (its subprocess timeout) longer than
    the script's own deadline, so that a hung build is reported by the script's line."""
    waits = {}
    for module in sorted((REPO / "tests" / "integration").glob("test_*.py")):
        text = module.read_text()
        found = re.search(r"^BUILD_TIMEOUT_S = (\d+)", text, re.M)
        if "image-build.sh" in text and found:
            waits[module.name] = int(found[1])
    assert {"test_image.py", "test_podman_run.py", "test_apptainer.py"} <= set(waits)
    short = {name: s for name, s in waits.items() if s <= build_deadline("cpu")}
    assert not short, short
