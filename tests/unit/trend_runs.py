"""Directories of runs for the trend report's tests, made from a real run: the records of
tests/fixtures/pairs/emulated4-pairs.jsonl (a pairs run of mpi over 4 emulated nodes at
1 Gbit/s, node0..node3) copied once per run with its own run id and start time, one day apart,
each pair's figures multiplied by a factor: noise (a seeded normal draw) and, for the pairs of
a lowered node, 1 - step x the run's number. A pair's bandwidth is multiplied by the factor and
its times (time_us and samples_us) divided by it, so bandwidth and latency stay consistent.
The files are named at random, so their names' order is not the runs' order."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pairs" / "emulated4-pairs.jsonl"
START = datetime(2026, 12, 1, 2, 0, tzinfo=timezone.utc)


def make_runs(folder: Path, count: int = 30, *, lowered: str | None = None, step: float = 0.03,
              noise: float = 0.03, seed: int = 7) -> list[Path]:
    """``count`` runs in ``folder``; their paths in the order they started."""
    records = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        run_id = f"20261201T0200Z-trend{i:02d}"
        out = []
        for record in records:
            r = json.loads(json.dumps(record))
            r["run_id"] = run_id
            if r["kind"] == "run":
                r["started"] = (START + timedelta(days=i)).isoformat()
                r["plan"]["run_id"] = run_id
            elif r["kind"] == "pairs":
                factor = 1 + noise * rng.gauss(0, 1)
                if lowered in (r["a_host"], r["b_host"]):
                    factor *= 1 - step * i
                r["bw_gbyte_s"] *= factor
                r["time_us"] = {k: v / factor for k, v in r["time_us"].items()}
                r["samples_us"] = [v / factor for v in r["samples_us"]]
            out.append(json.dumps(r))
        path = folder / f"{rng.getrandbits(40):010x}.jsonl"
        path.write_text("\n".join(out) + "\n")
        paths.append(path)
    return paths


def floors_file(path: Path, at_least_gbyte_s: float, *, extra: str = "") -> Path:
    """A floors file with one per-node rule on the pairs' bandwidth (and ``extra`` rules)."""
    path.write_text(f"""format = "fabbench-floors/1"
name = "trend-test"

[[rule]]
id = "pairs-node-bw"
source = "a test"
workload = "pairs"
per_node = true
metric = "bw"
at_least = {at_least_gbyte_s!r}
unit = "GB/s"
{extra}""")
    return path
