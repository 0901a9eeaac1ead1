"""One class per name: no two classes under src/ share a name (two things called ``Link`` or
``Outcome`` make a reader open both to find out which one a line means). Read from the source
with ``ast``, nested classes included."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def class_names(src: Path) -> dict[str, list[str]]:
    """Class name -> where each class of that name is defined ("path:line"), for every .py file
    under src."""
    found: dict[str, list[str]] = {}
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where = f"{path.relative_to(src)}:{node.lineno}"
                found.setdefault(node.name, []).append(where)
    return found


def duplicates(found: dict[str, list[str]]) -> list[str]:
    return [f"{name}: {', '.join(places)}" for name, places in sorted(found.items())
            if len(places) > 1]


def test_no_class_name_is_defined_twice_under_src():
    assert duplicates(class_names(SRC)) == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _lines(*text: str) -> str:
    return "\n".join(text) + "\n"


def test_a_name_defined_in_two_modules_or_nested_is_found(tmp_path):
    src = _tree(tmp_path, {
        "pkg/a.py": _lines("class Link:", "    pass"),
        "pkg/b.py": _lines("def f():", "    class Link:", "        pass"),
        "pkg/c.py": _lines("class Other:", "    class Inner:", "        pass"),
    })
    assert duplicates(class_names(src)) == ["Link: pkg/a.py:1, pkg/b.py:2"]


def test_the_walk_sees_the_real_package():
    found: Iterable[str] = class_names(SRC)
    assert "Record" in found and "Verdict" in found


# the modules every workload package has, one name each part (issue 61: the recipe of
# docs/architecture.md, "A new workload")
WORKLOAD_PARTS = ("workload", "section", "record", "line", "floors", "study", "rules", "scaling",
                  "run", "resume")


def recipe_part(path: Path) -> bool:
    """Is ``path`` (under src) one of the recipe's modules of a workload package?"""
    return path.parts[:2] == ("fabbench", "workloads") and len(path.parts) == 4 and \
        path.stem in WORKLOAD_PARTS


def test_no_module_name_is_used_twice_under_src():
    """One module per name too (issue 45): a `text.py` in three packages says nothing of which
    text; packages' `__init__.py` aside, and the recipe's modules of the workload packages
    (workloads/<name>/record.py says which record by its package, as every package names it)."""
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        if path.name != "__init__.py" and not recipe_part(path.relative_to(SRC)):
            found.setdefault(path.stem, []).append(str(path.relative_to(SRC)))
    assert not duplicates(found)


def test_only_a_workload_package_s_recipe_modules_share_a_name():
    assert recipe_part(Path("fabbench/workloads/halo/record.py"))
    assert not recipe_part(Path("fabbench/workloads/halo/grid.py"))
    assert not recipe_part(Path("fabbench/results/record.py"))
    assert not recipe_part(Path("fabbench/workloads/record.py"))
    assert recipe_part(Path("fabbench/workloads/train/record.py"))
    assert not recipe_part(Path("fabbench/workloads/train/engines.py"))
    assert not recipe_part(Path("fabbench/floors/rules.py"))
    assert not recipe_part(Path("fabbench/workloads/train/deeper/record.py"))
