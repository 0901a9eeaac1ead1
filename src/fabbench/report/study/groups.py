"""A study's cells grouped by the question they answer (one workload, or one collective at one
size, on one node count), ranked by median, each against the group's best with a 95 % interval
and a significance test; a headline per group in plain words.

Statistics are report.significance's (bootstrap interval of the ratio of medians, Mann-Whitney U)
over the samples each record keeps: those of a workload's own ``study_groups`` (the
collectives': per-sample times at the largest size every cell of the group measured) or
``study`` rows (train's: per-step times).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fabbench import catalog
from fabbench.report.significance import Verdict, compare_samples, median_ratio
from fabbench.report.study.cells import StudyCell
from fabbench.workload_base import Workload
from fabbench.workload_spec import StudyCellRecords, StudyRow

# what a group's median is, its unit and its throughput column, by workload kind (from
# fabbench.catalog: the workloads whose cells a study ranks)
METRIC = {kind: m.name for kind, m in catalog.METRICS.items()}
UNIT = {kind: m.unit for kind, m in catalog.METRICS.items()}
THROUGHPUT = {kind: m.throughput for kind, m in catalog.METRICS.items()}
THROUGHPUT_SHORT = {kind: m.throughput_short for kind, m in catalog.METRICS.items()}
# the kinds whose groups show a scaling efficiency
SCALING = {kind: m.scaling for kind, m in catalog.METRICS.items()}


def on_nodes(what: str, nodes: int) -> str:
    """A group's title: "gpt-tiny on 2 nodes"."""
    return f"{what} on {nodes} node{'s' if nodes > 1 else ''}"


@dataclass
class CellResult:
    """One cell in one group: its numbers and its verdict against the group's best."""

    cell: StudyCell
    median: float                  # in the metric's unit: step ms (train), µs per op, ...
    samples: list[float]
    throughput: float | None = None  # samples/s (train), GB/s busbw (collectives)
    comm_share: float | None = None  # exposed communication / step or iteration
    scaling: float | None = None     # T_n / (n T_1)
    link_pct: float | None = None    # busbw as a share of the link (collectives)
    transport: str = "?"
    verdict: Verdict | None = None   # against the best (None for the best itself)
    best: bool = False

    def diff(self) -> tuple[float, float | None, float | None]:
        """Difference to the best in %: value, interval low, high (positive: slower)."""
        v = self.verdict
        if v is None:
            return 0.0, None, None
        lo = None if v.ci_low is None else (v.ci_low - 1) * 100
        hi = None if v.ci_high is None else (v.ci_high - 1) * 100
        return (v.ratio - 1) * 100, lo, hi


@dataclass
class CellGroup:
    """Cells that answer the same question: one workload (and op, size), one node count."""

    kind: str
    what: str        # a network ("gpt-tiny"), a study workload's name, "allreduce 1 MiB"
    nodes: int
    rows: list[CellResult] = field(default_factory=list)

    @property
    def title(self) -> str:
        return on_nodes(self.what, self.nodes)


def verdict_of(best: CellResult, other: CellResult) -> Verdict:
    """other against best, from their samples (time ratio other / best)."""
    return compare_samples(best.samples, other.samples,
                           ratio=median_ratio(best.median, other.median))


def rank(group: CellGroup) -> None:
    """Mark the group's fastest cell best, give every other its verdict against it, and sort
    the rows fastest first."""
    if not group.rows:
        return
    best = min(group.rows, key=lambda r: r.median)
    best.best = True
    for r in group.rows:
        if r is not best:
            r.verdict = verdict_of(best, r)
    group.rows.sort(key=lambda r: r.median)


def _cross_node_scaling(groups: list[CellGroup]) -> None:
    """Scaling efficiency per node count from the study's own 1-node cells: throughput at N
    nodes over N times the same cell's throughput on one node (when the record has none)."""
    one = {}
    for g in groups:
        if g.nodes == 1:
            for r in g.rows:
                a = r.cell.axes
                one[(a["workload"], a["fabric"], a["primitive"], a["gpudirect"], a["link"])] = r
    for g in groups:
        if g.nodes == 1:
            continue
        for r in g.rows:
            a = r.cell.axes
            base = one.get((a["workload"], a["fabric"], a["primitive"], a["gpudirect"],
                            a["link"]))
            if r.scaling is None and base is not None and base.throughput and r.throughput:
                r.scaling = r.throughput / (g.nodes * base.throughput)


def workload_groups(cells: list[StudyCell]) -> list[CellGroup]:
    """The groups of the workloads that make their own (``study_groups``: the collectives', per
    operation and size) and name a metric, in the registry's order: per study workload and node
    count, of the cells with records of the workload's kind, in the cells' order."""
    groups = []
    for workload in catalog.WORKLOADS.values():
        if workload.metric is None or not workload.defines("study_groups"):
            continue
        by_key: dict[tuple[str, int], list[tuple[StudyCell, StudyCellRecords[Any]]]] = {}
        for c in cells:
            records = [r for s in c.series for r in s.of_kind(workload.record)]
            if records:
                by_key.setdefault((c.axes["workload"], c.axes["nodes"]), []).append(
                    (c, StudyCellRecords(id=c.id, records=records, run=c.run)))
        for (_, nodes), members in by_key.items():
            for made in workload.study_groups([m for _, m in members]):
                g = CellGroup(workload.name, made.what, nodes)
                for c, _ in members:
                    row = made.rows.get(c.id)
                    if row is not None:
                        g.rows.append(CellResult(
                            cell=c, median=row.median, samples=list(row.samples),
                            throughput=row.throughput, comm_share=row.comm_share,
                            scaling=row.scaling, link_pct=row.link_pct,
                            transport=row.transport if row.transport is not None else "?"))
                groups.append(g)
    return groups


def _pct(x: float) -> str:
    return f"{abs(x):.1f} %"


def _ci(lo: float | None, hi: float | None) -> str:
    """A significant difference's interval (a significant verdict always has one)."""
    return "?" if lo is None or hi is None else f"{abs(lo):.1f}–{abs(hi):.1f} %"


def headline(g: CellGroup) -> str:
    """The group's finding in the paper's words."""
    what = g.what if g.nodes == 1 else g.title
    if len(g.rows) < 2:
        only = g.rows[0].cell.label if g.rows else "none"
        return f"{what}: one cell ({only}), nothing to compare"
    best = g.rows[0]
    others = g.rows[1:]
    sig = [r for r in others if r.verdict is not None and r.verdict.significant]
    untested = [r for r in others if r.verdict is None or r.verdict.p_value is None]
    if not sig:
        if len(untested) == len(others):
            return (f"{what}: fastest {best.cell.label}; no samples recorded to test the "
                    f"differences to {', '.join(r.cell.label for r in others)}")
        tested = [best, *(r for r in others if r not in untested)]
        text = (f"{what}: no significant difference between "
                f"{', '.join(r.cell.label for r in tested)}")
        if untested:
            text += (f" ({', '.join(r.cell.label for r in untested)}: not enough samples to "
                     "test)")
        return text
    worst = max(sig, key=lambda r: r.diff()[0])
    d, lo, hi = worst.diff()
    word = "slower" if d > 0 else "faster"
    text = (f"{what}: {worst.cell.label} is {_pct(d)} {word} than {best.cell.label} "
            f"(95 % CI {_ci(lo, hi)}), significant")
    rest = [r for r in others if r is not worst]
    same = [r for r in rest if r.verdict is not None and r.verdict.verdict == "same"]
    more = [r for r in rest if r in sig]
    if len(rest) <= 3:
        for r in rest:
            if r in sig:
                dr, lr, hr = r.diff()
                text += (f"; {r.cell.label} {_pct(dr)} {'slower' if dr > 0 else 'faster'} "
                         f"(95 % CI {_ci(lr, hr)}), significant")
            elif r in same:
                text += f"; {r.cell.label}: no significant difference"
            else:
                text += f"; {r.cell.label}: not enough samples to test"
    else:
        text += (f"; of the {len(rest)} other cells {len(more)} differ significantly from "
                 f"{best.cell.label}, {len(same)} do not")
    return text


def _figure(record: Any, path: str) -> float | None:
    """A record's field by dotted path ("time_us.p50"), through mappings and dataclasses."""
    value = record
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else getattr(value, part, None)
        if value is None:
            return None
    return float(value)


def metric_row(spec: Workload[Any], records: list[Any]) -> StudyRow | None:
    """A cell's row where its workload has no ``study`` hook: the median of its metric's
    value over the cell's records, each record a sample."""
    assert spec.metric is not None
    values = [v for r in records if (v := _figure(r, spec.metric.value)) is not None]
    if not values:
        return None
    transports = {t for r in records if (t := getattr(r, "transport", None))}
    return StudyRow(median=statistics.median(values), samples=values,
                    transport=", ".join(sorted(transports)) or None)


def cell_groups(cells: list[StudyCell]) -> list[CellGroup]:
    """The cells of every workload ranked cell by cell (those with no ``study_groups`` of their
    own, whose class names a metric): per study workload and node count, each cell's row from
    its records of the workload's kind (the workload's ``study``, else :func:`metric_row`),
    in the registry's order; where the metric shows scaling, a row without its own is given
    it from the study's 1-node cells."""
    groups: dict[tuple[str, str, str, int], CellGroup] = {}
    order = list(catalog.WORKLOADS)
    for c in cells:
        spec: Workload[Any] | None = catalog.WORKLOADS.get(c.entry.kind)
        if spec is None or spec.metric is None or spec.defines("study_groups"):
            continue
        records = [r for s in c.series for r in s.of_kind(spec.record)]
        row = spec.study(records) if spec.defines("study") else metric_row(spec, records)
        if row is None:
            continue
        what = row.what or c.axes["workload"]
        key = (spec.name, c.axes["workload"], what, c.axes["nodes"])
        g = groups.setdefault(key, CellGroup(spec.name, what, c.axes["nodes"]))
        g.rows.append(CellResult(
            cell=c, median=row.median, samples=list(row.samples), throughput=row.throughput,
            comm_share=row.comm_share, scaling=row.scaling,
            transport=row.transport or (c.run.transport if c.run and c.run.transport else "?")))
    _cross_node_scaling([g for g in groups.values() if SCALING[g.kind]])
    return sorted(groups.values(), key=lambda g: order.index(g.kind))


def all_groups(cells: list[StudyCell]) -> list[CellGroup]:
    """Every group of a study's cells: those ranked cell by cell (the training's first), then
    those the workloads make of their own (the collectives' per operation and size)."""
    return cell_groups(cells) + workload_groups(cells)
