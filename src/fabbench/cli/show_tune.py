"""The progress of `fabbench tune`: a spinner with the launch that runs, on a terminal; a line
per launch otherwise."""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.progress import Progress as RichProgress
from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

from fabbench.console import console
from fabbench.tune.search import TuneEvent


class TuneProgress:
    def __init__(self) -> None:
        self.live = console().is_terminal
        self.started = time.monotonic()
        self.bar = RichProgress(SpinnerColumn(), TextColumn("{task.description}"),
                                TimeElapsedColumn(), console=console(), transient=True) \
            if self.live else None
        self.task = self.bar.add_task("tune", total=None) if self.bar else None

    def __enter__(self) -> TuneProgress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.bar is not None:
            self.bar.stop()

    def update(self, e: TuneEvent) -> None:
        what = f"launch {e.done}: {e.label}" + (" (done before)" if e.what == "skip" else "")
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, description=what)
        else:
            print(f"[{time.monotonic() - self.started:6.0f} s] {what}", file=sys.stderr,
                  flush=True)
