"""How much of the package mypy checks strictly: modules and lines (issue 61).

Reads [tool.mypy] of pyproject.toml, in the working tree or, with --rev, at a commit, and the
package's modules (src/fabbench/**/*.py) from the same place. A module counts as strict when
every per-module flag of `mypy --strict` is on for it: from `strict = true` or the flags set
one by one at the top level, then from the overrides that match it, the more specific pattern
last (as mypy resolves them: a wildcard before a name, a shorter wildcard before a longer).
Lines are the file's physical lines, as `wc -l` counts them.

Prints the modules left out (when any) and one line: strict modules of all, strict lines of
all, and the share of the lines.

    .venv/bin/python bench/typing_coverage.py               # the working tree
    .venv/bin/python bench/typing_coverage.py --rev a68e33e # at a commit
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "src/fabbench"
# The per-module flags that `mypy --strict` turns on (mypy 2.4's --help); --warn-unused-ignores
# and --warn-redundant-casts are global and are not counted here.
STRICT_FLAGS = ("disallow_any_generics", "disallow_subclassing_any", "disallow_untyped_calls",
                "disallow_untyped_defs", "disallow_incomplete_defs", "check_untyped_defs",
                "disallow_untyped_decorators", "warn_return_any", "no_implicit_reexport",
                "strict_equality", "extra_checks")


def git(rev: str, *args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True,
                          text=True).stdout


def read(path: str, rev: str | None) -> str:
    """The text of a file of the repository, in the tree or at ``rev``."""
    return (REPO / path).read_text() if rev is None else git(rev, "show", f"{rev}:{path}")


def modules(rev: str | None) -> Iterator[tuple[str, int]]:
    """(dotted module name, line count) of every module of the package."""
    if rev is None:
        names = [str(p.relative_to(REPO)) for p in (REPO / PACKAGE).rglob("*.py")]
    else:
        names = git(rev, "ls-tree", "-r", "--name-only", rev, "--", PACKAGE).splitlines()
    for name in sorted(n for n in names if n.endswith(".py")):
        parts = Path(name).relative_to("src").with_suffix("").parts
        dotted = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield dotted, len(read(name, rev).splitlines())


def matches(pattern: str, module: str) -> bool:
    """Whether a mypy override's module pattern covers the module (`a.*` covers `a` too)."""
    if pattern.endswith(".*"):
        stem = pattern[:-2]
        return module == stem or module.startswith(stem + ".")
    return module == pattern


def specificity(pattern: str) -> tuple[bool, int]:
    return not pattern.endswith(".*"), len(pattern)


def flags_for(module: str, config: Mapping[str, object]) -> dict[str, bool]:
    """The strict flags' values for one module."""
    on = bool(config.get("strict", False))
    flags = {flag: bool(config.get(flag, on)) for flag in STRICT_FLAGS}
    overrides = config.get("overrides", [])
    assert isinstance(overrides, list)
    found: list[tuple[tuple[bool, int], dict[str, object]]] = []
    for override in overrides:
        patterns = override["module"]
        for pattern in [patterns] if isinstance(patterns, str) else patterns:
            if matches(pattern, module):
                found.append((specificity(pattern), override))
    for _, override in sorted(found, key=lambda f: f[0]):
        flags.update({flag: bool(override[flag]) for flag in STRICT_FLAGS if flag in override})
    return flags


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rev", help="measure at this commit instead of the working tree")
    args = ap.parse_args()
    config = tomllib.loads(read("pyproject.toml", args.rev))["tool"]["mypy"]
    strict_modules = strict_lines = all_modules = all_lines = 0
    for module, lines in modules(args.rev):
        all_modules += 1
        all_lines += lines
        if all(flags_for(module, config).values()):
            strict_modules += 1
            strict_lines += lines
        else:
            print(f"not strict: {module} ({lines} lines)")
    print(f"strict: {strict_modules} of {all_modules} modules, {strict_lines} of {all_lines} "
          f"lines ({100 * strict_lines / all_lines:.1f} %) ({args.rev or 'working tree'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
