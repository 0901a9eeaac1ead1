"""The replay's record as the console shows it, as the run measures and in `fabbench report`:
the step, its compute and the communication it waited on beyond that compute (all the slowest
rank's medians, microseconds)."""

from __future__ import annotations

from fabbench.workloads.replay.record import Replay

HEADER = (f"#{'mode':>12} {'steps':>5} {'step us':>12} {'compute us':>12} {'exposed us':>12} "
          f"{'share':>6} {'comm us':>12} {'ops/step':>8}  transport")


def line(rec: Replay) -> str:
    return (f" {rec.mode:>12} {rec.steps:>5} {rec.step_us.p50:>12.1f} "
            f"{rec.compute_us.p50:>12.1f} {rec.exposed_us.p50:>12.1f} "
            f"{rec.exposed_share:>6.1%} {rec.comm_us.p50:>12.1f} {rec.ops_per_step:>8.1f}  "
            f"{rec.transport or '-'}")
