"""Which node is slow, on an emulated cluster: does the pairs report name it, every time?

For each primitive (mpi, gloo) and each set-up — 4 nodes at 1 Gbit/s with node 3's link at
250 Mbit/s, and 4 nodes with all links equal — `fabbench emulate run ... -- run --workload pairs`
runs ``--runs`` times (a fresh cluster each time), and the report's verdict is read from the
records (workloads/pairs/slow_node.py, the rule in docs/methods.md). Printed per run: the nodes
named and node 3's pairs as a share of the median of the pairs without it; then per set-up how
often the expected answer came: node 3 named with the slow link, none named with equal links.

Target (issue 11): node 3 named in 10 of 10 runs over mpi and over gloo; none named when the
links are equal. Needs root (network namespaces). Exits 1 when a target is missed.

The pairs run one at a time (`--pair-schedule auto` is `serial` on an emulated cluster, the
waiting ranks in a quiet barrier): the emulated nodes share this host's CPUs, and two pairs at
once are bound by them, not by their links (docs/methods.md, "Which node is slow").

The emulated links are only as fast as this host's CPU lets the bridge forward: on a loaded
2-core host a 1 Gbit/s link may carry less than 250 Mbit/s (`fabbench emulate run -- run --ceiling`
tells), and then the set-up cannot be told apart; `--link 100mbit --slow 25mbit` keeps the
same 4:1 ratio within what the host forwards.

Usage: python bench/pairs_slow_node.py [--runs 10] [--primitives mpi,gloo] [--sizes 8,1M]
                                       [--link 1gbit] [--slow 250mbit]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fabbench.report.runs_report import findings_json
from fabbench.results.runs import load


def one_run(primitive: str, link: str, extra: list[str], sizes: str, out: Path) -> dict:
    cmd = [sys.executable, "-m", "fabbench", "emulate", "run", "--nodes", "4", "--link", link,
           *extra, "--max-time", "300", "--", "run", "--primitive", primitive,
           "--workload", "pairs", "--sizes", sizes, "--no-ceiling", "--timeout", "30",
           "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=400, check=False)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    (found,) = findings_json(load([out]))
    return found["pairs"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--primitives", default="mpi,gloo")
    ap.add_argument("--sizes", default="8,1M")
    ap.add_argument("--link", default="1gbit", help="every node's link")
    ap.add_argument("--slow", default="250mbit", help="node 3's link in the slow set-up")
    args = ap.parse_args()
    setups = {f"node 3 at {args.slow}": ["--slow-node", f"3:{args.slow}"], "all equal": []}
    ok = True
    summary = []
    with tempfile.TemporaryDirectory(prefix="fabbench-pairs-bench-") as tmp:
        for primitive in args.primitives.split(","):
            for setup, extra in setups.items():
                expected = [3] if extra else []
                hits = 0
                for i in range(args.runs):
                    start = time.monotonic()
                    v = one_run(primitive, args.link, extra, args.sizes,
                                Path(tmp) / f"{primitive}-{len(extra)}-{i}.jsonl")
                    three = next(n for n in v["nodes"] if n["unit"] == 3)
                    hits += v["slow"] == expected
                    print(f"{primitive:5} {setup:18} run {i + 1:2}: named {v['slow'] or 'none'}"
                          f"; node 3's pairs {100 * three['share_min']:.0f}–"
                          f"{100 * three['share_max']:.0f}% of the others' median "
                          f"{three['others_median_gbyte_s']:.4f} GB/s "
                          f"({time.monotonic() - start:.0f} s)", flush=True)
                summary.append((primitive, setup, hits, args.runs, expected))
                ok &= hits == args.runs
    print()
    print(f"4 nodes, links {args.link}, pairs at {args.sizes.split(',')[-1]}")
    print(f"{'primitive':10} {'links':18} {'expected':>9} {'right':>8}")
    for primitive, setup, hits, runs, expected in summary:
        print(f"{primitive:10} {setup:18} {str(expected or 'none'):>9} {hits:>4} of {runs}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
