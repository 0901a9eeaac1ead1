"""The library calls behind `fabbench report` and `fabbench compare`: files in, outputs written,
text for the console returned."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabbench import catalog
from fabbench.report import tables
from fabbench.report.compare import Comparison, compare
from fabbench.report.late import late_ranks
from fabbench.results import lines, output_files
from fabbench.results.reader import collector_paused
from fabbench.results.runs import Series, expand, load
from fabbench.workloads.collectives.workload import CollectivesWorkload
from fabbench.workloads.pairs.record import Pairs, best_pairs

if TYPE_CHECKING:
    from fabbench.floors.points import Point
    from fabbench.report.plots import Plot


@dataclass
class Outputs:
    """What a report or compare produced: the runs, the files written, and console text."""

    series: list[Series]
    text: str
    warnings: list[str]
    written: list[Path] = field(default_factory=list)
    comparison: Comparison | None = None
    floors: tuple[str, list[str]] | None = None  # the floors' heading and the placements


def checked(paths: Sequence[str | Path], *, html: Path | None, plots_dir: Path | None,
            csv: Path | None) -> Targets:
    """The outputs asked for, refused before any work when one would overwrite a file, is an
    input, or cannot be written (results.output_files)."""
    files = output_files.check_all([("--html", html), ("--csv", csv)], paths)
    return Targets({o.flag: o for o in files},
                    output_files.check_folder("--plots", plots_dir) if plots_dir else None)


@dataclass(frozen=True)
class Targets:
    """The checked outputs of a report or a compare: files by option, and the plots' folder."""

    files: dict[str, output_files.Output]
    plots: output_files.Output | None

    def write(self, texts: dict[str, str], made: Sequence[Plot], csv_train: str | None = None,
              inputs: Sequence[str | Path] = ()) -> list[Path]:
        """The files of ``texts`` (by option), a train CSV beside --csv, the figures: none
        written when one is refused."""
        pending: list[tuple[output_files.Output, str | bytes]] = [
            (self.files[flag], text) for flag, text in texts.items()]
        csv = self.files.get("--csv")
        if csv_train is not None and csv is not None:
            train = csv.path.with_name(csv.path.stem + "-train.csv")
            pending.append((output_files.check("--csv", train, inputs), csv_train))
        if self.plots is not None:
            pending += [(output_files.into(self.plots, name), data)
                        for p in made for name, data in p.files()]
        return output_files.write_all(pending)


def _plots(series: Sequence[Series], comparison: Comparison | None = None) -> list[Plot]:
    from fabbench.report import plots  # matplotlib: only when figures are asked for

    made = plots.size_sweeps(series) + plots.training(series)
    if comparison is not None:
        made = plots.ratios(comparison) + made
    return made


def make_report(paths: Sequence[str | Path], *, html: Path | None = None,
                plots_dir: Path | None = None, csv: Path | None = None,
                title: str | None = None, floors: Path | None = None) -> Outputs:
    """The report of results files; ``floors``: a floors file to place the figures against
    (default: the shipped reference floors)."""
    to = checked(paths, html=html, plots_dir=plots_dir, csv=csv)
    with collector_paused():
        return _report(paths, to, title=title, floors=floors)


def _report(paths: Sequence[str | Path], to: Targets, *, title: str | None,
            floors: Path | None) -> Outputs:
    from fabbench.floors.peer_output import read_foreign
    from fabbench.floors.verify import is_fabbench

    files = expand(paths)
    own = [f for f in files if is_fabbench(f)]
    series = load(own) if own else []
    others = [p for f in files if f not in own for p in read_foreign(f)]
    text = "\n".join(tables.nccl_table(s, op) for s in series for op in tables.ops_of([s]))
    text += "".join(workload_tables(s) for s in series)
    eff = tables.efficiency_lines(series)
    if eff:
        text += "\n" + "\n".join(f"# {line}" for line in eff) + "\n"
    text += "".join(findings_text(s) for s in series)
    text += foreign_text(others, series)
    placed = floors_lines(series, floors, others)
    if placed[1]:
        text += f"# {placed[0]}:\n" + "".join(f"#   {line}\n" for line in placed[1])
    out = Outputs(series, text, tables.warnings_of(series), floors=placed if placed[1] else None)
    names = [s.label for s in series] + sorted({f"{p.source} {Path(p.file).name}"
                                                 for p in others})
    _finish(out, to, title=title or f"fabbench report: {', '.join(names)}", inputs=paths)
    return out


def workload_tables(s: Series) -> str:
    """The records of one run's workloads that show as lines (each workload's
    ``report_lines``) as the run streamed them, and its ceiling records when
    no collective table carries the ceiling."""
    out = ""
    if s.ceilings and not s.collectives:
        out += "".join(f"{lines.ceiling(c)}\n" for c in s.ceilings)
    where = f"{s.run.ranks} ranks on {s.run.nodes} node(s)"
    for spec in catalog.WORKLOADS.values():
        recs = s.of_kind(spec.record) if spec.report_lines else []
        if recs:
            out += (f"# {s.label}: {spec.name}, {where}\n{spec.header(s.run)}\n"
                    + "".join(f"{spec.line(r)}\n" for r in recs))
    return out


def floors_lines(series: Sequence[Series], path: Path | None = None,
                 others: Sequence[Point] = ()) -> tuple[str, list[str]]:
    """Where the runs' figures (and other tools' points) stand against a floors file (the
    reference floors by default): a heading, and the verdicts of the rules that judged
    something, a figure beside its rule's reference."""
    from fabbench.floors import rules
    from fabbench.floors.judge import judge
    from fabbench.floors.points import points_of
    from fabbench.floors.verify import placement

    floors = rules.load(path or rules.REFERENCE)
    return (f"against the floors of {floors.name} ({floors.path})",
            placement(judge(floors, [*points_of(series), *others])))


def foreign_text(points: Sequence[Point], series: Sequence[Series]) -> str:
    """Other tools' results (nccl-tests, OSU) as tables per file, run and operation, each
    size beside fabbench's busbw (or pairs bandwidth) at the same operation and size where a
    fabbench run given with them measured it."""
    if not points:
        return ""
    mine: dict[tuple[str, int], tuple[float, str]] = {}
    for s in series:
        for c in s.collectives:
            mine.setdefault((c.op, c.bytes), (c.busbw_gbyte_s, s.label))
        for r in best_pairs(p for p in s.of_kind(Pairs.kind) if isinstance(p, Pairs)):
            mine.setdefault(("pairs", r.bytes), (r.bw_gbyte_s, s.label))
    groups: dict[tuple[str, str, str, str | None], list[Point]] = {}
    for p in points:
        groups.setdefault((p.source, p.file, p.run, p.op), []).append(p)
    out = ""
    for (source, file, run, op), rows in groups.items():
        bw = "busbw" if rows[0].workload == CollectivesWorkload.name else "bw"
        out += (f"# {source}: {op or rows[0].workload} ({run}; {file}; no transport claimed)\n"
                f"#{'size':>11} {bw + ' GB/s':>11} {'time us':>11}  vs fabbench\n")
        for p in rows:
            key = (p.op or "", p.bytes or 0) if bw == "busbw" else ("pairs", p.bytes or 0)
            figure, time_us = p.metrics.get(bw), p.metrics.get("time")
            theirs = mine.get(key)
            versus = f"{figure / theirs[0]:.2f}x of {theirs[1]} ({theirs[0]:.4g} GB/s)" \
                if theirs and figure is not None and theirs[0] > 0 else "-"
            out += (f" {p.bytes if p.bytes is not None else '-':>11} "
                    f"{'-' if figure is None else format(figure, '.4g'):>11} "
                    f"{'-' if time_us is None else format(time_us, '.2f'):>11}  {versus}\n")
    return out


def findings(s: Series) -> dict[str, Any]:
    """What the workloads find in one run (which node is slow, from the pairs records) and
    which rank arrives late (each rank's own times in the collective records)."""
    own = catalog.findings(s.of_kind)
    late, points = late_ranks(s.collectives, s.run.rank_hosts)
    return {"series": s.label, "run_id": s.run.run_id,
            **{name: f.json if f is not None else None for name, f in own.items()},
            "late_ranks": [r.to_json() for r in late], "late_points_judged": points,
            "_own": own, "_late": late}


def findings_text(s: Series) -> str:
    f = findings(s)
    out = ""
    for found in f["_own"].values():
        if found is not None:
            out += f"# {s.label}: {found.heading}\n{found.table}"
            out += "".join(f"# {line}\n" for line in found.text)
    out += "".join(f"# {s.label}: {r.sentence(s.run.nodes)}\n" for r in f["_late"])
    return out


def findings_json(series: Sequence[Series]) -> list[dict[str, object]]:
    return [{k: v for k, v in findings(s).items() if not k.startswith("_")} for s in series]


def make_compare(paths: Sequence[str | Path], *, html: Path | None = None,
                 plots_dir: Path | None = None, csv: Path | None = None,
                 title: str | None = None) -> Outputs:
    to = checked(paths, html=html, plots_dir=plots_dir, csv=csv)
    with collector_paused():
        series = load(paths)
        comparison = compare(series)
        out = Outputs(series, "", tables.warnings_of(series), comparison=comparison)
        out.warnings += comparison.unmatched
        _finish(out, to, title=title or f"fabbench compare: "
                f"{' vs '.join(s.label for s in series)}", inputs=paths)
    return out


def compare_rows(c: Comparison) -> list[dict[str, object]]:
    return [{"op": r.op, "dtype": r.dtype, "bytes": r.bytes, "ranks": r.ranks,
             "a": c.baseline.label, "b": r.other.label, "a_p50_us": r.a.time_us.p50,
             "b_p50_us": r.b.time_us.p50, "ratio": r.verdict.ratio,
             "ci_low": r.verdict.ci_low, "ci_high": r.verdict.ci_high,
             "p_value": r.verdict.p_value, "verdict": r.verdict.verdict, "notes": r.notes}
            for r in c.rows]


COMPARE_FIELDS = ("op", "dtype", "bytes", "ranks", "a", "b", "a_p50_us", "b_p50_us", "ratio",
                  "ci_low", "ci_high", "p_value", "verdict", "notes")


def _finish(out: Outputs, to: Targets, *, title: str, inputs: Sequence[str | Path]) -> None:
    texts, train = {}, None
    if "--csv" in to.files:
        if out.comparison is not None:
            texts["--csv"] = tables.to_csv(compare_rows(out.comparison), COMPARE_FIELDS)
        else:
            texts["--csv"] = tables.to_csv(tables.collective_rows(out.series), tables.CSV_FIELDS)
            rows = tables.train_rows(out.series)
            train = tables.to_csv(rows, tables.TRAIN_CSV_FIELDS) if rows else None
    made = _plots(out.series, out.comparison) if "--html" in to.files or to.plots else []
    try:
        if "--html" in to.files:
            from fabbench.report.html import render

            texts["--html"] = render(out.series, made, title=title, comparison=out.comparison,
                                     floors=out.floors)
        out.written += to.write(texts, made, train, inputs)
    finally:
        for p in made:
            p.close()
