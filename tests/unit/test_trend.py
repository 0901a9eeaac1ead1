"""`fabbench report DIR --trend`: each node's and link's figure across runs, the nodes drifting
toward a floor flagged before they cross it, noise left alone (report.trend, report.drift;
the rule is docs/methods.md's "Drift of a node's figure"). The runs are copies of a real pairs
run over 4 emulated nodes (tests/unit/trend_runs.py)."""

from __future__ import annotations

import itertools
import json
import re
import statistics
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, cli
from fabbench.errors import UsageError
from fabbench.floors.judge import FAIL, PASS
from fabbench.floors.points import points_of
from fabbench.floors.rules import load as load_floors
from fabbench.floors.verify import verify
from fabbench.report import drift
from fabbench.report.trend import FORMAT, ordered, trend_of
from fabbench.results.runs import load
from unit.trend_runs import FIXTURE, floors_file, make_runs

NODES = ("node0", "node1", "node2", "node3")


def fixture_figures() -> dict[str, float]:
    """Each node's bandwidth in the real run the runs are made of."""
    return {p.node: p.metrics["bw"] for p in points_of(load([FIXTURE])) if p.node}


def node_verdict(path: Path, floors: Path, node: str) -> str:
    """`floors verify`'s status of one node in one run (the trend's own judge left aside)."""
    (v,) = [n for n in verify(load_floors(floors), [path]).verdict().nodes if n.node == node]
    return v.status


def test_the_fixture_is_a_real_four_node_pairs_run():
    (s,) = load([FIXTURE])
    assert s.run.nodes == 4 and s.run.rank_hosts == list(NODES) and s.summary.ok
    assert s.run.interface == "fbnet0"  # the emulated nodes' interface (fabbench emulate)
    assert sorted(fixture_figures()) == list(NODES)


def test_a_node_lowered_run_by_run_is_flagged_drifting_before_it_crosses_the_floor(capsys,
                                                                                    tmp_path):
    """The must-show: 30 runs, node2's pairs lowered 3 % of the first run's figure per run (its
    bandwidth and times, with 3 % noise on every pair): node2 is flagged "drifting" at a run
    where `floors verify` still passes it, before the first run it fails, and "below floor"
    once it has; no other node is flagged at any run, nor any link without node2."""
    paths = make_runs(tmp_path / "runs", lowered="node2")
    floor = 0.5 * statistics.median(fixture_figures().values())
    floors = floors_file(tmp_path / "floors.toml", floor)
    runs = ordered(load([tmp_path / "runs"]))
    assert [s.path for s in runs] == paths  # by start time, not by file name
    assert sorted(paths) != paths
    verdicts = {}
    for k in range(drift.MIN_RUNS, len(runs) + 1):
        found = trend_of(runs[:k], load_floors(floors))
        (rule,) = found.rules
        verdicts[k] = {n.subject: n.judged.verdict for n in rule.nodes}
        assert [n for n in verdicts[k] if n != "node2" and verdicts[k][n] != drift.STEADY] == []
        # node2's links, its evidence, only when node2 is flagged
        assert {ln.subject for ln in rule.links} == (
            {"node0 <-> node2", "node1 <-> node2", "node2 <-> node3"}
            if verdicts[k]["node2"] != drift.STEADY else set())
    flagged = min(k for k, v in verdicts.items() if v["node2"] == drift.DRIFTING)
    crossed = min(k for k in range(1, len(paths) + 1)
                  if node_verdict(paths[k - 1], floors, "node2") == FAIL)
    assert node_verdict(paths[flagged - 1], floors, "node2") == PASS
    assert flagged < crossed, (flagged, crossed)
    assert all(v["node2"] == drift.BELOW for k, v in verdicts.items() if k >= crossed + 2)
    # the same through the command, on the runs up to the one that flagged node2
    code, out, err = cli_trend(capsys, tmp_path, paths[:flagged], "--floors", str(floors), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["format"] == FORMAT == "fabbench-trend/1"
    assert data["flagged"] == [{"rule": "pairs-node-bw", "node": "node2",
                                "verdict": "drifting"}]
    (rule,) = data["rules"]
    node2 = next(n for n in rule["nodes"] if n["subject"] == "node2")
    assert node2["last"] >= node2["floor"] == pytest.approx(floor)
    assert node2["projected"] < node2["floor"] and node2["slope_per_run"] < 0
    assert [s["run"] for s in node2["series"]] == [r["run"] for r in data["runs"]]
    assert rule["links_latest"] == 6
    assert [ln["subject"] for ln in rule["links"]] == ["node0 <-> node2", "node1 <-> node2",
                                                      "node2 <-> node3"]
    code, out, _ = cli_trend(capsys, tmp_path, paths[:flagged], "--floors", str(floors))
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("node2 "))
    assert "drifting (floor in ~" in line
    assert out.splitlines()[-1] == "# 1 node(s) flagged: node2 (drifting)"


def cli_trend(capsys, tmp_path: Path, paths: list[Path], *args: str) -> tuple[int, str, str]:
    """`fabbench report DIR --trend ARGS` over a directory of these runs only."""
    folder = tmp_path / f"given-{len(paths)}-{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    for p in paths:
        (folder / p.name).write_bytes(p.read_bytes())
    return cli(capsys, "report", str(folder), "--trend", *args)


def test_noise_alone_flags_nothing(tmp_path):
    """30 runs of the same cluster with 4 % noise on every pair and a floor 15 % under the
    slowest node: no node flagged at any run, projecting 5 runs ahead or 10. A slope's
    projection alone would have crossed the floor now and then (checked): the trend test is
    what keeps those nodes out."""
    make_runs(tmp_path / "runs", noise=0.04, seed=2)
    floors = load_floors(floors_file(tmp_path / "floors.toml",
                                     0.85 * min(fixture_figures().values())))
    runs = ordered(load([tmp_path / "runs"]))
    projected_past = 0
    for k in range(drift.MIN_RUNS, len(runs) + 1):
        for ahead in (5, 10):
            (rule,) = trend_of(runs[:k], floors, ahead=ahead).rules
            assert [n.subject for n in rule.nodes if n.flagged] == [] and rule.links == ()
            assert rule.links_latest == 6
            projected_past += sum(n.fit.projected is not None and n.fit.projected < n.floor
                                  for n in rule.nodes)
    assert projected_past > 0


def test_a_rising_time_under_a_limit_is_drifting_too(tmp_path):
    """A limit on time (lower is better): node2's pairs slower run by run (the same records'
    times) drift toward the limit and are flagged before they pass it; the bandwidth rule
    beside it judges the same runs, and no other node is flagged by either."""
    make_runs(tmp_path / "runs", 25, lowered="node2", step=0.04, noise=0.0)
    times = {p.node: p.metrics["time"] for p in points_of(load([FIXTURE]))}
    floors = load_floors(floors_file(tmp_path / "floors.toml", 1e-6, extra=f"""
[[rule]]
id = "pairs-node-time"
source = "a test"
workload = "pairs"
per_node = true
metric = "time"
at_most = {3 * max(times.values())!r}
unit = "us"
"""))
    runs = ordered(load([tmp_path / "runs"]))
    seen = []
    for k in range(drift.MIN_RUNS, len(runs) + 1):
        by_rule = {r.rule.id: r for r in trend_of(runs[:k], floors).rules}
        assert list(by_rule) == ["pairs-node-bw", "pairs-node-time"]
        time_rule = by_rule["pairs-node-time"]
        assert time_rule.links == () and time_rule.links_latest == 0  # pairs' figures are bw
        assert [n.subject for r in by_rule.values() for n in r.nodes
                if n.flagged and n.subject != "node2"] == []
        node2 = next(n for n in time_rule.nodes if n.subject == "node2")
        seen.append(node2.judged.verdict)
        if node2.judged.verdict == drift.DRIFTING:
            assert node2.fit.slope > 0 and node2.last <= node2.floor < node2.fit.projected
    assert drift.DRIFTING in seen and seen[-1] == drift.ABOVE
    assert seen.index(drift.DRIFTING) < seen.index(drift.ABOVE)


def test_the_window_and_the_horizon(tmp_path):
    """A longer horizon flags the lowered node earlier; a window longer than the runs fits
    them all."""
    make_runs(tmp_path / "runs", lowered="node2")
    floors = load_floors(floors_file(tmp_path / "floors.toml",
                                     0.5 * statistics.median(fixture_figures().values())))
    runs = ordered(load([tmp_path / "runs"]))

    def first_flag(**options: int) -> int:
        return next(k for k in range(drift.MIN_RUNS, len(runs) + 1)
                    if any(n.flagged and n.subject == "node2"
                           for n in trend_of(runs[:k], floors, **options).rules[0].nodes))

    assert first_flag(ahead=10) < first_flag(ahead=5) < first_flag(ahead=1)
    found = trend_of(runs[:8], floors, window=50)
    assert all(n.fit.runs == 8 for n in found.rules[0].nodes)
    for window, ahead in ((drift.MIN_RUNS - 1, 5), (10, 0)):
        with pytest.raises(UsageError, match="--window takes at least 5 runs and --ahead at "
                                             "least 1"):
            trend_of(runs, floors, window=window, ahead=ahead)


def test_theil_sen_and_the_exact_mann_kendall_test():
    """The slope is the median of the pairwise slopes (one wild run does not move it); the
    p-value is the exact tail of Kendall's S, checked against every order of 6 figures."""
    y = np.array([[10.0, 9.0, 8.0, 100.0, 6.0, 5.0, 4.0]])
    (fit,) = drift.fits(y, ahead=2, higher_is_better=True)
    assert fit.slope == pytest.approx(-1.0) and fit.fitted == pytest.approx(4.0)
    assert fit.projected == pytest.approx(2.0)
    # a strictly falling series of n: p = 1/n!; of 5 runs that is 1/120 < ALPHA
    (fit,) = drift.fits(np.array([[5.0, 4, 3, 2, 1]]), ahead=1, higher_is_better=True)
    assert fit.p_value == pytest.approx(1 / 120) and fit.p_value <= drift.ALPHA
    (rising,) = drift.fits(np.array([[5.0, 4, 3, 2, 1]]), ahead=1, higher_is_better=False)
    assert rising.p_value == pytest.approx(1.0)
    orders = list(itertools.permutations(range(6)))
    s_of = [sum(np.sign(b - a) for a, b in itertools.combinations(o, 2)) for o in orders]
    for s in range(-15, 16):
        brute = sum(x >= s for x in s_of) / len(orders)
        assert drift._tail(6, s) == pytest.approx(brute), s
    # a gap (a run without the node) leaves the others' order; fewer than MIN_RUNS figures:
    # no fit
    gap, short = drift.fits(np.array([[6.0, 5, np.nan, 3, 2, 1],
                                      [1.0, np.nan, np.nan, 2, 3, 4]]), 1, True)
    assert gap.runs == 5 and gap.slope == pytest.approx(-1.0) and gap.p_value == \
        pytest.approx(1 / 120)
    assert short.runs == 4 and short.slope is None and short.p_value is None


def test_html_and_plots_show_the_flagged_node_against_the_floor_and_the_others(capsys, tmp_path):
    paths = make_runs(tmp_path / "runs", 16, lowered="node2")
    floors = floors_file(tmp_path / "floors.toml",
                         0.5 * statistics.median(fixture_figures().values()))
    html, figs = tmp_path / "trend.html", tmp_path / "figs"
    code, out, err = cli_trend(capsys, tmp_path, paths, "--floors", str(floors), "--html",
                               str(html), "--plots", str(figs), "--title", "a month <of> runs")
    assert code == 0, err
    assert f"wrote {html}" in out
    assert sorted(p.name for p in figs.iterdir()) == ["trend-pairs-node-bw-node2.png",
                                                      "trend-pairs-node-bw-node2.svg"]
    svg = (figs / "trend-pairs-node-bw-node2.svg").read_text()
    for gid in ("series-node2", "floor", "band", "fit"):
        assert f'id="{gid}"' in svg, gid
    page = html.read_text()
    assert "<title>a month &lt;of&gt; runs</title>" in page
    assert page.count("data:image/svg+xml;base64,") == 1
    assert '<tr class="flagged"><td class="l">node2</td>' in page


def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path):
    floors = floors_file(tmp_path / "floors.toml", 0.01)
    runs = make_runs(tmp_path / "runs", 5)
    empty = tmp_path / "empty"
    empty.mkdir()
    twice = tmp_path / "twice"
    twice.mkdir()
    for i, p in enumerate(runs[:2] + runs[:1]):
        (twice / f"{i}.jsonl").write_bytes(p.read_bytes())
    bad_time = tmp_path / "bad-time"
    bad_time.mkdir()
    for p in runs:
        (bad_time / p.name).write_text(re.sub(r'"started": "[^"]*"', '"started": "yesterday"',
                                              p.read_text(), count=1))
    collectives = REPO / "tests" / "fixtures" / "runs" / "siteA-ib.jsonl"
    cases = [
        ([str(empty), "--trend", "--floors", str(floors)], "no results files"),
        ([str(runs[0]), "--trend", "--floors", str(floors)], "at least 5 runs"),
        ([*map(str, runs[:4]), "--trend", "--floors", str(floors)], "; 4 given"),
        ([str(collectives), "--trend", "--floors", str(floors)], "no per-node figures"),
        ([str(tmp_path / "runs"), "--trend", "--floors", str(tmp_path / "nope.toml")],
         "cannot read floors file"),
        ([str(tmp_path / "runs"), "--trend", "--floors", "reference"],
         "no rule of the floors reference"),
        ([str(tmp_path / "runs"), "--trend"], "no rule of the floors reference"),
        ([str(twice), "--trend", "--floors", str(floors)], "is given twice"),
        ([str(bad_time), "--trend", "--floors", str(floors)], "'yesterday' is not a time"),
        ([str(tmp_path / "runs"), "--window", "4"], "options of --trend"),
        ([str(tmp_path / "runs"), "--trend", "--csv", str(tmp_path / "x.csv")], "--csv"),
        ([str(tmp_path / "runs"), "--trend", "--floors", str(floors), "--window", "4"],
         "--window takes at least 5 runs"),
        ([str(tmp_path / "runs"), "--trend", "--floors", str(floors), "--ahead", "0"],
         "--ahead at least 1, not 10 and 0"),
    ]
    for argv, message in cases:
        code, out, err = cli(capsys, "report", *argv)
        assert code == 2 and out == "", (argv, out)
        assert len(err.strip().splitlines()) == 1 and message in err, (argv, err)
    assert not (tmp_path / "x.csv").exists()


def test_runs_without_nodes_figures_are_left_out_with_a_warning(capsys, tmp_path):
    floors = floors_file(tmp_path / "floors.toml", 0.01)
    make_runs(tmp_path / "runs", 5)
    other = tmp_path / "runs" / "zz-collectives.jsonl"
    other.write_bytes((REPO / "tests" / "fixtures" / "runs" / "siteA-ib.jsonl").read_bytes())
    code, out, err = cli(capsys, "report", str(tmp_path / "runs"), "--trend", "--floors",
                         str(floors))
    assert code == 0
    assert "# trend of 5 runs" in out
    assert f"{other}: run " in err and "left out of the trend" in err
