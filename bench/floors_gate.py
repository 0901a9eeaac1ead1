"""Acceptance floors on an emulated cluster: how many false failures, and is the slow node named?

On 4 emulated nodes at 1 Gbit/s (a standing `fabbench emulate up` cluster), `--baseline` healthy
pairs runs make a floors file (`fabbench floors baseline`, each node's pairs bandwidth, the
floor `--below` under the median); then `--runs` further healthy runs are each judged against
it (`fabbench floors verify`): every failure there is a false failure. Then a cluster of the
same shape with node 3's link at 250 Mbit/s runs `--slow-runs` times, each judged the same way:
it must exit 1 naming node 3, and only node 3, with its margin.

Target (issue 34): 0 false failures in 20 healthy runs; the slow node named, alone, every time.
Needs root (network namespaces). Exits 1 when a target is missed. Prints each run's verdict
line and the margins, then the counts.

Usage: python bench/floors_gate.py [--baseline 5] [--runs 20] [--slow-runs 3] [--below 0.1]
                                  [--spread 3] [--primitive mpi] [--link 1gbit] [--slow 250mbit]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NODES = 4


def fabbench(*args: str, env: dict | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fabbench", *args], capture_output=True,
                          text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})


class Cluster:
    """A standing emulated cluster, taken down on exit (also after a failure)."""

    def __init__(self, link: str, extra: list[str]) -> None:
        self.args = ["--nodes", str(NODES), "--link", link, *extra]
        self.env: dict[str, str] = {}

    def __enter__(self) -> Cluster:
        p = fabbench("emulate", "up", *self.args, timeout=120)
        found = re.search(r"FABBENCH_EMULATION=(\S+)", p.stdout)
        if p.returncode != 0 or not found:
            raise SystemExit(f"emulate up failed ({p.returncode}): {p.stderr[-2000:]}")
        self.env = {"FABBENCH_EMULATION": found.group(1)}
        return self

    def __exit__(self, *exc: object) -> None:
        fabbench("emulate", "down", env=self.env, timeout=120)

    def run(self, out: Path, primitive: str, sizes: str) -> None:
        p = fabbench("run", "--primitive", primitive, "--workload", "pairs", "--sizes", sizes,
                     "--no-ceiling", "--timeout", "30", "--out", str(out), env=self.env)
        if p.returncode != 0:
            raise SystemExit(f"run failed ({p.returncode}): {p.stderr[-3000:]}")


def verify(floors: Path, result: Path, json_out: Path) -> tuple[int, dict, str]:
    p = fabbench("floors", "verify", "--floors", str(floors), str(result), "--json",
                 str(json_out))
    if p.returncode == 2:
        raise SystemExit(f"verify refused its input: {p.stderr}")
    return p.returncode, json.loads(json_out.read_text()), p.stdout


def margins(verdict: dict) -> str:
    return " ".join(f"{n['node']} {n['margin']:+.1%}" for n in verdict["nodes"]
                    if n["margin"] is not None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--slow-runs", type=int, default=3)
    ap.add_argument("--below", type=float, default=0.10)
    ap.add_argument("--spread", type=float, default=3.0)
    ap.add_argument("--primitive", default="mpi")
    ap.add_argument("--sizes", default="8,1M")
    ap.add_argument("--link", default="1gbit")
    ap.add_argument("--slow", default="250mbit")
    args = ap.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fabbench-floors-bench-") as tmp:
        d = Path(tmp)
        floors = d / "site.toml"
        with Cluster(args.link, []) as healthy:
            base = [d / f"base-{i}.jsonl" for i in range(args.baseline)]
            for out in base:
                healthy.run(out, args.primitive, args.sizes)
            p = fabbench("floors", "baseline", *map(str, base), "--out", str(floors), "--below",
                         str(args.below), "--spread", str(args.spread))
            if p.returncode != 0:
                raise SystemExit(f"baseline failed: {p.stderr}")
            print(p.stdout.strip(), flush=True)
            for line in floors.read_text().splitlines():
                if line.startswith(("source = ", "baseline_fraction = ")):
                    print(f"  {line}", flush=True)
            false_failures = 0
            for i in range(args.runs):
                out = d / f"healthy-{i}.jsonl"
                healthy.run(out, args.primitive, args.sizes)
                code, verdict, text = verify(floors, out, d / f"healthy-{i}.json")
                false_failures += code != 0
                print(f"healthy {i + 1:2}: exit {code}; {margins(verdict)}", flush=True)
                if code != 0:
                    print(text, flush=True)
        named_right = 0
        with Cluster(args.link, ["--slow-node", f"3:{args.slow}"]) as slow:
            for i in range(args.slow_runs):
                out = d / f"slow-{i}.jsonl"
                slow.run(out, args.primitive, args.sizes)
                code, verdict, text = verify(floors, out, d / f"slow-{i}.json")
                failed = sorted(n["node"] for n in verdict["nodes"] if n["status"] == "fail")
                right = code == 1 and failed == ["node3"]  # the emulated node 3's hostname
                named_right += right
                print(f"slow    {i + 1:2}: exit {code}; failed {failed or 'none'}; "
                      f"{margins(verdict)}", flush=True)
                for line in text.splitlines():
                    if line.startswith("FAIL"):
                        print(f"  {line}", flush=True)
    print()
    print(f"false failures: {false_failures} of {args.runs} healthy runs "
          f"(baseline of {args.baseline}, floors {args.below:.0%} below the median, or "
          f"{args.spread:g} robust sd where lower)")
    print(f"slow node named alone: {named_right} of {args.slow_runs} runs with node 3 at "
          f"{args.slow}")
    print(f"({time.monotonic() - started:.0f} s)")
    return 0 if false_failures == 0 and named_right == args.slow_runs else 1


if __name__ == "__main__":
    sys.exit(main())
