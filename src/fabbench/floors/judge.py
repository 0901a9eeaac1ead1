"""The verdict: every rule of a floors file against measured points, pass / fail / not judged,
with the figure, the floor and the margin, node by node where the points are per node.

A rule judges each subject's points (one operation at one size and dtype, one node, one
network) in the order given, ``repeats`` at a time, passing on the first try that holds. A
point that lacks what the rule needs is not judged, never passed. A node failing a per-node
rule is only called bad when its pairs with passed nodes miss the floor too (else the slow end
is elsewhere: "not judged", with the evidence); with no passed node, every failing node fails."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fabbench.console import NO_BUS
from fabbench.floors.points import METRICS, Point
from fabbench.floors.rules import Floors, Rule
from fabbench.units import format_size
from fabbench.workloads.collectives.workload import CollectivesWorkload

PASS, FAIL, NOT_JUDGED = "pass", "fail", "not judged"


@dataclass(frozen=True, kw_only=True)
class Judgement:
    """One rule's judgement of one subject (a try group)."""

    rule: Rule
    status: str                 # PASS, FAIL, NOT_JUDGED
    subject: str                # "allreduce 64M float32", "node fbn3", "transport"
    node: str | None = None
    figure: float | None = None  # the deciding try's figure, in the metric's unit
    floor: float | None = None   # after the tolerance
    margin: float | None = None  # how far the figure is on the good side (<0: short)
    how: str = ""                # how the floor was made
    why: str = ""                # a failure's or a non-judgement's reason, in words
    tries: int = 0
    passed_on: int | None = None  # the try that held (1-based)
    point: Point | None = None

    @property
    def unit(self) -> str:
        return METRICS[self.rule.metric][0] if self.rule.metric else ""

    def line(self) -> str:
        """One line for the console."""
        head = {PASS: "PASS", FAIL: "FAIL", NOT_JUDGED: "NOT JUDGED"}[self.status]
        what = f"node {self.node}" if self.node else f"rule {self.rule.id}"
        text = f"{head:<10} {what}: "
        if self.figure is not None and self.floor is not None:
            metric = f"{self.rule.workload} {self.rule.metric}"
            about = self.point.op if self.node and self.point and self.point.op else \
                self.subject
            if self.node and self.point and self.point.bytes is not None:
                about += f" {format_size(self.point.bytes)}"
            text += (f"{about}: {metric} {self.figure:.4g} {self.unit}, "
                     f"{'floor' if self.rule.higher_is_better else 'limit'} {self.floor:.4g} "
                     f"{self.unit} ({self.how}), margin {self.margin:+.1%}")
            if self.tries > 1:
                text += (f"; passed on try {self.passed_on} of {self.tries}"
                         if self.passed_on else f"; none of {self.tries} tries held")
        else:
            text += f"{self.subject}: {self.why}" if self.subject else self.why
        if self.why and self.figure is not None and self.status != PASS:
            text += f"; {self.why}"
        if self.node:
            text += f" [rule {self.rule.id}]"
        elif self.point is not None:
            text += f" [{self.point.source} {self.point.run}]"
        return text

    def to_json(self) -> dict[str, Any]:
        p = self.point
        return {"rule": self.rule.id, "source": self.rule.source, "status": self.status,
                "subject": self.subject, "node": self.node, "metric": self.rule.metric,
                "unit": self.unit or None, "figure": self.figure, "floor": self.floor,
                "margin": self.margin, "how": self.how, "why": self.why, "tries": self.tries,
                "passed_on": self.passed_on,
                "point": None if p is None else {
                    "source": p.source, "file": p.file, "run": p.run, "op": p.op,
                    "bytes": p.bytes, "dtype": p.dtype, "primitive": p.primitive,
                    "fabric": p.fabric, "transport": p.transport,
                    "transport_class": p.transport_class, "nodes": p.nodes,
                    "evidence": p.evidence}}


def judge(floors: Floors, points: Sequence[Point]) -> list[Judgement]:
    """Every rule's verdicts, rules in file order."""
    out: list[Judgement] = []
    for rule in floors.rules:
        matched = [p for p in points if rule.matches(p)]
        if not matched:
            out.append(Judgement(rule=rule, status=NOT_JUDGED, subject="",
                               why="no measurement matches it"))
            continue
        if rule.judges_transport:
            out += _transport(rule, matched)
        if rule.kind is not None:
            verdicts = [v for group in _subjects(matched).values()
                        for v in _floor(rule, group)]
            out += _confirmed(rule, verdicts) if rule.per_node else verdicts
    return out


def exit_code(verdicts: Iterable[Judgement]) -> int:
    """0: nothing failed and something passed; 1: a floor failed, or nothing was judged."""
    statuses = [v.status for v in verdicts]
    return 1 if FAIL in statuses or PASS not in statuses else 0


def _transport(rule: Rule, points: Sequence[Point]) -> list[Judgement]:
    """Per run: the transport classes its points report against the required and forbidden
    ones; a source that claims no transport is not judged."""
    runs: dict[tuple[str, str], list[Point]] = {}
    for p in points:
        runs.setdefault((p.file, p.run), []).append(p)
    out = []
    for ps in runs.values():
        reported = sorted({p.transport for p in ps if p.transport})
        classes = sorted({c for p in ps if (c := p.transport_class)})
        if not reported:
            out.append(Judgement(rule=rule, status=NOT_JUDGED, subject="transport", point=ps[0],
                               why=f"{ps[0].source} claims no transport"))
            continue
        if not classes:
            out.append(Judgement(rule=rule, status=NOT_JUDGED, subject="transport", point=ps[0],
                               why=f"transport {', '.join(reported)} is of no known class"))
            continue
        wanted = " or ".join(rule.require_transport)
        bad = [c for c in classes if (rule.require_transport and c not in
                                      rule.require_transport) or c in rule.forbid_transport]
        said = f"transport {', '.join(reported)} (class {', '.join(classes)})"
        if bad:
            needs = f"required: {wanted}" if rule.require_transport else ""
            never = f"forbidden: {', '.join(rule.forbid_transport)}" \
                if set(bad) & set(rule.forbid_transport) else ""
            out.append(Judgement(rule=rule, status=FAIL, subject="transport", point=ps[0],
                               why=f"{said}; {'; '.join(x for x in (needs, never) if x)}"))
        else:
            out.append(Judgement(rule=rule, status=PASS, subject="transport", point=ps[0],
                               why=f"{said}" + (f", as required ({wanted})" if wanted else "")))
    return out


# what one verdict is about: (node, op, bytes, dtype, primitive, ranks)
Subject = tuple[str | None, str | None, int | None, str | None, str | None, int | None]


def _subject(p: Point) -> Subject:
    return (p.node, p.op, p.bytes, p.dtype, p.primitive, p.ranks)


def _subjects(points: Sequence[Point]) -> dict[Subject, list[Point]]:
    groups: dict[Subject, list[Point]] = {}
    for p in points:
        groups.setdefault(_subject(p), []).append(p)
    return groups


def _name(p: Point) -> str:
    if p.node is not None:
        return f"node {p.node}"
    parts = [p.op or "", format_size(p.bytes) if p.bytes is not None else "", p.dtype or ""]
    return " ".join(x for x in parts if x) or p.workload


def _holds(rule: Rule, p: Point) -> tuple[bool | None, float | None, float | None, float | None,
                                           str]:
    """(held, figure, floor after tolerance, margin, how); held None: not judged (how: why)."""
    assert rule.metric is not None
    figure = p.metrics.get(rule.metric)
    if figure is None:
        if p.ranks == 1 and p.workload == CollectivesWorkload.name:
            return None, None, None, None, f"{NO_BUS}: no {rule.metric} to judge"
        return None, None, None, None, f"{p.source} recorded no {rule.metric} here"
    floor, how = rule.floor(p)
    if floor is None:
        return None, figure, None, None, how
    if rule.higher_is_better:
        floor *= 1 - rule.tolerance
        margin = figure / floor - 1 if floor > 0 else None
        held = figure >= floor
    else:
        floor *= 1 + rule.tolerance
        margin = floor / figure - 1 if figure > 0 else None
        held = figure <= floor
    if rule.tolerance:
        how += f", less a {rule.tolerance:.0%} tolerance"
    return held, figure, floor, margin, how


def _floor(rule: Rule, tries: list[Point]) -> list[Judgement]:
    """The verdicts of one subject's tries, ``repeats`` at a time."""
    out = []
    for start in range(0, len(tries), rule.repeats):
        group = tries[start:start + rule.repeats]
        judged = [(i, p, *_holds(rule, p)) for i, p in enumerate(group, 1)]
        held = next((j for j in judged if j[2]), None)
        failed = [j for j in judged if j[2] is False]
        pick = held or (max(failed, key=lambda j: j[5] if j[5] is not None else -1e9)
                        if failed else judged[-1])
        i, p, ok, figure, floor, margin, how = pick
        status = PASS if ok else FAIL if ok is False else NOT_JUDGED
        out.append(Judgement(rule=rule, status=status, subject=_name(p), node=p.node,
                           figure=figure if status != NOT_JUDGED else None,
                           floor=floor if status != NOT_JUDGED else None, margin=margin,
                           how=how if status != NOT_JUDGED else "",
                           why=how if status == NOT_JUDGED else "", tries=len(group),
                           passed_on=i if ok else None, point=p))
    return out


def _confirmed(rule: Rule, verdicts: list[Judgement]) -> list[Judgement]:
    """Per-node verdicts with each failing node confirmed against nodes that passed in the same
    run (its pairs with them miss the floor too), else not called bad."""
    out = []
    for v in verdicts:
        if v.status != FAIL or v.point is None or v.floor is None:
            out.append(v)
            continue
        good = {w.node for w in verdicts if w.status == PASS and w.point is not None
                and w.point.run == v.point.run}
        with_good = [bw for host, bw in v.point.peers.items() if host in good]
        if not good or not with_good:
            why = "no node passed to confirm it against" if not good else \
                "no pair with a node that passed"
            out.append(replace(v, why=f"{why}; evidence: {v.point.evidence}"))
            continue
        confirm = statistics.median(with_good)
        if confirm < v.floor if rule.higher_is_better else confirm > v.floor:
            out.append(replace(v, why=f"confirmed: its pairs with the {len(with_good)} node(s) "
                                    f"that passed give {confirm:.4g} {v.unit}; evidence: "
                                    f"{v.point.evidence}"))
        else:
            out.append(replace(v, status=NOT_JUDGED,
                             why=f"a suspect, not confirmed: its pairs with nodes that passed "
                                 f"give {confirm:.4g} {v.unit}, which meets the floor "
                                 f"({v.point.evidence})"))
    return out
