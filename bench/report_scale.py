"""How the analysis commands scale with the records they read: `report`, `compare`, `verify`
(`floors verify`), `baseline` (`floors baseline`) and `model` (`forecast`) timed on files of
about 1,000, 10,000 and 100,000 records, with the CPU time and peak memory (VmHWM) of each
command's process, for this checkout's fabbench and, with --before, for another checkout of it
(a `git worktree` of an older commit) on the same files in the same run, the two alternating so
that a busy neighbour slows both alike (docs/performance.md). A --before checkout older than the
commands' move (5cbaa93, issue 45) runs them by their old spellings.

The files are made from real records: a results file of a real run (--source; by default the
demo's, `fabbench run --fabric ethernet`, made once into --work) is repeated, run by run, under
distinct run ids (``<run id>-r<n>``) until a file holds at least the size asked for; each copy
keeps its run record and summary, so a file holds whole runs only. `compare` reads a file's runs
as A (the first) against each of the others.

    .venv/bin/python bench/report_scale.py --source /tmp/demo.jsonl             # after only
    git worktree add /tmp/fb-before HEAD~1
    .venv/bin/python bench/report_scale.py --source /tmp/demo.jsonl --before /tmp/fb-before
    git worktree remove /tmp/fb-before
    .venv/bin/python bench/report_scale.py --sizes 1000 --commands report --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZES = (1_000, 10_000, 100_000)
COMMANDS = ("report", "compare", "verify", "baseline", "model")
TIMEOUT_S = 1800


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


def timed(src: Path, argv: list[str], scratch: Path) -> tuple[float, float, float]:
    """Run ``fabbench ARGV`` with the package of ``src`` first on the path: wall seconds, CPU
    seconds (user + system: what a busy neighbour inflates less) and peak RSS (MiB) of that
    process. Exit codes 0 and 1 are results (verify's 1: a floor failed)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    peak = scratch / "peak-kib"
    peak.unlink(missing_ok=True)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", WRAPPER, str(peak), *argv], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1) or not peak.exists():
        sys.exit(f"bench/report_scale.py: {' '.join(argv)} ({src}) failed "
                 f"({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, int(peak.read_text()) / 1024


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", type=Path, action="append",
                   help="a real results file to repeat (repeatable); default: the demo's")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)),
                   help="records per file, comma-separated")
    p.add_argument("--commands", default=",".join(COMMANDS))
    p.add_argument("--before", type=Path,
                   help="another checkout of fabbench (a git worktree) to time beside this one")
    p.add_argument("--after", type=Path, default=REPO,
                   help="the checkout timed as 'after' (default: this one)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each command (median kept)")
    p.add_argument("--compare-up-to", type=int, default=10_000, metavar="RECORDS",
                   help="compare only files up to this size: compare tests every point of "
                   "every run against the first run's (a bootstrap each) and prints them all")
    p.add_argument("--work", type=Path, help="where the files go (default: a temporary folder)")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    commands = args.commands.split(",")
    unknown = set(commands) - set(COMMANDS)
    if unknown:
        sys.exit(f"bench/report_scale.py: no command {', '.join(sorted(unknown))}")
    sides = {"after": args.after / "src"}
    if args.before is not None:
        sides = {"before": args.before / "src", **sides}
    moved = {side: moved_in(src) for side, src in sides.items()}
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        sources = args.source or [demo_file(work)]
        runs = [run for source in sources for run in runs_of(source)]
        merged = work / "source.jsonl"
        merged.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n"
                                  for run in runs for r in run))
        files, made = {}, {}
        for size in sizes:
            files[size] = work / f"records-{size}.jsonl"
            made[size] = generate(merged, size, files[size])
            print(f"# {files[size].name}: {made[size]} records, "
                  f"{files[size].stat().st_size / 2**20:.1f} MiB", flush=True)
        table = []
        for size in sizes:
            for command in commands:
                if command == "compare" and size > args.compare_up_to:
                    continue
                got: dict[str, list[tuple[float, float, float]]] = {s: [] for s in sides}
                for _ in range(args.repeat):
                    for side, src in sides.items():  # alternate: before, after, before, ...
                        got[side].append(timed(
                            src, argv_of(command, files[size], work, moved[side]), work))
                row = {"command": command, "records": made[size]}
                for side, results in got.items():
                    row[f"{side}_s"] = statistics.median(r[0] for r in results)
                    row[f"{side}_cpu_s"] = statistics.median(r[1] for r in results)
                    row[f"{side}_rss_mib"] = max(r[2] for r in results)
                table.append(row)
                print(json.dumps(row), flush=True)
    head = "| command | records |" + "".join(
        f" {s} s | {s} CPU s | {s} peak RSS MiB |" for s in sides)
    print("\n" + head + (" speed-up |" if "before" in sides else ""))
    print("|" + " --- |" * (head.count("|") - 1 + ("before" in sides)))
    for row in table:
        cells = "".join(f" {row[f'{s}_s']:.2f} | {row[f'{s}_cpu_s']:.2f} | "
                        f"{row[f'{s}_rss_mib']:.0f} |" for s in sides)
        ratio = (f" {row['before_s'] / row['after_s']:.1f}x |" if "before" in sides else "")
        print(f"| {row['command']} | {row['records']:,} |{cells}{ratio}")


if __name__ == "__main__":
    main()
