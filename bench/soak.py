"""Soak test of the failure path: kill one of 4 ranks during a large allreduce, many times.

Each round runs `fabbench run --ranks 4` with FABBENCH_FAULT=kill:<rank>:allreduce:<bytes> and
checks: the run ends non-zero within 2 x --timeout of the kill (plus start-up), the dead rank is
named, and every point measured before the kill is in the results file, schema-valid.
Prints a line per round and a verdict: zero hangs and zero lost records is the goal.

Usage: python bench/soak.py [--rounds 20] [--primitives mpi,gloo] [--timeout 8]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fabbench.errors import UsageError
from fabbench.results.reader import read_results
from fabbench.workloads.collectives.record import Collective

LARGE = 8 << 20
SIZES = [8 * 4 ** i for i in range(12) if 8 * 4 ** i <= 16 << 20]


def round_once(primitive: str, victim: int, timeout_s: int, workdir: Path) -> tuple[str, str]:
    out = workdir / f"{primitive}-{victim}-{time.monotonic_ns()}.jsonl"
    cmd = [sys.executable, "-m", "fabbench", "run", "--fabric", "ethernet", "--primitive",
           primitive, "--ranks", "4", "--ops", "allreduce", "--sizes", "8:16M:4", "--budget",
           "0.03", "--timeout", str(timeout_s), "--out", str(out)]
    env = {**os.environ, "FABBENCH_FAULT": f"kill:{victim}:allreduce:{LARGE}"}
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                           timeout=4 * timeout_s + 60)
    except subprocess.TimeoutExpired:
        return "HANG", f"no exit after {4 * timeout_s + 60} s"
    elapsed = time.monotonic() - start
    if p.returncode == 0:
        return "FAIL", "exit code 0 after a kill"
    if f"rank {victim}" not in p.stderr:
        return "FAIL", f"rank {victim} not named: {p.stderr.strip().splitlines()[-1:]}"
    try:
        recs = read_results(out).of_kind(Collective)
    except UsageError as exc:
        return "LOST", str(exc)
    expect = [s for s in SIZES if s < LARGE]
    if [r.bytes for r in recs] != expect:
        return "LOST", f"{len(recs)} of {len(expect)} points before the kill"
    return "ok", f"{elapsed:.1f} s, code {p.returncode}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--primitives", default="mpi,gloo")
    ap.add_argument("--timeout", type=int, default=8)
    args = ap.parse_args()
    tally: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            primitive = args.primitives.split(",")[i % len(args.primitives.split(","))]
            victim = i % 4
            verdict, detail = round_once(primitive, victim, args.timeout, Path(tmp))
            tally[verdict] = tally.get(verdict, 0) + 1
            print(f"round {i + 1:>3}  {primitive:<5} kill rank {victim}  {verdict:<4} {detail}",
                  flush=True)
    print("soak:", ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    return 0 if set(tally) == {"ok"} else 1


if __name__ == "__main__":
    sys.exit(main())
