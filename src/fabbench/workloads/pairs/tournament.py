"""The pairs workload's ranks: which node is slow (docs/methods.md, "Which node is slow, which
rank is late").

A collective runs at its slowest link's pace, so a bad link hides in it. Here nodes meet in
disjoint pairs, round after round (a round-robin tournament, the circle method), each pair timed
by the same engine with a bidirectional sendrecv. The schedule (the plan's pairs section):
`rounds`, a round's pairs at once, as on real nodes; `serial`, one pair at a time while the
others wait, for nodes that share CPUs (emulated ones). One rank stands for each node (each rank
for itself on one host). A pair below SLOW_SHARE of the median at the largest size is measured
once more after the rounds (a ``recheck`` record); every rank picks the same pairs from the
gathered figures."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from fabbench.comm.base import Communicator
from fabbench.config import section
from fabbench.plan import Plan
from fabbench.results import records
from fabbench.timing.engine import measure
from fabbench.timing.stats import summarize
from fabbench.workloads.faults import Fault
from fabbench.workloads.ops import DTYPE_SIZES, fill
from fabbench.workloads.pairs.record import SLOW_SHARE, Pairs
from fabbench.workloads.pairs.section import PairsConfig

OP = "sendrecv"


def schedule(plan: Plan) -> str:
    """The plan's schedule, decided (PairsWorkload.decide): rounds or serial."""
    return section(plan, "pairs", PairsConfig).pair_schedule


def round_robin(n: int) -> list[list[tuple[int, int]]]:
    """The circle method: rounds of disjoint pairs (a < b) in which each of ``n`` units meets
    every other exactly once. Unit 0 stays put, the others turn one place per round; with n
    odd a bye joins and its partner rests."""
    if n < 2:
        return []
    units: list[int | None] = [*range(n), *([None] if n % 2 else [])]
    m = len(units)
    rounds = []
    for _ in range(m - 1):
        pairs = [(units[i], units[m - 1 - i]) for i in range(m // 2)]
        rounds.append(sorted((min(a, b), max(a, b)) for a, b in pairs
                             if a is not None and b is not None))
        units = [units[0], units[-1], *units[1:-1]]
    return rounds


def endpoints(hosts: list[str]) -> tuple[list[int], str]:
    """The rank that stands for each unit, and the unit: ``node`` (the first rank of each host
    name, in rank order) or ``rank`` (every rank, when all share one host)."""
    if len(set(hosts)) == 1:
        return list(range(len(hosts))), "rank"
    first: dict[str, int] = {}
    for rank, host in enumerate(hosts):
        first.setdefault(host, rank)
    return list(first.values()), "node"


def _measure_pair(comm: Communicator, plan: Plan, peer: int, nbytes: int, dtype: str,
                  arm: Callable[[float, str], None], what: str, pause_s: float
                  ) -> dict[str, Any]:
    count = nbytes // DTYPE_SIZES[dtype]
    send = comm.array(fill(comm.rank, 0, count), dtype)
    recv = comm.array(np.zeros(count), dtype)
    m = measure(comm.exchange(peer, send, recv), comm.pair(peer), plan.collectives.policy, arm,
                plan.op_timeout(nbytes), what, pause_s, nbytes=nbytes, bandwidth=True)
    correct = None
    if plan.collectives.check:  # fresh buffers, one exchange, the peer's values expected
        recv = comm.array(np.zeros(count), dtype)
        arm(plan.op_timeout(nbytes), f"{what} (check)")
        comm.exchange(peer, send, recv)()
        comm.synchronize()
        correct = bool(np.array_equal(comm.host(recv), fill(peer, 0, count)))
    return {"m": m, "correct": correct}


def run_pairs(comm: Communicator, plan: Plan, transport: str, hosts: list[str],
              arm: Callable[[float, str], None], fault: Fault | None = None
              ) -> Iterator[Pairs]:
    """Yield one `pairs` record per pair, size and dtype, round by round, then one `recheck`
    record per pair that was slow at the largest size (see the module's doc).
    Every rank runs this; ranks that stand for no unit, or rest this round, only keep step."""
    ranks, unit = endpoints(hosts)
    me = ranks.index(comm.rank) if comm.rank in ranks else None
    rounds = round_robin(len(ranks))
    where = {pair: number for number, pairs in enumerate(rounds) for pair in pairs}
    first: dict[tuple[str, int], dict[tuple[int, int], float]] = {}  # (dtype, bytes): pair: GB/s
    for number, pairs in enumerate(rounds):
        for dtype in plan.collectives.dtypes:
            for nbytes in plan.collectives.sizes:
                size = _size(nbytes, dtype)
                if size == 0:
                    continue
                for rec in _pairs_once(comm, plan, pairs, ranks, me, unit, size, dtype, arm,
                                       fault, number, len(rounds), hosts, transport,
                                       serial=schedule(plan) == "serial"):
                    first.setdefault((dtype, size), {})[(rec.a, rec.b)] = rec.bw_gbyte_s
                    yield rec
    for dtype in plan.collectives.dtypes:
        size = max((_size(n, dtype) for n in plan.collectives.sizes), default=0)
        for a, b in slow_pairs(first.get((dtype, size), {})):
            yield from _pairs_once(comm, plan, [(a, b)], ranks, me, unit, size, dtype, arm,
                                   fault, where[(a, b)], len(rounds), hosts, transport,
                                   serial=True, recheck=True)


def _size(nbytes: int, dtype: str) -> int:
    return nbytes // DTYPE_SIZES[dtype] * DTYPE_SIZES[dtype]


def slow_pairs(bw: Mapping[tuple[int, int], float]) -> list[tuple[int, int]]:
    """The pairs to measure again: below SLOW_SHARE of the median of all pairs (with 3 or more
    pairs; fewer cannot say which is the odd one)."""
    if len(bw) < 3:
        return []
    median = float(np.median(list(bw.values())))
    return sorted(pair for pair, v in bw.items() if v < SLOW_SHARE * median)


def _pairs_once(comm: Communicator, plan: Plan, pairs: list[tuple[int, int]], ranks: list[int],
                me: int | None, unit: str, size: int, dtype: str,
                arm: Callable[[float, str], None], fault: Fault | None, number: int,
                rounds: int, hosts: list[str], transport: str, *, serial: bool,
                recheck: bool = False) -> Iterator[Pairs]:
    """The given disjoint pairs exchange ``size`` bytes (at once, or one after another when
    ``serial``), and every rank gathers every pair's figures: one record per pair."""
    mine: dict[str, Any] | None = None
    stage = f"pairs recheck (round {number + 1})" if recheck else \
        f"pairs round {number + 1} of {rounds}"
    for a, b in pairs:
        what = f"{stage}: {OP} {unit} {a} <-> {unit} {b} of {size} bytes ({dtype})"
        if me in (a, b):
            peer = ranks[b if me == a else a]
            pause = fault.pause_s(comm.rank, "pairs", size) if fault else 0.0
            got = _measure_pair(comm, plan, peer, size, dtype, arm, what, pause)
            if me == a:  # one side reports the pair
                mine = {"pair": (a, b), **got}
        if serial:  # the next pair starts when this one ends
            arm(plan.op_timeout(size) + plan.timeout_s, f"{what}: waiting for it")
            comm.quiet_barrier()
    arm(plan.op_timeout(size) + plan.timeout_s, f"{stage}: waiting for every pair ({size} bytes)")
    for found in comm.gather_objects(_portable(mine)):
        if found is not None:
            yield _record(found, number, rounds, ranks, hosts, unit, size, dtype, transport,
                          plan, recheck)


def _portable(mine: dict[str, Any] | None) -> dict[str, Any] | None:
    """What crosses to rank 0: plain numbers."""
    if mine is None:
        return None
    m = mine["m"]
    return {"pair": mine["pair"], "samples_us": list(m.samples_us), "batch": m.batch,
            "warmup": m.warmup, "correct": mine["correct"]}


def _record(found: dict[str, Any], number: int, rounds: int, ranks: list[int], hosts: list[str],
            unit: str, size: int, dtype: str, transport: str, plan: Plan,
            recheck: bool) -> Pairs:
    a, b = found["pair"]
    samples = found["samples_us"]
    times = summarize(samples)
    return Pairs(
        run_id=plan.run_id, op=OP, schedule="serial" if recheck else schedule(plan),
        round=number + 1, rounds=rounds,
        unit=unit, units=len(ranks), a=a, b=b, a_rank=ranks[a], b_rank=ranks[b],
        a_host=hosts[ranks[a]], b_host=hosts[ranks[b]], bytes=size, dtype=dtype,
        transport=transport, iters=found["batch"] * len(samples),
        samples=len(samples), batch=found["batch"], warmup=found["warmup"],
        timing=plan.collectives.policy.protocol,
        time_us=records.Times.of(times), samples_us=[round(s, 3) for s in samples],
        bw_gbyte_s=size / (times["p50"] * 1e-6) / 1e9, correct=found["correct"],
        recheck=recheck)

