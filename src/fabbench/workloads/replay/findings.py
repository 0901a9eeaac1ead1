"""What a replay's record says of the fabric, for `fabbench report` (the workload's
``findings``): what the communication costs the job's step (its exposed share), the operations
that take the most of it, and, where the ranks ran on an emulated link of known rate, what the
same operations would take at that link's line rate (each one's time scaled by its bus
bandwidth's share of the link: t x busbw / link); without one (a real fabric: its line rate is
the run record's, which a study's report sets busbw against), nothing is said of a link."""

from __future__ import annotations

from fabbench.units import format_size
from fabbench.workload_spec import Findings
from fabbench.workloads.replay.record import Replay, ReplayOp

#: the operations the table shows, the largest first
SHOWN = 8


def per_step_us(op: ReplayOp) -> float:
    """The operation's time in one step: its median times how often a step issues it."""
    return op.time_us.p50 * op.per_step


def at_link_us(op: ReplayOp, link_gbit_s: float) -> float | None:
    """Its time per step at the link's line rate (busbw at 100 %); None without a busbw."""
    if op.busbw_gbyte_s is None:
        return None
    return per_step_us(op) * op.busbw_gbyte_s * 8 / link_gbit_s


def findings(rec: Replay) -> Findings:
    ops = sorted(rec.ops, key=per_step_us, reverse=True)
    total = sum(per_step_us(o) for o in ops)
    link = rec.link_gbit_s
    head = (f"#{'op':>15} {'group':>7} {'bytes':>10} {'dtype':>9} {'async':>5} {'/step':>6} "
            f"{'p50 us':>11} {'of comm':>7} {'busbw GB/s':>10}"
            + (f" {'% link':>6}" if link else ""))
    rows = [head]
    for o in ops[:SHOWN]:
        bw = "-" if o.busbw_gbyte_s is None else f"{o.busbw_gbyte_s:.3f}"
        pct = "" if not link else (" " + ("-" if o.busbw_gbyte_s is None else
                                          f"{100 * o.busbw_gbyte_s * 8 / link:5.1f}%"))
        rows.append(f" {o.op:>15} {f'{o.group}/{o.group_size}':>7} {format_size(o.bytes):>10} "
                    f"{o.dtype:>9} {'yes' if o.async_op else 'no':>5} {o.per_step:>6.2g} "
                    f"{o.time_us.p50:>11.1f} {per_step_us(o) / total if total else 0:>7.1%} "
                    f"{bw:>10}{pct}")
    if len(ops) > SHOWN:
        rows.append(f"# ... and {len(ops) - SHOWN} smaller operations")
    text = [_step(rec)]
    if ops:
        big = ops[0]
        text.append(f"the largest: {big.op} of {format_size(big.bytes)} on group {big.group} "
                    f"({big.group_size} ranks), {per_step_us(big) / 1e3:.2f} ms a step "
                    f"({per_step_us(big) / total if total else 0:.0%} of the communication)")
    if link:
        ideal = [t for o in ops if (t := at_link_us(o, link)) is not None]
        if ideal:
            text.append(f"at the emulated link's line rate ({link:g} Gbit/s) these operations "
                        f"would take {sum(ideal) / 1e3:.2f} ms a step; they took "
                        f"{total / 1e3:.2f} ms: the line rate accounts for "
                        f"{sum(ideal) / total if total else 0:.0%} of their time")
    return Findings(heading=f"replay of {rec.trace} ({rec.mode}, {rec.ranks} ranks): what the "
                            "communication costs the step",
                    table="\n".join(rows) + "\n", text=tuple(text),
                    json={"step_us": rec.step_us.p50, "exposed_us": rec.exposed_us.p50,
                          "exposed_share": rec.exposed_share, "comm_us": rec.comm_us.p50,
                          "largest": [{"op": o.op, "group": o.group, "bytes": o.bytes,
                                       "per_step_us": per_step_us(o)} for o in ops[:SHOWN]],
                          "link_gbit_s": link})


def _step(rec: Replay) -> str:
    recorded = "" if rec.recorded_step_us is None else \
        f"; the job's own step took {rec.recorded_step_us / 1e3:.2f} ms"
    where = "" if rec.link_gbit_s is None else f"on the {rec.link_gbit_s:g} Gbit/s link, "
    return where + _said(rec, recorded)


def _said(rec: Replay, recorded: str) -> str:
    if rec.mode == "back-to-back":
        return (f"the step's communication alone, back to back, took "
                f"{rec.step_us.p50 / 1e3:.2f} ms (median of {rec.steps} steps){recorded}")
    return (f"the step took {rec.step_us.p50 / 1e3:.2f} ms, of which "
            f"{rec.exposed_us.p50 / 1e3:.2f} ms ({rec.exposed_share:.0%}) waited on "
            f"communication beyond its {rec.compute_us.p50 / 1e3:.2f} ms of compute "
            f"(median of {rec.steps} steps){recorded}")
