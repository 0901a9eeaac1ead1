"""The library call behind `fabbench report DIR --trend`: the runs read, the trend of their nodes
and links against a floors file (report.trend), its page and figures written."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fabbench.floors import rules
from fabbench.report.runs_report import checked
from fabbench.report.tables import warnings_of
from fabbench.report.trend import AHEAD, WINDOW, Trend, trend_of
from fabbench.results.reader import collector_paused
from fabbench.results.runs import expand, load


@dataclass
class TrendOutputs:
    trend: Trend
    warnings: list[str]
    written: list[Path] = field(default_factory=list)


def make_trend(paths: Sequence[str | Path], *, floors: Path | None = None,
               window: int = WINDOW, ahead: int = AHEAD, html: Path | None = None,
               plots_dir: Path | None = None, title: str | None = None) -> TrendOutputs:
    """The trend of the runs in ``paths`` against ``floors`` (default: the reference floors);
    the outputs asked for are checked before any work and written after."""
    to = checked(paths, html=html, plots_dir=plots_dir, csv=None)
    judged_by = rules.load(floors or rules.REFERENCE)
    with collector_paused():
        series = load(paths)
        found = trend_of(series, judged_by, window=window, ahead=ahead,
                         files=[str(p) for p in expand(paths)])
    out = TrendOutputs(found, warnings_of(series) + list(found.warnings))
    if html is None and plots_dir is None:
        return out
    from fabbench.report import plots  # matplotlib: only when figures are asked for
    from fabbench.report.html import render_trend

    made = plots.trend(found)
    try:
        texts = {"--html": render_trend(found, made, title=title or (
            f"fabbench trend: {len(found.runs)} runs against {judged_by.name}"))} if html else {}
        out.written += to.write(texts, made, inputs=paths)
    finally:
        for p in made:
            p.close()
    return out
