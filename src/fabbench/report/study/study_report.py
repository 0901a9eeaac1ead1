"""The library call behind `fabbench report STUDY_DIR`: the answer, HTML, figures, JSON."""

from __future__ import annotations

import json
from pathlib import Path

from fabbench.errors import UsageError
from fabbench.report.runs_report import write_output
from fabbench.report.study.answer import StudyAnswer, answer


def make_study_report(directory: Path, *, html: Path | None = None,
                      plots_dir: Path | None = None, json_path: Path | None = None,
                      title: str | None = None) -> tuple[StudyAnswer, list[Path]]:
    a = answer(directory)
    written: list[Path] = []
    if json_path is not None:
        written.append(write_output(json_path, json.dumps(a.to_json(), indent=1, allow_nan=False)
                              + "\n"))
    if html is None and plots_dir is None:
        return a, written
    from fabbench.report.study import study_plots  # matplotlib: only when figures are asked for

    made = study_plots.cells(a) + study_plots.forecast(a)
    try:
        if plots_dir is not None:
            for p in made:
                try:
                    written += p.save(plots_dir)
                except OSError as exc:
                    raise UsageError(f"cannot write plots to {plots_dir}: {exc.strerror}") \
                        from None
        if html is not None:
            from fabbench.report.study.study_html import render

            written.append(write_output(html, render(
                a, made, title=title or f"fabbench study {a.manifest.study}: the answer")))
    finally:
        for p in made:
            p.close()
    return a, written
