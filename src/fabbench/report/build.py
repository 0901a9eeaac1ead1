"""The library calls behind `fabbench report` and `fabbench compare`: files in, outputs written,
text for the console returned."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fabbench import catalog
from fabbench.errors import UsageError
from fabbench.report import pairs, tables
from fabbench.report.compare import Comparison, compare
from fabbench.report.late import late_ranks
from fabbench.results import lines
from fabbench.results.runs import Series, load
from fabbench.workload_spec import load_entry


@dataclass
class Outputs:
    """What a report or compare produced: the runs, the files written, and console text."""

    series: list[Series]
    text: str
    warnings: list[str]
    written: list[Path] = field(default_factory=list)
    comparison: Comparison | None = None


def write_output(path: Path, text: str) -> Path:
    """Write a report's file (its folder made first); an unwritable path is a UsageError."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    return path


def _csv(series: Sequence[Series], csv_path: Path) -> list[Path]:
    written = [write_output(csv_path, tables.to_csv(tables.collective_rows(series),
                                              tables.CSV_FIELDS))]
    train = tables.train_rows(series)
    if train:
        written.append(write_output(csv_path.with_name(csv_path.stem + "-train.csv"),
                              tables.to_csv(train, tables.TRAIN_CSV_FIELDS)))
    return written


def _plots(series: Sequence[Series], comparison: Comparison | None = None) -> list:
    from fabbench.report import plots  # matplotlib: only when figures are asked for

    made = plots.size_sweeps(series) + plots.training(series)
    if comparison is not None:
        made = plots.ratios(comparison) + made
    return made


def make_report(paths: Sequence[str | Path], *, html: Path | None = None,
                plots_dir: Path | None = None, csv: Path | None = None,
                title: str | None = None) -> Outputs:
    from fabbench.report.html import warnings_of

    series = load(paths)
    text = "\n".join(tables.nccl_table(s, op) for s in series for op in tables.ops_of([s]))
    text += "".join(workload_tables(s) for s in series)
    eff = tables.efficiency_lines(series)
    if eff:
        text += "\n" + "\n".join(f"# {line}" for line in eff) + "\n"
    text += "".join(findings_text(s) for s in series)
    out = Outputs(series, text, warnings_of(series))
    _finish(out, html=html, plots_dir=plots_dir, csv=csv,
            title=title or f"fabbench report: {', '.join(s.label for s in series)}")
    return out


def workload_tables(s: Series) -> str:
    """The records of one run's workloads that show as lines (train, halo, a workload
    package's: their specs' ``lines``) as the run streamed them, and its ceiling records when
    no collective table carries the ceiling."""
    out = ""
    if s.ceilings and not s.collectives:
        out += "".join(f"{lines.ceiling(c)}\n" for c in s.ceilings)
    where = f"{s.run.ranks} ranks on {s.run.nodes} node(s)"
    for spec in catalog.WORKLOADS.values():
        recs = s.of_kind(spec.record) if spec.lines else []
        if recs:
            shown: lines.Lines = load_entry(spec.lines or "")
            out += (f"# {s.label}: {spec.name}, {where}\n{shown.header}\n"
                    + "".join(f"{shown.line(r)}\n" for r in recs))
    return out


def findings(s: Series) -> dict:
    """Which node is slow (pairs records) and which rank arrives late (each rank's own times in
    the collective records) in one run."""
    verdict = pairs.analyse(s.pairs)
    late, points = late_ranks(s.collectives, s.run.rank_hosts)
    return {"series": s.label, "run_id": s.run.run_id,
            "pairs": verdict.as_dict() if verdict is not None else None,
            "late_ranks": [r.as_dict() for r in late], "late_points_judged": points,
            "_verdict": verdict, "_late": late}


def findings_text(s: Series) -> str:
    f = findings(s)
    out = ""
    verdict = f["_verdict"]
    if verdict is not None:
        out += (f"# {s.label}: pairs, {verdict.pairs} pairs of {len(verdict.nodes)} "
                f"{verdict.unit}s, bandwidth at {verdict.bw_bytes} B\n{pairs.table(verdict)}")
        out += "".join(f"# {line}\n" for line in verdict.text)
    out += "".join(f"# {s.label}: {r.sentence(s.run.nodes)}\n" for r in f["_late"])
    return out


def findings_json(series: Sequence[Series]) -> list[dict]:
    return [{k: v for k, v in findings(s).items() if not k.startswith("_")} for s in series]


def make_compare(paths: Sequence[str | Path], *, html: Path | None = None,
                 plots_dir: Path | None = None, csv: Path | None = None,
                 title: str | None = None) -> Outputs:
    from fabbench.report.html import warnings_of

    series = load(paths)
    comparison = compare(series)
    out = Outputs(series, "", warnings_of(series), comparison=comparison)
    out.warnings += comparison.unmatched
    _finish(out, html=html, plots_dir=plots_dir, csv=csv,
            title=title or f"fabbench compare: {' vs '.join(s.label for s in series)}")
    return out


def compare_rows(c: Comparison) -> list[dict]:
    return [{"op": r.op, "dtype": r.dtype, "bytes": r.bytes, "ranks": r.ranks,
             "a": c.baseline.label, "b": r.other.label, "a_p50_us": r.a.time_us["p50"],
             "b_p50_us": r.b.time_us["p50"], "ratio": r.verdict.ratio,
             "ci_low": r.verdict.ci_low, "ci_high": r.verdict.ci_high,
             "p_value": r.verdict.p_value, "verdict": r.verdict.verdict, "notes": r.notes}
            for r in c.rows]


COMPARE_FIELDS = ("op", "dtype", "bytes", "ranks", "a", "b", "a_p50_us", "b_p50_us", "ratio",
                  "ci_low", "ci_high", "p_value", "verdict", "notes")


def _finish(out: Outputs, *, html: Path | None, plots_dir: Path | None, csv: Path | None,
            title: str) -> None:
    if csv is not None:
        if out.comparison is not None:
            out.written.append(write_output(csv, tables.to_csv(compare_rows(out.comparison),
                                                         COMPARE_FIELDS)))
        else:
            out.written += _csv(out.series, csv)
    if html is None and plots_dir is None:
        return
    made = _plots(out.series, out.comparison)
    try:
        if plots_dir is not None:
            for p in made:
                try:
                    out.written += p.save(plots_dir)
                except OSError as exc:
                    raise UsageError(f"cannot write plots to {plots_dir}: {exc.strerror}") \
                        from None
        if html is not None:
            from fabbench.report.html import render

            out.written.append(write_output(html, render(out.series, made, title=title,
                                                   comparison=out.comparison)))
    finally:
        for p in made:
            p.close()
