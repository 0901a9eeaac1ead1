"""The answer of a study directory: per workload (a network, a workload ranked by its metric, each
collective) and node count, every cell's step time and throughput, the exposed-communication
share, the scaling efficiency, and its difference to the best cell with a 95 % interval and
whether it is significant (report.study.groups); a headline in plain words on top, with the slow
node a `pairs` cell names (its findings, as compare applies them: report.study.sites);
what `fabbench model` forecasts from the same results, and, over emulated links, measured beside
forecast (report.study.link_whatif). Reads the manifest and results files only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabbench import catalog
from fabbench.errors import UsageError
from fabbench.report.study.cells import StudyCell, load_cells
from fabbench.report.study.groups import METRIC, CellGroup, all_groups, headline, rank
from fabbench.report.study.link_whatif import LinkWhatIf, whatif
from fabbench.report.study.sites import site_network
from fabbench.scaling.predict import Forecast, ModelOptions, build, jsonable
from fabbench.study.manifest import StudyManifest


@dataclass
class StudyAnswer:
    """Everything a study's report shows; ``forecast`` is `fabbench forecast`'s answer (None with
    ``forecast_error`` saying why, or when not asked for)."""

    directory: Path
    manifest: StudyManifest
    cells: list[StudyCell]
    groups: list[CellGroup]
    headline: list[str]
    warnings: list[str]
    forecast: Forecast | None = None
    forecast_error: str | None = None
    whatif: list[LinkWhatIf] = field(default_factory=list)
    slow: tuple[str, ...] | None = None  # hosts a pairs cell names slow; None: no pairs cell ran
    slow_text: tuple[str, ...] = ()  # the rule's account

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cells:
            out[c.entry.status] = out.get(c.entry.status, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        """The answer for machines (strict JSON: no inf/nan)."""
        groups = []
        for g in self.groups:
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
        answer: dict[str, Any] = jsonable({  # jsonable keeps an object an object
            "study": self.manifest.study, "directory": str(self.directory),
            "headline": self.headline, "counts": self.counts(), "groups": groups,
            "cells": [{"id": c.id, "label": c.label, "status": c.entry.status,
                       "reason": c.entry.reason, "error": c.entry.error,
                       "file": c.entry.file} for c in self.cells],
            "forecast": None if self.forecast is None else self.forecast.to_json(),
            "forecast_error": self.forecast_error,
            "whatif": [{"what": w.what, "nodes": w.nodes, "agreement": w.agreement,
                        "notes": list(w.notes), "rows": [dataclasses.asdict(r) for r in w.rows]}
                       for w in self.whatif],
            "slow": None if self.slow is None else list(self.slow),
            "slow_text": list(self.slow_text),
            "warnings": self.warnings})
        return answer


def _forecast(directory: Path, cells: list[StudyCell]) -> tuple[Forecast | None, str | None]:
    """`fabbench model` over the study's results: what they predict for more nodes and other
    links (train cells: Zhang et al.'s what-if; collectives: α-β fits)."""
    files = [directory / c.entry.file for c in cells if c.series]
    if not files:
        return None, "no cell ran"
    try:
        return build(files, ModelOptions(nodes=max(16, *(c.axes["nodes"] for c in cells)))), None
    except UsageError as exc:
        return None, str(exc)


def answer(directory: str | Path, *, forecast: bool = True) -> StudyAnswer:
    """The study's answer; ``forecast=False`` leaves the model out (faster, no what-if)."""
    directory = Path(directory)
    doc, cells, warnings = load_cells(directory)
    ran = [c for c in cells if c.series]
    groups = all_groups(ran)
    for g in groups:
        rank(g)
    lines = [headline(g) for g in groups]
    for c in cells:
        if c.entry.status == "failed":
            warnings.append(f"cell {c.id} failed: {c.entry.error}")
        elif c.entry.status in ("pending", "running"):
            warnings.append(f"cell {c.id} did not finish ({c.entry.status}); "
                            "fabbench study run --resume continues the study")
    out = StudyAnswer(directory, doc, cells, groups, lines, warnings)
    judged = [w.record for w in catalog.WORKLOADS.values() if w.defines("findings")]
    if any(s.of_kind(kind) for c in ran for s in c.series for kind in judged):
        net = site_network(ran)
        out.slow, out.slow_text = net.slow, net.slow_text
        out.headline += list(net.slow_text)  # "slow node: ..." or "no slow rank: ...", as run said
    if forecast:
        out.forecast, out.forecast_error = _forecast(directory, ran)
        out.whatif = whatif(groups)
        out.headline += [w.agreement for w in out.whatif]
    return out


