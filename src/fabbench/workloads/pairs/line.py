"""A pairs record as the console shows it while the run measures."""

from __future__ import annotations

from fabbench.workloads.pairs.record import Pairs

# a recheck's round ends in "r" (1r: the pair of round 1, measured again)
HEADER = (f"#{'round':>6} {'pair':>9} {'size':>10} {'type':>9} {'p50 us':>11} {'GB/s':>8} "
          f"{'check':>6}  hosts")


def line(rec: Pairs) -> str:
    check = {True: "ok", False: "WRONG", None: "-"}[rec.correct]
    pair = f"{rec.a}<->{rec.b}"
    round_ = f"{rec.round}r" if rec.recheck else rec.round
    return (f" {round_:>6} {pair:>9} {rec.bytes:>10} {rec.dtype:>9} "
            f"{rec.time_us.p50:>11.2f} {rec.bw_gbyte_s:>8.4f} {check:>6}  "
            f"{rec.a_host} <-> {rec.b_host}")
