"""One clear line when the suite is stopped from outside, e.g. by the deadline of a phase of
`make test` (.ci/test-suite.sh: `timeout $(TEST_TIMEOUT) pytest`: SIGTERM to pytest and to every
process of its group).

Without this, pytest dies of the SIGTERM at once: no line says why, no summary of what ran, and
the make recipe only reports exit 124. With it, pytest stops the way it stops on ^C: the line
below (which test, which phase, which fixture was being set up, e.g. `published`: a cold image
build), the summary of the tests that ran, exit 124. The subprocess a test waited on is ended by
subprocess.run (SIGKILL); the scripts of the set-up clean after themselves (.ci/podman-build.sh
runs under a parent-death signal and removes its build containers).

tests/integration/conftest.py imports these hooks.
"""

from __future__ import annotations

import signal
import time

import pytest

_state: dict[str, object] = {"start": time.monotonic(), "test": "collection", "phase": "",
                             "fixtures": []}


def pytest_collection_finish(session: pytest.Session) -> None:
    _state["start"] = time.monotonic()
    signal.signal(signal.SIGTERM, _stopped)


def _stopped(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once; the group got it too
    seconds = time.monotonic() - float(_state["start"])  # type: ignore[arg-type]
    fixtures = _state["fixtures"]
    where = f"{_state['test']} ({_state['phase'] or 'between tests'}"
    where += f", setting up fixture {fixtures[-1]})" if fixtures else ")"
    pytest.exit(f"[tests] stopped by SIGTERM {seconds:.0f}s after collection, during {where}: "
                "`make test` sends it when a phase of the suite runs past its deadline "
                "(TOGETHER_TIMEOUT, TEST_TIMEOUT: Makefile)",
                returncode=124)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    _state["test"] = item.nodeid
    try:
        return (yield)
    finally:
        _state["phase"] = ""


def pytest_runtest_setup(item: pytest.Item) -> None:
    _state["phase"] = "setup"


def pytest_runtest_call(item: pytest.Item) -> None:
    _state["phase"] = "call"


def pytest_runtest_teardown(item: pytest.Item) -> None:
    _state["phase"] = "teardown"


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
    stack = _state["fixtures"]
    stack.append(fixturedef.argname)  # type: ignore[union-attr]
    try:
        return (yield)
    finally:
        stack.pop()  # type: ignore[union-attr]
