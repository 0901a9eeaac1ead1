"""`fabbench verify --prometheus FILE`: the verdict in Prometheus' text exposition format, read
back by Prometheus' own Python parser (prometheus_client), the way node_exporter's textfile
collector would serve it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import REPO, cli
from fabbench.floors import prometheus
from fabbench.floors.judge import judge
from fabbench.floors.verify import Verification
from unit.test_floors import ALLREDUCE, PAIRS, fleet, floors, pairs, point

LATENCY = '''
[[rule]]
id = "small-latency"
source = "test"
workload = "collectives"
op = "allreduce"
size = "8"
metric = "time"
at_most = 50
unit = "us"
'''


def families(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_a_slow_nodes_check_reads_back_through_prometheus_parser(tmp_path):
    f = replace(floors(tmp_path, PAIRS.replace('id = "pairs-bw"', 'id = "pairs \\"bw\\""')),
                name="site floors")
    text = prometheus.exposition(Verification(f, [], judge(f, pairs(fleet(slow="n3")))))
    got = families(text)
    verdict = {s.labels["node"]: s.value for s in got["fabbench_floor_verdict"]}
    assert verdict == {"n1": 1, "n2": 1, "n3": 0, "n4": 1}
    figure = {s.labels["node"]: s.value
              for s in got["fabbench_floor_figure_gigabytes_per_second"]}
    assert figure["n3"] == pytest.approx(0.03) and figure["n1"] == pytest.approx(0.117)
    (floor,) = {s.value for s in got["fabbench_floor_threshold_gigabytes_per_second"]}
    assert floor == pytest.approx(0.1)
    one = got["fabbench_floor_verdict"][0].labels
    assert one["rule"] == 'pairs "bw"' and one["op"] == "sendrecv"  # escaped and read back
    assert one["size_bytes"] == str(1 << 20) and one["metric"] == "bw"
    counts = {s.labels["status"]: s.value for s in got["fabbench_floor_verdicts"]}
    assert counts == {"pass": 3, "fail": 1, "not_judged": 0}
    assert {s.labels["floors"] for s in got["fabbench_floor_verdicts"]} == {"site floors"}
    assert text.count("# TYPE fabbench_floor_verdict gauge") == 1


def test_figures_are_in_the_names_base_unit_and_not_judged_is_left_out(tmp_path):
    f = floors(tmp_path, ALLREDUCE + LATENCY)
    small = point(bytes=8, metrics={"busbw": 0.001, "algbw": 0.001, "time": 40.0})
    verdicts = judge(f, [small, point(ranks=1, metrics={"time": 900.0})])
    got = families(prometheus.exposition(Verification(f, [], verdicts)))
    (seconds,) = got["fabbench_floor_figure_seconds"]
    assert seconds.value == pytest.approx(40e-6) and seconds.labels["size_bytes"] == "8"
    (limit,) = got["fabbench_floor_threshold_seconds"]
    assert limit.value == pytest.approx(50e-6)
    # the one-rank 64 MiB point has no busbw: not judged, so no figure, only its count
    assert "fabbench_floor_figure_gigabytes_per_second" not in got
    counts = {s.labels["status"]: s.value for s in got["fabbench_floor_verdicts"]}
    assert counts == {"pass": 1, "fail": 0, "not_judged": 1}


def test_the_cli_replaces_its_own_file_whole_and_refuses_any_other(tmp_path, capsys):
    results = REPO / "tests" / "fixtures" / "pairs" / "local-pairs.jsonl"
    rules = tmp_path / "f.toml"
    rules.write_text('format = "fabbench-floors/1"\nname = "local"\n'
                     + PAIRS.replace("at_least = 0.1", "at_least = 0.001"))
    out = tmp_path / "fabbench.prom"
    out.write_text(prometheus.HEADER + "\nstale 1\n")  # what an earlier check wrote
    code, printed, _ = cli(capsys, "verify", "--floors", str(rules), str(results),
                           "--prometheus", str(out))
    assert code == 0, printed
    assert f"wrote {out}" in printed
    assert out.read_text().splitlines()[0] == prometheus.HEADER
    got = families(out.read_text())
    # its three ranks ran on one host ("vm"): one series, as Prometheus requires
    (only,) = got["fabbench_floor_verdict"]
    assert only.value == 1 and only.labels["node"] == "vm"
    assert only.labels["run"] == "20261124T165814Z-6698b5"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.toml", "fabbench.prom"]
    # a file fabbench did not write is never replaced, a textfile of another exporter included
    other = tmp_path / "other.prom"
    other.write_text("# HELP node_x x\nnode_x 1\n")
    code, _, err = cli(capsys, "verify", "--floors", str(rules), str(results),
                       "--prometheus", str(other))
    assert code == 2 and err.strip().splitlines() == [
        f"fabbench: error: --prometheus {other} exists: fabbench never overwrites a file; "
        "give a new name"]
    assert other.read_text() == "# HELP node_x x\nnode_x 1\n"
    code, _, err = cli(capsys, "verify", "--floors", str(rules), str(results),
                       "--prometheus", str(tmp_path / "gone" / "x.prom"))
    assert code == 2 and err.strip().splitlines() == [
        f"fabbench: error: cannot write --prometheus {tmp_path / 'gone' / 'x.prom'}: no folder "
        f"{tmp_path / 'gone'}"]
