"""A pairs run at a cluster's scale, made from a real pairs run's records (bench/report_scale.py
--workload pairs).

The file of N nodes is one run as the pairs workload of N nodes writes it: its run record (ranks,
nodes, rank_hosts, plan and emulated cluster saying N), then round by round of the round-robin
tournament (workloads/pairs/tournament.py: N-1 rounds for N even, N for N odd), per dtype and
size, the round's pairs (a < b) in order, one record per pair and size, then the summary counting
them: N(N-1)/2 pairs x sizes records (1,047,552 for 1,024 nodes and 2 sizes; 16,773,120 for
4,096). Node i is ``node<i>`` (as the emulator names it), one rank each. The figures of each pair
(samples, times, bandwidth, ...) are a real pair's, the source's records cycled: pair k takes the
source's record k modulo their number, at each size, so a pair's figures at both sizes come from
the same real pair. The source's rechecks are left out (one record per pair and size).

Fast enough for 16.8 million records (about 12 GB): each source record becomes a line template
once (json.dumps, with the pair's fields as str.format fields in the line's head; its tail, the
figures, a constant), then a record is one format call on the head and a concatenation.
"""

from __future__ import annotations

import ipaddress
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the fields of a pairs record that say which pair it is, as template fields (a pair's ranks are
# its nodes: one rank a node)
PAIR_FIELDS = {"round": "{r}", "a": "{a}", "b": "{b}", "a_rank": "{a}", "b_rank": "{b}",
               "a_host": '"node{a}"', "b_host": '"node{b}"'}


def fail(message: str) -> None:
    """Bad input: one line on stderr, exit 2."""
    print(f"bench/report_scale.py: {message}", file=sys.stderr)
    raise SystemExit(2)


@dataclass(frozen=True)
class PairsSource:
    """A real pairs run: its run record, its first measurements per (dtype, bytes) in the order
    the run wrote them, its summary."""

    run: dict[str, Any]
    groups: tuple[tuple[dict[str, Any], ...], ...]
    summary: dict[str, Any]


def read_source(path: Path) -> PairsSource:
    """The one run of a pairs results file (as written: JSON objects)."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    runs = [r for r in records if r["kind"] == "run"]
    summaries = [r for r in records if r["kind"] == "summary"]
    if len(runs) != 1 or len(summaries) != 1:
        fail(f"{path} holds {len(runs)} runs and {len(summaries)} summaries; give one pairs run")
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in records:
        if r["kind"] == "pairs" and not r.get("recheck"):
            groups.setdefault((r["dtype"], r["bytes"]), []).append(r)
    if not groups:
        fail(f"{path} holds no pairs records")
    return PairsSource(runs[0], tuple(tuple(g) for g in groups.values()), summaries[0])


def rounds_of(n: int) -> Iterator[list[tuple[int, int]]]:
    """The rounds of ``n`` units' tournament, one at a time, as tournament.round_robin makes them
    all at once (the circle method: unit 0 stays put, the others turn one place a round; with n
    odd a bye, unit n, joins): after r turns, place i > 0 holds unit 1 + (i - 1 - r) mod (m - 1)."""
    m = n + n % 2
    for r in range(m - 1):
        at = [0, *(1 + (i - 1 - r) % (m - 1) for i in range(1, m))]
        yield sorted((min(a, b), max(a, b)) for a, b in
                     ((at[i], at[m - 1 - i]) for i in range(m // 2)) if a < n and b < n)


def dumps(value: Any) -> str:
    """JSON as results files hold it (results/writer.py)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def template(record: dict[str, Any], n: int) -> tuple[Callable[..., str], str]:
    """A pairs record of ``n`` nodes with the figures of ``record``: its line as the format of
    its head, of the round ``r`` and the pair ``a``, ``b``, and its tail (the figures: most of
    the line, formatted once)."""
    missing = set(PAIR_FIELDS) - set(record)
    if missing:
        fail(f"a pairs record without {', '.join(sorted(missing))}")
    fixed = {**record, "rounds": n - 1 + n % 2, "unit": "node", "units": n}
    keys = list(fixed)
    last = max(keys.index(key) for key in PAIR_FIELDS) + 1
    head = ",".join(f"{dumps(key)}:{PAIR_FIELDS[key]}" if key in PAIR_FIELDS else
                    f"{dumps(key)}:{dumps(fixed[key])}".replace("{", "{{").replace("}", "}}")
                    for key in keys[:last])
    tail = "".join(f",{dumps(key)}:{dumps(fixed[key])}" for key in keys[last:])
    return ("{{" + head).format, tail + "}\n"


def run_record(run: dict[str, Any], n: int) -> dict[str, Any]:
    """The source's run record for ``n`` nodes of one rank each."""
    out = {**run, "ranks": n, "nodes": n, "rank_hosts": [f"node{i}" for i in range(n)],
           "plan": {**run["plan"], "ranks": n}}
    if run.get("rank_containers"):
        out["rank_containers"] = [run["rank_containers"][0]] * n
    cluster = run.get("emulation")
    if cluster and cluster.get("links"):
        first = ipaddress.IPv4Network(cluster["subnet"]).network_address
        subnet = ipaddress.IPv4Network(f"{first}/{min(24, 32 - (n + 1).bit_length())}",
                                       strict=False)
        links = cluster["links"]
        out["emulation"] = {**cluster, "nodes": n, "subnet": str(subnet), "links": [
            {**links[i % len(links)], "node": f"node{i}",
             "address": str(subnet.network_address + 1 + i)} for i in range(n)]}
    return out


def records_of(source: PairsSource, n: int) -> int:
    """The pairs records of ``n`` nodes: one per pair and (dtype, bytes)."""
    return n * (n - 1) // 2 * len(source.groups)


def lines(source: PairsSource, n: int) -> Iterator[str]:
    """The file of ``n`` nodes, a round of lines at a time."""
    yield dumps(run_record(source.run, n)) + "\n"
    templates = [[template(r, n) for r in group] for group in source.groups]
    k = 0  # pairs so far: pair k takes the k-th source record (cycled) at every size
    for number, pairs in enumerate(rounds_of(n), 1):
        for group in templates:
            cycle = len(group)
            out = []
            for i, (a, b) in enumerate(pairs):
                head, tail = group[(k + i) % cycle]
                out.append(head(r=number, a=a, b=b) + tail)
            yield "".join(out)
        k += len(pairs)
    counts = {**source.summary.get("counts", {}), "pairs": records_of(source, n)}
    yield dumps({**source.summary, "counts": counts}) + "\n"


def write(source: PairsSource, n: int, out: Path) -> int:
    """Write the file of ``n`` nodes; the pairs records written."""
    with out.open("w") as f:
        f.writelines(lines(source, n))
    return records_of(source, n)


def estimate_bytes(source: PairsSource, n: int) -> int:
    """About how large the file of ``n`` nodes is (its pairs records at their mean length)."""
    mean = sum(sum(len(head(r=n, a=n, b=n) + tail) for head, tail in
                   (template(r, n) for r in g)) / len(g) for g in source.groups)
    return int(mean * n * (n - 1) // 2) + len(dumps(run_record(source.run, n))) + 4096
