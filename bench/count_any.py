"""Count the `Any`-typed attributes on the results and configuration path (issue 45).

An attribute is an annotated name in a class body (a dataclass field, a NamedTuple or
TypedDict entry, a plain class's annotated attribute; ClassVar included). It counts as
`Any`-typed when its annotation names `Any` anywhere (`Any`, `dict[str, Any]`,
`Mapping[str, Any] | None`, `list[dict[str, Any]]`, ...) or is a container left bare, whose
items are then `Any` (`dict`, `list`, `tuple`, `set`, `Mapping`, `Sequence`, ...). Functions'
parameters and return types are not attributes and are not counted.

Where: src/fabbench/results/, config.py, option_fields.py, study/, scaling/ and the workloads'
record modules (the default),
in the working tree or, with --rev, at a commit. Prints each counted attribute as
``path:line Class.name: annotation``, then the count per file and the total of attributes
and of `Any`-typed ones.

    .venv/bin/python bench/count_any.py               # the working tree
    .venv/bin/python bench/count_any.py --rev 7d7d8f0 # at a commit
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PATHS = ("src/fabbench/results", "src/fabbench/config.py", "src/fabbench/option_fields.py",
         "src/fabbench/study", "src/fabbench/scaling",
         # the workloads' record kinds, in their packages since issue 45 (results/ before)
         "src/fabbench/workloads/halo/record.py",
         "src/fabbench/workloads/pairs/record.py")
BARE = {"dict", "list", "tuple", "set", "frozenset", "Dict", "List", "Tuple", "Set",
        "Mapping", "MutableMapping", "Sequence", "MutableSequence", "Iterable", "Collection"}


def sources(paths: list[str], rev: str | None) -> Iterator[tuple[str, str]]:
    """(path, text) of every Python file under ``paths``, in the tree or at ``rev``."""
    if rev is None:
        for p in paths:
            root = REPO / p
            for f in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
                yield str(f.relative_to(REPO)), f.read_text()
        return
    names = subprocess.run(["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", rev,
                            "--", *paths], check=True, capture_output=True, text=True).stdout
    for name in sorted(n for n in names.splitlines() if n.endswith(".py")):
        yield name, subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{name}"],
                                   check=True, capture_output=True, text=True).stdout


def any_typed(annotation: ast.expr) -> bool:
    """Whether the annotation names Any or is a bare container (string annotations parsed)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    subscripted = {id(n.value) for n in ast.walk(annotation) if isinstance(n, ast.Subscript)}
    for node in ast.walk(annotation):
        name = (node.id if isinstance(node, ast.Name)
                else node.attr if isinstance(node, ast.Attribute) else None)
        if name == "Any" or (name in BARE and id(node) not in subscripted):
            return True
    return False


def attributes(text: str) -> Iterator[tuple[int, str, str, bool]]:
    """(line, Class.name, annotation, Any-typed) of each annotated name in a class body."""
    for cls in ast.walk(ast.parse(text)):
        if isinstance(cls, ast.ClassDef):
            for stmt in cls.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    yield (stmt.lineno, f"{cls.name}.{stmt.target.id}",
                           ast.unparse(stmt.annotation), any_typed(stmt.annotation))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=list(PATHS),
                    help="files or folders, relative to the repository root")
    ap.add_argument("--rev", help="count at this commit instead of the working tree")
    args = ap.parse_args()
    per_file: Counter[str] = Counter()
    total = 0
    for path, text in sources(args.paths, args.rev):
        for line, name, annotation, counted in attributes(text):
            total += 1
            if counted:
                per_file[path] += 1
                print(f"{path}:{line} {name}: {annotation}")
    print()
    for path, n in sorted(per_file.items()):
        print(f"{n:4d}  {path}")
    print(f"{sum(per_file.values())} Any-typed attributes of {total} "
          f"({args.rev or 'working tree'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
