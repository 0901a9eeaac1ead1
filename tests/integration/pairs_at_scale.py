"""A pairs results file at a cluster's scale, made from a real run's records: every pair of NODES
nodes (node0000, node0001, ...) at each size of tests/fixtures/pairs/local-pairs.jsonl, each
record one of that run's records of its size (taken in turn) with the pair's ranks, hosts and
round; the records of the pairs of ``slow`` (a node's name) at a hundredth of the bandwidth (the
run's best pair, 1.1 GB/s, becomes 0.011), a hundred times the time. 1,024 nodes: 1,047,552
records, about 735 MB, in seconds: each line is formatted from a template made once per record
of the run, not serialised record by record."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO

RUN = REPO / "tests" / "fixtures" / "pairs" / "local-pairs.jsonl"
SLOWER = 100.0  # the slow node's pairs: bandwidth / SLOWER, times * SLOWER
HOST = "node%04d"  # a node's name by its index


def host(index: int) -> str:
    return HOST % index


def _slowed(record: dict) -> dict:
    out = dict(record, bw_gbyte_s=record["bw_gbyte_s"] / SLOWER,
               time_us={k: v * SLOWER for k, v in record["time_us"].items()})
    out["samples_us"] = [v * SLOWER for v in record["samples_us"]]
    return out


def _template(record: dict, nodes: int, rounds: int) -> tuple[str, str, str]:
    """The record as a line: head + middle % {round, a, b} + tail (the fields that change from
    pair to pair are neighbours: only they are formatted)."""
    placed = {"round": "%(round)d", "rounds": str(rounds), "units": str(nodes), "a": "%(a)d",
              "b": "%(b)d", "a_rank": "%(a)d", "b_rank": "%(b)d",
              "a_host": json.dumps(HOST.replace("%", "%(a)")),
              "b_host": json.dumps(HOST.replace("%", "%(b)"))}
    keys = list(record)
    assert placed.keys() <= record.keys(), keys
    fields = [json.dumps(k) + ":" + (placed[k] if k in placed else
                                     json.dumps(v, separators=(",", ":")).replace("%", "%%"))
              for k, v in record.items()]
    first = min(keys.index(k) for k in placed)
    last = max(keys.index(k) for k in placed)
    head = "{" + ",".join(fields[:first]) + ("," if first else "")
    tail = ("," if last + 1 < len(fields) else "") + ",".join(fields[last + 1:]) + "}\n"
    return head.replace("%%", "%"), ",".join(fields[first:last + 1]), tail.replace("%%", "%")


def write(path: Path, nodes: int, slow: str | None = None) -> int:
    """Write the file; return its number of pairs records."""
    lines = [json.loads(line) for line in RUN.read_text().splitlines() if line.strip()]
    run, summary = lines[0], lines[-1]
    assert run["kind"] == "run" and summary["kind"] == "summary"
    by_size: dict[int, list[dict]] = {}
    for r in lines[1:-1]:
        by_size.setdefault(r["bytes"], []).append(r)
    rounds = nodes - 1 if nodes % 2 == 0 else nodes
    templates = {size: [(_template(r, nodes, rounds), _template(_slowed(r), nodes, rounds))
                        for r in records] for size, records in sorted(by_size.items())}
    hosts = [host(i) for i in range(nodes)]
    slow_index = hosts.index(slow) if slow is not None else -1
    run = dict(run, ranks=nodes, nodes=nodes, rank_hosts=hosts,
               rank_containers=[run["rank_containers"][0]] * nodes,
               plan=dict(run["plan"], ranks=nodes))
    with path.open("w") as f:
        f.write(json.dumps(run, separators=(",", ":")) + "\n")
        pair = 0
        for a in range(nodes):
            chunk: list[str] = []
            for b in range(a + 1, nodes):
                values = {"round": 1 + (a + b) % rounds, "a": a, "b": b}
                slowed = slow_index in (a, b)
                for choices in templates.values():
                    head, middle, tail = choices[pair % len(choices)][slowed]
                    chunk += (head, middle % values, tail)
                pair += 1
            f.write("".join(chunk))
        count = pair * len(templates)
        f.write(json.dumps(dict(summary, counts=dict(summary["counts"], pairs=count)),
                           separators=(",", ":")) + "\n")
    return count
