"""``fabbench floors verify``: results of any source read as points, judged against a floors
file, and the verdict as lines and as JSON (format fabbench-verdict/1)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabbench.errors import UsageError
from fabbench.floors.judge import FAIL, NOT_JUDGED, PASS, Judgement, exit_code, judge
from fabbench.floors.points import Point, points_of
from fabbench.floors.rules import Floors
from fabbench.results.reader import collector_paused
from fabbench.results.runs import expand, split_runs

FORMAT = "fabbench-verdict/1"


def is_fabbench(path: Path) -> bool:
    """Is this a fabbench results file (JSON Lines records), not another tool's output? A
    .jsonl file is always read as fabbench's (a bad one gets the results loader's message);
    another file is fabbench's when its first line is a JSON object with a "kind"."""
    if path.suffix == ".jsonl":
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(4096).lstrip()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    if not head.startswith(b"{"):
        return False
    first = head.split(b"\n", 1)[0]
    try:
        return "kind" in json.loads(first)
    except ValueError:
        return b'"kind"' in first


def read_points(paths: Sequence[str | Path]) -> list[Point]:
    """Every point of the given files and directories (a directory: its *.jsonl), in order:
    fabbench's results, nccl-tests' and OSU's output (fabbench.floors.peer_output)."""
    points: list[Point] = []
    for path in expand(paths):
        if is_fabbench(path):
            points += points_of(split_runs(path))
        else:
            from fabbench.floors.peer_output import read_foreign

            points += read_foreign(path)
    return points


@dataclass
class Verification:
    floors: Floors
    files: list[str]
    verdicts: list[Judgement]

    @property
    def exit_code(self) -> int:
        return exit_code(self.verdicts)

    def counts(self) -> dict[str, int]:
        return {s: sum(v.status == s for v in self.verdicts) for s in (PASS, FAIL, NOT_JUDGED)}

    def lines(self) -> list[str]:
        c = self.counts()
        out = [f"# floors {self.floors.path} ({self.floors.name}, {len(self.floors.rules)} "
               f"rules) against {len(self.files)} file(s)"]
        out += [v.line() for v in self.verdicts if v.status == FAIL]
        out += [v.line() for v in self.verdicts if v.status == PASS]
        out += [v.line() for v in self.verdicts if v.status == NOT_JUDGED]
        failed_nodes = sorted({v.node for v in self.verdicts if v.status == FAIL and v.node})
        tail = f"verdict: {c[FAIL]} failed, {c[PASS]} passed, {c[NOT_JUDGED]} not judged"
        if failed_nodes:
            tail += f"; failed node(s): {', '.join(failed_nodes)}"
        if not c[PASS] and not c[FAIL]:
            tail += "; nothing was judged, which is not a pass"
        out.append(f"{tail} (exit {self.exit_code})")
        return out

    def verdict(self) -> FloorsVerdict:
        """The verdict as `fabbench floors verify --json` writes it: every rule's, and each node's
        worst (a failure over a pass over not judged; of equals, the last)."""
        nodes: dict[str, NodeVerdict] = {}
        rank = {FAIL: 2, PASS: 1, NOT_JUDGED: 0}
        for v in self.verdicts:
            if v.node is None:
                continue
            n = nodes.get(v.node) or NodeVerdict(
                node=v.node, status=NOT_JUDGED, figure=None, unit=v.unit, floor=None,
                margin=None, metric=v.rule.metric, rules=(), line="")
            n = dataclasses.replace(n, rules=(*n.rules, v.rule.id))
            if rank[v.status] >= rank[n.status]:
                n = dataclasses.replace(n, status=v.status, figure=v.figure, floor=v.floor,
                                        margin=v.margin, unit=v.unit, metric=v.rule.metric,
                                        line=v.line())
            nodes[v.node] = n
        return FloorsVerdict(floors=str(self.floors.path), name=self.floors.name,
                       files=tuple(self.files), ok=self.exit_code == 0,
                       exit_code=self.exit_code, counts=self.counts(),
                       rules=tuple(v.to_json() for v in self.verdicts),
                       nodes=tuple(nodes.values()))

    def to_json(self) -> dict[str, Any]:
        return self.verdict().to_json()


@dataclass(frozen=True, kw_only=True)
class NodeVerdict:
    """A node's verdict: its worst rule's status, figure and line, and every rule that judged
    it."""

    node: str
    status: str
    figure: float | None
    unit: str | None
    floor: float | None
    margin: float | None
    metric: str | None
    rules: tuple[str, ...]
    line: str

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "status": self.status, "figure": self.figure,
                "unit": self.unit, "floor": self.floor, "margin": self.margin,
                "metric": self.metric, "rules": list(self.rules), "line": self.line}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> NodeVerdict:
        return cls(**{**data, "rules": tuple(data["rules"])})


@dataclass(frozen=True, kw_only=True)
class FloorsVerdict:
    """The JSON of `fabbench floors verify --json` (FORMAT); each rule's verdict as
    Judgement.to_json writes it."""

    floors: str
    name: str
    files: tuple[str, ...]
    ok: bool
    exit_code: int
    counts: Mapping[str, int]
    rules: tuple[Mapping[str, Any], ...]
    nodes: tuple[NodeVerdict, ...]

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "floors": self.floors, "name": self.name,
                "files": list(self.files), "ok": self.ok, "exit_code": self.exit_code,
                "counts": dict(self.counts), "rules": [dict(r) for r in self.rules],
                "nodes": [n.to_json() for n in self.nodes]}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> FloorsVerdict:
        """The verdict of its JSON (a UsageError for another format)."""
        if data.get("format") != FORMAT:
            raise UsageError(f"not a verdict of `fabbench verify --json` (format {FORMAT}): "
                             f"format is {data.get('format')!r}")
        return cls(floors=data["floors"], name=data["name"], files=tuple(data["files"]),
                   ok=data["ok"], exit_code=data["exit_code"], counts=data["counts"],
                   rules=tuple(data["rules"]),
                   nodes=tuple(NodeVerdict.read(n) for n in data["nodes"]))


def placement(verdicts: Sequence[Judgement]) -> list[str]:
    """The judged verdicts as placements: a figure against its rule's reference figure where
    the rule has one ("46.2 GB/s: 96 % of the 48 GB/s reference"), else its verdict line."""
    out = []
    for v in verdicts:
        if v.status == NOT_JUDGED:
            continue
        ref = v.rule.reference
        if ref and v.figure is not None and v.floor is not None:
            out.append(f"{v.subject}: {v.rule.metric} {v.figure:.4g} {v.unit}: "
                       f"{v.figure / ref:.0%} of the {ref:.4g} {v.unit} reference "
                       f"({v.rule.description or v.rule.id}; {v.rule.source}); floor "
                       f"{v.floor:.4g} {v.unit}: {v.status} [rule {v.rule.id}]")
        else:
            out.append(v.line())
    return out


def verify(floors: Floors, paths: Sequence[str | Path]) -> Verification:
    files = [str(p) for p in expand(paths)]
    with collector_paused():  # reading and judging make no cycles (results.reader)
        return Verification(floors, files, judge(floors, read_points(paths)))
