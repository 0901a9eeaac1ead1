"""A study: a matrix of cells (fabric x primitive x GPUDirect x workload x nodes [x link]) kept as
data in a TOML file, validated once, before anything runs.

    name = "quick"
    [matrix]                # the axes (every combination is a cell); fabric = ["*"]: every profile
    fabric = ["ethernet"]   # also primitive, gpudirect, nodes, link (emulated link rates)
    workload = ["stencil"]
    [run]                   # options of every cell, as `fabbench run` takes them
    [workload.stencil]      # a workload: its kind (a --workload name) and its own options
    kind = "halo"
    [[exclude]] / [[override]]   # combinations left out; options for the cells a match selects

A bad file is refused with its path, line and key (``UsageError``). Names are looked up in the
package's studies, /etc/fabbench/studies, ~/.config/fabbench/studies and $FABBENCH_STUDY_PATH
(later wins); a .toml path works too. The shipped studies in study/studies/ are full examples."""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import tomllib

from fabbench import catalog
from fabbench.config import STUDY_KEYS, Field, RunConfig, study_value
from fabbench.errors import UsageError
from fabbench.fabrics.profile import GPUDIRECT
from fabbench.study.locate import line_of

BUILTIN_DIR = Path(__file__).parent / "studies"
AXES = ("workload", "fabric", "primitive", "gpudirect", "nodes", "link")
KINDS = tuple(catalog.WORKLOADS)  # a cell's workload: one of them (pairs: the slow node)
_TOP_KEYS = ("name", "description", "matrix", "run", "workload", "exclude", "override")
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")

# The keys a cell may set: the study's own (where the ranks go, how long the cell may take),
# then every field of the run configuration (fabbench.config) but the matrix's axes and what the
# study places itself (--ranks, --out); each with the TOML types it takes and the workload kinds
# it belongs to (None: every kind).
_TOML = {"text": (str,), "int": (int,), "float": (int, float), "switch": (bool,),
         "list": (str, list)}
_OWN_KEYS = {"ranks_per_node": ((int,), None), "deadline": ((int, float), None),
             "retry": ((str,), None)}
# retry = "transient": a cell that failed from a fault on the wire (a peer that timed out, a
# connection reset: study.run.transient) runs once more; "none" (the default) never
RETRIES = ("none", "transient")


def _shared(f: Field, shares: tuple[str, ...]) -> bool:
    """Whether a workload that shares the sections ``shares`` (Workload.shares, by name) takes
    the section field ``f``: those its section's class lends (SHARED), all where it names none."""
    if f.section not in shares:
        return False
    return f.name in getattr(catalog.SECTIONS[f.section], "SHARED", (f.name,))


KEYS: Mapping[str, tuple[tuple[type, ...], tuple[str, ...] | None]] = MappingProxyType({
    **_OWN_KEYS,
    **{key: (_TOML[f.option.kind.name], None if f.section is None else
             # its section's, and those of the workloads that run by the field too (their
             # Workload.shares)
             (f.section, *(w.name for w in catalog.WORKLOADS.values() if _shared(f, w.shares))))
       for key, f in STUDY_KEYS.items()
       if not f.option.placed and key not in (*AXES, "kind")}})
DEFAULT_DEADLINE_S = 600.0


def _reaches(key: str, kind: str) -> bool:
    """Whether the option ``key`` is one of the workloads of that kind (of every kind: None)."""
    kinds = KEYS[key][1]
    return kinds is None or kind in kinds


def search_path() -> list[Path]:
    dirs = [BUILTIN_DIR, Path("/etc/fabbench/studies"), Path.home() / ".config/fabbench/studies"]
    dirs += [Path(p) for p in os.environ.get("FABBENCH_STUDY_PATH", "").split(":") if p]
    return dirs


def available_studies() -> dict[str, Path]:
    """Name -> file over the search path (later directories override earlier ones)."""
    from fabbench.fabrics.profile import toml_files

    return toml_files(search_path())


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One launch of `fabbench run`: its place in the matrix, its keys as the study gave them
    (``options``) and the run configuration they make (``config``)."""

    id: str
    workload: str  # the [workload.NAME] it runs
    kind: str      # a workload of fabbench.catalog
    fabric: str
    primitive: str
    gpudirect: str
    nodes: int
    link: str | None
    options: Mapping[str, Any]
    config: RunConfig

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.id):
            raise UsageError(f"bad cell id {self.id!r}")

    @property
    def ranks_per_node(self) -> int:
        return int(self.options.get("ranks_per_node", 1))

    @property
    def ranks(self) -> int:
        return self.ranks_per_node * self.nodes

    @property
    def deadline_s(self) -> float:
        return float(self.options.get("deadline", DEFAULT_DEADLINE_S))

    @property
    def retry(self) -> str:
        return str(self.options.get("retry", "none"))

    @property
    def device(self) -> str | None:
        """cuda when the cell needs GPU buffers (a GPU-only primitive such as nccl; GPUDirect on
        or off, an A/B of GPU buffers), else what was asked (None: fabbench run's default)."""
        return self.config.device

    def axes(self) -> dict[str, Any]:
        return {"workload": self.workload, "fabric": self.fabric, "primitive": self.primitive,
                "gpudirect": self.gpudirect, "nodes": self.nodes, "link": self.link}

    def run_args(self) -> list[str]:
        """The arguments of `fabbench run` for this cell (without --out and --ranks)."""
        return self.config.to_argv()


@dataclass(frozen=True, kw_only=True)
class Study:
    name: str
    description: str
    source: str
    sha256: str
    axes: Mapping[str, tuple[Any, ...]]
    cells: tuple[Cell, ...] = field(default_factory=tuple)

    def cell(self, cell_id: str) -> Cell:
        for c in self.cells:
            if c.id == cell_id:
                return c
        raise KeyError(cell_id)


class _Source:
    """The file being read: errors name it, the line and the key."""

    def __init__(self, path: Path, text: str) -> None:
        self.path, self.text = path, text

    def error(self, key: tuple[str | int, ...], message: str, value: object = None
              ) -> UsageError:
        shown = ".".join(str(k) if isinstance(k, str) else f"[{k}]" for k in key).replace(".[",
                                                                                        "[")
        line = line_of(self.text, key, value)
        return UsageError(f"{self.path}:{line}: {shown or 'study'}: {message}")


def find_study(name_or_path: str) -> Path:
    if name_or_path.endswith(".toml") or os.sep in name_or_path:
        path = Path(name_or_path)
        if not path.is_file():
            raise UsageError(f"no study file {name_or_path}")
        return path
    studies = available_studies()
    if name_or_path not in studies:
        raise UsageError(f"unknown study {name_or_path!r} (known: {', '.join(sorted(studies))})")
    return studies[name_or_path]


def load_study(name_or_path: str) -> Study:
    path = find_study(name_or_path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read study {path}: {exc.strerror}") from None
    text = raw.decode(errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    return parse_study(data, _Source(path, text), hashlib.sha256(raw).hexdigest())


def _unknown(src: _Source, table: Mapping[str, Any], allowed: tuple[str, ...] | Mapping[str, Any],
             where: tuple[str | int, ...]) -> None:
    for key in table:
        if key not in allowed:
            raise src.error((*where, key), f"unknown key {key!r} (allowed: "
                            f"{', '.join(sorted(allowed))})")


def _table(src: _Source, data: Mapping[str, Any], key: str, *, required: bool = False
           ) -> dict[str, Any]:
    value = data.get(key, {} if not required else None)
    if value is None:
        raise src.error((), f"missing table [{key}]")
    if not isinstance(value, dict):
        raise src.error((key,), "expected a table")
    return value


def _options(src: _Source, table: Mapping[str, Any], where: tuple[str | int, ...],
             kind: str | None, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    out = {}
    for key, value in table.items():
        if key in skip:
            continue
        if key not in KEYS:
            raise src.error((*where, key), f"unknown key {key!r} (options: "
                            f"{', '.join(sorted(KEYS))})")
        types, kinds = KEYS[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise src.error((*where, key), f"expected {' or '.join(t.__name__ for t in types)}, "
                            f"got {type(value).__name__}")
        if kind is not None and kinds is not None and kind not in kinds:
            raise src.error((*where, key), f"{key!r} is an option of {', '.join(kinds)} "
                            f"workloads, not of a {kind} workload")
        if key in STUDY_KEYS:
            try:
                study_value(key, value)
            except UsageError as exc:
                raise src.error((*where, key), str(exc), value) from None
        out[key] = value
    return out


def _axis(src: _Source, matrix: Mapping[str, Any], axis: str, default: list[Any] | None
          ) -> list[Any]:
    values = matrix.get(axis, default)
    if values is None:
        raise src.error(("matrix",), f"missing axis {axis!r}")
    if not isinstance(values, list):
        raise src.error(("matrix", axis), "expected a list")
    if not values:
        raise src.error(("matrix", axis), "empty: the matrix has no cells")
    if len(set(map(str, values))) != len(values):
        raise src.error(("matrix", axis), "a value is listed twice")
    return values


def parse_study(data: Mapping[str, Any], src: _Source, sha256: str = "") -> Study:
    from fabbench.comm.primitives import PRIMITIVES
    from fabbench.emulate.cluster_spec import parse_rate
    from fabbench.fabrics.profile import available_profiles

    _unknown(src, data, _TOP_KEYS, ())
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise src.error(("name",), "name must be lower-case letters, digits, '-' or '_'")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise src.error(("description",), "expected a string")
    matrix = _table(src, data, "matrix", required=True)
    _unknown(src, matrix, AXES, ("matrix",))
    workloads = _table(src, data, "workload", required=True)
    if not workloads:
        raise src.error(("workload",), "no [workload.NAME] table")

    # the axes, each value checked
    profiles = available_profiles()
    fabrics = _axis(src, matrix, "fabric", None)
    if "*" in fabrics:
        fabrics = [f for f in fabrics if f != "*"] + sorted(set(profiles) - set(fabrics))
    for f in fabrics:
        if f not in profiles:
            raise src.error(("matrix", "fabric"), f"unknown fabric {f!r} (known: "
                            f"{', '.join(sorted(profiles))}, or '*')", f)
    primitives = _axis(src, matrix, "primitive", None)
    for p in primitives:
        if p not in PRIMITIVES:
            raise src.error(("matrix", "primitive"), f"unknown primitive {p!r} (known: "
                            f"{', '.join(PRIMITIVES)})", p)
    gpudirect = _axis(src, matrix, "gpudirect", ["auto"])
    for g in gpudirect:
        if g not in GPUDIRECT:
            raise src.error(("matrix", "gpudirect"), f"expected {', '.join(GPUDIRECT)}, not "
                            f"{g!r}", g)
    nodes = _axis(src, matrix, "nodes", [1])
    for n in nodes:
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 4096:
            raise src.error(("matrix", "nodes"), f"a node count is a whole number from 1 to "
                            f"4096, not {n!r}", n)
    links = _axis(src, matrix, "link", [None])
    for link in links:
        if link is not None:
            if not isinstance(link, str):
                raise src.error(("matrix", "link"), f"a link rate is a string such as "
                                f"\"1gbit\", not {link!r}", link)
            try:
                parse_rate(link)
            except UsageError as exc:
                raise src.error(("matrix", "link"), str(exc), link) from None
    names = _axis(src, matrix, "workload", None)
    for w in names:
        if w not in workloads:
            raise src.error(("matrix", "workload"), f"no [workload.{w}] table (defined: "
                            f"{', '.join(workloads)})", w)

    # options: [run], then each workload's, then the overrides that match
    base = _options(src, _table(src, data, "run"), ("run",), None)
    kinds, wl_options = {}, {}
    for w, table in workloads.items():
        if not isinstance(table, dict):
            raise src.error(("workload", w), "expected a table")
        kind = table.get("kind")
        if kind not in KINDS:
            raise src.error(("workload", w, "kind") if "kind" in table else ("workload", w),
                            f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        if not _NAME.fullmatch(w):
            raise src.error(("workload", w), "a workload name is lower-case letters, digits, "
                            "'-' or '_'")
        kinds[w] = kind
        wl_options[w] = _options(src, table, ("workload", w), kind, skip=("kind",))
    excludes = _selectors(src, data, "exclude", fabrics, primitives, gpudirect, nodes, links,
                          names)
    overrides = _overrides(src, data, fabrics, primitives, gpudirect, nodes, links, names, kinds)

    axes = {"workload": names, "fabric": fabrics, "primitive": primitives,
            "gpudirect": gpudirect, "nodes": nodes, "link": links}
    cells = []
    for w, fab, prim, gdr, n, link in itertools.product(names, fabrics, primitives, gpudirect,
                                                        nodes, links):
        where = {"workload": w, "fabric": fab, "primitive": prim, "gpudirect": gdr, "nodes": n,
                 "link": link}
        if any(_matches(sel, where) for sel in excludes):
            continue
        # [run] options of one kind (steps, sizes, ...) reach only the workloads of that kind
        options = {k: v for k, v in base.items() if _reaches(k, kinds[w])}
        options.update(wl_options[w])
        for i, (sel, opts) in enumerate(overrides):
            if _matches(sel, where):
                for key in opts:
                    if not _reaches(key, kinds[w]):
                        raise src.error(("override", i, key), f"{key!r} is not an option of "
                                        f"workload {w!r} ({kinds[w]}), which this override "
                                        "matches")
                options.update(opts)
        cell_id = _cell_id(where, axes)
        cells.append(_cell(src, cell_id, w, kinds[w], where, options))
    if not cells:
        raise src.error(("matrix",), "the matrix leaves no cells (every combination is "
                        "excluded)")
    return Study(name=name, description=description, source=str(src.path), sha256=sha256,
                 axes=MappingProxyType({k: tuple(v) for k, v in axes.items()}),
                 cells=tuple(cells))


def _selectors(src: _Source, data: Mapping[str, Any], key: str, *axes: list[Any]
               ) -> list[dict[str, tuple[Any, ...]]]:
    entries = data.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise src.error((key,), f"expected [[{key}]] tables")
    return [_selector(src, e, (key, i), axes) for i, e in enumerate(entries)]


def _selector(src: _Source, table: Mapping[str, Any], where: tuple[str | int, ...],
              axes: tuple[list[Any], ...]) -> dict[str, tuple[Any, ...]]:
    if not table:
        raise src.error(where, "empty: it would select every cell")
    known = dict(zip(("fabric", "primitive", "gpudirect", "nodes", "link", "workload"), axes,
                     strict=True))
    out = {}
    for axis, value in table.items():
        if axis not in known:
            raise src.error((*where, axis), f"unknown axis {axis!r} (axes: "
                            f"{', '.join(AXES)})")
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v not in known[axis]:
                raise src.error((*where, axis), f"{v!r} is not on the matrix's {axis} axis "
                                f"({', '.join(map(str, known[axis]))})", v)
        out[axis] = tuple(values)
    return out


def _overrides(src: _Source, data: Mapping[str, Any], fabrics: list[Any],
               primitives: list[Any], gpudirect: list[Any], nodes: list[Any], links: list[Any],
               names: list[Any], kinds: dict[str, Any]
               ) -> list[tuple[dict[str, tuple[Any, ...]], dict[str, Any]]]:
    entries = data.get("override", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise src.error(("override",), "expected [[override]] tables")
    out = []
    for i, entry in enumerate(entries):
        match = entry.get("match")
        if not isinstance(match, dict):
            raise src.error(("override", i), "needs match = { axis = value, ... }")
        sel = _selector(src, match, ("override", i, "match"),
                        (fabrics, primitives, gpudirect, nodes, links, names))
        opts = _options(src, entry, ("override", i), None, skip=("match",))
        if not opts:
            raise src.error(("override", i), "sets no option")
        out.append((sel, opts))
    return out


def _matches(selector: Mapping[str, tuple[Any, ...]], where: Mapping[str, Any]) -> bool:
    return all(where[axis] in values for axis, values in selector.items())


def _cell_id(where: Mapping[str, Any], axes: Mapping[str, list[Any]]) -> str:
    parts = [where["workload"], where["fabric"], where["primitive"]]
    if len(axes["gpudirect"]) > 1 or where["gpudirect"] != "auto":
        parts.append(f"gdr-{where['gpudirect']}")
    parts.append(f"n{where['nodes']}")
    if where["link"] is not None:
        parts.append(re.sub(r"[^a-z0-9]+", "", where["link"].lower()))
    return "-".join(parts)


def _cell(src: _Source, cell_id: str, workload: str, kind: str, where: Mapping[str, Any],
          options: dict[str, Any]) -> Cell:
    """The cell's configuration, checked through the same Plan `fabbench run` builds: a study
    cannot hold a cell that `fabbench run` would refuse for its options."""
    from fabbench.comm import primitives
    from fabbench.plan import Plan

    ranks_per_node = options.get("ranks_per_node", 1)
    if ranks_per_node < 1:
        raise src.error(("run", "ranks_per_node"), "must be at least 1")
    if not 0 < options.get("deadline", DEFAULT_DEADLINE_S) <= 86400:
        raise src.error(("run", "deadline"), "a deadline is between 0 and 86400 seconds")
    if options.get("retry", "none") not in RETRIES:
        raise src.error(("run", "retry"), f"takes {' or '.join(RETRIES)}, not "
                                          f"{options['retry']!r}")
    primitive, gpudirect = where["primitive"], where["gpudirect"]
    keys = {k: v for k, v in options.items() if k in STUDY_KEYS}
    if primitives.get(primitive).gpu_only or gpudirect != "auto":
        keys["device"] = "cuda"  # GPU buffers: a GPU-only primitive, or an A/B of GPUDirect
    try:
        config = RunConfig.from_study({**keys, "fabric": where["fabric"], "primitive": primitive,
                                       "gpudirect": gpudirect, "kind": kind})
        Plan.of(config, fabric=config.fabric, primitive=primitive,
                device=config.device or "cpu", ranks=max(1, ranks_per_node * where["nodes"]),
                iface=config.iface, out="-", run_id="study")
    except UsageError as exc:
        raise src.error(("workload", workload), f"cell {cell_id}: {exc}") from None
    return Cell(id=cell_id, workload=workload, kind=kind, fabric=where["fabric"],
                primitive=primitive, gpudirect=gpudirect, nodes=where["nodes"],
                link=where["link"], options=MappingProxyType(options), config=config)
