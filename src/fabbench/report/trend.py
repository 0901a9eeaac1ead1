"""`fabbench report DIR --trend`: each node's figure, and each link's, across the runs of a
directory in the order they started, judged by the floors file's rules as `floors verify`
judges one run (fabbench.floors.judge over fabbench.floors.points), and each series' drift
against its floor (report.drift): the nodes drifting toward the floor are flagged before they
cross it. As lines for the console and as JSON (format fabbench-trend/1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fabbench.errors import UsageError
from fabbench.floors.judge import Judgement, judge
from fabbench.floors.points import METRICS, Point, points_of
from fabbench.floors.rules import Floors, Rule
from fabbench.report import drift
from fabbench.results.runs import Series

FORMAT = "fabbench-trend/1"
WINDOW = 10  # the runs the slope is fitted over (the latest ones)
AHEAD = 5    # the runs the fit is projected ahead


@dataclass(frozen=True)
class RunOf:
    """A run of the trend: its id, when it started and its file."""

    run_id: str
    started: str
    file: str


@dataclass(frozen=True, kw_only=True)
class TrendRow:
    """One node's (or link's) series under one rule: its figure and floor in each run of the
    trend (None: not in that run), its fit over the window and its verdict."""

    subject: str                 # the node, or "a <-> b" for a link
    figures: tuple[float | None, ...]
    floors: tuple[float | None, ...]
    fit: drift.DriftFit
    judged: drift.Judged

    @property
    def runs(self) -> int:
        return sum(f is not None for f in self.figures)

    @property
    def first(self) -> float | None:
        return next((f for f in self.figures if f is not None), None)

    @property
    def last(self) -> float | None:
        return next((f for f in reversed(self.figures) if f is not None), None)

    @property
    def floor(self) -> float | None:
        return self.floors[-1] if self.floors else None

    @property
    def flagged(self) -> bool:
        return self.judged.verdict in drift.FLAGGED

    def to_json(self, runs: Sequence[RunOf]) -> dict[str, Any]:
        return {"subject": self.subject, "verdict": self.judged.verdict, "why": self.judged.why,
                "runs": self.runs, "first": self.first, "last": self.last,
                "slope_per_run": self.fit.slope, "fitted": self.fit.fitted,
                "projected": self.fit.projected, "p_value": self.fit.p_value,
                "floor": self.floor, "runs_to_floor": self.judged.runs_to_floor,
                "series": [{"run": r.run_id, "figure": f, "floor": fl}
                           for r, f, fl in zip(runs, self.figures, self.floors, strict=True)
                           if f is not None]}


@dataclass(frozen=True, kw_only=True)
class RuleTrend:
    """The series one rule judged: every node's; for a rule on bandwidth, the links (the
    figures of a node's pairs) of each flagged node, as its evidence, and how many links the
    latest run holds. A link is not flagged on its own: one pair's figure is noisier than a node's
    median of them, and a cluster has n(n-1)/2 links."""

    rule: Rule
    nodes: tuple[TrendRow, ...]
    links: tuple[TrendRow, ...] = ()
    links_latest: int = 0  # the links (pairs) of the latest run

    @property
    def unit(self) -> str:
        return METRICS[self.rule.metric][0] if self.rule.metric else ""

    def to_json(self, runs: Sequence[RunOf]) -> dict[str, Any]:
        return {"rule": self.rule.id, "metric": self.rule.metric, "unit": self.unit,
                "higher_is_better": self.rule.higher_is_better,
                "nodes": [n.to_json(runs) for n in self.nodes],
                "links_latest": self.links_latest,
                "links": [ln.to_json(runs) for ln in self.links]}


@dataclass(frozen=True, kw_only=True)
class Trend:
    floors: Floors
    files: tuple[str, ...]
    runs: tuple[RunOf, ...]
    window: int
    ahead: int
    rules: tuple[RuleTrend, ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def flagged(self) -> list[tuple[RuleTrend, TrendRow]]:
        return [(r, n) for r in self.rules for n in r.nodes if n.flagged]

    def lines(self) -> list[str]:
        """The console's text: per rule a table of its nodes, then its flagged links."""
        first, last = self.runs[0].started, self.runs[-1].started
        out = [f"# trend of {len(self.runs)} runs, started {first} to {last}: the slope over "
               f"the last {min(self.window, len(self.runs))} runs, projected {self.ahead} "
               f"run(s) ahead, against the floors of {self.floors.name} ({self.floors.path})"]
        for r in self.rules:
            side = "floor" if r.rule.higher_is_better else "limit"
            out.append(f"# rule {r.rule.id}: {r.rule.workload} {r.rule.metric} in {r.unit}, "
                       f"the {side} as `floors verify` makes it")
            out += _table("node", r.nodes)
            if r.links:
                out.append(f"# the links of the flagged node(s), of the {r.links_latest} of "
                           "the latest run:")
                out += _table("link", r.links)
        flagged = self.flagged()
        names = ", ".join(f"{n.subject} ({n.judged.verdict})" for _, n in flagged)
        out.append(f"# {len(flagged)} node(s) flagged" + (f": {names}" if flagged else ""))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "floors": str(self.floors.path), "name": self.floors.name,
                "files": list(self.files), "window": self.window, "ahead": self.ahead,
                "alpha": drift.ALPHA,
                "runs": [{"run": r.run_id, "started": r.started, "file": r.file}
                         for r in self.runs],
                "rules": [r.to_json(self.runs) for r in self.rules],
                "flagged": [{"rule": r.rule.id, "node": n.subject, "verdict": n.judged.verdict}
                            for r, n in self.flagged()],
                "warnings": list(self.warnings)}


def _num(v: float | None, fmt: str = ".4g") -> str:
    return "-" if v is None else format(v, fmt)


def _table(what: str, rows: Sequence[TrendRow]) -> list[str]:
    width = max([len(what), *(len(r.subject) for r in rows)])
    out = [f"{what:<{width}} {'runs':>5} {'first':>10} {'last':>10} {'slope/run':>10} "
           f"{'projected':>10} {'floor':>10}  verdict"]
    for r in rows:
        verdict = r.judged.verdict
        if r.judged.verdict == drift.DRIFTING and r.judged.runs_to_floor is not None:
            verdict += f" (floor in ~{r.judged.runs_to_floor:.1f} runs)" \
                if r.judged.runs_to_floor else " (its fit past the floor already)"
        out.append(f"{r.subject:<{width}} {r.runs:>5} {_num(r.first):>10} {_num(r.last):>10} "
                   f"{_num(r.fit.slope, '+.3g'):>10} {_num(r.fit.projected):>10} "
                   f"{_num(r.floor):>10}  {verdict}")
    return out


def ordered(series: Sequence[Series]) -> list[Series]:
    """The runs in the order they started (their run records' ``started``; equal times by run
    id); a run given twice, or a start time that is not one, is refused."""
    seen: dict[str, Path] = {}
    for s in series:
        if s.run.run_id in seen:
            raise UsageError(f"run {s.run.run_id} is given twice ({seen[s.run.run_id]} and "
                             f"{s.path}): a trend takes each run once")
        seen[s.run.run_id] = s.path
    return sorted(series, key=lambda s: (_started(s), s.run.run_id))


def _started(s: Series) -> datetime:
    try:
        when = datetime.fromisoformat(s.run.started)
    except (TypeError, ValueError):
        raise UsageError(f"{s.path}: run {s.run.run_id}: started = {s.run.started!r} is not "
                         "a time (ISO 8601)") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _node_verdicts(points: Sequence[Point], floors: Floors) -> list[Judgement]:
    """One run's per-node verdicts that have a figure and a floor, as verify judges them."""
    return [v for v in judge(floors, points)
            if v.node is not None and v.figure is not None and v.floor is not None
            and v.rule.metric is not None]


def trend_of(series: Sequence[Series], floors: Floors, *, window: int = WINDOW,
             ahead: int = AHEAD, files: Sequence[str] = ()) -> Trend:
    """The trend of the given runs (any order) against ``floors``."""
    if window < drift.MIN_RUNS or ahead < 1:
        raise UsageError(f"--window takes at least {drift.MIN_RUNS} runs and --ahead at least "
                         f"1, not {window} and {ahead}")
    runs: list[RunOf] = []
    judged: list[list[Judgement]] = []
    left_out: list[str] = []
    nodes_seen = False
    for s in ordered(series):
        points = list(points_of([s]))
        nodes_seen = nodes_seen or any(p.node is not None for p in points)
        verdicts = _node_verdicts(points, floors)
        if not verdicts:
            left_out.append(f"{s.path}: run {s.run.run_id} left out of the trend: no node's "
                            f"figure in it that a rule of {floors.name} judges")
            continue
        runs.append(RunOf(s.run.run_id, s.run.started, str(s.path)))
        judged.append(verdicts)
    if not runs:
        raise UsageError(
            "no node's figure to follow: the runs hold no per-node figures (pairs records)"
            if not nodes_seen else f"no rule of the floors {floors.name} ({floors.path}) "
            "judges the nodes' figures: give --floors FILE with a pairs rule (docs/floors.md)")
    if len(runs) < drift.MIN_RUNS:
        raise UsageError(f"a trend needs at least {drift.MIN_RUNS} runs with nodes' figures; "
                         f"{len(runs)} given")
    rules = [r for r in floors.rules if any(v.rule.id == r.id for vs in judged for v in vs)]
    return Trend(floors=floors, files=tuple(files) or tuple(sorted({r.file for r in runs})),
                 runs=tuple(runs), window=window, ahead=ahead,
                 rules=tuple(_rule_trend(r, judged, window, ahead) for r in rules),
                 warnings=tuple(left_out))


def _rule_trend(rule: Rule, judged: Sequence[Sequence[Judgement]], window: int,
                ahead: int) -> RuleTrend:
    count = len(judged)
    mine = [[v for v in verdicts if v.rule.id == rule.id] for verdicts in judged]
    figures: dict[str, list[float | None]] = {}
    floors: dict[str, list[float | None]] = {}
    for i, verdicts in enumerate(mine):
        for v in verdicts:
            assert v.node is not None  # _node_verdicts keeps the nodes' only
            figures.setdefault(v.node, [None] * count)[i] = v.figure
            floors.setdefault(v.node, [None] * count)[i] = v.floor
    nodes = _rows(rule, sorted(figures), figures, floors, window, ahead)
    if rule.metric != "bw":  # the pairs' figures (a node's peers) are bandwidths
        return RuleTrend(rule=rule, nodes=tuple(nodes))
    bad = {n.subject for n in nodes if n.flagged}
    links: dict[str, list[float | None]] = {}
    link_floors: dict[str, list[float | None]] = {}
    for i, verdicts in enumerate(mine):
        for v in verdicts:
            assert v.node is not None and v.point is not None
            if v.node not in bad:
                continue
            for peer, bw in v.point.peers.items():  # a pair of two flagged nodes: either's
                name = f"{min(v.node, peer)} <-> {max(v.node, peer)}"
                links.setdefault(name, [None] * count)[i] = bw
                link_floors.setdefault(name, [None] * count)[i] = v.floor
    return RuleTrend(rule=rule, nodes=tuple(nodes),
                     links=tuple(_rows(rule, sorted(links), links, link_floors, window, ahead)),
                     links_latest=len({frozenset((v.node, peer)) for v in mine[-1]
                                       if v.point is not None for peer in v.point.peers}))


def _rows(rule: Rule, names: Sequence[str], figures: dict[str, list[float | None]],
          floors: dict[str, list[float | None]], window: int, ahead: int) -> list[TrendRow]:
    if not names:
        return []
    higher = rule.higher_is_better
    fitted = drift.fits(drift.series_window([figures[n] for n in names], window), ahead, higher)
    out = []
    for name, fit in zip(names, fitted, strict=True):
        xs, fl = figures[name], floors[name]
        out.append(TrendRow(subject=name, figures=tuple(xs), floors=tuple(fl), fit=fit,
                       judged=drift.judged(fit, xs[-1], fl[-1], higher_is_better=higher,
                                           ahead=ahead, in_latest=xs[-1] is not None)))
    return out
