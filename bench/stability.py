"""How many points of a default run are stable by the one rule, and how long the run takes.

Runs `fabbench run` (by default the default sweep: `--fabric ethernet`, 2 ranks, every op,
8 B to 64 MiB), reads the results through the same loader and the same rule as `fabbench report`
(timing.stats.STABLE_RULE: the 95 % interval of the median within ±5 % of it) and prints, per
repetition, the wall time and the share of stable points; for contrast also the share that a
"stdev < 10 % of the mean and >= 10 samples" rule would call stable.

Goal: on a quiet host at least 90 % of the points stable, in under a minute. Timings depend on the
host: run it on an idle machine, and repeat (--repeat) to see the spread.

    .venv/bin/python bench/stability.py                      # the default run, once
    .venv/bin/python bench/stability.py --repeat 3
    .venv/bin/python bench/stability.py -- --fabric shm --primitive gloo
    .venv/bin/python bench/stability.py --fabbench "/other/venv/bin/python -m fabbench"
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fabbench.report.tables import unstable as why_unstable
from fabbench.results.reader import read_results
from fabbench.timing.stats import STABLE_RULE
from fabbench.workloads.collectives.record import Collective

TIMEOUT_S = 600


def one_run(fabbench: list[str], args: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "r.jsonl")
        cmd = [*fabbench, "run", *args, "--out", str(out)]
        t0 = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        wall = time.monotonic() - t0
        if done.returncode != 0:
            sys.exit(f"stability: {shlex.join(cmd)} exited {done.returncode}: "
                     f"{(done.stderr.strip().splitlines() or [''])[-1]}")
        points = read_results(out).of_kind(Collective)
    unstable = [f"{p.op} {p.bytes} B: {why}" for p in points if (why := why_unstable(p))]
    spread_ok = sum(1 for p in points if (p.samples or 0) >= 10
                    and (p.time_us.stdev or 0) < 0.1 * p.time_us.mean)
    return {"wall_s": wall, "points": len(points), "stable": len(points) - len(unstable),
            "spread_ok": spread_ok, "unstable": unstable}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs (default 1)")
    parser.add_argument("--fabbench", default=f"{shlex.quote(sys.executable)} -m fabbench",
                        help="the command that runs fabbench (default: this Python's)")
    parser.add_argument("run_args", nargs="*", help="after --: arguments of `fabbench run` "
                        "(default: --fabric ethernet)")
    a = parser.parse_args()
    args = a.run_args or ["--fabric", "ethernet"]
    print(f"# fabbench run {shlex.join(args)}; stable: {STABLE_RULE}")
    print(f"#{'run':>4} {'wall s':>8} {'points':>7} {'stable':>7} {'share':>7} "
          f"{'stdev<10%':>10}")
    shares, walls = [], []
    for i in range(a.repeat):
        r = one_run(shlex.split(a.fabbench), args)
        share = r["stable"] / r["points"] if r["points"] else 0.0
        shares.append(share)
        walls.append(r["wall_s"])
        print(f" {i + 1:>4} {r['wall_s']:>8.1f} {r['points']:>7} {r['stable']:>7} "
              f"{100 * share:>6.1f}% {100 * r['spread_ok'] / max(1, r['points']):>9.1f}%",
              flush=True)
        for line in r["unstable"][:5]:
            print(f"#      unstable: {line}")
        if len(r["unstable"]) > 5:
            print(f"#      ... and {len(r['unstable']) - 5} more")
    print(f"# median of {a.repeat}: {100 * statistics.median(shares):.1f}% stable, "
          f"{statistics.median(walls):.1f} s (goal: >= 90% in < 60 s on a quiet host)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
