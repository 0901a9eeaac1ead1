"""A replayed job at more nodes or on another link (issue 62): the trace's own steps (each
rank's operations in order, the compute gaps between them, which are asynchronous), each
operation's time from the α-β model, and the step simulated as the replay runs it
(docs/replay.md, "Forecast").

The step of one rank, simulated: the rank computes for an operation's gap, then issues it; the
operations share the node's link one at a time, in the order issued (an operation starts when
it is issued and the link is free); a blocking operation holds the rank until it completes, an
asynchronous one is waited for at the step's end (the replay's rule), then the rank computes
its step's tail (the optimizer's compute after the last operation). The step ends when the
rank's compute and every operation are done; its exposed communication is the step less its
compute. The step of the job is its slowest rank's, the median over the trace's steps (as the
replay's p50).

Scaling follows the training what-if (fabbench.scaling.whatif): workers are nodes. An operation
on a group of every rank of the trace (data parallel) runs over ``nodes`` workers, its whole
array S kept (an allreduce's buffer, FSDP's whole parameter array of an allgather or a
reduce_scatter: each rank's part shrinks as the group grows); an operation on a smaller group
(tensor or pipeline parallel) keeps its group and takes the time the replay measured for it
(the model's time at its own size where the replay did not run it). The compute gaps stay as
recorded."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fabbench.errors import UsageError
from fabbench.scaling import costs
from fabbench.scaling.costs import BUSBW_ALGORITHM
from fabbench.scaling.fit import MIN_SIZES, Fit, fit_points
from fabbench.scaling.whatif import Prediction
from fabbench.trace.document import Trace, TraceOp, whole_bytes
from fabbench.workloads.replay.record import Replay, ReplayOp

# the cost model's operation for a trace's: reduce moves broadcast's bytes (a tree or a chain the
# other way), a send or a receive is one message, a barrier an allreduce of nothing
_MODELLED = {"reduce": "broadcast", "send": "sendrecv", "recv": "sendrecv",
             "barrier": "allreduce"}

Key = tuple[str, int, int, str, int | None, bool]


def key_of(op: TraceOp | ReplayOp) -> Key:
    """What a replay record's operation and a trace's have in common: one distinct operation."""
    peer = op.peer
    return (op.op, op.group, op.bytes, op.dtype, peer, op.async_op)


@dataclass(frozen=True, kw_only=True)
class ReplayProfile:
    """One replay as the what-if needs it: the trace, the replay's own figures, and the times
    it measured for each distinct operation (p50, µs)."""

    trace: Trace
    path: str
    mode: str
    ranks: int
    measured_step_s: float
    measured_exposed_s: float
    measured_us: dict[Key, float]

    @classmethod
    def of(cls, rec: Replay) -> ReplayProfile:
        """The record's profile; UsageError when its trace cannot be read or is not the one
        the record replayed (its sha256)."""
        try:
            raw = Trace.raw(rec.trace)
        except UsageError as exc:
            raise UsageError(f"replay of {rec.trace}: the trace cannot be read ({exc}): the "
                             "forecast simulates its steps") from None
        if hashlib.sha256(raw).hexdigest() != rec.trace_sha256:
            raise UsageError(f"replay of {rec.trace}: the trace changed since it was replayed "
                             "(its sha256 differs from the record's)")
        trace = Trace.parse(raw, rec.trace)
        return cls(trace=trace, path=rec.trace, mode=rec.mode, ranks=rec.ranks,
                   measured_step_s=rec.step_us.p50 * 1e-6,
                   measured_exposed_s=rec.exposed_us.p50 * 1e-6,
                   measured_us={key_of(o): o.time_us.p50 for o in rec.ops})

    @property
    def compute_s(self) -> float:
        """The slowest rank's compute a step (its gaps and its tail), the median over the
        trace's steps (as the replay's p50)."""
        steps = [max(r.steps[i].compute_us for r in self.trace.ranks)
                 for i in range(len(self.trace.ranks[0].steps))]
        return statistics.median(steps) * 1e-6 if steps else 0.0


def op_time_s(op: TraceOp, trace: Trace, p: int, params: costs.Params) -> float:
    """The model's time of ``op`` when its group has ``p`` workers (S kept as the trace's)."""
    group = len(trace.groups[op.group].ranks)
    nbytes = float(whole_bytes(op.op, op.bytes, group))
    if op.op == "barrier":
        nbytes = 0.0
    return costs.best(_MODELLED.get(op.op, op.op), p, nbytes, params)[1]


def step_s(ops: Sequence[TraceOp], time_of: Callable[[TraceOp], float],
           tail_s: float = 0.0) -> tuple[float, float]:
    """(the step's time, its communication) of one rank's operations and its tail's compute
    (module docstring)."""
    clock = link = comm = 0.0
    for op in ops:
        clock += op.gap_us * 1e-6
        took = time_of(op)
        link = max(clock, link) + took
        comm += took
        if not op.async_op:
            clock = link
    return max(clock, link) + tail_s, comm


def predict(profile: ReplayProfile, nodes: int, params: costs.Params,
            scaled: bool = True) -> Prediction:
    """The step at ``nodes`` workers over links of ``params``. ``scaled`` False: every group
    at the size the trace had (the model at the measured point)."""
    trace = profile.trace
    world = trace.world

    gaps = scaled or profile.mode == "gaps"  # the measured point as the replay ran it

    def time_of(op: TraceOp) -> float:
        group = len(trace.groups[op.group].ranks)
        if group == world and scaled:
            return op_time_s(op, trace, nodes, params)
        # the replay's own time where it is the operation's: a blocking one, or any back to
        # back (an asynchronous one's, with gaps, runs to its wait at the step's end)
        measured = profile.measured_us.get(key_of(op))
        if measured is not None and scaled and (not op.async_op or profile.mode != "gaps"):
            return measured * 1e-6
        return op_time_s(op, trace, group, params)

    def ops_of(ops: Sequence[TraceOp]) -> Sequence[TraceOp]:
        return ops if gaps else [dataclasses.replace(o, gap_us=0.0) for o in ops]

    steps, comms = [], []
    for i in range(len(trace.ranks[0].steps)):
        per_rank = [step_s(ops_of(r.steps[i].ops), time_of,
                           r.steps[i].tail_us * 1e-6 if gaps else 0.0) for r in trace.ranks]
        slowest = max(per_rank)
        steps.append(slowest[0])
        comms.append(slowest[1])
    step = statistics.median(steps)
    compute = profile.compute_s if gaps else 0.0
    overhead = step - compute
    overhead = 0.0 if overhead <= 1e-9 * max(step, 1e-9) else overhead  # no float residue
    return Prediction(nodes=nodes if scaled else world,
                      bandwidth_bytes_per_s=params.bandwidth_bytes_per_s, compression=1.0,
                      comm_s=statistics.median(comms), overhead_s=overhead,
                      scaling=compute / step if step > 0 else 1.0)


def fits(replays: Sequence[Replay]) -> tuple[list[Fit], list[str]]:
    """α-β fits of the replays' own operations, one per (run, op, transport, group size) with
    two sizes or more: the operations timed whole, the blocking ones and every one back to
    back (an asynchronous one's time, with gaps, runs to its wait at the step's end)."""
    points: dict[tuple[str, str, str, int], list[ReplayOp]] = {}
    for rec in replays:
        for o in rec.ops:
            if o.op in BUSBW_ALGORITHM and o.group_size > 1 and o.bytes > 0 and \
                    (not o.async_op or rec.mode != "gaps"):
                points.setdefault((rec.run_id, o.op, rec.transport or "?", o.group_size),
                                  []).append(o)
    out, skipped = [], []
    for (run_id, op, transport, n), ops in sorted(points.items()):
        sizes = [whole_bytes(op, o.bytes, n) for o in ops]
        if len(set(sizes)) < MIN_SIZES:
            continue  # a trace's few sizes: nothing to fit, and nothing wrong
        largest = max(ops, key=lambda o: o.bytes)
        try:
            out.append(fit_points(op, transport, n, sizes, [o.time_us.p50 * 1e-6 for o in ops],
                                  largest.busbw_gbyte_s or math.nan, run_id))
        except UsageError as exc:
            skipped.append(f"replay not fitted: {exc}")
    return out, skipped
