"""Every `sh` example in README.md runs, in order, in one scratch directory, each as its own
test. `fabbench run` examples get a short sweep appended (later options win); nothing else is
changed."""

from __future__ import annotations

import os
import re
import shlex

import pytest

from conftest import REPO, fabbench, horovod_available, needs_mpirun

pytestmark = [pytest.mark.integration, needs_mpirun]

SHORT = ["--sizes", "8,4K", "--budget", "0.02"]


def readme_examples() -> list[str]:
    text = (REPO / "README.md").read_text()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        commands += [ln.strip() for ln in block.splitlines() if ln.strip().startswith("fabbench")]
    return commands


EXAMPLES = readme_examples()


def test_readme_has_examples():
    assert len(EXAMPLES) >= 15
    assert "fabbench run --fabric ethernet --out eth.jsonl" in EXAMPLES


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """One directory for all examples: later ones read what earlier ones wrote."""
    return tmp_path_factory.mktemp("readme")


def _id(command: str) -> str:
    return f"{EXAMPLES.index(command):02d}-" + "-".join(
        a.lstrip("-") for a in shlex.split(command)[1:4])


@pytest.mark.parametrize("command", EXAMPLES, ids=_id)
def test_readme_example(command, scratch):
    """Each example on its own: one that needs Horovod is skipped when Horovod is missing,
    and the others still run."""
    argv = shlex.split(command)[1:]
    if "horovod" in argv and not horovod_available():
        pytest.skip("needs Horovod (containers/horovod.sh builds it)")
    if argv[0] == "emulate" and os.geteuid() != 0:
        pytest.skip("fabbench emulate makes network namespaces: needs root")
    if argv[0] == "run" and "--workload" not in argv:
        argv += SHORT
    p = fabbench(*argv, cwd=scratch, timeout=300)
    assert p.returncode == 0, f"{command}\n{p.stderr[-3000:]}"
    assert "Traceback" not in p.stderr, command


def test_readme_examples_wrote_what_they_say(scratch):
    assert (scratch / "report.html").stat().st_size > 10_000
    assert (scratch / "compare.html").exists() and (scratch / "all.csv").exists()
    assert list((scratch / "results").glob("*.jsonl"))  # runs without --out
