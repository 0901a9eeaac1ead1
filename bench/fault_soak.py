"""Faults in a stream of runs (issue 36): on ONE standing cluster of 2 emulated nodes at 1 Gbit/s,
a clean baseline first, then ``--runs`` consecutive `fabbench run`s of which ``--faulted``, drawn
at random, get a fault from the matrix (tests/integration/faults_on_wire.py) drawn at random, at a
random point of the run. Does a fault leave anything behind that spoils the runs after it?

Each run is the matrix's run (allreduce 1 MiB and 16 MiB, --budget 3, --timeout 5); a fault comes
a random delay after the 1 MiB point is in the results file, anywhere in the 16 MiB point's
warm-up and measurement (up to 0.8 of its budget: a later one could land after the run's last
exchange, when a link going down harms nothing), but for the full disk, which comes when the
first point is written, as in the matrix (filled later, what is left of the results file's last
page could hold the rest of the sweep and its summary: seen once). Checked:
- every faulted run ended as its matrix row expects (exit code, bound, headline, records,
  summary, nothing of it left running), or outlived its fault: every point measured and rank 0's
  summary ok, the launch failed after them and said so, nothing left (a daemon killed while the
  ranks talk to each other directly: mpirun may notice only when it ends the job);
- every clean run ended well, with nothing left, and its 16 MiB bus bandwidth is within the noise of
  the baseline's: compare's rule (report.significance.compare_samples: Mann-Whitney p < 0.05 with a
  bootstrap interval of the ratio of medians that excludes 1) does not call the clean runs slower or
  faster than the baseline; the runs right after a fault are listed against the baseline's range;
- at the end, no process in either node's namespace and none on the host carrying the marker of
  one of the stream's runs.

Prints a line per run and a summary; exits 1 when a check failed. Needs root (namespaces).

Usage: python bench/fault_soak.py [--runs 50] [--faulted 10] [--baseline 10] [--primitive mpi]
                                  [--faults link-down,flap,...] [--seed 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fabbench import procs  # noqa: E402
from fabbench.report.significance import compare_samples  # noqa: E402
from integration.faults_on_wire import (  # noqa: E402 - the rows live beside their test
    FAULTS,
    MARKER,
    SWEEP,
    Cluster,
    Fault,
    Outcome,
    left,
    problems,
    run_row,
    standing,
)

SIXTEEN_MIB = 16 << 20
# the faults a stream can take on a plain cluster (the loss row needs a lossy one; none is clean)
STREAM = tuple(f for f in FAULTS if not f.cluster and f.name != "none")
# the control, with the faulted rows' sweep (the matrix runs its own shorter): a clean run is
# the same run as a faulted one, up to the fault
CONTROL = dataclasses.replace(next(f for f in FAULTS if f.name == "none"), sweep=SWEEP,
                              delay_s=1.0)
BUDGET_S = float(CONTROL.sweep[CONTROL.sweep.index("--budget") + 1])  # of the 16 MiB point


def busbw(o: Outcome) -> float | None:
    return next((r["busbw_gbyte_s"] for r in o.records
                 if r.get("kind") == "collective" and r.get("bytes") == SIXTEEN_MIB), None)


def marked_under(folder: Path) -> list[str]:
    """Every process on this host that carries the marker of a run whose directory is under
    ``folder`` (this stream's runs: their launchers' TMPDIR), as pids."""
    return [str(pid) for pid, _ in procs.marked(MARKER, f"{folder}/", prefix=True)]


OUTLIVED = "every measurement had finished, and rank 0's summary says ok"


def outlived(o: Outcome) -> bool:
    """The run outlived its fault: every point measured, rank 0's summary ok, and the launch
    failed only after them, said so (a fault off the data path: mpirun notices a daemon it
    lost only when it needs it, to end the job); nothing of it left running."""
    return (o.code not in (0, None) and OUTLIVED in o.stderr and o.summary is not None
            and o.summary.get("ok") is True and len(o.points()) == 2
            and not o.left_at_exit and not o.left_after)


def run_once(cluster: Cluster, primitive: str, fault: Fault, out: Path) -> tuple[Outcome, list]:
    o = run_row(cluster, primitive, fault, out)
    return o, [] if fault.name != "none" and outlived(o) else problems(o, fault.expect[primitive])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--faulted", type=int, default=10)
    ap.add_argument("--baseline", type=int, default=10)
    ap.add_argument("--primitive", default="mpi", choices=("mpi", "gloo", "horovod"))
    ap.add_argument("--faults", default=",".join(f.name for f in STREAM),
                    help="the faults drawn from (default: every row of a plain cluster)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    menu = [f for f in STREAM if f.name in args.faults.split(",")
            and args.primitive in f.expect]
    if not menu or not 0 <= args.faulted <= args.runs or args.baseline < 1:
        ap.error(f"nothing to draw from, or --faulted not in 0..--runs: faults {args.faults!r} "
                 f"for {args.primitive}, {args.faulted} of {args.runs}")
    # SIGTERM unwinds like Ctrl-C, so that the standing cluster is taken down
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rng = random.Random(args.seed)
    faulted = dict(zip(sorted(rng.sample(range(args.runs), args.faulted)),
                       (rng.choice(menu) for _ in range(args.faulted)), strict=True))
    wrong: list[str] = []
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fault-soak-") as tmp, standing() as cluster:
        # each run's launcher makes its run directory (every rank's and daemon's marker) under
        # TMPDIR: this stream's runs are told from other work on the host by it
        runs_tmp = Path(tmp) / "runs"
        runs_tmp.mkdir()
        os.environ["TMPDIR"] = str(runs_tmp)
        base: list[float] = []
        rest: list[float] = []  # of the baseline's runs: seconds from the first point to exit
        for i in range(args.baseline):
            o, found = run_once(cluster, args.primitive, CONTROL, Path(tmp) / f"base-{i}.jsonl")
            wrong += [f"baseline #{i + 1}: {p}" for p in found]
            if (bw := busbw(o)) is not None:
                base.append(bw)
            if o.fault_to_exit_s is not None:
                rest.append(CONTROL.delay_s + o.fault_to_exit_s)
            print(f"baseline {i + 1:>2}: exit {o.code}, 16 MiB {bw or 0:.4f} GB/s"
                  + ("" if not found else "; " + "; ".join(found)), flush=True)
        # the latest a fault may come: within the 16 MiB point's measurement (it lasts its
        # budget at least after the 1 MiB point is written), so that it always meets the run
        latest = min(0.6 * statistics.median(rest) if rest else 2.0, 0.8 * BUDGET_S)
        clean: list[float] = []
        after_fault: list[tuple[int, float | None]] = []
        previous_faulted = False
        for i in range(args.runs):
            fault = faulted.get(i)
            # a fault the matrix gives at the first point (the disk filled then: later, what is
            # left of the file's last page can hold the rest of the sweep) keeps its moment
            row = CONTROL if fault is None else fault if fault.delay_s == 0 else \
                dataclasses.replace(fault, delay_s=round(rng.uniform(0.0, latest), 2))
            o, found = run_once(cluster, args.primitive, row, Path(tmp) / f"run-{i}.jsonl")
            bw = busbw(o)
            if fault is None:
                if bw is not None:
                    clean.append(bw)
                if previous_faulted:
                    after_fault.append((i + 1, bw))
            wrong += [f"run #{i + 1} ({row.name}): {p}" for p in found]
            what = "clean" if fault is None else f"{row.name} at +{row.delay_s:.2f} s"
            if fault is not None and outlived(o):
                what += ", outlived"
            print(f"run {i + 1:>2} {what:<22} exit {o.code}, "
                  + (f"16 MiB {bw:.4f} GB/s" if bw is not None else
                     f"ended {o.fault_to_exit_s or 0:.1f} s after the fault")
                  + (f", left {len(o.left_at_exit)}/{len(o.left_after)}")
                  + ("" if not found else "; " + "; ".join(found)), flush=True)
            previous_faulted = fault is not None
        at_end = left(cluster, None) + marked_under(runs_tmp)
    if at_end:
        wrong.append(f"left running at the end: {at_end}")
    print(f"\n{args.primitive}: {args.baseline} baseline runs, then {args.runs} runs with "
          f"{args.faulted} faults ({', '.join(f'#{i + 1} {f.name}' for i, f in faulted.items())}),"
          f" {time.monotonic() - start:.0f} s in all; seed {args.seed}")
    if base and clean:
        v = compare_samples(base, clean, ratio=statistics.median(clean) / statistics.median(base))
        interval = f"{v.ci_low:.3f}..{v.ci_high:.3f}" if v.ci_low is not None else "none"
        # compare_samples reads its samples as times: a verdict "slower" on bandwidths is a
        # stream that moved more bytes per second than its baseline, "faster" one that moved less
        said = {"slower": "higher", "faster": "lower"}.get(v.verdict, v.verdict)
        print(f"16 MiB busbw, GB/s: baseline median {statistics.median(base):.4f} "
              f"(min {min(base):.4f}, max {max(base):.4f}, n {len(base)}); clean runs of the "
              f"stream median {statistics.median(clean):.4f} (min {min(clean):.4f}, "
              f"max {max(clean):.4f}, n {len(clean)}); ratio {v.ratio:.3f} (95 % {interval}, "
              f"p {v.p_value if v.p_value is None else round(v.p_value, 3)}): {said}")
        if v.significant:
            wrong.append(f"the clean runs' busbw is {said} than the baseline's (ratio "
                         f"{v.ratio:.3f}, 95 % {interval})")
        low, high = min(base), max(base)
        print("right after a fault: " + ", ".join(
            f"#{n} {bw:.4f}" + ("" if low <= bw <= high else " (outside the baseline's range)")
            if bw is not None else f"#{n} none" for n, bw in after_fault))
    print("leftovers at the end: " + (", ".join(at_end) if at_end else "none"))
    for w in wrong:
        print(f"NOT AS EXPECTED: {w}")
    print("verdict: " + ("as expected" if not wrong else f"{len(wrong)} problem(s)"))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
