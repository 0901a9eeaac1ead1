"""Every `sh` example in README.md and then in docs/guide.md runs, in that order, in one scratch
directory, each as its own test. `fabbench run` examples get a short sweep appended (later options
win); nothing else is changed."""

from __future__ import annotations

import os
import re
import shlex

import pytest

from conftest import REPO, fabbench, horovod_available, needs_mpirun

pytestmark = [pytest.mark.together, pytest.mark.integration, needs_mpirun]

SHORT = ["--sizes", "8,4K", "--budget", "0.02"]
# read in this order: the guide's examples read what the README's wrote
DOCUMENTS = ("README.md", "docs/guide.md")


def examples(document: str) -> list[str]:
    """The `fabbench` lines of the document's `sh` blocks (`text` blocks are not run)."""
    text = (REPO / document).read_text()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        commands += [ln.strip() for ln in block.splitlines() if ln.strip().startswith("fabbench")]
    return commands


EXAMPLES = [(document, command) for document in DOCUMENTS for command in examples(document)]


def test_documents_have_examples():
    readme, guide = examples("README.md"), examples("docs/guide.md")
    assert len(readme) >= 5 and len(guide) >= 15
    assert "fabbench run --fabric ethernet --out eth.jsonl" in readme
    assert len({command for _, command in EXAMPLES}) == len(EXAMPLES), "an example run twice"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """One directory for all examples: later ones read what earlier ones wrote."""
    return tmp_path_factory.mktemp("readme")


def _id(example: tuple[str, str]) -> str:
    document, command = example
    return f"{EXAMPLES.index(example):02d}-{os.path.basename(document).removesuffix('.md')}-" + (
        "-".join(a.lstrip("-") for a in shlex.split(command)[1:4]))


@pytest.mark.parametrize("example", EXAMPLES, ids=_id)
def test_documented_example(example, scratch):
    """Each example on its own: one that needs Horovod is skipped when Horovod is missing,
    and the others still run."""
    document, command = example
    argv = shlex.split(command)[1:]
    if "horovod" in argv and not horovod_available():
        pytest.skip("needs Horovod (containers/horovod.sh builds it)")
    if argv[0] == "emulate" and os.geteuid() != 0:
        pytest.skip("fabbench emulate makes network namespaces: needs root")
    if argv[0] == "run" and "--workload" not in argv:
        argv += SHORT
    p = fabbench(*argv, cwd=scratch, timeout=300)
    assert p.returncode == 0, f"{document}: {command}\n{p.stderr[-3000:]}"
    assert "Traceback" not in p.stderr, f"{document}: {command}"


def test_documented_examples_wrote_what_they_say(scratch):
    assert (scratch / "report.html").stat().st_size > 10_000
    assert (scratch / "compare.html").exists() and (scratch / "all.csv").exists()
    assert list((scratch / "results").glob("*.jsonl"))  # runs without --out
    assert (scratch / "wire.jsonl").exists() or os.geteuid() != 0
