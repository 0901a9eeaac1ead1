"""bench/pairs_scale.py, the maker of bench/report_scale.py's pairs files: a pairs run of N nodes
made from a real 4-node run over emulated nodes is a valid results file with the counts of N
nodes, the round-robin tournament's structure and the real records' figures."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import cli
from fabbench.report.runs_report import findings_json
from fabbench.results.reader import read_results
from fabbench.results.runs import load
from fabbench.workloads.pairs.tournament import round_robin

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "tests" / "fixtures" / "pairs" / "emulated-4.jsonl"  # a real run, 4 nodes


@pytest.fixture(scope="module")
def maker():
    spec = importlib.util.spec_from_file_location("bench_pairs_scale",
                                                  REPO / "bench" / "pairs_scale.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


@pytest.mark.parametrize("n", range(2, 42))
def test_the_rounds_are_the_tournaments(maker, n):
    assert list(maker.rounds_of(n)) == round_robin(n)


@pytest.mark.parametrize("n", [6, 7])
def test_a_made_file_is_a_valid_run_of_n_nodes(maker, tmp_path, capsys, n):
    source = maker.read_source(SOURCE)
    path = tmp_path / f"pairs-{n}.jsonl"
    pairs = n * (n - 1) // 2
    assert maker.write(source, n, path) == 2 * pairs  # 2 sizes (8 B, 1 MiB)
    results = read_results(path)  # the schema's check, every record
    (run,) = results.of_kind("run")
    assert (run.ranks, run.nodes, run.plan["ranks"]) == (n, n, n)
    assert list(run.rank_hosts) == [f"node{i}" for i in range(n)]
    assert [link.node for link in run.emulation.links] == list(run.rank_hosts)
    assert len({link.address for link in run.emulation.links}) == n
    (summary,) = results.of_kind("summary")
    recs = results.of_kind("pairs")
    assert summary.counts["pairs"] == len(recs) == 2 * pairs
    # one record per pair and size, in the tournament's rounds, one rank a node
    rounds = round_robin(n)
    where = {pair: number for number, ps in enumerate(rounds, 1) for pair in ps}
    assert Counter((r.a, r.b, r.bytes) for r in recs) == {
        (a, b, size): 1 for (a, b) in where for size in (8, 1 << 20)}
    assert all(r.round == where[(r.a, r.b)] and r.rounds == len(rounds) == n - 1 + n % 2
               and r.units == n and r.unit == "node" and (r.a_rank, r.b_rank) == (r.a, r.b)
               and (r.a_host, r.b_host) == (f"node{r.a}", f"node{r.b}") for r in recs)
    # the records in the run's order: round by round, size by size, the round's pairs in order
    assert [(r.round, r.bytes, r.a, r.b) for r in recs] == [
        (number, size, a, b) for number, ps in enumerate(rounds, 1) for size in (8, 1 << 20)
        for a, b in ps]
    # pair k's figures are the k-th real pair's (cycled), at both sizes: line for line
    real = [json.loads(line) for line in SOURCE.read_text().splitlines()]
    by_size = {size: [r for r in real if r["kind"] == "pairs" and r["bytes"] == size]
               for size in (8, 1 << 20)}
    lines = path.read_text().splitlines()[1:-1]
    order = [pair for ps in rounds for pair in ps]
    for line in lines:
        got = json.loads(line)
        k = order.index((got["a"], got["b"]))
        figures = by_size[got["bytes"]][k % 6]
        assert line == maker.dumps({**figures, **{key: got[key] for key in (
            "round", "rounds", "unit", "units", "a", "b", "a_rank", "b_rank", "a_host",
            "b_host")}})
    # the report reads it as one run of n nodes
    (found,) = findings_json(load([path]))
    assert found["pairs"]["pairs"] == pairs and len(found["pairs"]["nodes"]) == n
    code, out, err = cli(capsys, "report", str(path))
    assert code == 0 and f"{pairs} pairs of {n} nodes" in out, err
