"""Imports run one way: CLI -> library -> core, and the folders are the layers. Every import of
the package is read from its source (an AST walk: imports inside functions and under ``if
TYPE_CHECKING`` included) and checked against the layers: a module's layer is its folder's (its
top-level package, or the top-level module it is), never its own, so LAYERS names top-level
packages only and there is no exception list. A module may import its own package and lower
layers, never a higher one, nor another package of its own layer; and no module reaches itself
through imports of any kind (no cycle, inside a package either). Results, report, render and the
scaling model never import torch, mpi4py or horovod, neither themselves (even lazily) nor through
what they import at module level. A failure prints every broken rule, one line each.

A new package of fabbench must be declared in LAYERS (the test says so when it is not)."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# lowest first; each entry is a top-level package or module, whose every module it places
LAYERS: Sequence[Sequence[str]] = (
    ("fabbench", "fabbench.errors", "fabbench.procs"),
    ("fabbench.units", "fabbench.option_fields", "fabbench.workload_spec", "fabbench.by_name",
     "fabbench.value_rules"),  # the value rules `render` and the chart's schema share
    ("fabbench.workload_base",),  # what a workload is: one class, registered by name
    ("fabbench.timing", "fabbench.sysinfo", "fabbench.console", "fabbench.emulate",
     "fabbench.trace"),  # a recorded job's communication: read, checked, recorded
    ("fabbench.fabrics", "fabbench.networks", "fabbench.comm"),
    ("fabbench.catalog",),  # every workload (one class each) and installed ones
    ("fabbench.config",),  # the run configuration: every option of `fabbench run`, once
    ("fabbench.results",),  # records, the one loader, a run's link: what every reader shares
    ("fabbench.plan",),
    ("fabbench.workloads", "fabbench.ceiling"),
    ("fabbench.scaling", "fabbench.floors"),  # the scaling model; acceptance floors
    ("fabbench.launch",),  # ranks, launchers (one class each), runtimes, ports
    ("fabbench.runner",),
    ("fabbench.fidelity",),  # times `fabbench run` against bare loops started by its launcher
    ("fabbench.doctor", "fabbench.study"),
    # jobs and studies rendered; results and studies read; the Kubernetes API (node labels)
    ("fabbench.render", "fabbench.report", "fabbench.k8s_api"),
    ("fabbench.tune",),  # library settings searched with launches of `fabbench run`
    ("fabbench.cli",),
    ("fabbench.__main__",),
)
HEAVY = ("torch", "mpi4py", "horovod")
LIGHT = ("fabbench.results", "fabbench.report", "fabbench.render", "fabbench.k8s_api",
         "fabbench.scaling")


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # a module of the package, or a top-level third-party name
    line: int
    eager: bool  # runs when the importer is imported (module level, not TYPE_CHECKING)


def modules(src: Path, package: str) -> dict[str, Path]:
    out = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, eager: bool) -> Iterator[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        deferred = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) or (
            isinstance(child, ast.If) and _type_checking(child))
        if deferred:  # runs later, or never
            yield from _walk(child, False)
        else:
            yield child, eager
            yield from _walk(child, eager)


def imports(src: Path, package: str) -> list[Import]:
    known = modules(src, package)
    found = []
    for name, path in known.items():
        is_pkg = path.name == "__init__.py"
        for node, eager in _walk(ast.parse(path.read_text(), str(path)), True):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the importer's package
                    anchor = name.split(".")
                    anchor = anchor[:len(anchor) - node.level + (1 if is_pkg else 0)]
                    base = ".".join([*anchor, base] if base else anchor)
                # "from pkg import module" imports the module; "from pkg import name" the package
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                           for a in node.names]
            for target in targets:
                if target.split(".")[0] == package:
                    while target not in known:  # a name inside a module: the module
                        target = target.rsplit(".", 1)[0]
                else:
                    target = target.split(".")[0]
                found.append(Import(name, target, node.lineno, eager))
    return found


def layer_of(module: str, layers: Sequence[Sequence[str]]) -> tuple[int, str] | None:
    """(level, folder) of a module: the layer that names its top-level package (or module); the
    package itself (the first name of the lowest layer) names only its own __init__."""
    folder = _top(module)
    for level, names in enumerate(layers):
        if folder in names:
            return level, folder
    return None


def violations(src: Path, package: str, layers: Sequence[Sequence[str]],
               heavy: Sequence[str] = HEAVY, light: Sequence[str] = LIGHT) -> list[str]:
    """Every broken rule, one line each ("file:line: what")."""
    found = imports(src, package)
    known = modules(src, package)
    out = []
    for module in known:
        if layer_of(module, layers) is None:
            out.append(f"{module}: not in any layer: declare its package in LAYERS")
    for imp in found:
        if imp.target.split(".")[0] != package:
            continue
        a, b = layer_of(imp.importer, layers), layer_of(imp.target, layers)
        if a is None or b is None or a[1] == b[1]:
            continue
        if b[0] > a[0]:
            out.append(f"{known[imp.importer]}:{imp.line}: {imp.importer} (layer {a[1]}) "
                       f"imports {imp.target} (layer {b[1]}), a higher layer")
        elif b[0] == a[0] and b[1] != layers[0][0]:
            out.append(f"{known[imp.importer]}:{imp.line}: {imp.importer} imports "
                       f"{imp.target}, another package of its own layer")
    eager: dict[str, set[str]] = {}
    for imp in found:
        if imp.eager:
            eager.setdefault(imp.importer, set()).add(imp.target)
    for module in known:
        if not any(module == p or module.startswith(p + ".") for p in light):
            continue
        for imp in (i for i in found if i.importer == module):
            if imp.target in heavy:
                out.append(f"{known[module]}:{imp.line}: {module} imports {imp.target}")
        chain = _eager_path(module, eager, heavy)
        if chain:
            out.append(f"{known[module]}: {' -> '.join(chain)} (at import time)")
    out += cycles(found, known)
    return list(dict.fromkeys(out))


def cycles(found: Sequence[Import], known: Mapping[str, Path]) -> list[str]:
    """One line per group of modules that import each other, by imports of any kind: a path
    from its first module back to itself, each step with the file and line of its import."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in found:
        if imp.target in known and imp.target != imp.importer:
            edges.setdefault(imp.importer, {}).setdefault(imp.target, imp)
    out = []
    for group in _strongly_connected(edges):
        start = min(group)
        steps = _path(start, start, edges, group)
        where = ", ".join(f"{known[i.importer]}:{i.line}" for i in steps)
        chain = " -> ".join([start, *(i.target for i in steps)])
        out.append(f"import cycle: {chain} ({where})")
    return out


def _strongly_connected(edges: Mapping[str, Mapping[str, Import]]) -> list[set[str]]:
    """The groups of two or more modules that reach each other (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(groups, key=min)


def _path(start: str, goal: str, edges: Mapping[str, Mapping[str, Import]],
          within: set[str]) -> list[Import]:
    """The imports of a shortest path from start back to goal inside one group (breadth first)."""
    previous: dict[str, Import] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w, imp in sorted(edges.get(v, {}).items()):
                if w not in within or w in previous:
                    continue
                previous[w] = imp
                if w == goal:
                    steps = [imp]
                    while steps[0].importer != goal:
                        steps.insert(0, previous[steps[0].importer])
                    return steps
                nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{start} is in a cycle without a path back to itself")


def _top(module: str) -> str:
    """The package a module belongs to (fabbench.report for fabbench.report.tables)."""
    return ".".join(module.split(".")[:2])


def _eager_path(start: str, eager: Mapping[str, set[str]], heavy: Sequence[str]
                ) -> list[str] | None:
    """The chain of module-level imports from start to a heavy library, if there is one."""
    seen, stack = {start}, [[start]]
    while stack:
        chain = stack.pop()
        for target in sorted(eager.get(chain[-1], ())):
            if target in heavy:
                return [*chain, target]
            if target not in seen:
                seen.add(target)
                stack.append([*chain, target])
    return None


def test_fabbench_imports_run_one_way():
    found = violations(SRC, "fabbench", LAYERS)
    assert not found, "imports against the layers:\n" + "\n".join(found)


def test_the_layers_are_folders():
    """No module is placed apart from its folder: every name in LAYERS is a top-level package or
    module of fabbench, named once."""
    names = [name for layer in LAYERS for name in layer]
    known = modules(SRC, "fabbench")
    assert len(names) == len(set(names))
    assert [n for n in names if n not in known or _top(n) != n] == []


def test_the_walk_sees_lazy_and_eager_imports_of_the_real_package():
    found = {(i.importer, i.target): i.eager for i in imports(SRC, "fabbench")}
    assert found[("fabbench.cli.main", "fabbench.runner")] is False  # inside the run command
    assert found[("fabbench.runner", "fabbench.launch.local")] is True
    assert found[("fabbench.comm.torchdist", "torch")] is False


def _package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


SYNTHETIC_LAYERS = (("pkg",), ("pkg.low",), ("pkg.report", "pkg.other"), ("pkg.high",))


def test_a_lazy_upward_import_is_found(tmp_path):
    src = _package(tmp_path, {
        "__init__.py": "", "high/__init__.py": "X = 1\n",
        "low/__init__.py": "def f():\n    from pkg.high import X\n    return X\n",
        "report/__init__.py": ""})
    (bad,) = violations(src, "pkg", SYNTHETIC_LAYERS)
    assert "pkg.low (layer pkg.low) imports pkg.high (layer pkg.high)" in bad
    assert bad.startswith(f"{src / 'pkg/low/__init__.py'}:2:")


def test_same_layer_relative_and_undeclared_imports_are_found(tmp_path):
    src = _package(tmp_path, {
        "__init__.py": "", "high/__init__.py": "", "low/__init__.py": "",
        "report/__init__.py": "", "report/table.py": "from ..other import x\nfrom . import y\n",
        "other/__init__.py": "", "extra/__init__.py": ""})
    found = violations(src, "pkg", SYNTHETIC_LAYERS)
    assert any("pkg.report.table imports pkg.other, another package of its own layer" in v
               for v in found)
    assert any(v.startswith("pkg.extra: not in any layer") for v in found)
    assert len(found) == 2


def test_a_heavy_import_in_a_light_package_is_found_directly_and_through_a_chain(tmp_path):
    src = _package(tmp_path, {
        "__init__.py": "", "high/__init__.py": "",
        "low/__init__.py": "import torch\n",
        "report/__init__.py": "from pkg.low import thing\n\n\ndef f():\n    import mpi4py\n"})
    found = violations(src, "pkg", SYNTHETIC_LAYERS, light=("pkg.report",))
    assert any(v.endswith("pkg.report imports mpi4py") for v in found)
    assert any(v.endswith("pkg.report -> pkg.low -> torch (at import time)") for v in found)
    assert len(found) == 2


@pytest.mark.parametrize("guard", ["if TYPE_CHECKING:", "def f():"])
def test_what_does_not_run_at_import_time_is_no_chain(tmp_path, guard):
    src = _package(tmp_path, {
        "__init__.py": "", "high/__init__.py": "",
        "low/__init__.py": f"TYPE_CHECKING = False\n{guard}\n    import torch\n",
        "report/__init__.py": "import pkg.low\n"})
    assert violations(src, "pkg", SYNTHETIC_LAYERS, light=("pkg.report",)) == []


@pytest.mark.parametrize("guard", ["if TYPE_CHECKING:", "def f():"])
def test_a_cycle_inside_a_package_is_found_whatever_guards_it(tmp_path, guard):
    src = _package(tmp_path, {
        "__init__.py": "", "high/__init__.py": "", "report/__init__.py": "",
        "low/__init__.py": "", "low/a.py": "from pkg.low import b\n",
        "low/b.py": f"TYPE_CHECKING = False\n{guard}\n    from pkg.low.a import x\n"})
    (bad,) = violations(src, "pkg", SYNTHETIC_LAYERS)
    low = src / "pkg" / "low"
    assert bad == (f"import cycle: pkg.low.a -> pkg.low.b -> pkg.low.a "
                   f"({low / 'a.py'}:1, {low / 'b.py'}:3)")
