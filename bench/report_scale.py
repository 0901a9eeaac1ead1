"""How the analysis commands scale with the records they read: `report`, `compare`, `verify`
(`floors verify`), `baseline` (`floors baseline`) and `model` (`forecast`) timed on files of
about 1,000, 10,000 and 100,000 collective records, or (--workload pairs) `report`, `verify` and
`baseline` on one pairs run of 1,024 and 4,096 nodes (1,047,552 and 16,773,120 records), with
the wall and CPU seconds and peak memory (VmHWM) of each command's process, for this checkout's
fabbench and, with --before, for another checkout of it (a `git worktree` of an older commit) on
the same files in the same run, the two alternating so that a busy neighbour slows both alike
(docs/performance.md). A command still running after --deadline seconds is stopped and reported
as "> N" (its CPU seconds and peak RSS so far as "> x"). Each command reads the file for the
first time: the checked columns a read keeps beside a large file (results.column_cache) are
removed before it, unless --warm (then one read before the timed ones keeps them). A --before
checkout older than the commands' move (5cbaa93, issue 45) runs them by their old spellings.

The files are made from real records, each file in turn (timed, then deleted unless --keep).
Collective: a results file of a real run (--source; by default the demo's, `fabbench run
--fabric ethernet`, made once into --work) is repeated, run by run, under distinct run ids
(``<run id>-r<n>``) until a file holds at least the size asked for; each copy keeps its run
record and summary, so a file holds whole runs only. `compare` reads a file's runs as A (the
first) against each of the others. Pairs: the records of a real pairs run over emulated nodes
(--source; by default tests/fixtures/pairs/emulated-4.jsonl, recorded with `fabbench emulate run
--nodes 4 --link 1gbit -- run --primitive mpi --workload pairs --sizes 8,1M --budget 0.05
--no-ceiling --timeout 30`) spread over N nodes by a round-robin tournament (bench/pairs_scale.py);
the free space of --work is checked first.

    .venv/bin/python bench/report_scale.py --source /tmp/demo.jsonl             # after only
    git worktree add /tmp/fb-before HEAD~1
    .venv/bin/python bench/report_scale.py --source /tmp/demo.jsonl --before /tmp/fb-before
    .venv/bin/python bench/report_scale.py --workload pairs --nodes 1024 --before /tmp/fb-before \
        --repeat 1 --deadline 1800
    .venv/bin/python bench/report_scale.py --workload pairs --nodes 1024 --before /tmp/fb-before \
        --no-after --repeat 1                                # before alone, for a later after
    git worktree remove /tmp/fb-before
    .venv/bin/python bench/report_scale.py --sizes 1000 --commands report --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pairs_scale

REPO = Path(__file__).resolve().parents[1]
SIZES = (1_000, 10_000, 100_000)
NODES = (1_024, 4_096)
WORKLOADS = {"collective": ("report", "compare", "verify", "baseline", "model"),
             "pairs": ("report", "verify", "baseline")}
PAIRS_SOURCE = REPO / "tests" / "fixtures" / "pairs" / "emulated-4.jsonl"
SPARE_BYTES = 2 * 2**30  # left free on --work's disk beside a pairs file
TIMEOUT_S = 1800
# the checked columns a read keeps beside a large file for the next (results.column_cache)
KEPT = ".fabbench-columns.parquet"


def runs_of(source: Path) -> list[list[dict]]:
    """A results file's records as written (JSON objects), one list per run."""
    runs: list[list[dict]] = []
    for line in source.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if record["kind"] == "run" or not runs:
            runs.append([])
        runs[-1].append(record)
    if not runs:
        sys.exit(f"bench/report_scale.py: {source} holds no records")
    return runs


def copies(runs: list[list[dict]], at_least: int) -> Iterator[str]:
    """The lines of whole runs, repeated under distinct run ids, until ``at_least`` lines."""
    written, n = 0, 0
    while written < at_least:
        for run in runs:
            for record in run:
                line = {**record, "run_id": f"{record['run_id']}-r{n:06d}"}
                yield json.dumps(line, separators=(",", ":"), allow_nan=False)
                written += 1
            n += 1


def generate(source: Path, size: int, out: Path) -> int:
    """A file of at least ``size`` records made of ``source``'s runs; the records written."""
    written = 0
    with out.open("w") as f:
        for line in copies(runs_of(source), size):
            f.write(line + "\n")
            written += 1
    return written


def demo_file(work: Path) -> Path:
    """The demo's results file (a real 2-rank run over TCP), made once."""
    path = work / "demo.jsonl"
    if not path.exists():
        print("making the source: fabbench run --fabric ethernet (about 2 minutes)", flush=True)
        subprocess.run([sys.executable, "-m", "fabbench", "run", "--fabric", "ethernet",
                        "--out", str(path)], check=True, timeout=TIMEOUT_S,
                       stdout=subprocess.DEVNULL)
    return path


# where issue 45 moved the commands (5cbaa93): `floors verify`, `floors baseline`, `forecast`
MOVED = {"verify": ["floors", "verify"], "baseline": ["floors", "baseline"],
         "model": ["forecast"]}


def moved_in(src: Path) -> bool:
    """Whether the fabbench in ``src`` has the commands where issue 45 moved them."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([sys.executable, "-m", "fabbench", "forecast", "--help"], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          timeout=TIMEOUT_S).returncode == 0


def argv_of(command: str, path: Path, scratch: Path, moved: bool = True) -> list[str]:
    """The command line of one analysis command on one file (``moved``: by the spellings of
    issue 45, else the old ones)."""
    words = MOVED[command] if moved and command in MOVED else [command]
    if command in ("report", "compare"):
        return [command, str(path)]
    if command == "verify":
        return [*words, "--floors", "reference", str(path)]
    if command == "baseline":
        out = scratch / f"baseline-{time.monotonic_ns()}.toml"
        return [*words, str(path), "--out", str(out)]
    if command == "model":
        return [*words, "--from", str(path), "--nodes", "64"]
    raise ValueError(command)


# `fabbench ARGV` run by a process that writes its own peak RSS (VmHWM: the high-water mark of
# its memory since exec) to a file when it exits. ru_maxrss would not do: Linux counts in it the
# memory of the process that forked it, before exec.
WRAPPER = """import atexit, sys
peak_to = sys.argv.pop(1)
def peak():
    with open('/proc/self/status') as status, open(peak_to, 'w') as out:
        out.write(next(line for line in status if line.startswith('VmHWM:')).split()[1])
atexit.register(peak)
from fabbench.cli.main import main
main(sys.argv[1:])
"""


@dataclass(frozen=True)
class Timing:
    """One command's run: wall and CPU seconds (user + system: what a busy neighbour inflates
    less), peak RSS (MiB); ``stopped``: at the deadline, so each figure is a lower bound."""

    wall_s: float
    cpu_s: float
    rss_mib: float
    stopped: bool = False


def vm_hwm_kib(pid: int) -> int | None:
    """A running process's peak RSS so far (KiB); None once it has exited."""
    with open(f"/proc/{pid}/status") as status:
        return next((int(line.split()[1]) for line in status if line.startswith("VmHWM:")),
                    None)


def timed(src: Path, argv: list[str], scratch: Path, deadline_s: float) -> Timing:
    """Run ``fabbench ARGV`` with the package of ``src`` first on the path, stopped (SIGKILL)
    after ``deadline_s``. Exit codes 0 and 1 are results (verify's 1: a floor failed)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    peak, err = scratch / "peak-kib", scratch / "stderr"
    peak.unlink(missing_ok=True)
    start = time.perf_counter()
    with err.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", WRAPPER, str(peak), *argv], env=env,
                                stdout=subprocess.DEVNULL, stderr=stderr)
    stopped_at = None
    # its pidfd is readable when it exits; until os.wait4 reaps it its pid is its own
    pidfd = os.pidfd_open(proc.pid)
    try:
        if not select.select([pidfd], [], [], deadline_s)[0]:
            stopped_at = vm_hwm_kib(proc.pid)  # None: it ended at the deadline
            if stopped_at is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)
    _, status, usage = os.wait4(proc.pid, 0)  # its rusage: that child's own CPU time
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    if stopped_at is not None:
        return Timing(deadline_s, cpu, stopped_at / 1024, stopped=True)
    if proc.returncode not in (0, 1) or not peak.exists():
        sys.exit(f"bench/report_scale.py: {' '.join(argv)} ({src}) failed "
                 f"({proc.returncode}): {err.read_text(errors='replace')[-2000:]}")
    return Timing(wall, cpu, int(peak.read_text()) / 1024)


@dataclass(frozen=True)
class Made:
    """A file made to be read: its records and, for pairs, its nodes."""

    path: Path
    records: int
    nodes: int | None = None


def collective_files(args: argparse.Namespace, work: Path) -> Iterator[Made]:
    """The collective files, each made when the one before has been timed."""
    sources = args.source or [demo_file(work)]
    runs = [run for source in sources for run in runs_of(source)]
    merged = work / "source.jsonl"
    merged.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n"
                              for run in runs for r in run))
    for size in [int(s) for s in args.sizes.split(",")]:
        path = work / f"records-{size}.jsonl"
        yield Made(path, generate(merged, size, path))


def pairs_files(args: argparse.Namespace, work: Path) -> Iterator[Made]:
    """The pairs files of --nodes, each made (space allowing) when the one before is timed."""
    if args.source and len(args.source) > 1:
        pairs_scale.fail("--workload pairs takes one --source (one pairs run)")
    source = pairs_scale.read_source((args.source or [PAIRS_SOURCE])[0])
    for n in [int(s) for s in args.nodes.split(",")]:
        if n < 2:
            pairs_scale.fail(f"--nodes {n}: a pairs run has 2 nodes or more")
        need, free = pairs_scale.estimate_bytes(source, n), shutil.disk_usage(work).free
        if need + SPARE_BYTES > free:
            pairs_scale.fail(f"the file of {n} nodes needs about {need / 2**30:.1f} GiB and "
                             f"{SPARE_BYTES / 2**30:.0f} GiB to spare; {work} has "
                             f"{free / 2**30:.1f} GiB free")
        path = work / f"pairs-{n}.jsonl"
        start = time.perf_counter()
        made = Made(path, pairs_scale.write(source, n, path), n)
        print(f"# {path.name}: made in {time.perf_counter() - start:.0f} s", flush=True)
        yield made


def row_of(command: str, made: Made, got: dict[str, list[Timing]]) -> dict:
    """A command's figures on a file: the median of the runs (the lower bound of a stopped one),
    the largest peak RSS."""
    row: dict = {"command": command, "nodes": made.nodes, "records": made.records}
    for side, results in got.items():
        done = [r for r in results if not r.stopped] or results
        row[side] = {"wall_s": statistics.median(r.wall_s for r in done),
                     "cpu_s": statistics.median(r.cpu_s for r in done),
                     "rss_mib": max(r.rss_mib for r in done),
                     "stopped": done[0].stopped}
    return row


def table(rows: list[dict], sides: list[str]) -> list[str]:
    """The rows as docs/performance.md's tables: per side wall s, CPU s, peak RSS MiB."""
    nodes = any(row["nodes"] for row in rows)
    head = ["command", *(["nodes"] if nodes else []), "records"]
    for side in sides:
        head += [f"{side}: wall s", "CPU s", "peak RSS MiB"]
    head += ["wall before/after"] if len(sides) == 2 else []
    out = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for row in rows:
        cells = [row["command"], *([f"{row['nodes']:,}"] if nodes else []), f"{row['records']:,}"]
        for side in sides:
            f, over = row[side], "> " if row[side]["stopped"] else ""
            cells += [f"{over}{f['wall_s']:.2f}", f"{over}{f['cpu_s']:.2f}",
                      f"{over}{f['rss_mib']:.0f}"]
        if len(sides) == 2:
            before, after = row["before"], row["after"]
            over = "> " if before["stopped"] and not after["stopped"] else ""
            ratio = f"{over}{before['wall_s'] / after['wall_s']:.1f}x"
            cells.append("?" if after["stopped"] else ratio)
        out.append("| " + " | ".join(cells) + " |")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", choices=WORKLOADS, default="collective",
                   help="collective: files of --sizes records; pairs: one run of --nodes nodes")
    p.add_argument("--source", type=Path, action="append",
                   help="a real results file to repeat (repeatable); default: the demo's, or "
                   "for pairs one pairs run (default: tests/fixtures/pairs/emulated-4.jsonl)")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)),
                   help="records per file, comma-separated")
    p.add_argument("--nodes", default=",".join(map(str, NODES)),
                   help="pairs: nodes per file, comma-separated")
    p.add_argument("--commands", help="comma-separated (default: " + "; ".join(
        f"{w}: {','.join(c)}" for w, c in WORKLOADS.items()) + ")")
    p.add_argument("--before", type=Path,
                   help="another checkout of fabbench (a git worktree) to time beside this one")
    p.add_argument("--after", type=Path, default=REPO,
                   help="the checkout timed as 'after' (default: this one)")
    p.add_argument("--no-after", action="store_true", help="time --before alone")
    p.add_argument("--repeat", type=int, default=3, help="runs of each command (median kept)")
    p.add_argument("--deadline", type=float, default=TIMEOUT_S, metavar="SECONDS",
                   help="stop a command after this long and report it as '> SECONDS'")
    p.add_argument("--compare-up-to", type=int, default=20_000, metavar="RECORDS",
                   help="compare only files up to this size (a file of --sizes 10000 holds "
                   "10,074: whole runs are repeated): compare tests every point of every run "
                   "against the first run's (a bootstrap each) and prints them all")
    p.add_argument("--warm", action="store_true",
                   help="time each command with the file's checked columns kept by a read "
                   "before it (results.column_cache); by default they are removed before each "
                   "command: every read is the file's first")
    p.add_argument("--work", type=Path, help="where the files go (default: a temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the files made in --work")
    args = p.parse_args()
    commands = args.commands.split(",") if args.commands else list(WORKLOADS[args.workload])
    unknown = set(commands) - set(WORKLOADS[args.workload])
    if unknown:
        pairs_scale.fail(f"no command {', '.join(sorted(unknown))} for {args.workload}")
    sides = {} if args.no_after else {"after": args.after / "src"}
    if args.before is not None:
        sides = {"before": args.before / "src", **sides}
    if not sides:
        pairs_scale.fail("--no-after without --before times nothing")
    moved = {side: moved_in(src) for side, src in sides.items()}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)  # each command's peak, stderr and baseline: removed at the end
        work = args.work or scratch
        work.mkdir(parents=True, exist_ok=True)
        files = pairs_files if args.workload == "pairs" else collective_files
        for made in files(args, work):
            print(f"# {made.path.name}: {made.records:,} records, "
                  f"{made.path.stat().st_size / 2**20:.1f} MiB", flush=True)
            kept = made.path.parent / f".{made.path.name}{KEPT}"
            if args.warm and "after" in sides:  # kept by a read before the timed ones
                time.sleep(1.1)  # a file changed within a second before its read is not kept
                timed(sides["after"], argv_of("report", made.path, scratch), scratch,
                      args.deadline)
            for command in commands:
                if command == "compare" and made.records > args.compare_up_to:
                    print(f"# compare not timed on {made.path.name}: {made.records:,} records, "
                          f"over --compare-up-to {args.compare_up_to:,}", flush=True)
                    continue
                got: dict[str, list[Timing]] = {s: [] for s in sides}
                for _ in range(args.repeat):
                    for side, src in sides.items():  # alternate: before, after, before, ...
                        if not args.warm:
                            kept.unlink(missing_ok=True)
                        if not any(t.stopped for t in got[side]):  # stopped once: enough
                            got[side].append(timed(src, argv_of(
                                command, made.path, scratch, moved[side]), scratch,
                                args.deadline))
                rows.append(row_of(command, made, got))
                print(json.dumps(rows[-1]), flush=True)
            if not args.keep:
                made.path.unlink()
                kept.unlink(missing_ok=True)
    print("\n" + "\n".join(table(rows, list(sides))))


if __name__ == "__main__":
    main()
