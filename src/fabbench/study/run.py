"""`fabbench study run`: every cell of a study as its own `fabbench run` launch, in a subprocess
with a deadline, into one directory:

    DIR/study.json            the manifest (every cell, its status, and why)
    DIR/cells/<cell>.jsonl    one results file per cell
    DIR/logs/<cell>.log       what the cell's launch printed

A failed cell is recorded with its error and the study goes on. ``resume`` runs again only the
cells that are not complete (an ok results file, or skipped); an earlier attempt's partial file is
kept beside, renamed ``<cell>.jsonl.attempt-N``. Inside a Slurm allocation each cell is an
``srun`` step over the allocation's nodes.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from fabbench import __version__
from fabbench.emulate.site import current as emulated_site
from fabbench.errors import RunError, UsageError
from fabbench.launch import launchers, schedulers
from fabbench.procs import dies_with_this_process, stop_groups
from fabbench.results import output_files
from fabbench.study import manifest
from fabbench.study.host import Host, Place, detect_place, launcher_of, why_not
from fabbench.study.manifest import Attempt, CellEntry, StudyManifest
from fabbench.study.spec import Cell, Study
from fabbench.sysinfo.inventory import IMAGE_REF_ENV

STOP_GRACE_S = 15.0  # after SIGTERM, the cell's launcher stops its ranks; then SIGKILL
# a cell is stopped as a user's `kill` would: `fabbench run` stops its ranks and writes the
# summary saying so (SIGINT, a Ctrl-C, leaves the file without one; srun takes a first SIGINT
# as a request for its status)
STOP = signal.SIGTERM


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Event:
    """What the runner tells its caller (the CLI draws the progress): "start" (nothing run
    yet), "cell" (a cell starts) and "done" (a cell finished)."""

    what: str
    done: int            # cells finished so far in this invocation
    total: int           # cells this invocation runs
    cell: CellEntry | None = None
    eta_s: float | None = None  # the time left, estimated from this invocation's cells so far
    skipped: int = 0     # cells this place cannot run (in the manifest with their reason)


@dataclass
class StudyOutcome:
    directory: Path
    manifest: StudyManifest
    ran: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def code(self) -> int:
        return 1 if self.counts.get("failed") else 0


def cell_entry(cell: Cell, argv: list[str]) -> CellEntry:
    return CellEntry(id=cell.id, axes=cell.axes(), kind=cell.kind, options=dict(cell.options),
                     argv=argv, file=f"cells/{cell.id}.jsonl", log=f"logs/{cell.id}.log")


def command(cell: Cell, out: Path, place: Place, index: int) -> tuple[list[str], dict[str, str]]:
    """The launch of one cell and the environment it adds: `fabbench run` starting its own
    ranks here (or `fabbench emulate ... -- run` on emulated nodes), or, in an allocation, the
    ranks started by the place's scheduler (launch.schedulers). Empty when it cannot start
    the cell's launcher (why_not skips such a cell, saying so). The image reference this
    process was told (FABBENCH_IMAGE_REF) goes on to every rank: an MPIJob's workers get only
    what mpirun exports."""
    fabbench = [sys.executable, "-m", "fabbench"]
    run = ["run", *cell.run_args(), "--out", str(out)]
    site = emulated_site()  # `fabbench emulate ... -- study run`: the site's links, its image
    if site is not None:
        return [*fabbench, *site.cell_argv(nodes=cell.nodes, ranks_per_node=cell.ranks_per_node,
                                           max_time_s=cell.deadline_s, run=run)], {}
    if cell.link is not None:  # emulated nodes on this host
        return ([*fabbench, "emulate", "run", "--nodes", str(cell.nodes), "--link", cell.link,
                 "--ranks-per-node", str(cell.ranks_per_node), "--max-time",
                 f"{cell.deadline_s:g}", "--", *run], {})
    scheduler = schedulers.get(place.scheduler)
    launcher = launchers.get(launcher_of(cell))
    if not scheduler.starts(launcher):
        return [], {}
    return scheduler.launch(
        place, launcher, nodes=cell.nodes, per_node=cell.ranks_per_node,
        program=[*fabbench, *run], port=scheduler.port(place, index),
        forward={k: os.environ[k] for k in (IMAGE_REF_ENV,) if os.environ.get(k)})


# what a run says when the wire or a peer failed under it, not its configuration or its library:
# the faults a second attempt may not meet (a link that flapped, a port that lost packets, a
# peer that stalled); a persistent one (the link down for good) fails the retry too
TRANSIENT = ("did not arrive", "timed out in", "connection reset",
             "connection refused by peer", "no route to host", "network is unreachable",
             "lost communication", "broken pipe")


def transient(error: str | None, code: int | None) -> bool:
    """Did the cell fail from a fault on the wire (retried with retry = "transient")? Never a
    refusal of its options (exit 2), a wrong result, or a study stopped by its user."""
    if not error or code == 2 or "stopped" in error:
        return False
    text = error.lower()
    return any(phrase in text for phrase in TRANSIENT) and "wrong" not in text


def _error_of(log: Path, code: int) -> str:
    """The cell's own account of what failed: its 'fabbench: error:' line, else its last line."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    for ln in reversed(lines):
        if ln.startswith("fabbench: error:"):
            return ln[len("fabbench: error:"):].strip()
    tail = lines[-1] if lines else "no output"
    return f"exit code {code}: {tail[-400:]}"


def results_ok(path: Path) -> bool:
    """A complete cell: its results file ends with ok summaries for every run in it."""
    from fabbench.results.reader import read_results
    from fabbench.results.records import Run, Summary

    if not path.is_file():
        return False
    try:
        results = read_results(path)
    except UsageError:
        return False
    runs = [r.run_id for r in results.of_kind(Run)]
    ok = {r.run_id for r in results.of_kind(Summary) if r.ok}
    return bool(runs) and all(r in ok for r in runs)


class _Stop(Exception):
    """SIGTERM/SIGHUP while a cell runs: stop it and end the study (resumable)."""


def launch_logged(argv: list[str], env: dict[str, str], log: Path, deadline_s: float
            ) -> tuple[int, str | None]:
    """Run one cell with its deadline; the exit code and, when the study stopped it, why."""
    with open(log, "ab") as out:
        out.write(f"# {_now()} {shlex.join(argv)}\n".encode())
        out.flush()
        # the cell ends with the study, however the study ends (SIGKILL too): the kernel sends
        # it SIGTERM then, as the study itself would (a cell left running would finish on its
        # own, in a directory --resume takes over)
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env={**os.environ, **env},
                                start_new_session=True, preexec_fn=dies_with_this_process(STOP))
    end = time.monotonic() + deadline_s
    try:
        while True:
            try:
                return proc.wait(timeout=min(1.0, max(0.0, end - time.monotonic()))), None
            except subprocess.TimeoutExpired:
                if time.monotonic() >= end:
                    stop_groups([proc], STOP, STOP_GRACE_S)
                    return (proc.returncode if proc.returncode is not None else 124,
                            f"passed the cell's deadline of {deadline_s:g} s; stopped")
    except BaseException:
        stop_groups([proc], STOP, STOP_GRACE_S)
        raise


def _start_manifest(study: Study, place: Place, cells: list[CellEntry]) -> StudyManifest:
    return StudyManifest(study=study.name, description=study.description, source=study.source,
                         source_sha256=study.sha256, started=_now(),
                         host=socket.gethostname(), place=place, fabbench=__version__,
                         axes={k: list(v) for k, v in study.axes.items()}, cells=cells)


def run_study(study: Study, directory: str | os.PathLike[str], *, resume: bool = False,
              only: Callable[[Cell], bool] | None = None,
              progress: Callable[[Event], None] | None = None,
              place: Place | None = None) -> StudyOutcome:
    directory = Path(directory)
    output_files.check_name("--out", directory)
    if only is not None and not any(only(c) for c in study.cells):
        raise UsageError(f"--only matches no cell of the study {study.name} (its cells: "
                         f"{', '.join(c.id for c in study.cells[:5])}"
                         f"{', ...' if len(study.cells) > 5 else ''})")
    place = place or detect_place()
    host = Host.look()
    entries = []
    for i, cell in enumerate(study.cells):
        argv, _ = command(cell, directory / "cells" / f"{cell.id}.jsonl", place, i)
        entries.append(cell_entry(cell, argv))
    if resume:
        if not manifest.is_study_dir(directory):
            raise UsageError(f"cannot resume {directory}: it holds no study ({manifest.NAME})")
        doc = manifest.read(directory)
        _check_same(doc, study, entries, directory)
        doc.place = place
        doc.finished = None
        by_id = {e.id: e for e in doc.cells}
        for e in entries:  # keep what was found; a changed launch (another place) is taken
            by_id[e.id].argv = e.argv
    else:
        if directory.exists() and not directory.is_dir():
            raise UsageError(f"{directory} is a file, not a directory; --out names the study's "
                             "directory (fabbench never overwrites results)")
        if directory.exists() and any(directory.iterdir()):
            raise UsageError(f"{directory} is not empty; choose another --out, or add --resume "
                             "to continue the study in it (fabbench never overwrites results)")
        doc = _start_manifest(study, place, entries)
    manifest.validate(doc.to_json(), str(manifest.path_in(directory)))  # before anything
    for sub in ("cells", "logs"):
        try:
            (directory / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create {directory / sub}: {exc.strerror}") from None

    # skipped with their reason, or queued
    queue = []
    for i, (cell, e) in enumerate(zip(study.cells, doc.cells, strict=True)):
        if only is not None and not only(cell):
            continue
        if e.status == "ok" and results_ok(directory / e.file):
            continue
        reason = why_not(cell, host, place)
        if reason is not None:
            e.status, e.reason, e.error = "skipped", reason, None
            continue
        if e.status == "skipped" and resume:
            e.status, e.reason = "pending", None
        queue.append((i, cell, e))
    manifest.write(directory, doc)

    out = StudyOutcome(directory, doc)
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}

    def stop(signum: int, _frame: object) -> None:
        raise _Stop(signal.Signals(signum).name)

    for s in previous:
        signal.signal(s, stop)
    started = time.monotonic()
    tell = progress or (lambda _event: None)
    skipped = sum(1 for e in doc.cells if e.status == "skipped")
    tell(Event("start", 0, len(queue), skipped=skipped))
    try:
        for n, (i, cell, e) in enumerate(queue, 1):
            elapsed = time.monotonic() - started
            eta = elapsed / (n - 1) * (len(queue) - n + 1) if n > 1 else None
            tell(Event("cell", n - 1, len(queue), e, eta, skipped))
            _run_cell(directory, cell, e, place, i, doc)
            if e.status == "failed" and cell.retry == "transient" and \
                    transient(e.error, e.exit_code):
                _run_cell(directory, cell, e, place, i, doc)  # once more; both recorded
            out.ran += 1
            elapsed = time.monotonic() - started
            tell(Event("done", n, len(queue), e, elapsed / n * (len(queue) - n), skipped))
    except _Stop as why:
        raise RunError(f"study stopped by {why} (continue with --resume)") from None
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    doc.finished = _now()
    manifest.write(directory, doc)
    for e in doc.cells:
        out.counts[e.status] = out.counts.get(e.status, 0) + 1
    return out


def _run_cell(directory: Path, cell: Cell, e: CellEntry, place: Place, index: int,
              doc: StudyManifest) -> None:
    results = directory / e.file
    log = directory / (e.log or f"logs/{e.id}.log")
    kept = None
    if results.exists():  # an earlier attempt: kept beside, never overwritten
        n = e.attempts
        while results.with_name(f"{results.name}.attempt-{n}").exists():
            n += 1
        kept = results.with_name(f"{results.name}.attempt-{n}")
        results.rename(kept)
    if e.status == "failed":  # the attempt before this one, as it ended
        e.history = [*(e.history or ()), Attempt(
            attempt=e.attempts, error=e.error, exit_code=e.exit_code, wall_s=e.wall_s,
            transient=transient(e.error, e.exit_code),
            file=str(kept.relative_to(directory)) if kept else None)]
    e.status, e.started, e.reason, e.error, e.exit_code, e.wall_s = (
        "running", _now(), None, None, None, None)
    e.attempts += 1
    manifest.write(directory, doc)
    argv, env = command(cell, results, place, index)
    t0 = time.monotonic()
    try:
        code, stopped = launch_logged(argv, env, log, cell.deadline_s)
    except BaseException:
        e.status, e.error = "failed", "the study was stopped while this cell ran"
        e.wall_s = round(time.monotonic() - t0, 3)
        manifest.write(directory, doc)
        raise
    e.wall_s = round(time.monotonic() - t0, 3)
    e.exit_code = code
    if code == 0 and results_ok(results):
        e.status = "ok"
    else:
        e.status = "failed"
        e.error = stopped or (_error_of(log, code) if code else
                              "exit code 0 but the results file has no ok summary")
    manifest.write(directory, doc)


def _check_same(doc: StudyManifest, study: Study, entries: list[CellEntry],
                directory: Path) -> None:
    if doc.study != study.name:
        raise UsageError(f"{directory} holds study {doc.study!r}, not {study.name!r}")
    old = [(c.id, c.options) for c in doc.cells]
    new = [(e.id, e.options) for e in entries]
    if json.dumps(old, sort_keys=True) != json.dumps(new, sort_keys=True):
        raise UsageError(f"study {study.name!r} ({study.source}) has changed since {directory} "
                         "was started (other cells or options); start it anew in another --out")
