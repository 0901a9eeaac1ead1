"""How a study looks on the console: its cells, and a progress bar over them while it runs (a
line per finished cell as well, so logs of batch jobs show the progress too)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn
from rich.progress import Progress as Bar
from rich.table import Table

from fabbench.console import console
from fabbench.study.spec import Study

_STYLE = {"ok": "green", "failed": "red", "skipped": "yellow", "pending": "dim",
          "running": "cyan"}


def cells_table(s: Study, rows: list[dict[str, Any]]) -> Table:
    table = Table(title=f"study {s.name}: {len(rows)} cells ({s.source})", title_justify="left")
    for col in ("cell", "workload", "fabric", "primitive", "gdr", "nodes", "link", "here"):
        table.add_column(col)
    for r in rows:
        here = "[green]runs[/]" if r["skip"] is None else f"[yellow]skipped:[/] {escape(r['skip'])}"
        table.add_row(r["id"], r["workload"], r["fabric"], r["primitive"], r["gpudirect"],
                      str(r["nodes"]), r["link"] or "-", here)
    return table


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "estimating"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min {seconds % 60:02d} s"


class Progress:
    """The bar (on a terminal) and one line per cell (always, on stderr)."""

    def __init__(self, study: Study, out: Path) -> None:
        self.study, self.out = study, out
        self.err = console(stderr=True)
        self.bar: Bar | None = None
        self.task = TaskID(0)  # the bar's one task, once there is a bar

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def update(self, event: Any) -> None:
        if event.what == "start":
            self.err.print(f"study {self.study.name}: {event.total} cells to run, "
                           f"{event.skipped} skipped on this host -> {self.out}")
            if sys.stderr.isatty() and event.total:
                self.bar = Bar(TextColumn("{task.description}"), BarColumn(),
                               MofNCompleteColumn(), TextColumn("{task.fields[eta]}"),
                               console=self.err, transient=True)
                self.bar.start()
                self.task = self.bar.add_task("cells", total=event.total, eta="")
            return
        cell = event.cell
        left = f"about {_duration(event.eta_s)} left" if event.done < event.total else "done"
        if event.what == "cell":
            if self.bar is not None:
                self.bar.update(self.task, description=cell.id, eta=left)
            return
        status = cell.status
        why = f": {escape(cell.error)}" if cell.error else ""
        line = (f"[{event.done}/{event.total}] [{_STYLE[status]}]{status}[/] {cell.id} "
                f"({cell.wall_s:.1f} s){why} - {left}")
        if self.bar is not None:
            self.bar.update(self.task, completed=event.done, eta=left)
            self.bar.console.print(line, soft_wrap=True)
        else:
            self.err.print(line, soft_wrap=True)

    def summary(self, outcome: Any) -> None:
        counts = ", ".join(f"{n} {k}" for k, n in sorted(outcome.counts.items()))
        print(f"study {self.study.name}: {counts}; manifest {outcome.directory / 'study.json'}")
        for cell in outcome.manifest.cells:
            if cell.status == "skipped":
                print(f"  skipped {cell.id}: {cell.reason}")
            elif cell.status == "failed":
                # the library's own message is in the cell's output, not in this summary
                print(f"  failed  {cell.id}: {cell.error}; its output: "
                      f"{outcome.directory / str(cell.log)}")
        print(f"answer: fabbench report {outcome.directory}")
