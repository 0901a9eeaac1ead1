"""Every `sh` example in README.md runs, in order, in one scratch directory. `fabbench run`
examples get a short sweep appended (later options win); nothing else is changed."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import REPO, fabbench, horovod_available, needs_mpirun

pytestmark = [pytest.mark.integration, pytest.mark.slow, needs_mpirun]

SHORT = ["--sizes", "8,4K", "--budget", "0.02"]


def readme_examples() -> list[str]:
    text = (REPO / "README.md").read_text()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        commands += [ln.strip() for ln in block.splitlines() if ln.strip().startswith("fabbench")]
    return commands


def test_readme_has_examples():
    examples = readme_examples()
    assert len(examples) >= 15
    assert "fabbench run --fabric ethernet --out eth.jsonl" in examples


def test_readme_examples_run(tmp_path):
    for command in readme_examples():
        argv = shlex.split(command)[1:]
        if "horovod" in argv and not horovod_available():
            pytest.skip("horovod is not installed (containers/horovod.sh builds it)")
        if argv[0] == "run" and "--workload" not in argv:
            argv += SHORT
        p = fabbench(*argv, cwd=tmp_path, timeout=300)
        assert p.returncode == 0, f"{command}\n{p.stderr[-3000:]}"
        assert "Traceback" not in p.stderr, command
    assert (tmp_path / "report.html").stat().st_size > 10_000
    assert (tmp_path / "compare.html").exists() and (tmp_path / "all.csv").exists()
    assert list((tmp_path / "results").glob("*.jsonl"))  # runs without --out
