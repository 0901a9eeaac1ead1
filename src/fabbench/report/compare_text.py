"""Console views of a comparison (Rich tables); the report's own text is tables.nccl_table."""

from __future__ import annotations

from rich.table import Table

from fabbench.report.compare import Comparison
from fabbench.report.long_table import LongTable
from fabbench.workloads.train.record import Train

_STYLE = {"faster": "green", "slower": "red", "same": "dim"}


def compare_tables(c: Comparison) -> list[Table]:
    out: list[Table] = []
    for op in c.ops():
        table: Table = LongTable(
            title=f"{op}: time ratio vs {c.baseline.label} (p50; < 1 is faster)",
            title_justify="left")
        for name in ("B", "size B", "type", "A p50 µs", "B p50 µs", "B/A", "95% CI", "p",
                     "verdict", "notes"):
            table.add_column(name, justify="left" if name in ("B", "type", "verdict", "notes")
                             else "right")
        for r in (r for r in c.rows if r.op == op):
            v = r.verdict
            ci = "-" if v.ci_low is None else f"{v.ci_low:.3f}–{v.ci_high:.3f}"
            p = "-" if v.p_value is None else f"{v.p_value:.3g}"
            style = _STYLE.get(v.verdict, "yellow")
            table.add_row(r.other.label, str(r.bytes), r.dtype, f"{r.a.time_us.p50:.2f}",
                          f"{r.b.time_us.p50:.2f}", f"{v.ratio:.3f}", ci, p,
                          f"[{style}]{v.verdict}[/]", r.notes)
        out.append(table)
    if c.train:
        table = Table(title="training", title_justify="left")
        for name in ("B", "model", "ranks", "A samples/s", "B samples/s", "B/A", "A scaling",
                     "B scaling"):
            table.add_column(name)
        for t in c.train:
            a, b = t.a, t.b

            def sps(x: Train | None) -> str:
                return "-" if x is None else f"{x.samples_per_s['p50']:.1f}"

            def eff(x: Train | None) -> str:
                return "-" if x is None or x.scaling_efficiency is None else \
                    f"{100 * x.scaling_efficiency:.0f}%"

            ratio = f"{b.samples_per_s['p50'] / a.samples_per_s['p50']:.3f}" \
                if a and b else "-"
            table.add_row(t.other.label, t.model, str(t.ranks), sps(a), sps(b), ratio, eff(a),
                          eff(b))
        out.append(table)
    prov = Table(title="provenance that differs", title_justify="left")
    prov.add_column("field")
    for s in [c.baseline, *c.others]:
        prov.add_column(s.label)
    for key, values in c.provenance:
        prov.add_row(key, *values)
    if not c.provenance:
        prov.add_row("(none: same set-up)", *["" for _ in c.others], "")
    out.append(prov)
    return out


def verdict_summary(c: Comparison) -> list[str]:
    lines = []
    for other in c.others:
        counts = c.counts(other)
        lines.append(f"{other.label} vs {c.baseline.label}: "
                     + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    return lines
