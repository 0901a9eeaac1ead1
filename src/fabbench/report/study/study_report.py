"""The library call behind `fabbench report STUDY_DIR`: the answer, HTML, figures, JSON."""

from __future__ import annotations

import json
from pathlib import Path

from fabbench.report.runs_report import checked
from fabbench.report.study.answer import StudyAnswer, answer
from fabbench.results import output_files

HTML, JSON = "report.html", "report.json"  # beside study.json, made again by each report


def make_study_report(directory: Path, *, html: Path | None = None,
                      plots_dir: Path | None = None,
                      title: str | None = None) -> tuple[StudyAnswer, list[Path]]:
    """The answer, with report.json and report.html beside the manifest (made again each
    time); the page at ``html`` instead when given (a new file, results.output_files)."""
    to = checked([directory], html=html, plots_dir=plots_dir, csv=None)
    a = answer(directory)
    written = [output_files.renew(directory / JSON, json.dumps(a.to_json(), indent=1,
                                                          allow_nan=False) + "\n")]
    from fabbench.report.study import study_plots  # matplotlib: only when figures are asked for
    from fabbench.report.study.study_html import render

    made = study_plots.cells(a) + study_plots.forecast(a)
    try:
        page = render(a, made, title=title or f"fabbench study {a.manifest.study}: the answer")
        if html is None:
            written.append(output_files.renew(directory / HTML, page))
        written += to.write({"--html": page} if html else {}, made)
    finally:
        for p in made:
            p.close()
    return a, written
