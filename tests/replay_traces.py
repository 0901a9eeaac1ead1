"""Hand-made fabbench-trace/1 documents for the replay's tests (unit and integration): built
with the document's dataclasses (fabbench.trace.document), as a recorder writes them."""

from __future__ import annotations

from fabbench.trace.document import RankTrace, Trace, TraceGroup, TraceOp, TraceStep

KIB = 1024


def two_groups(steps: int = 2, gap_us: float = 2000.0) -> Trace:
    """Two ranks, two process groups (the world, and both ranks in reverse order: group rank 0
    is global rank 1), each step: an asynchronous allreduce issued during "backward", an
    allgather and a reduce_scatter on group 1, a broadcast from group 1's rank 0, a send from 0
    to 1, a last asynchronous allreduce waited at the step's end, then half a gap of compute
    (the optimizer's: the step's tail)."""
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
        TraceStep(ops=ops(r), wall_us=4 * gap_us, comm_us=gap_us, tail_us=gap_us / 2)
        for _ in range(steps)))
        for r in range(2))
    return Trace(world=2, groups=groups, ranks=ranks, source={"made": "tests/replay_traces.py"})


def tensor_and_data_parallel(steps: int = 1, gap_us: float = 500.0) -> Trace:
    """Four ranks as a job of 2-way tensor and 2-way data parallelism: the world, two tensor
    groups (0, 1 and 2, 3) and two data groups (0, 2 and 1, 3); each step an allgather, a
    reduce_scatter and an alltoall in the rank's tensor group, an asynchronous allreduce and a
    reduce to the group's rank 1 in its data group, a broadcast and a barrier of the world."""
    groups = (TraceGroup(id=0, ranks=(0, 1, 2, 3)), TraceGroup(id=1, ranks=(0, 1), name="tp0"),
              TraceGroup(id=2, ranks=(2, 3), name="tp1"),
              TraceGroup(id=3, ranks=(0, 2), name="dp0"),
              TraceGroup(id=4, ranks=(1, 3), name="dp1"))

    def ops(rank: int) -> tuple[TraceOp, ...]:
        tp, dp = (1 if rank < 2 else 2), (3 if rank % 2 == 0 else 4)
        return (TraceOp(op="allgather", group=tp, bytes=64 * KIB, gap_us=gap_us),
                TraceOp(op="reduce_scatter", group=tp, bytes=64 * KIB, gap_us=gap_us),
                TraceOp(op="allreduce", group=dp, bytes=256 * KIB, async_op=True,
                        gap_us=2 * gap_us),
                TraceOp(op="broadcast", group=0, bytes=4 * KIB, peer=0),
                TraceOp(op="alltoall", group=tp, bytes=8 * KIB),
                TraceOp(op="reduce", group=dp, bytes=8 * KIB, peer=1),
                TraceOp(op="barrier", group=0, bytes=0))

    return Trace(world=4, groups=groups, ranks=tuple(
        RankTrace(rank=r, steps=tuple(TraceStep(ops=ops(r)) for _ in range(steps)))
        for r in range(4)), source={"made": "tests/replay_traces.py"})
