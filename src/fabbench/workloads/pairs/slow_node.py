"""Which node is slow, from the pairs records of one run (docs/methods.md, "Which node is slow,
which rank is late").

Each pair's bandwidth is its p50 at the largest size. A node is slow when every one of its pairs
is below SLOW_SHARE of the median of the pairs without it, and even the slowest of those is faster
than its fastest pair by the same margin: one bad link produces that, noise does not. Otherwise
(several bad nodes, a noisy network, two nodes) no node is named and the report says why. A
rechecked pair is judged by its better figure (pairs.record.best_pairs). Latency is shown, not
judged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabbench.workloads.pairs import frame
from fabbench.workloads.pairs.record import SLOW_SHARE, Pairs


@dataclass(frozen=True, kw_only=True)
class NodeStat:
    unit: int
    host: str
    rank: int
    pairs: int
    bw_gbyte_s: np.ndarray             # its pairs' bandwidths, in pair order
    others_median_gbyte_s: float       # the median of the pairs without it
    others_min_gbyte_s: float          # the slowest pair without it
    latency_us: float | None           # median of its pairs' latencies
    others_latency_us: float | None

    @property
    def lowest(self) -> float:
        return float(self.bw_gbyte_s.min())

    @property
    def highest(self) -> float:
        return float(self.bw_gbyte_s.max())

    @property
    def share(self) -> tuple[float, float]:
        """Its slowest and fastest pair as a share of the others' median."""
        ref = self.others_median_gbyte_s
        return self.lowest / ref, self.highest / ref

    @property
    def all_slow(self) -> bool:
        return self.share[1] < SLOW_SHARE

    @property
    def others_normal(self) -> bool:
        return self.highest < SLOW_SHARE * self.others_min_gbyte_s

    def to_json(self) -> dict[str, Any]:
        lo, hi = self.share
        return {"unit": self.unit, "host": self.host, "rank": self.rank, "pairs": self.pairs,
                "bw_gbyte_s": self.bw_gbyte_s.tolist(),
                "others_median_gbyte_s": self.others_median_gbyte_s,
                "share_min": lo, "share_max": hi, "others_min_gbyte_s": self.others_min_gbyte_s,
                "latency_us": self.latency_us, "others_latency_us": self.others_latency_us,
                "all_slow": self.all_slow, "others_normal": self.others_normal}


@dataclass(kw_only=True)
class PairsVerdict:
    unit: str                       # "node" or "rank"
    bw_bytes: int                   # the size bandwidths are judged at
    latency_bytes: int | None
    pairs: int
    median_gbyte_s: float           # of every pair
    rechecked: list[tuple[int, int]] = field(default_factory=list)  # measured again
    recovered: list[tuple[int, int]] = field(default_factory=list)  # ... and then not slow
    nodes: list[NodeStat] = field(default_factory=list)
    slow: list[NodeStat] = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"unit": self.unit, "bw_bytes": self.bw_bytes,
                "latency_bytes": self.latency_bytes, "pairs": self.pairs,
                "median_gbyte_s": self.median_gbyte_s, "slow_share": SLOW_SHARE,
                "rechecked": [list(p) for p in self.rechecked],
                "recovered": [list(p) for p in self.recovered],
                "slow": [n.unit for n in self.slow],
                "slow_hosts": [n.host for n in self.slow],
                "nodes": [n.to_json() for n in self.nodes], "text": self.text}


def _name(unit: str, n: NodeStat) -> str:
    return f"{unit} {n.unit} ({n.host}, rank {n.rank})" if unit == "node" else \
        f"rank {n.rank} ({n.host})"


def analyse(records: Sequence[Pairs]) -> PairsVerdict | None:
    """The verdict for one run's pairs records; None when there are none."""
    f = frame.frame(records)
    if f is None:
        return None
    big = f.sizes[-1]
    bw = f.big.by_pair()
    lat = f.small.by_pair() if f.small is not None else None
    without = bw.without()
    verdict = PairsVerdict(unit=f.unit, bw_bytes=big,
                           latency_bytes=f.sizes[0] if f.small is not None else None,
                           pairs=len(bw), median_gbyte_s=without.median())
    verdict.rechecked = sorted({(a, b) for a, b, n in f.rechecked if n == big})
    measured = dict(zip(zip(bw.a.tolist(), bw.b.tolist(), strict=True), bw.v.tolist(),
                        strict=True)) if verdict.rechecked else {}
    verdict.recovered = [p for p in verdict.rechecked if p in measured
                         and measured[p] >= SLOW_SHARE * verdict.median_gbyte_s]
    ends = bw.ends()
    spans, figures = ends.spans(), bw.v[ends.pair]  # each unit's pairs' figures: its span
    lat_ends = lat.ends() if lat is not None else None
    lat_spans = lat_ends.spans() if lat_ends is not None else {}
    lat_without = lat.without() if lat is not None else None
    for k, (host, rank) in f.where.items():
        span = spans.get(k)
        if span is None or span.stop - span.start == len(bw):
            continue
        mine = ends.pair[span]
        rest = without.rest(mine)
        ref = rest.median()
        if ref <= 0:
            continue
        my_lat = lat_ends.pair[lat_spans[k]] if lat_ends is not None and k in lat_spans \
            else _NONE
        rest_lat = lat_without.rest(my_lat) if lat_without is not None else None
        verdict.nodes.append(NodeStat(
            unit=k, host=host, rank=rank, pairs=len(mine), bw_gbyte_s=figures[span],
            others_median_gbyte_s=ref, others_min_gbyte_s=rest.kth(0),
            latency_us=rest_lat.removed_median() if rest_lat is not None and len(my_lat)
            else None,
            others_latency_us=rest_lat.median() if rest_lat is not None and len(rest_lat)
            else None))
    all_slow = [n for n in verdict.nodes if n.all_slow]
    verdict.slow = [n for n in all_slow if n.others_normal]
    verdict.text = _explain(verdict, all_slow, len(f.where))
    return verdict


_NONE = np.zeros(0, dtype=np.int64)


def _pair_list(pairs: list[tuple[int, int]]) -> str:
    return ", ".join(f"{a}<->{b}" for a, b in pairs)


def _explain(v: PairsVerdict, all_slow: list[NodeStat], units: int) -> list[str]:
    at = f"at {v.bw_bytes} B"
    if units < 3:
        return [f"no verdict: {units} {v.unit}s make one pair, which cannot say which end is "
                "slow (3 or more are needed)"]
    lines = []
    if v.rechecked:
        lines.append(f"{len(v.rechecked)} pairs below {100 * SLOW_SHARE:.0f}% of the median "
                     f"measured again ({_pair_list(v.rechecked)}); "
                     + (f"{_pair_list(v.recovered)} then not slow, judged by the better figure"
                        if v.recovered else "each slow again"))
    for n in v.slow:
        lo, hi = n.share
        text = (f"slow {v.unit}: {_name(v.unit, n)}: its {n.pairs} pairs move "
                f"{n.lowest:.4g}–{n.highest:.4g} GB/s {at}, "
                f"{100 * lo:.0f}–{100 * hi:.0f}% of {n.others_median_gbyte_s:.4g} GB/s, the "
                f"median of the pairs without it (the slowest of those: "
                f"{n.others_min_gbyte_s:.4g} GB/s)")
        if n.latency_us is not None and n.others_latency_us:
            text += (f"; latency at {v.latency_bytes} B {n.latency_us:.4g} µs against "
                     f"{n.others_latency_us:.4g} µs")
        lines.append(text)
    if not v.slow:
        if all_slow:
            names = ", ".join(_name(v.unit, n) for n in all_slow)
            lines.append(f"no single slow {v.unit}: the pairs of {names} are all below "
                         f"{100 * SLOW_SHARE:.0f}% of the others' median, but some pair without "
                         "it is as slow (more than one slow node, or a noisy network)")
        else:
            worst = min(v.nodes, key=lambda n: n.share[1]) if v.nodes else None
            text = (f"no slow {v.unit}: every {v.unit} has a pair at "
                    f"{100 * SLOW_SHARE:.0f}% or more of the median of the pairs without it "
                    f"({v.pairs} pairs {at}, median {v.median_gbyte_s:.4g} GB/s")
            if worst is not None:
                text += (f"; the closest, {_name(v.unit, worst)}, has its best pair at "
                         f"{100 * worst.share[1]:.0f}%")
            lines.append(text + ")")
    return lines


def table(v: PairsVerdict) -> str:
    """Per node: its pairs' bandwidths against the median of the pairs without it."""
    head = (f"#{v.unit:>5} {'host':>16} {'pairs':>5} {'min GB/s':>10} {'max GB/s':>10} "
            f"{'others GB/s':>11} {'share':>11} {'lat µs':>9} {'others µs':>9}  verdict\n")
    rows = []
    slow = {n.unit for n in v.slow}
    for n in v.nodes:
        lo, hi = n.share
        lat = "-" if n.latency_us is None else f"{n.latency_us:.4g}"
        olat = "-" if n.others_latency_us is None else f"{n.others_latency_us:.4g}"
        rows.append(f" {n.unit:>5} {n.host[-16:]:>16} {n.pairs:>5} {n.lowest:>10.4g} "
                    f"{n.highest:>10.4g} {n.others_median_gbyte_s:>11.4g} "
                    f"{f'{100 * lo:.0f}–{100 * hi:.0f}%':>11} {lat:>9} {olat:>9}  "
                    f"{'SLOW' if n.unit in slow else ''}")
    return head + "\n".join(rows) + "\n"
