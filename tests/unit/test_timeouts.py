"""`make test`'s deadlines cover a cold image build (docs/faults-setup.md): the numbers read from
the Makefile and the scripts, against the times measured on the development machine (2 cores),
so that neither can drift past the other unnoticed.

make test (.ci/test-suite.sh) runs its first phase, the tests marked `together`, under
`timeout $(TOGETHER_TIMEOUT)`, and the rest under `timeout $(TEST_TIMEOUT)`. The cold build runs
in the first phase's podman lane, in the first module fixture that needs the image. A build that
hangs must end by its own deadline (BUILD_TIMEOUT, one line, its build containers removed) while
that lane still fits; the tests' own waits for the build must be longer than that deadline, so
that the script's line reports it.
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
    # the first phase's podman lane, publish included, the image, the SIF and Docker's image
    # rebuilt after a change to pyproject.toml (2026-11-27, a clean clone's make test:
    # docs/testing.md); with them cached, about 400 s
    "the podman modules": 666,
}
# The second phase (the tests not marked `together`), the same run.
SECOND_PHASE_S = 1936
SAFETY = 2.0  # the cpu build's deadline is at least this many cold builds


def make_variable(name: str) -> int:
    return int(re.search(rf"^{name} \?= (\d+)$", (REPO / "Makefile").read_text(), re.M)[1])


def build_deadline(flavor: str) -> int:
    text = (REPO / ".ci" / "image-build.sh").read_text()
    return int(re.search(rf"\b{flavor.upper()}_BUILD_TIMEOUT=(\d+)\b", text)[1])


def test_every_pytest_of_make_test_runs_under_its_phases_deadline():
    recipe = (REPO / "Makefile").read_text().split("\ntest: setup-all\n", 1)[1].split("\n\n", 1)[0]
    assert "TEST_TIMEOUT=$(TEST_TIMEOUT) TOGETHER_TIMEOUT=$(TOGETHER_TIMEOUT)" in recipe
    assert "bash .ci/test-suite.sh" in recipe
    suite = (REPO / ".ci" / "test-suite.sh").read_text().replace("\\\n", " ")
    runs = [line for line in suite.splitlines() if '"${pytest[@]}"' in line
            and not line.lstrip().startswith("#")]
    deadlines = [re.search(r'timeout "\$\{(\w+):-\d+\}"', line) for line in runs]
    assert len(runs) == 3 and all(deadlines), runs
    assert sorted(d[1] for d in deadlines) == ["TEST_TIMEOUT", "TOGETHER_TIMEOUT",
                                               "TOGETHER_TIMEOUT"]
    assert "timeout 900" in suite  # the unit tests'


def test_the_cpu_build_deadline_leaves_room_for_a_slow_cold_build():
    assert build_deadline("cpu") >= SAFETY * MEASURED_S["cold cpu image build"]


def test_a_cold_podman_lane_fits_its_deadline_even_with_the_build_at_its_deadline():
    rest = sum(s for what, s in MEASURED_S.items() if what != "cold cpu image build")
    measured = rest + MEASURED_S["cold cpu image build"]
    at_deadline = rest + build_deadline("cpu")
    together = make_variable("TOGETHER_TIMEOUT")
    assert measured < at_deadline <= together, (measured, at_deadline, together)


def test_the_second_phase_fits_its_deadline_twice_over():
    assert make_variable("TEST_TIMEOUT") >= SAFETY * SECOND_PHASE_S


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
