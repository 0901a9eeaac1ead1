"""What the product cites exists in the product: every docs/ file that code, tests, README or CI
name is in the repository, every relative link and anchor of the Markdown files resolves, and no
file cites notes that users do not have."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# what the product ships or runs: the places a citation can hide
SCANNED = ("src", "tests", "bench", "containers", "charts", "docs", ".ci", ".github")
TOP_FILES = ("README.md", "Makefile", "Dockerfile", "Apptainer.def", "pyproject.toml")
TEXT_SUFFIXES = {".py", ".md", ".sh", ".toml", ".yml", ".yaml", ".tpl", ".j2", ".json", ".txt",
                 ".def", ".env", ".cfg", ""}
# spelled in pieces so that this file does not cite them itself
PRIVATE_NOTES = ("REFERENCES" + ".md", "NOTES" + ".md")


def product_files() -> list[Path]:
    """The files of the checkout (tracked, or new and not ignored): never what a build left,
    such as an egg-info's copy of an older README."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                             "-z", "--", *TOP_FILES, *SCANNED], cwd=REPO, capture_output=True,
                            timeout=60, check=True).stdout.decode().split("\0")
    files = []
    for name in sorted(filter(None, listed)):
        path = REPO / name
        if (path.is_file() and path.suffix in TEXT_SUFFIXES
                and (name in TOP_FILES or "fixtures" not in path.parts)):
            files.append(path)
    return files


def markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(m) for m in re.findall(r"^#+ (.*)$", path.read_text(), flags=re.M)}


def test_docs_exist():
    for name in ("guide.md", "methods.md", "results.md", "fabrics.md", "testing.md"):
        assert (REPO / "docs" / name).stat().st_size > 1000, name


def prose(text: str) -> str:
    """Markdown without its code: fenced blocks and inline code removed."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))


def test_readme_is_a_front_door():
    """Under 200 lines; the two set-up commands first; the core ideas before the tasks; the
    rest of the documentation named."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) < 200
    headings = re.findall(r"^## (.*)$", text, flags=re.M)
    assert headings[0] == "Two commands"
    first_block = re.search(r"```\n(.*?)```", text, flags=re.S).group(1)
    assert first_block.startswith("make demo") and "\nmake test" in first_block
    tasks = next(i for i, h in enumerate(headings) if h.startswith("Five things"))
    for idea in ("What the numbers mean", "Transport truth", "Fidelity"):
        assert headings.index(idea) < tasks, idea
    assert len(re.findall(r"^### \d\. ", text, flags=re.M)) == 5
    for doc in sorted((REPO / "docs").glob("*.md")):
        assert f"docs/{doc.name}" in text, f"README does not say where {doc.name} is"


def test_readme_holds_no_measurement_and_no_formula():
    """Figures measured on one machine belong in docs/methods.md and bench output, formulas in
    methods.md: the README's prose has neither."""
    text = prose((REPO / "README.md").read_text())
    figures = re.findall(r"\d[\d.,–-]*\s*(?:GB/s|Gb/s|Gbit/s|Mbit/s|MB/s|µs|us|ms)\b", text)
    assert not figures
    assert not re.findall(r"[αβγ]|\(n\s*[−-]\s*1\)", text)


def test_nothing_cites_notes_users_do_not_have():
    offenders = [f"{path.relative_to(REPO)}: {note}" for path in product_files()
                 for note in PRIVATE_NOTES if note in path.read_text(errors="replace")]
    assert not offenders


def test_every_cited_doc_exists():
    cited = {}
    for path in product_files():
        for name in re.findall(r"docs/([\w\-]+\.md)", path.read_text(errors="replace")):
            cited.setdefault(name, path.relative_to(REPO))
    assert {"methods.md", "results.md", "fabrics.md"} <= set(cited)
    missing = {name: str(where) for name, where in cited.items()
               if not (REPO / "docs" / name).exists()}
    assert not missing


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: p.name)
def test_relative_links_and_anchors_resolve(path):
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists() or anchor and anchor not in anchors(dest):
            broken.append(target)
    assert not broken


def test_every_formula_section_names_a_source():
    """Each cited source of methods.md is listed under its Sources, and each listed one is used."""
    text = (REPO / "docs" / "methods.md").read_text()
    body, _, sources = text.partition("## Sources")
    used = set(re.findall(r"\[([\w\-]+)\](?!\()", body))
    listed = set(re.findall(r"^- \*\*\[([\w\-]+)\]\*\*", sources, flags=re.M))
    assert used and used == listed, (used - listed, listed - used)


def _defines(path: Path, name: str) -> bool:
    """Does the module at ``path`` define or import ``name`` at its top level?"""
    return bool(re.search(rf"^(?:(?:async )?def |class )?{re.escape(name)}\b|^from .* import .*\b"
                          rf"{re.escape(name)}\b", path.read_text(), flags=re.M))


def _resolves(dotted: str) -> bool:
    """``fabbench.a.b`` is a module of the package, or ``fabbench.a.NAME`` a name in one."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        base = REPO / "src" / Path(*parts[:end])
        for module in (base.with_suffix(".py"), base / "__init__.py"):
            if module.is_file():
                rest = parts[end:]
                return not rest or len(rest) == 1 and _defines(module, rest[0])
    return False


def architecture_names() -> tuple[list[str], list[str]]:
    """What docs/architecture.md names: in code spans, module paths from the repository's root
    and dotted names; in its diagrams, paths inside the package (``launch/rank.py``)."""
    text = (REPO / "docs" / "architecture.md").read_text()
    diagrams = "\n".join(re.findall(r"```\n(.*?)```", text, flags=re.S))
    spans = [token.rstrip("/") for token in re.findall(r"`([^`\s]+)`", text)
             if re.fullmatch(r"fabbench(\.\w+)+", token)
             or re.fullmatch(r"(src|bench|tests|containers|charts|docs|\.ci)/[\w./\-*<>]+", token)]
    in_package = re.findall(r"(?<![\w/.])((?:[a-z_]+/)+(?:[a-z_]+\.(?:py|json))?|[a-z_]+\.py\b)",
                            diagrams)
    return spans, [path.rstrip("/") for path in in_package]


def test_every_module_architecture_names_exists():
    spans, in_package = architecture_names()
    assert len(spans) >= 30 and len(in_package) >= 20, "architecture.md names the modules"
    missing = [name for name in spans
               if not (_resolves(name) if name.startswith("fabbench.")
                       else list(REPO.glob(re.sub(r"<[^>]+>", "*", name))))]
    missing += [path for path in in_package
                if not ((REPO / "src" / "fabbench" / path).exists() or (REPO / path).exists())]
    assert not missing


def test_architecture_says_where_each_new_thing_goes():
    text = (REPO / "docs" / "architecture.md").read_text()
    headings = " ".join(re.findall(r"^#+ (.*)$", text, flags=re.M)).lower()
    for thing in ("fabric", "primitive", "workload", "launcher", "scheduler",
                  "container runtime", "record kind"):
        assert f"a new {thing}" in headings, thing
