"""A study over emulated links (the `link` axis): per training group, what each link measured
against the best cell, beside what `fabbench model` forecasts for that link (Zhang et al.'s
what-if from the same study's record of the fastest link: its compute step, gradient volume and
bucket schedule). Measured and forecast are put side by side and a line says whether they agree
on where the network matters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fabbench.emulate.cluster_spec import parse_rate
from fabbench.report.study.groups import CellGroup, on_nodes
from fabbench.scaling import whatif as scaling_whatif
from fabbench.workloads.train.record import Train
from fabbench.workloads.train.study import largest

MATTERS = 0.05  # a forecast slowdown of 5 % or more: the network is forecast to matter


@dataclass(frozen=True)
class WhatIfRow:
    """One emulated link of a training group: its measured step against the forecast one."""

    link: str
    link_gbit_s: float
    measured_ms: float
    diff_pct: float
    ci_low_pct: float | None
    ci_high_pct: float | None
    verdict: str
    forecast_ms: float
    forecast_overhead_ms: float
    forecast_slowdown_pct: float

    @property
    def measured_matters(self) -> bool:
        return self.verdict == "slower"

    @property
    def forecast_matters(self) -> bool:
        return self.forecast_slowdown_pct >= 100 * MATTERS


@dataclass(frozen=True)
class LinkWhatIf:
    """A training group over emulated links: per link, measured beside forecast, the notes the
    forecast rests on, and one line saying whether the two agree on where the network matters."""

    what: str   # the model
    nodes: int
    rows: tuple[WhatIfRow, ...]  # slowest link first
    notes: tuple[str, ...]
    agreement: str

    @property
    def title(self) -> str:
        return on_nodes(self.what, self.nodes)


def _rate_gbit_s(link: str) -> float:
    return parse_rate(link) / 1e9


def whatif_rows(g: CellGroup) -> tuple[list[WhatIfRow], list[str]]:
    """Rows for a train group whose cells ran on emulated links (empty otherwise)."""
    linked = [r for r in g.rows if r.cell.axes.get("link")]
    if len(linked) < 2:
        return [], []
    fastest = max(linked, key=lambda r: _rate_gbit_s(r.cell.axes["link"]))
    rec = largest([t for s in fastest.cell.series for t in s.of_kind(Train)])
    if rec is None:  # not a train group: its cells hold no train record
        return [], []
    profile = scaling_whatif.profile_from_record(rec)
    nodes = g.nodes
    fastest_bytes_s = _rate_gbit_s(fastest.cell.axes["link"]) * 1e9 / 8
    base = scaling_whatif.predict(profile, nodes, fastest_bytes_s)
    base_ms = (profile.iteration_s + base.overhead_s) * 1e3
    rows = []
    for r in sorted(linked, key=lambda r: _rate_gbit_s(r.cell.axes["link"])):
        gbit = _rate_gbit_s(r.cell.axes["link"])
        p = scaling_whatif.predict(profile, nodes, gbit * 1e9 / 8)
        step_ms = (profile.iteration_s + p.overhead_s) * 1e3
        d, lo, hi = r.diff()
        rows.append(WhatIfRow(
            link=r.cell.axes["link"], link_gbit_s=gbit, measured_ms=r.median, diff_pct=d,
            ci_low_pct=lo, ci_high_pct=hi, verdict=r.verdict.verdict if r.verdict else "best",
            forecast_ms=step_ms, forecast_overhead_ms=p.overhead_s * 1e3,
            forecast_slowdown_pct=(step_ms / base_ms - 1) * 100))
    notes = [f"forecast from {fastest.cell.id}: compute step {profile.iteration_s * 1e3:.1f} ms, "
             f"{profile.grad_bytes / 1e6:.2f} MB of gradients in {len(profile.buckets)} "
             f"bucket(s), {nodes} nodes", *profile.notes]
    return rows, notes


def agreement(g: CellGroup, rows: list[WhatIfRow]) -> str:
    """One line: where the measurement and the forecast say the network matters."""
    def links(matters: list[bool]) -> str:
        chosen = [r.link for r, m in zip(rows, matters, strict=True) if m]
        return ", ".join(chosen) or "no link"

    measured = [r.measured_matters for r in rows]
    forecast = [r.forecast_matters for r in rows]
    same = measured == forecast
    return (f"{g.what}: the network matters (measured, significant) at {links(measured)}; "
            f"forecast (≥ {100 * MATTERS:.0f} % slower than at the fastest link) at "
            f"{links(forecast)}: {'consistent' if same else 'NOT consistent'}")


def whatif(groups: Sequence[CellGroup]) -> list[LinkWhatIf]:
    """Every train group whose cells ran over emulated links, measured beside forecast."""
    out = []
    for g in groups:
        rows, notes = whatif_rows(g)
        if rows:
            out.append(LinkWhatIf(what=g.what, nodes=g.nodes, rows=tuple(rows),
                                  notes=tuple(notes), agreement=agreement(g, rows)))
    return out
