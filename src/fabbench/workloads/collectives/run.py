"""The collectives sweep as a rank runs it: for each op, dtype and size, time it and (with
--check) verify it."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any

import numpy as np

from fabbench.comm.base import GRAPH_OPS, Communicator
from fabbench.plan import Plan
from fabbench.results import records
from fabbench.timing.engine import measure
from fabbench.timing.stats import STABLE_RULE, is_stable, median_ci95_rel, summarize
from fabbench.workloads.collectives.record import Collective
from fabbench.workloads.collectives.resume import point_key
from fabbench.workloads.collectives.section import Sweep
from fabbench.workloads.faults import Fault
from fabbench.workloads.ops import OPS, expected, send_data


def _buffers(comm: Communicator, op: str, counts: tuple[int, int], dtype: str) -> tuple[Any, Any]:
    send = comm.array(send_data(op, comm.rank, comm.size, counts), dtype)
    recv_init = send_data(op, comm.rank, comm.size, counts) if op == "broadcast" else \
        np.zeros(counts[1])
    return send, comm.array(recv_init, dtype)


def check_once(comm: Communicator, op: str, counts: tuple[int, int], dtype: str,
               corrupt: bool = False) -> tuple[bool, int, list[int]]:
    """Fresh buffers, one operation, compare with the expected values on every rank.
    Returns (all correct, wrong elements over all ranks, ranks with wrong elements)."""
    send, recv = _buffers(comm, op, counts, dtype)
    if op == "allreduce" and comm.in_place_reduce:
        recv = comm.array(send_data(op, comm.rank, comm.size, counts), dtype)
    comm.bind(op, send, recv)()
    comm.synchronize()
    got = comm.host(recv)
    if corrupt:  # the test hook of FABBENCH_FAULT=corrupt: one flipped element
        got = got.copy()
        got[len(got) // 2] += 1.0
    wrong = int(np.count_nonzero(got != expected(op, comm.rank, comm.size, counts)))
    per_rank = comm.gather_objects(wrong)
    bad = [r for r, w in enumerate(per_rank) if w]
    return not bad, sum(per_rank), bad


def slots(plan: Plan, nbytes: int) -> int:
    """How many copies of a point's buffers the operations of a CUDA graph cycle through: as
    many as fit in the sweep's largest message (nccl-tests shifts its buffers through its
    largest size likewise), at most a graph's or a batch's operations (each takes the next)."""
    options: Sweep = plan.collectives
    return max(1, min(options.policy.max_batch, GRAPH_OPS, max(options.sizes) // nbytes))


def sweep(comm: Communicator, plan: Plan, transport: str, arm: Callable[[float, str], None],
          fault: Fault | None = None, skip: Collection[str] = ()) -> Iterator[Collective]:
    """Yield one collective record per measured point, skipping the points in ``skip``
    (point_key; already measured by the run being resumed)."""
    n = comm.size
    options: Sweep = plan.collectives
    for op_name in options.ops:
        op = OPS[op_name]
        for dtype in options.dtypes:
            for nbytes in options.sizes:
                counts = op.counts(nbytes, dtype, n)
                if counts is None:
                    continue
                size = op.bytes_moved(counts, dtype)
                if point_key(op_name, dtype, size) in skip:
                    continue
                if fault is not None:
                    fault.at_point(comm.rank, op_name, size)
                send, recv = _buffers(comm, op_name, counts, dtype)
                what = f"{op_name} of {size} bytes ({dtype})"
                pause = fault.pause_s(comm.rank, op_name, size) if fault is not None else 0.0
                call = comm.graphed(op_name, send, recv, slots(plan, size)) \
                    if options.policy.cuda_graph else comm.bind(op_name, send, recv)
                m = measure(call, comm, options.policy, arm,
                            plan.op_timeout(size), what, pause, nbytes=size,
                            bandwidth=op.exchange)
                del send, recv, call
                arm(plan.op_timeout(size), f"{what} (gathering each rank's times)")
                own = comm.gather_objects([round(s, 3) for s in m.own_us])
                correct: bool | None = None
                wrong: int | None = None
                bad: list[int] = []
                if options.check:
                    arm(plan.op_timeout(size), f"{what} (check)")
                    correct, wrong, bad = check_once(comm, op_name, counts, dtype,
                                                     corrupt=fault is not None
                                                     and fault.corrupts(comm.rank))
                times = summarize(m.samples_us)
                algbw = size / (times["p50"] * 1e-6) / 1e9
                rel = median_ci95_rel(m.samples_us)
                yield Collective(
                    run_id=plan.run_id, op=op_name, bytes=size, count=max(counts), dtype=dtype,
                    ranks=n, transport=transport, iters=m.iters, samples=len(m.samples_us),
                    batch=m.batch, warmup=m.warmup, timing=options.policy.protocol,
                    cuda_graph=options.policy.cuda_graph, time_us=records.Times.of(times),
                    samples_us=[round(s, 3) for s in m.samples_us], rank_samples_us=own,
                    algbw_gbyte_s=algbw, busbw_gbyte_s=algbw * op.busbw_factor(n),
                    busbw_mean_gbyte_s=size / (times["mean"] * 1e-6) / 1e9 * op.busbw_factor(n),
                    correct=correct, wrong=wrong, wrong_ranks=bad,
                    stable=is_stable(rel), stable_rule=STABLE_RULE, median_ci95_rel=rel)
