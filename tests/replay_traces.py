"""Hand-made fabbench-trace/1 documents for the replay's tests (unit and integration): built
with the document's dataclasses (fabbench.trace.document), as a recorder writes them."""

from __future__ import annotations

from fabbench.trace.document import RankTrace, Trace, TraceGroup, TraceOp, TraceStep

KIB = 1024


def two_groups(steps: int = 2, gap_us: float = 2000.0) -> Trace:
    """Two ranks, two process groups (the world, and both ranks in reverse order: group rank 0
    is global rank 1), each step: an asynchronous allreduce issued during "backward", an
    allgather and a reduce_scatter on group 1, a broadcast from group 1's rank 0, a send from 0
    to 1, and a last asynchronous allreduce waited at the step's end."""
    groups = (TraceGroup(id=0, ranks=(0, 1), name="world"),
              TraceGroup(id=1, ranks=(1, 0), name="tp"))

    def ops(rank: int) -> tuple[TraceOp, ...]:
        p2p = TraceOp(op="send", group=0, bytes=32 * KIB, peer=1, gap_us=gap_us / 4) \
            if rank == 0 else TraceOp(op="recv", group=0, bytes=32 * KIB, peer=0,
                                      gap_us=gap_us / 4)
        return (TraceOp(op="allreduce", group=0, bytes=256 * KIB, async_op=True, gap_us=gap_us,
                        dur_us=900.0),
                TraceOp(op="allgather", group=1, bytes=64 * KIB, gap_us=gap_us / 2),
                TraceOp(op="reduce_scatter", group=1, bytes=64 * KIB, gap_us=gap_us / 4),
                TraceOp(op="broadcast", group=1, bytes=128 * KIB, peer=0, gap_us=gap_us / 4),
                p2p,
                TraceOp(op="allreduce", group=0, bytes=1024 * KIB, async_op=True,
                        gap_us=gap_us))

    ranks = tuple(RankTrace(rank=r, steps=tuple(
        TraceStep(ops=ops(r), wall_us=4 * gap_us, comm_us=gap_us) for _ in range(steps)))
        for r in range(2))
    return Trace(world=2, groups=groups, ranks=ranks, source={"made": "tests/replay_traces.py"})
