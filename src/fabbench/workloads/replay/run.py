"""The replay as the ranks run it: the trace's process groups rebuilt, each distinct
operation's buffers allocated once, then warm-up and timed steps, each rank issuing its own
recorded sequence.

The rules (docs/replay.md, "Replaying a trace"):
- groups: ``groups[0]`` is the world's group; every other group is made with
  ``torch.distributed.new_group`` on every rank, in the trace's order (torch requires every rank
  to make every group, in one order). A root (broadcast, reduce) is the group's rank, mapped
  through the trace's group order to the global rank torch takes; a send's or receive's peer is
  a global rank.
- buffers: one set per distinct (op, bytes, dtype, group), allocated before the first step in
  page-aligned host memory as the collectives' (comm.torchdist.torch_array); allgather's output
  and reduce_scatter's input are the group's size times the trace's bytes; alltoall's count is
  rounded down to a multiple of the group's size (the equal split torch takes).
- a step starts after a barrier of every rank (the timing engine's rule before each sample);
  its clock (time.perf_counter) stops when every operation it issued has completed (on CUDA,
  after torch.cuda.synchronize(), the collectives' timing method).
- gaps mode: before each operation, the compute time the job spent since its previous one, as a
  sleep (the host's cores stay free for the library's threads, which progress the asynchronous
  operations meanwhile, as a GPU job's host does; a busy loop would take the cores the
  transfers need here, and is not how a GPU's compute occupies its host); a sleep's overshoot
  is taken from the next gap, so that a step's compute adds up to the recorded. An operation
  the job issued asynchronously is issued so and waited at the step's end, in issue order (the
  trace does not say where the job waited: DDP waits its buckets there, before the optimizer),
  the others completed before the next gap; an asynchronous one's time ends where it is found
  completed, polled after each blocking operation, else at its wait. After the step's waits,
  its recorded tail (the compute after the job's last operation: its optimizer step), slept the
  same way. back-to-back mode: no gaps and no tail, every operation completed before the next.
- the watchdog is armed before each operation (and its gap) and each wait: plan.op_timeout of
  its bytes, plus in gaps mode the longest step's compute of any rank (a peer may still be in
  it), so that a dead peer ends the run in seconds past that.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fabbench.comm.base import Communicator
from fabbench.comm.torchdist import torch_array
from fabbench.emulate.cluster import current as emulated_cluster
from fabbench.plan import Plan
from fabbench.results.records import Times
from fabbench.timing.stats import summarize
from fabbench.trace.document import Trace, TraceOp, covered, whole_bytes
from fabbench.workloads.ops import OPS
from fabbench.workloads.replay.record import Replay, ReplayOp
from fabbench.workloads.replay.rules import read
from fabbench.workloads.replay.section import ReplayConfig

#: (op, group, bytes, dtype, root or peer, async): one distinct operation of the trace
OpKey = tuple[str, int, int, str, int | None, bool]


def key_of(op: TraceOp) -> OpKey:
    return (op.op, op.group, op.bytes, op.dtype, op.peer, op.async_op)


@dataclass(frozen=True)
class Issue:
    """One operation of a step as the rank issues it: its key's index, the gap before it (s),
    whether it is waited at the step's end, its deadline and the call (a torch Work when
    asynchronous)."""

    key: int
    gap_s: float
    deferred: bool
    timeout_s: float
    what: str
    call: Callable[[], Any]


class Replayer:
    """This rank's replay of ``trace``: its groups, buffers and steps, ready to run."""

    def __init__(self, comm: Communicator, plan: Plan, trace: Trace) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.comm, self.plan = torch, dist, comm, plan
        self.options: ReplayConfig = plan.replay
        self.trace = trace
        self.gaps = self.options.replay_mode == "gaps"
        # every rank makes every group, in the trace's order (torch's rule for new_group)
        self.groups = [dist.group.WORLD] + [dist.new_group(ranks=list(g.ranks))
                                            for g in trace.groups[1:]]
        # a rank may wait on a peer that is still in its recorded compute: every deadline
        # allows for the longest step's compute of any rank
        self.slack_s = max((s.compute_us * 1e-6 for r in trace.ranks for s in r.steps),
                           default=0.0) if self.gaps else 0.0
        self.keys: list[OpKey] = []
        self._buffers: dict[tuple[str, int, str, int], tuple[Any, Any]] = {}
        mine = trace.ranks[comm.rank].steps
        self.steps = [[self._issue(op, i) for i, op in enumerate(s.ops)] for s in mine]
        self.tails = [s.tail_us * 1e-6 if self.gaps else 0.0 for s in mine]

    def _issue(self, op: TraceOp, position: int) -> Issue:
        key = key_of(op)
        if key not in self.keys:
            self.keys.append(key)
        deferred = self.gaps and op.async_op
        return Issue(key=self.keys.index(key), gap_s=op.gap_us * 1e-6 if self.gaps else 0.0,
                     deferred=deferred, timeout_s=self.plan.op_timeout(op.bytes) + self.slack_s,
                     what=f"replay: {op.op} of {op.bytes} bytes on group {op.group} "
                          f"(operation {position + 1} of the step)",
                     call=self._call(op, deferred))

    def _buffers_of(self, op: TraceOp) -> tuple[Any, Any]:
        """(send, recv) of a distinct (op, bytes, dtype, group), made once: one buffer for the
        operations that work in place (allreduce, broadcast, reduce) or one way (send, recv)."""
        at = (op.op, op.bytes, op.dtype, op.group)
        if at not in self._buffers:
            n = len(self.trace.groups[op.group].ranks)
            count = op.bytes // np.dtype(_numpy_name(op.dtype)).itemsize
            send, recv = count, count
            if op.op == "allgather":
                recv = count * n
            elif op.op == "reduce_scatter":
                send = count * n
            elif op.op == "alltoall":
                send = recv = count - count % n
            out = self._array(recv, op.dtype)
            two = op.op in ("allgather", "reduce_scatter", "alltoall")
            self._buffers[at] = (self._array(send, op.dtype) if two else out, out)
        return self._buffers[at]

    def _array(self, count: int, dtype: str) -> Any:
        if count == 0:  # an empty buffer (page-aligned memory takes none)
            return self.torch.empty(0, dtype=getattr(self.torch, dtype), device=self.comm.device)
        return torch_array(self.torch, np.ones(count), dtype, self.comm.device)

    def _call(self, op: TraceOp, deferred: bool) -> Callable[[], Any]:
        """The operation on its group and buffers; asynchronous (returning a Work) when it is
        waited at the step's end."""
        dist, pg, a = self.dist, self.groups[op.group], deferred
        if op.op == "barrier":
            return lambda: dist.barrier(group=pg, async_op=a)
        send, recv = self._buffers_of(op)
        ranks = self.trace.groups[op.group].ranks
        if op.op == "allreduce":
            return lambda: dist.all_reduce(recv, group=pg, async_op=a)
        if op.op == "allgather":
            return lambda: dist.all_gather_into_tensor(recv, send, group=pg, async_op=a)
        if op.op == "reduce_scatter":
            return lambda: dist.reduce_scatter_tensor(recv, send, group=pg, async_op=a)
        if op.op == "alltoall":
            return lambda: dist.all_to_all_single(recv, send, group=pg, async_op=a)
        if op.op == "broadcast":
            root = ranks[op.peer or 0]
            return lambda: dist.broadcast(recv, src=root, group=pg, async_op=a)
        if op.op == "reduce":
            root = ranks[op.peer or 0]
            return lambda: dist.reduce(recv, dst=root, group=pg, async_op=a)
        peer = op.peer or 0
        if op.op == "send":
            return (lambda: dist.isend(send, dst=peer, group=pg)) if a else \
                (lambda: dist.send(send, dst=peer, group=pg))
        if op.op == "recv":
            return (lambda: dist.irecv(recv, src=peer, group=pg)) if a else \
                (lambda: dist.recv(recv, src=peer, group=pg))
        raise KeyError(op.op)

    def _completed(self, pending: list[tuple[Issue, float, Any]], times: list[tuple[int, float]],
                   spans: list[tuple[float, float]]) -> list[tuple[Issue, float, Any]]:
        """The asynchronous operations still running; each one found completed (polled after
        every blocking operation: its time is issue to there, not to the step's end) timed."""
        if not pending or self.comm.device != "cpu":  # a GPU's work completes on its stream
            return pending
        now = time.perf_counter()
        done = [p for p in pending if p[2].is_completed()]
        times.extend((issue.key, now - start) for issue, start, _ in done)
        spans.extend((start, now - start) for _, start, _ in done)
        return [p for p in pending if p not in done]

    def step(self, index: int, arm: Callable[[float, str], None]) -> tuple[
            float, float, float, list[tuple[int, float]]]:
        """One step: (its seconds, its compute's, the time at least one of its operations was
        in flight (the trace's ``comm_us`` rule), each operation's (key, seconds))."""
        issues = self.steps[index % len(self.steps)]
        clock, sync = time.perf_counter, self.comm.synchronize
        arm(self.plan.timeout_s + self.slack_s, f"replay step {index + 1} (barrier)")
        self.comm.barrier()
        t0 = clock()
        last, wanted, compute = t0, 0.0, 0.0
        times: list[tuple[int, float]] = []
        spans: list[tuple[float, float]] = []  # each operation's (start, seconds)
        pending: list[tuple[Issue, float, Any]] = []
        for issue in issues:
            arm(issue.timeout_s, issue.what)  # its gap within the deadline (slack_s)
            if issue.gap_s > 0:  # the compute so far made up to the recorded
                wanted += issue.gap_s
                compute = _slept(wanted, compute, last)
            start = clock()
            work = issue.call()
            if issue.deferred:
                pending.append((issue, start, work))
                last = clock()
                continue
            sync()
            last = clock()
            times.append((issue.key, last - start))
            spans.append((start, last - start))
            pending = self._completed(pending, times, spans)
        for issue, start, work in pending:
            arm(issue.timeout_s, f"{issue.what}, waited at the step's end")
            work.wait()
            sync()
            times.append((issue.key, clock() - start))
            spans.append((start, times[-1][1]))
        tail = self.tails[index % len(self.tails)]
        if tail > 0:  # the compute after the last operation (the optimizer's)
            wanted += tail
            compute = _slept(wanted, compute, clock())
        end = clock()
        return end - t0, compute, in_flight(spans), times


def _slept(wanted: float, compute: float, since: float) -> float:
    """The step's compute once made up to ``wanted`` seconds: a sleep, timed from ``since`` (the
    end of the rank's previous work), its overshoot counted so that the next gap sleeps less."""
    if wanted > compute:
        time.sleep(wanted - compute)
    return compute + time.perf_counter() - since


def in_flight(spans: Sequence[tuple[float, float]]) -> float:
    """The time at least one of the (start, seconds) spans was running (the trace's
    ``comm_us`` rule: operations in flight together count once)."""
    return covered([(start, start + took) for start, took in spans])


def run_replay(comm: Communicator, plan: Plan, transport: str,
               arm: Callable[[float, str], None]) -> Replay:
    options: ReplayConfig = plan.replay
    trace, digest = read(options.trace)
    arm(plan.timeout_s * 2, "replay: making the trace's process groups")
    replayer = Replayer(comm, plan, trace)
    mine: list[tuple[float, float, float]] = []
    samples: dict[int, list[float]] = {}
    for i in range(options.replay_warmup + options.replay_steps):
        step_s, compute_s, comm_s, times = replayer.step(i, arm)
        if i < options.replay_warmup:
            continue
        mine.append((step_s, compute_s, comm_s))
        for key, t in times:
            samples.setdefault(key, []).append(t)
    arm(plan.timeout_s, "replay: gathering each rank's times")
    every = comm.gather_objects((mine, {replayer.keys[k]: v for k, v in samples.items()}))
    return replay_record(plan, trace, digest, transport, every)


def replay_record(plan: Plan, trace: Trace, digest: str, transport: str | None,
                  every: Sequence[tuple[list[tuple[float, float, float]],
                                        dict[OpKey, list[float]]]]) -> Replay:
    """The record of every rank's times (seconds): per step, the slowest rank's step with its
    compute and communication; per operation, the slowest issuing rank's time per
    occurrence."""
    options: ReplayConfig = plan.replay
    slowest = [max(col, key=lambda s: s[0]) for col in zip(*(e[0] for e in every), strict=True)]
    step_us = [s[0] * 1e6 for s in slowest]
    compute_us = [s[1] * 1e6 for s in slowest]
    comm_us = [s[2] * 1e6 for s in slowest]
    exposed_us = [max(0.0, s - c) for s, c in zip(step_us, compute_us, strict=True)]
    shares = [e / s if s > 0 else 0.0 for e, s in zip(exposed_us, step_us, strict=True)]
    keys = list(dict.fromkeys(k for e in every for k in e[1]))
    ops = [_op_entry(trace, key, [e[1][key] for e in every if key in e[1]], options.replay_steps)
           for key in keys]
    per_rank = [[op for s in r.steps for op in s.ops] for r in trace.ranks]
    cluster = emulated_cluster()
    return Replay(
        run_id=plan.run_id, trace=options.trace, trace_sha256=digest, trace_world=trace.world,
        trace_steps=len(trace.ranks[0].steps), groups=len(trace.groups),
        mode=options.replay_mode, ranks=plan.ranks, steps=options.replay_steps,
        warmup=options.replay_warmup, transport=transport,
        ops_per_step=statistics.fmean(len(p) for p in per_rank) / len(trace.ranks[0].steps),
        bytes_per_step=max(sum(o.bytes for o in p) for p in per_rank)
        // len(trace.ranks[0].steps),
        step_us=_times(step_us), compute_us=_times(compute_us), comm_us=_times(comm_us),
        exposed_us=_times(exposed_us), exposed_share=statistics.median(shares),
        step_samples_us=[round(t, 3) for t in step_us],
        exposed_samples_us=[round(t, 3) for t in exposed_us],
        recorded_step_us=_recorded(trace, "wall_us"), recorded_comm_us=_recorded(trace, "comm_us"),
        link_gbit_s=None if cluster is None else
        min(n.link.rate_bit_s for n in cluster.nodes) / 1e9,
        ops=ops)


def _times(samples_us: Sequence[float]) -> Times:
    return Times.of(summarize(samples_us))


def _op_entry(trace: Trace, key: OpKey, per_rank: Sequence[Sequence[float]],
              steps: int) -> ReplayOp:
    op, group, nbytes, dtype, peer, async_op = key
    slowest = [max(col) * 1e6 for col in zip(*per_rank, strict=False)]
    times = summarize(slowest)
    n = len(trace.groups[group].ranks)
    recorded = [o.dur_us for r in trace.ranks for s in r.steps for o in s.ops
                if key_of(o) == key and o.dur_us is not None]
    return ReplayOp(op=op, group=group, group_size=n, bytes=nbytes, dtype=dtype, peer=peer,
                    async_op=async_op, ranks=len(per_rank), per_step=len(slowest) / steps,
                    calls=len(slowest), time_us=Times.of(times),
                    busbw_gbyte_s=busbw(op, nbytes, n, times["p50"]),
                    recorded_us=statistics.median(recorded) if recorded else None)


def busbw(op: str, nbytes: int, n: int, t_us: float) -> float | None:
    """nccl-tests' bus bandwidth (GB/s) of one operation of the trace's ``nbytes`` (the rank's
    own buffer: allgather's and reduce_scatter's whole array is n times it) over a group of n
    ranks in ``t_us``; send and recv move their bytes (factor 1), reduce as broadcast; None for
    a barrier, a group of one rank, or no time."""
    if op == "barrier" or n < 2 or t_us <= 0:
        return None
    if op in ("send", "recv"):
        return nbytes / (t_us * 1e-6) / 1e9
    spec = OPS["broadcast" if op == "reduce" else op]
    size = whole_bytes(op, nbytes, n)
    return size / (t_us * 1e-6) / 1e9 * spec.busbw_factor(n)


def _recorded(trace: Trace, field: str) -> float | None:
    """The job's own median of a step's ``field`` (per step, the slowest rank's), if every
    rank recorded it."""
    values: list[list[float | None]] = [[getattr(s, field) for s in r.steps]
                                        for r in trace.ranks]
    if any(v is None for vs in values for v in vs):
        return None
    return float(statistics.median(max(v or 0.0 for v in col)
                                   for col in zip(*values, strict=True)))


def _numpy_name(dtype: str) -> str:
    return "float16" if dtype == "bfloat16" else dtype
