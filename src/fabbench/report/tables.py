"""Rows of a report: the nccl-tests layout for text, flat rows for CSV, link efficiency."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from fabbench.console import ONE_RANK
from fabbench.report.significance import why_unstable
from fabbench.results.link import LinkRate, MeasuredCeiling, ceiling_of, format_gbit_s, link_of
from fabbench.results.runs import Series
from fabbench.workloads.collectives.record import Collective
from fabbench.workloads.collectives.study import share_pct
from fabbench.workloads.train.record import Train

# nccl-tests names and columns
NCCL_TYPE = {"float32": "float", "float64": "double", "float16": "half", "bfloat16": "bfloat16"}
REDOP = {"allreduce": "sum", "reduce_scatter": "sum"}
ROOT = {"broadcast": 0}
OP_ORDER = ("allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall", "sendrecv")


def ops_of(series: Iterable[Series]) -> list[str]:
    found = {c.op for s in series for c in s.collectives}
    return [op for op in OP_ORDER if op in found] + sorted(found - set(OP_ORDER))


def count_of(rec: Collective) -> int:
    """Elements per rank: as recorded, or (a fabbench/1 point without it) from bytes and dtype."""
    return rec.count or rec.bytes // {"float64": 8, "float32": 4}.get(rec.dtype, 2)


def nccl_table(s: Series, op: str) -> str:
    """One op of one run in the layout nccl-tests users read every day (plus p99, spread, link)."""
    link, ceiling = link_of(s.run), ceiling_of(s.ceilings)
    recs = [c for c in s.collectives if c.op == op]
    head = (f"# {s.label}: {op}, {s.run.ranks} ranks on {s.run.nodes} node(s), transport "
            f"{', '.join(sorted({c.transport for c in recs}))}, link "
            f"{f'{link.what}' if link else 'n/a'}"
            + (f", ceiling {ceiling.what}" if ceiling else "") + "\n"
            + (f"# {ONE_RANK}\n" if s.run.ranks == 1 else ""))
    cols = (f"#{'size':>11} {'count':>12} {'type':>8} {'redop':>6} {'root':>5} {'time':>10} "
            f"{'algbw':>8} {'busbw':>8} {'#wrong':>6} {'p99':>10} {'±ci%':>6} {'n':>4} "
            f"{'link%':>6} {'ceil%':>6}\n"
            f"#{'(B)':>11} {'(elements)':>12} {'':>8} {'':>6} {'':>5} {'(us)':>10} "
            f"{'(GB/s)':>8} {'(GB/s)':>8} {'':>6} {'(us)':>10} {'':>6} {'':>4} {'':>6} "
            f"{'':>6}\n")
    lines = []
    for r in recs:
        wrong = "N/A" if r.wrong is None else str(r.wrong)
        rel = r.median_ci95_rel
        flag = " !" if unstable(r) else ""
        lines.append(
            f" {r.bytes:>11} {count_of(r):>12} {NCCL_TYPE.get(r.dtype, r.dtype):>8} "
            f"{REDOP.get(op, 'none'):>6} {ROOT.get(op, -1):>5} {r.time_us.p50:>10.2f} "
            f"{r.algbw_gbyte_s:>8.3f} {busbw_text(r):>8} {wrong:>6} "
            f"{r.time_us.p99:>10.2f} {'-' if rel is None else f'{100 * rel:.1f}':>6} "
            f"{r.samples:>4} {link_pct(link, r):>6} {link_pct(ceiling, r):>6}{flag}")
    return head + cols + "\n".join(lines) + "\n"


def unstable(point: Collective) -> str | None:
    """Why a collective point is not stable by the one rule (report.significance.why_unstable)."""
    return why_unstable(point.stable, point.median_ci95_rel, point.samples or 0)


def busbw_text(rec: Collective) -> str:
    """busbw as a table shows it: "-" for a world of one rank (ONE_RANK)."""
    return "-" if rec.ranks == 1 else f"{rec.busbw_gbyte_s:.3f}"


def link_pct(link: LinkRate | MeasuredCeiling | None, rec: Collective) -> str:
    """share_pct in a table: "-" where there is none."""
    pct = share_pct(link, rec)
    return "-" if pct is None else f"{pct:.1f}"


def efficiency_lines(series: Iterable[Series]) -> list[str]:
    """One sentence per run and op: the peak busbw as a share of the link ("83% of 100 Gb/s")."""
    out = []
    for s in series:
        link, ceiling = link_of(s.run), ceiling_of(s.ceilings)
        if s.run.ranks == 1 and s.collectives:
            out.append(f"{s.label}: {ONE_RANK}; no share of the link to give")
            continue
        for op in ops_of([s]):
            recs = [c for c in s.collectives if c.op == op]
            best = max(recs, key=lambda r: r.busbw_gbyte_s)
            text = (f"{s.label} {op}: peak busbw {best.busbw_gbyte_s:.3f} GB/s "
                    f"at {best.bytes} B")
            if link is not None:
                text += (f" is {100 * link.efficiency(best.busbw_gbyte_s):.0f}% of the "
                         f"{format_gbit_s(link.speed_gbit_s)} link ({link.what})")
            else:
                text += " (link speed unknown: no efficiency)"
            if ceiling is not None:
                share = ceiling.efficiency(best.busbw_gbyte_s)
                text += (f" and {100 * share:.0f}% of the measured ceiling ({ceiling.what})")
                if share > 1.05:
                    text += ("; above the ceiling: the raw test was held back by something "
                             "other than the wire (a busy CPU?)")
                    if ceiling.retransmits:
                        text += f" — it resent {ceiling.retransmits} TCP segments"
                    text += "; rerun on an idle host, or read link% instead"
            out.append(text)
    return out


def unstable_points(s: Series) -> list[str]:
    """Points that are not stable by the one rule (timing.stats.STABLE_RULE), each with why."""
    out = []
    for r in s.collectives:
        why = unstable(r)
        if why:
            out.append(f"{r.op} {r.bytes} B: {why}")
    return out


def warnings_of(series: Iterable[Series]) -> list[str]:
    """The runs' own warnings (no summary, failed, a truncated line) and each run's unstable
    points, as a report and a comparison list them."""
    out = []
    for s in series:
        out += s.warnings
        bad = unstable_points(s)
        if bad:
            shown = "; ".join(bad[:6]) + (f"; and {len(bad) - 6} more" if len(bad) > 6 else "")
            out.append(f"{s.label}: {len(bad)} of {len(s.collectives)} points are unstable "
                       f"(rerun with a larger --budget, on an idle host): {shown}")
    return out


CSV_FIELDS = ("series", "file", "run_id", "host", "fabric", "primitive", "wire", "op", "bytes",
              "count", "dtype", "ranks", "nodes", "transport", "time_us_min", "time_us_p50",
              "time_us_mean", "time_us_p99", "time_us_max", "time_us_stdev", "samples",
              "algbw_gbyte_s", "busbw_gbyte_s", "link_gbit_s", "link_pct", "ceiling_gbit_s",
              "ceiling_pct", "correct", "median_ci95_rel", "unstable")
TRAIN_CSV_FIELDS = ("series", "file", "run_id", "host", "fabric", "primitive", "model",
                    "parameters", "batch_per_rank", "ranks", "samples_per_s_p50",
                    "samples_per_s_mean", "samples_per_s_ci95", "step_ms", "comm_ms",
                    "scaling_efficiency")


def _common(s: Series) -> dict[str, Any]:
    return {"series": s.label, "file": str(s.path), "run_id": s.run.run_id, "host": s.host,
            "fabric": s.run.fabric, "primitive": s.run.primitive}


def collective_rows(series: Iterable[Series]) -> list[dict[str, Any]]:
    rows = []
    for s in series:
        link, ceiling = link_of(s.run), ceiling_of(s.ceilings)
        for r in s.collectives:
            t = r.time_us
            shares = [share_pct(rate, r) for rate in (link, ceiling)]
            rows.append({
                **_common(s), "wire": s.run.wire or "native", "op": r.op,
                "bytes": r.bytes, "count": count_of(r), "dtype": r.dtype,
                "ranks": r.ranks, "nodes": s.run.nodes, "transport": r.transport,
                "time_us_min": t.min, "time_us_p50": t.p50, "time_us_mean": t.mean,
                "time_us_p99": t.p99, "time_us_max": t.max, "time_us_stdev": t.stdev,
                "samples": r.samples, "algbw_gbyte_s": r.algbw_gbyte_s,
                "busbw_gbyte_s": r.busbw_gbyte_s,
                "link_gbit_s": link.speed_gbit_s if link else None,
                "link_pct": None if shares[0] is None else round(shares[0], 3),
                "ceiling_gbit_s": ceiling.speed_gbit_s if ceiling else None,
                "ceiling_pct": None if shares[1] is None else round(shares[1], 3),
                "correct": r.correct, "median_ci95_rel": r.median_ci95_rel,
                "unstable": unstable(r) or ""})
    return rows


def train_rows(series: Iterable[Series]) -> list[dict[str, Any]]:
    rows = []
    for s in series:
        for r in s.of_kind(Train):
            sps = r.samples_per_s
            rows.append({**_common(s), "model": r.model, "parameters": r.parameters,
                         "batch_per_rank": r.batch_per_rank, "ranks": r.ranks,
                         "samples_per_s_p50": sps["p50"], "samples_per_s_mean": sps["mean"],
                         "samples_per_s_ci95": sps["ci95"], "step_ms": r.step_ms,
                         "comm_ms": r.comm_ms, "scaling_efficiency": r.scaling_efficiency})
    return rows


def to_csv(rows: list[dict[str, Any]], fields: tuple[str, ...]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in fields})
    return buf.getvalue()
