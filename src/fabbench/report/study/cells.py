"""A study directory as the report reads it: each cell of the manifest with the runs of its
results file (none when it did not run or failed), labelled by what varies between cells."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabbench.results.records import Run
from fabbench.results.runs import Series, split_runs
from fabbench.study import manifest as study_manifest
from fabbench.study.manifest import CellEntry, StudyManifest


@dataclass
class StudyCell:
    """One cell of the manifest (its entry as written) with the runs its results file holds."""

    entry: CellEntry
    series: list[Series]
    label: str = ""

    @property
    def id(self) -> str:
        return self.entry.id

    @property
    def axes(self) -> dict[str, Any]:
        return self.entry.axes

    @property
    def run(self) -> Run | None:
        return self.series[-1].run if self.series else None


def _labels(cells: list[StudyCell], axes: dict[str, list[Any]]) -> None:
    """A cell's label names what varies between cells beside workload and nodes."""
    for c in cells:
        a = c.axes
        prim = a["primitive"]
        over = c.entry.options.get("horovod_over")
        if over:
            prim += f"-{over}"
        label = f"{a['fabric']}/{prim}"
        if len(axes.get("gpudirect", [])) > 1 or a["gpudirect"] != "auto":
            label += f" gdr-{a['gpudirect']}"
        if a.get("link"):
            label += f" @{a['link']}"
        c.label = label


def load_cells(directory: str | Path) -> tuple[StudyManifest, list[StudyCell], list[str]]:
    """(manifest, cells in manifest order, warnings): a cell the manifest calls ok whose file is
    missing is kept without runs and named in a warning."""
    directory = Path(directory)
    doc = study_manifest.read(directory)
    cells, warnings = [], []
    for e in doc.cells:
        series: list[Series] = []
        path = directory / e.file
        if e.status == "ok":
            if not path.is_file():
                warnings.append(f"{e.id}: the manifest says ok but {path} is missing")
            else:
                series = split_runs(path)
                warnings += [w for s in series for w in s.warnings]
        cells.append(StudyCell(e, series))
    _labels(cells, doc.axes)
    return doc, cells, warnings
