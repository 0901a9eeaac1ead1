"""The answer of a study directory: per workload (a model, the halo exchange, each collective)
and node count, every cell's step time and throughput, the exposed-communication share, the
scaling efficiency, and its difference to the best cell with a 95 % interval and whether it is
significant; a headline in plain words on top.

Statistics are report.stats' (bootstrap interval of the ratio of medians, Mann-Whitney U) over the
samples each record keeps: per-step times of `train`, per-iteration times of `halo`, per-sample
times of `collective` (at the largest size every cell of the group measured).
Reads the manifest and results files only.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabbench.errors import UsageError
from fabbench.report.link import link_of
from fabbench.report.load import Series, split_runs
from fabbench.report.stats import Verdict, compare_samples
from fabbench.study import manifest as study_manifest
from fabbench.units import format_size

METRIC = {"train": "step time", "halo": "iteration time", "collectives": "time"}


@dataclass
class Cell:
    """One cell of the manifest with its results (None when it did not run or failed)."""

    entry: dict[str, Any]
    series: list[Series]
    label: str = ""

    @property
    def id(self) -> str:
        return self.entry["id"]

    @property
    def axes(self) -> dict[str, Any]:
        return self.entry["axes"]

    @property
    def run(self) -> dict[str, Any] | None:
        return self.series[-1].run if self.series else None


@dataclass
class Row:
    """One cell in one group: its numbers and its verdict against the group's best."""

    cell: Cell
    median: float                  # step ms (train), µs per iteration (halo) or per op
    samples: list[float]
    throughput: float | None = None  # samples/s (train), GB/s busbw (collectives)
    comm_share: float | None = None  # exposed communication / step (train, halo)
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
class Group:
    """Cells that answer the same question: one workload (and op, size), one node count."""

    kind: str
    what: str        # "gpt-tiny", "halo", "allreduce 1 MiB"
    nodes: int
    rows: list[Row] = field(default_factory=list)

    @property
    def title(self) -> str:
        return f"{self.what} on {self.nodes} node{'s' if self.nodes > 1 else ''}"


@dataclass
class StudyAnswer:
    directory: Path
    manifest: dict[str, Any]
    cells: list[Cell]
    groups: list[Group]
    headline: list[str]
    warnings: list[str]
    forecast: dict[str, Any] | None = None
    forecast_error: str | None = None
    whatif: list[dict[str, Any]] = field(default_factory=list)  # report.study_whatif

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cells:
            out[c.entry["status"]] = out.get(c.entry["status"], 0) + 1
        return out


def _labels(cells: list[Cell], axes: dict[str, list]) -> None:
    """A cell's label names what varies between cells beside workload and nodes."""
    for c in cells:
        a = c.axes
        prim = a["primitive"]
        over = c.entry["options"].get("horovod_over")
        if over:
            prim += f"-{over}"
        label = f"{a['fabric']}/{prim}"
        if len(axes.get("gpudirect", [])) > 1 or a["gpudirect"] != "auto":
            label += f" gdr-{a['gpudirect']}"
        if a.get("link"):
            label += f" @{a['link']}"
        c.label = label


def load_cells(directory: str | Path) -> tuple[dict[str, Any], list[Cell], list[str]]:
    directory = Path(directory)
    doc = study_manifest.read(directory)
    cells, warnings = [], []
    for e in doc["cells"]:
        series: list[Series] = []
        path = directory / e["file"]
        if e["status"] == "ok":
            if not path.is_file():
                warnings.append(f"{e['id']}: the manifest says ok but {path} is missing")
            else:
                series = split_runs(path)
                warnings += [w for s in series for w in s.warnings]
        cells.append(Cell(e, series))
    _labels(cells, doc["axes"])
    return doc, cells, warnings


def verdict_of(best: list[float], other: list[float]) -> Verdict:
    """other against best, from their samples (time ratio other / best)."""
    a = {"time_us": {"p50": statistics.median(best)}, "samples_us": best}
    b = {"time_us": {"p50": statistics.median(other)}, "samples_us": other}
    return compare_samples(a, b)


def _rank(group: Group) -> None:
    if not group.rows:
        return
    best = min(group.rows, key=lambda r: r.median)
    best.best = True
    for r in group.rows:
        if r is not best:
            r.verdict = verdict_of(best.samples, r.samples) if best.samples and r.samples else \
                Verdict(r.median / best.median, None, None, None, "no samples")
    group.rows.sort(key=lambda r: r.median)


def train_record(c: Cell) -> dict[str, Any] | None:
    """The cell's train record at its full rank count (a --scaling file holds several)."""
    recs = [t for s in c.series for t in s.train]
    if not recs:
        return None
    return max(recs, key=lambda t: t["ranks"])


def train_groups(cells: list[Cell]) -> list[Group]:
    groups: dict[tuple, Group] = {}
    for c in cells:
        rec = train_record(c)
        if rec is None:
            continue
        key = (c.axes["workload"], rec["model"], c.axes["nodes"])
        g = groups.setdefault(key, Group("train", rec["model"], c.axes["nodes"]))
        step = rec["step_ms"]
        share = rec.get("comm_fraction")
        if share is None and step > 0 and rec.get("compute_ms") is not None:
            share = max(0.0, step - rec["compute_ms"]) / step
        g.rows.append(Row(cell=c, median=step, samples=list(rec.get("step_ms_samples") or []),
                          throughput=rec["samples_per_s"]["p50"], comm_share=share,
                          scaling=rec.get("scaling_efficiency"),
                          transport=str(rec.get("transport", "?"))))
    _cross_node_scaling(list(groups.values()))
    return list(groups.values())


def _cross_node_scaling(groups: list[Group]) -> None:
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


def halo_groups(cells: list[Cell]) -> list[Group]:
    groups: dict[tuple, Group] = {}
    for c in cells:
        recs = [h for s in c.series for h in s.halo]
        if not recs:
            continue
        rec = recs[-1]
        key = (c.axes["workload"], c.axes["nodes"])
        g = groups.setdefault(key, Group("halo", c.axes["workload"], c.axes["nodes"]))
        t = rec["time_us"]["p50"]
        ex = (rec.get("exchange_us") or {}).get("p50")
        g.rows.append(Row(cell=c, median=t, samples=list(rec.get("samples_us") or []),
                          throughput=rec.get("exchange_gbyte_s"),
                          comm_share=(ex / t) if ex is not None and t > 0 else None,
                          transport=str(rec.get("transport", "?"))))
    return list(groups.values())


def collective_groups(cells: list[Cell]) -> list[Group]:
    """Per op: the largest size every cell of the workload and node count measured."""
    by_key: dict[tuple, list[Cell]] = {}
    for c in cells:
        if any(s.collectives for s in c.series):
            by_key.setdefault((c.axes["workload"], c.axes["nodes"]), []).append(c)
    groups = []
    for (_, nodes), members in by_key.items():
        ops = sorted({r["op"] for c in members for s in c.series for r in s.collectives})
        for op in ops:
            points = {c.id: {(r["bytes"], r["dtype"]): r for s in c.series for r in s.collectives
                             if r["op"] == op} for c in members}
            common = set.intersection(*(set(p) for p in points.values()))
            if not common:
                continue
            size, dtype = max(common)
            g = Group("collectives", f"{op} {format_size(size)}", nodes)
            for c in members:
                r = points[c.id][(size, dtype)]
                link = link_of(c.run) if c.run else None
                g.rows.append(Row(
                    cell=c, median=r["time_us"]["p50"], samples=list(r.get("samples_us") or []),
                    throughput=r["busbw_gbyte_s"],
                    link_pct=100 * link.efficiency(r["busbw_gbyte_s"])
                    if link else None, transport=r["transport"]))
            groups.append(g)
    return groups


def _pct(x: float) -> str:
    return f"{abs(x):.1f} %"


def headline(g: Group) -> str:
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
    worst = max(sig, key=lambda r: r.verdict.ratio)
    d, lo, hi = worst.diff()
    word = "slower" if d > 0 else "faster"
    text = (f"{what}: {worst.cell.label} is {_pct(d)} {word} than {best.cell.label} "
            f"(95 % CI {abs(lo):.1f}–{abs(hi):.1f} %), significant")
    rest = [r for r in others if r is not worst]
    same = [r for r in rest if r.verdict is not None and r.verdict.verdict == "same"]
    more = [r for r in rest if r in sig]
    if len(rest) <= 3:
        for r in rest:
            if r in sig:
                dr, lr, hr = r.diff()
                text += (f"; {r.cell.label} {_pct(dr)} {'slower' if dr > 0 else 'faster'} "
                         f"(95 % CI {abs(lr):.1f}–{abs(hr):.1f} %), significant")
            elif r in same:
                text += f"; {r.cell.label}: no significant difference"
            else:
                text += f"; {r.cell.label}: not enough samples to test"
    else:
        text += (f"; of the {len(rest)} other cells {len(more)} differ significantly from "
                 f"{best.cell.label}, {len(same)} do not")
    return text


def _forecast(directory: Path, cells: list[Cell]) -> tuple[dict | None, str | None]:
    """`fabbench model` over the study's results: what they predict for more nodes and other
    links (train cells: Zhang et al.'s what-if; collectives: α-β fits)."""
    from fabbench.scaling.predict import ModelOptions, build

    files = [directory / c.entry["file"] for c in cells if c.series]
    if not files:
        return None, "no cell ran"
    try:
        return build(files, ModelOptions(nodes=max(16, *(c.axes["nodes"] for c in cells)))), None
    except UsageError as exc:
        return None, str(exc)


def answer(directory: str | Path, *, forecast: bool = True) -> StudyAnswer:
    directory = Path(directory)
    doc, cells, warnings = load_cells(directory)
    ran = [c for c in cells if c.series]
    groups = train_groups(ran) + halo_groups(ran) + collective_groups(ran)
    for g in groups:
        _rank(g)
    lines = [headline(g) for g in groups]
    for c in cells:
        if c.entry["status"] == "failed":
            warnings.append(f"cell {c.id} failed: {c.entry.get('error')}")
        elif c.entry["status"] in ("pending", "running"):
            warnings.append(f"cell {c.id} did not finish ({c.entry['status']}); "
                            "fabbench study run --resume continues the study")
    out = StudyAnswer(directory, doc, cells, groups, lines, warnings)
    if forecast:
        from fabbench.report.study_whatif import whatif

        out.forecast, out.forecast_error = _forecast(directory, ran)
        out.whatif = whatif(out)
        out.headline += [w["agreement"] for w in out.whatif]
    return out


def as_json(a: StudyAnswer) -> dict[str, Any]:
    """The answer for machines (strict JSON: no inf/nan)."""
    from fabbench.scaling.predict import jsonable

    groups = []
    for g in a.groups:
        rows = []
        for r in g.rows:
            d, lo, hi = r.diff()
            v = r.verdict
            rows.append({"cell": r.cell.id, "label": r.cell.label, **r.cell.axes,
                         "median": r.median, "samples": len(r.samples),
                         "throughput": r.throughput, "comm_share": r.comm_share,
                         "scaling_efficiency": r.scaling, "link_pct": r.link_pct,
                         "transport": r.transport, "best": r.best, "diff_pct": d,
                         "diff_ci_low_pct": lo, "diff_ci_high_pct": hi,
                         "p_value": v.p_value if v else None,
                         "verdict": v.verdict if v else "best"})
        groups.append({"kind": g.kind, "what": g.what, "nodes": g.nodes,
                       "metric": METRIC[g.kind], "rows": rows})
    return jsonable({
        "study": a.manifest["study"], "directory": str(a.directory),
        "headline": a.headline, "counts": a.counts(), "groups": groups,
        "cells": [{"id": c.id, "label": c.label, "status": c.entry["status"],
                   "reason": c.entry.get("reason"), "error": c.entry.get("error"),
                   "file": c.entry["file"]} for c in a.cells],
        "forecast": a.forecast, "forecast_error": a.forecast_error,
        "whatif": [{"what": w["group"].what, "nodes": w["group"].nodes,
                    "agreement": w["agreement"], "notes": w["notes"],
                    "rows": [dataclasses.asdict(r) for r in w["rows"]]} for w in a.whatif],
        "warnings": a.warnings})
