"""The pairs schedule, the slow-node rule, the late-rank rule and the delay hook, on records made
here (the real runs are in tests/integration/test_slow_node.py)."""

from __future__ import annotations

import itertools
import random

import pytest

from fabbench.errors import UsageError
from fabbench.report.late import late_ranks
from fabbench.timing.engine import TimingPolicy, measure
from fabbench.workloads.collectives import Sweep
from fabbench.workloads.collectives.record import Collective
from fabbench.workloads.faults import Fault
from fabbench.workloads.pairs.record import SLOW_SHARE, Pairs, best_pairs
from fabbench.workloads.pairs.slow_node import analyse
from fabbench.workloads.pairs.tournament import endpoints, round_robin, slow_pairs


@pytest.mark.parametrize("n", range(2, 18))
def test_round_robin_every_pair_once_in_disjoint_rounds(n):
    rounds = round_robin(n)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    seen = [pair for r in rounds for pair in r]
    assert sorted(seen) == list(itertools.combinations(range(n), 2))
    for r in rounds:
        members = [u for pair in r for u in pair]
        assert len(members) == len(set(members))  # disjoint
        assert len(r) == n // 2


def test_round_robin_of_one_is_empty():
    assert round_robin(1) == [] and round_robin(0) == []


def test_endpoints_one_rank_per_node_or_every_rank_on_one_host():
    assert endpoints(["a", "a", "b", "b", "c", "c"]) == ([0, 2, 4], "node")
    assert endpoints(["h", "h", "h"]) == ([0, 1, 2], "rank")
    assert endpoints(["b", "a", "b", "a"]) == ([0, 1], "node")


def fleet(n: int, bw: dict[int, float] | None = None, base: float = 0.1, noise: float = 0.0,
          seed: int = 0, sizes=(8, 1 << 20)) -> list[Pairs]:
    """pairs records of n nodes whose links run at base GB/s, or bw[node]: a pair runs at the
    slower end's rate, times a uniform noise of ±noise."""
    rng = random.Random(seed)
    bw = bw or {}
    recs = []
    for number, pairs in enumerate(round_robin(n), 1):
        for a, b in pairs:
            for size in sizes:
                rate = min(bw.get(a, base), bw.get(b, base)) * (1 + rng.uniform(-noise, noise))
                recs.append(pair_record(number, a, b, size, rate))
    return recs


def pair_record(number: int, a: int, b: int, size: int, rate: float, **more) -> Pairs:
    """A pairs record of pair (a, b) moving ``size`` bytes at ``rate`` GB/s (plus 50 µs)."""
    p50 = size / (rate * 1e9) * 1e6 + 50.0
    return Pairs.read({"op": "sendrecv", "round": number, "unit": "node", "a": a, "b": b,
                       "a_rank": a, "b_rank": b, "a_host": f"n{a}", "b_host": f"n{b}",
                       "bytes": size, "dtype": "float32", "transport": "ob1/tcp",
                       "time_us": {"p50": p50}, "bw_gbyte_s": size / (p50 * 1e-6) / 1e9,
                       "correct": None, **more})


def test_slow_node_is_named_with_its_numbers():
    v = analyse(fleet(4, {3: 0.03}))
    assert [n.unit for n in v.slow] == [3]
    (line,) = v.text
    assert line.startswith("slow node: node 3 (n3, rank 3): its 3 pairs move")
    assert "of the pairs without it" in line and "latency at 8 B" in line
    three = next(n for n in v.nodes if n.unit == 3)
    assert three.share[1] < 0.35 and three.others_min_gbyte_s > 0.09


@pytest.mark.parametrize("n", [3, 4, 5, 8])
def test_slow_node_named_at_every_size_of_fleet(n):
    v = analyse(fleet(n, {n - 1: 0.025}, noise=0.1))
    assert [s.unit for s in v.slow] == [n - 1]


@pytest.mark.parametrize("seed", range(30))
def test_equal_links_name_none_under_noise(seed):
    v = analyse(fleet(4, noise=0.15, seed=seed))
    assert v.slow == []
    assert v.text[0].startswith("no slow node: every node has a pair at 75%")


def test_two_slow_nodes_are_not_blamed_on_one():
    v = analyse(fleet(4, {2: 0.03, 3: 0.03}))
    assert v.slow == []
    assert v.text[0].startswith("no single slow node") or v.text[0].startswith("no slow node")


def test_two_nodes_cannot_say_which_end():
    v = analyse(fleet(2, {1: 0.01}))
    assert v.slow == [] and "cannot say which end" in v.text[0]


def test_rule_threshold_is_the_documented_one():
    # node 3's best pair just above and just below 75 % of the others' median
    just_above = analyse(fleet(4, {3: 0.1 * (SLOW_SHARE + 0.02)}, sizes=(1 << 30,)))
    just_below = analyse(fleet(4, {3: 0.1 * (SLOW_SHARE - 0.02)}, sizes=(1 << 30,)))
    assert just_above.slow == [] and [n.unit for n in just_below.slow] == [3]


def recheck(recs: list[Pairs], a: int, b: int, bw: float) -> Pairs:
    """A recheck of pair (a, b) at the largest size, moving ``bw`` GB/s."""
    first = max((r for r in recs if (r.a, r.b) == (a, b)), key=lambda r: r.bytes)
    return pair_record(first.round, a, b, first.bytes, bw, recheck=True)


def test_a_pair_slowed_once_is_judged_by_its_recheck():
    # node 3's link is slow; a healthy pair (0, 1) was slowed in the rounds, as slow as node 3's
    recs = fleet(4, {3: 0.03})
    slowed = [r if (r.a, r.b, r.bytes) != (0, 1, 1 << 20) else
              pair_record(r.round, 0, 1, r.bytes, 0.03) for r in recs]
    assert analyse(slowed).slow == []  # without the recheck: no single slow node
    v = analyse([*slowed, recheck(slowed, 0, 1, 0.1), *(recheck(slowed, a, 3, 0.03)
                                                        for a in range(3))])
    assert [n.unit for n in v.slow] == [3]
    assert v.rechecked == [(0, 1), (0, 3), (1, 3), (2, 3)] and v.recovered == [(0, 1)]
    assert v.text[0] == ("4 pairs below 75% of the median measured again (0<->1, 0<->3, "
                         "1<->3, 2<->3); 0<->1 then not slow, judged by the better figure")
    assert v.text[1].startswith("slow node: node 3 (n3, rank 3)")


def test_a_slow_link_stays_slow_when_its_recheck_is_slow():
    recs = fleet(4, {3: 0.03})
    v = analyse([*recs, *(recheck(recs, a, 3, 0.028) for a in range(3))])
    assert [n.unit for n in v.slow] == [3] and v.recovered == []
    assert v.text[0].endswith("each slow again")
    three = next(n for n in v.nodes if n.unit == 3)
    assert min(three.bw_gbyte_s) > 0.029  # the better figure of each pair


def test_best_pairs_keeps_the_faster_figure_of_each_pair():
    recs = fleet(3, sizes=(1 << 20,))
    faster = recheck(recs, 0, 1, 0.5)
    best = best_pairs([*recs, faster])
    assert len(best) == 3 and faster in best


@pytest.mark.parametrize("bw,expected", [
    ({(0, 1): 1.0, (0, 2): 1.0, (1, 2): 0.2}, [(1, 2)]),
    ({(0, 1): 1.0, (0, 2): 0.8, (1, 2): 0.76}, []),
    ({(0, 1): 1.0, (2, 3): 0.1}, []),  # two pairs: no median to stand out from
    ({}, []),
])
def test_slow_pairs_are_those_below_the_share_of_the_median(bw, expected):
    assert slow_pairs(bw) == expected


def test_no_pairs_records_no_verdict():
    assert analyse([]) is None


def collective(op: str, per_rank: list[list[float]]) -> Collective:
    return Collective.read({"op": op, "rank_samples_us": per_rank})


def test_late_rank_named_from_each_ranks_own_time():
    recs = [collective("allreduce", [[5000.0 + i] * 6, [5010.0] * 6, [40.0] * 6, [4990.0] * 6])
            for i in range(5)]
    found, points = late_ranks(recs, ["a", "b", "c", "d"])
    assert points == 5
    (late,) = found
    assert late.rank == 2 and late.host == "c" and late.late_points == 5
    assert late.wait_us == pytest.approx(4960, rel=0.01)
    assert "rank 2 on host c" in late.sentence(1) and "waited for it" in late.sentence(1)


def test_no_late_rank_when_times_are_even_or_op_is_uneven():
    even = [collective("allreduce", [[100.0, 104.0], [98.0, 97.0], [103.0, 99.0]])] * 4
    assert late_ranks(even)[0] == []
    # broadcast's root finishes first by design: not judged
    bcast = [collective("broadcast", [[10.0] * 3, [100.0] * 3, [100.0] * 3])] * 4
    assert late_ranks(bcast) == ([], 0)


def test_late_in_a_minority_of_points_is_not_named():
    recs = [collective("allreduce", [[10.0], [100.0], [100.0]])] + \
        [collective("allreduce", [[100.0], [100.0], [100.0]])] * 3
    assert late_ranks(recs)[0] == []


def test_delay_fault_parsing(monkeypatch):
    monkeypatch.setenv("FABBENCH_FAULT", "delay:2:::20")
    f = Fault.from_env()
    assert f.pause_s(2, "allreduce", 8) == pytest.approx(0.02)
    assert f.pause_s(1, "allreduce", 8) == 0.0
    monkeypatch.setenv("FABBENCH_FAULT", "delay:1:allreduce")
    f = Fault.from_env()
    assert f.pause_s(1, "allreduce", 64) == pytest.approx(0.005)
    assert f.pause_s(1, "alltoall", 64) == 0.0
    f.at_point(1, "allreduce", 64)  # a delay never kills or stops


class OneRank:
    def barrier(self):
        pass

    def synchronize(self):
        pass

    def max_scalar(self, value):
        return value


def test_engine_leaves_the_hooks_pause_out_of_the_ranks_own_time():
    policy = TimingPolicy(budget_s=0.02, min_samples=3, max_samples=5)
    m = measure(lambda: None, OneRank(), policy, lambda s, w: None, 5.0, "noop", pause_s=0.002)
    assert min(m.samples_us) >= 2000  # the slowest rank's time holds the pause
    assert len(m.own_us) == len(m.samples_us) and max(m.own_us) < 1000


def test_horovod_has_no_pairs():
    from fabbench.plan import Plan

    with pytest.raises(UsageError, match="point-to-point"):
        Plan(fabric="ethernet", primitive="horovod", workload="pairs",
             collectives=Sweep(ops=("allreduce",), sizes=(8,)), out="x.jsonl", run_id="r")


def _plan(monkeypatch, cluster, ranks=None, pair_schedule="auto"):
    from fabbench import runner
    from fabbench.config import RunConfig
    from fabbench.workloads.pairs.section import PairsConfig

    monkeypatch.setattr(runner.emulate, "current", lambda: cluster)
    config = RunConfig(fabric="ethernet", primitive="gloo", workload="pairs", ranks=ranks,
                       pairs=PairsConfig(pair_schedule=pair_schedule))
    return runner.make_plan(config, local_launch=True)[0]


def _picked(monkeypatch, cluster) -> tuple[str, ...]:
    from fabbench import runner
    from fabbench.config import RunConfig

    monkeypatch.setattr(runner.emulate, "current", lambda: cluster)
    config = RunConfig(fabric="ethernet", primitive="gloo", workload="pairs")
    return runner.make_plan(config, local_launch=True)[1].picked


def test_pair_schedule_auto_is_serial_on_an_emulated_cluster_and_says_why(monkeypatch):
    from types import SimpleNamespace

    cluster = SimpleNamespace(iface="fbnet0", ranks=4, nodes=(0, 1, 2, 3), ranks_per_node=1)
    plan = _plan(monkeypatch, cluster)
    assert plan.pairs.pair_schedule == "serial" and plan.iface == "fbnet0"
    assert "pair_schedule=serial (the emulated nodes share this host's CPUs)" in \
        _picked(monkeypatch, cluster)
    assert _plan(monkeypatch, cluster, pair_schedule="rounds").pairs.pair_schedule == "rounds"


def test_pair_schedule_auto_is_rounds_elsewhere_and_a_bad_one_is_refused(monkeypatch):
    plan = _plan(monkeypatch, None, ranks=4)
    assert plan.pairs.pair_schedule == "rounds"
    assert _plan(monkeypatch, None, pair_schedule="serial").pairs.pair_schedule == "serial"
    with pytest.raises(UsageError, match="--pair-schedule takes auto, rounds, serial"):
        _plan(monkeypatch, None, pair_schedule="both")


# -- the analysis' arrays (workloads/pairs/frame.py) against plain Python on the same figures --

def _figures(seed: int, units: int, *, twice: bool, top: int = 0) -> tuple[list, list, list]:
    """(a, b, figure) of every pair of ``units`` units numbered from ``top`` in a shuffled
    order, figures from few values (ties); ``twice``: some pairs have two records, one a unit
    with itself."""
    rnd = random.Random(seed)
    pairs = [(top + a, top + b) for a, b in itertools.combinations(range(units), 2)]
    if twice:
        pairs += rnd.sample(pairs, len(pairs) // 3) + [(top + 1, top + 1)]
    rnd.shuffle(pairs)
    return ([a for a, _ in pairs], [b for _, b in pairs],
            [rnd.choice([0.5, 1.0, 1.25, 2.0]) for _ in pairs])


@pytest.mark.parametrize("twice", [False, True])
@pytest.mark.parametrize("top", [0, 70_000])  # units in 16 bits (a radix sort) or not
@pytest.mark.parametrize("seed", range(3))
def test_each_pairs_figure_and_each_units_pairs_are_those_of_a_plain_walk(seed, top, twice):
    import statistics

    import numpy as np

    from fabbench.workloads.pairs.frame import Rows

    a, b, v = _figures(seed, 9, twice=twice, top=top)
    got = Rows(np.array(a), np.array(b), np.array(v)).by_pair()
    per_pair: dict[tuple[int, int], list[float]] = {}
    for key, x in zip(zip(a, b, strict=True), v, strict=True):
        per_pair.setdefault(key, []).append(x)
    assert list(zip(got.a.tolist(), got.b.tolist(), got.v.tolist(), strict=True)) == \
        [(x, y, statistics.median(f)) for (x, y), f in sorted(per_pair.items())]
    ends = got.ends()
    mine: dict[int, list[int]] = {}
    for i, (x, y) in enumerate(zip(got.a.tolist(), got.b.tolist(), strict=True)):
        for u in dict.fromkeys((x, y)):  # a unit's pair with itself once
            mine.setdefault(u, []).append(i)
    assert {u: ends.pair[s].tolist() for u, s in ends.spans().items()} == dict(sorted(mine.items()))


@pytest.mark.parametrize("seed", range(5))
def test_a_nodes_evidence_is_its_slowest_pairs_the_first_of_equals(seed):
    import numpy as np

    from fabbench.workloads.pairs.floors import EVIDENCE, _Peers

    rnd = random.Random(seed)
    others = rnd.sample(range(200), 120)
    figures = [rnd.choice([0.5, 0.75, 1.0, 1.5]) for _ in others]
    host = {o: f"h{o % 37}" for o in others}  # hosts named twice: a later figure wins
    peers = _Peers(host, np.array(others), np.array(figures))
    pairs = [(host[o], x) for o, x in zip(others, figures, strict=True)]
    slowest = sorted(sorted(pairs, key=lambda p: p[1])[:EVIDENCE])
    assert peers.listed() == (f"the slowest {EVIDENCE} of {len(pairs)}: "
                              + ", ".join(f"{h} {x:.3g}" for h, x in slowest))
    assert dict(peers) == dict(pairs)
    few = _Peers(host, np.array(others[:5]), np.array(figures[:5]))
    assert few.listed() == ", ".join(f"{h} {x:.3g}" for h, x in sorted(pairs[:5]))
