"""A study's answer on the console: the headline, a table per group, the cells that did not run."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from fabbench.report.study.answer import StudyAnswer
from fabbench.report.study.groups import (
    METRIC,
    SCALING,
    THROUGHPUT_SHORT,
    UNIT,
    CellGroup,
)
from fabbench.report.study.link_whatif import LinkWhatIf
from fabbench.workloads.collectives.workload import CollectivesWorkload

_STYLE = {"faster": "green", "slower": "red", "same": "dim"}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def group_table(g: CellGroup) -> Table:
    table = Table(title=f"{g.title}: {METRIC[g.kind]}", title_justify="left")
    cols = ["cell", "transport", f"median {UNIT[g.kind]}", "n", THROUGHPUT_SHORT[g.kind]]
    cols += ["link %"] if g.kind == CollectivesWorkload.name else ["comm share"]
    cols += ["scaling"] if SCALING[g.kind] else []
    cols += ["vs best", "95% CI", "p", "verdict"]
    for c in cols:
        table.add_column(c, justify="left" if c in ("cell", "transport", "verdict") else "right",
                         no_wrap=c in ("cell", "95% CI"))
    for r in g.rows:
        d, lo, hi = r.diff()
        v = r.verdict
        row = [r.cell.label, r.transport, f"{r.median:.2f}", str(len(r.samples)),
               _num(r.throughput)]
        row += [_num(r.link_pct)] if g.kind == CollectivesWorkload.name else [_pct(r.comm_share)]
        row += [_pct(r.scaling)] if SCALING[g.kind] else []
        row += ["best" if r.best else f"{d:+.1f}%",
                "-" if lo is None else f"{lo:+.1f}…{hi:+.1f}%",
                "-" if v is None or v.p_value is None else f"{v.p_value:.3g}",
                "[green]best[/]" if v is None else
                f"[{_STYLE.get(v.verdict, 'yellow')}]{v.verdict}[/]"]
        table.add_row(*row)
    return table


def whatif_table(w: LinkWhatIf) -> Table:
    table = Table(title=f"{w.title}: measured against forecast (fabbench model)",
                  title_justify="left", caption="; ".join(w.notes), caption_justify="left")
    for c in ("link", "measured ms", "vs best", "95% CI", "verdict", "forecast ms",
              "forecast exposed ms", "forecast vs fastest link"):
        table.add_column(c, justify="left" if c in ("link", "verdict") else "right",
                         no_wrap=c == "95% CI")
    for r in w.rows:
        table.add_row(r.link, f"{r.measured_ms:.1f}", f"{r.diff_pct:+.1f}%",
                      "-" if r.ci_low_pct is None else f"{r.ci_low_pct:+.1f}…{r.ci_high_pct:+.1f}%",
                      f"[{_STYLE.get(r.verdict, 'green')}]{r.verdict}[/]", f"{r.forecast_ms:.1f}",
                      f"{r.forecast_overhead_ms:.1f}", f"{r.forecast_slowdown_pct:+.1f}%")
    return table


def lines(a: StudyAnswer) -> list[str | Table]:
    """Renderables, in order: headline, tables, cells that did not run, warnings."""
    counts = ", ".join(f"{n} {k}" for k, n in sorted(a.counts().items()))
    out: list[str | Table] = [f"[bold]study {a.manifest.study}[/] ({a.directory}): {counts}",
                 "[bold]Answer:[/]"]
    out += [f"  • {escape(line)}" for line in a.headline] or ["  (no cell ran)"]
    out += [group_table(g) for g in a.groups]
    out += [whatif_table(w) for w in a.whatif]
    for c in a.cells:
        if c.entry.status == "skipped":
            out.append(f"[yellow]skipped[/] {c.id}: {escape(c.entry.reason or '')}")
    if a.forecast is None:
        out.append(f"no forecast: {escape(a.forecast_error or '')}")
    else:
        for t in a.forecast.train:
            bw = ", ".join(f"{p.bandwidth_gbit_s:.4g} Gbit/s {p.scaling:.2f}"
                           for p in t.by_bandwidth)
            out.append(f"forecast {t.model} at {a.forecast.nodes} nodes, scaling factor "
                       f"by link: {bw}")
    return out
