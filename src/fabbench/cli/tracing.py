"""`fabbench trace`: parsing only; the library records and reads (fabbench.trace)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fabbench.errors import UsageError

if TYPE_CHECKING:
    from fabbench.trace.et import RankFiles


def trace(
    command: Annotated[list[str] | None, typer.Argument(
        help="The job to record, as you run it (after --).", show_default=False)] = None,
    out: Annotated[Path | None, typer.Option(
        help="Recording: a new (or empty) directory for trace.json and the ranks' raw files. "
        "With --read: the trace file to write (never an existing one).",
        show_default=False)] = None,
    steps: Annotated[int, typer.Option(
        min=0, help="Record the first N optimizer steps only (0: the whole job).")] = 0,
    read: Annotated[list[Path] | None, typer.Option(
        help="Read execution traces instead of recording: each rank's ET JSON, in rank "
        "order (repeat the option), or a directory of et-R.json files.",
        show_default=False)] = None,
    kineto: Annotated[list[Path] | None, typer.Option(
        help="With --read: each rank's Kineto chrome trace of the same run, in rank order "
        "(the times; without them the trace has none).", show_default=False)] = None,
    max_time: Annotated[float, typer.Option(
        help="Seconds the recorded command may run before it (its process group) is "
        "stopped.")] = 6 * 3600.0,
) -> None:
    """Record a training job's communication, or read PyTorch execution traces, into a trace.

    Recording runs COMMAND unchanged: in each rank, once its default process group is up,
    PyTorch's execution-trace observer and a CPU Kineto profiler record every collective and
    point-to-point operation with its process group, sizes, dtype and the compute time
    between them; at the end the ranks' files are combined into DIR/trace.json
    (fabbench-trace/1, docs/replay.md), the raw files kept in DIR/raw. The exit code is the
    command's. --read turns execution traces a job already wrote (what PARAM's comm replay
    reads) into the same format.

    Examples:
        fabbench trace --out t -- torchrun --nproc-per-node 2 examples/replay/ddp.py
        fabbench trace --out t --steps 5 -- torchrun --nproc-per-node 4 train.py
        fabbench trace --read et0.json --read et1.json --kineto k0.json --kineto k1.json
            --out t.json  # traces the job wrote itself
    """
    from fabbench.results import output_files
    from fabbench.trace import et, record

    if out is None:
        raise UsageError("--out is required: the directory (recording) or file (--read) to "
                         "write")
    if read:
        if command:
            raise UsageError("give either --read or a command to record, not both")
        output = output_files.check("--out", out, [*read, *(kineto or [])], reads="*.json*")
        files = et.files_in(read[0]) if len(read) == 1 and read[0].is_dir() else \
            _rank_files(read, kineto or [])
        reading = et.read(files)
        for line in reading.warnings:
            print(f"fabbench: warning: {line}", file=sys.stderr)
        output_files.write(output, json.dumps(reading.trace.to_json(), indent=1) + "\n")
        print(f"{out}: {record.summary(reading.trace)}")
        return
    output_files.check_name("--out", out)
    if kineto:
        raise UsageError("--kineto goes with --read")
    if not command:
        raise UsageError("no command to record: fabbench trace --out DIR -- COMMAND ...")
    if not 0 < max_time < math.inf:  # before DIR is made
        raise UsageError(f"--max-time must be a number of seconds above 0, not {max_time:g}")
    recording = record.record(record.claim(out), command or [], steps, max_time)
    if recording.trace is None:
        print(f"fabbench: error: {' '.join(command or [])} failed (exit {recording.code}); "
              f"no trace written", file=sys.stderr)
        raise typer.Exit(recording.code)
    for line in recording.warnings:
        print(f"fabbench: warning: {line}", file=sys.stderr)
    print(f"{recording.trace}: {recording.summary}")


def _rank_files(ets: list[Path], kinetos: list[Path]) -> list[RankFiles]:
    from fabbench.trace.et import RankFiles

    if kinetos and len(kinetos) != len(ets):
        raise UsageError(f"{len(ets)} execution traces and {len(kinetos)} Kineto traces: give "
                         "one of each per rank, or no Kineto trace")
    return [RankFiles(et=e, kineto=kinetos[i] if kinetos else None) for i, e in enumerate(ets)]


def register(app: typer.Typer) -> None:
    app.command(context_settings={"allow_interspersed_args": False,
                                  "ignore_unknown_options": True})(trace)
