"""Where the suite's minutes go: at the end of the integration run, the wall time of each test
module (setup, call and teardown of its tests, module-scoped fixtures included: a cold image
build or a cluster's start lands in the first test that needs it), the slowest first, with the
module's share of the whole. docs/testing.md's table is read off this summary.

tests/integration/conftest.py imports these hooks.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

_seconds: dict[str, float] = defaultdict(float)
_tests: dict[str, int] = defaultdict(int)
_start = time.monotonic()


def pytest_sessionstart(session: pytest.Session) -> None:
    global _start
    _start = time.monotonic()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    _seconds[module] += report.duration
    if report.when == "call" or (report.when == "setup" and report.skipped):
        _tests[module] += 1


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not _seconds:
        return
    whole = time.monotonic() - _start
    tr = terminalreporter
    tr.section("time per module (s, % of the session's wall time)")
    shown = 0.0
    for module, s in sorted(_seconds.items(), key=lambda kv: -kv[1]):
        if s < 10:
            break
        shown += s
        tr.write_line(f"{s:8.0f} {100 * s / whole:5.1f}%  {module} ({_tests[module]} tests)")
    if shown <= whole:
        tr.write_line(f"{whole - shown:8.0f} {100 * (whole - shown) / whole:5.1f}%  the rest "
                      f"(modules under 10 s, collection); session {whole:.0f} s")
    else:  # pytest-xdist's workers ran them side by side
        tr.write_line(f"the modules above ran side by side: {shown:.0f} s of tests in a session "
                      f"of {whole:.0f} s")
