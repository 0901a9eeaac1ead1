"""The replay workload's record: the results contract's ``replay`` kind (its fields are
schema.json's ``$defs/replay``, the published contract; a unit test compares the two), one per
replay of a trace: the step's figures over the replayed steps, and one ``ReplayOp`` per distinct
operation of the trace. Registered when the workload's package is loaded, as fabbench.catalog
loads it.

Per step, the slowest rank's: ``step_us`` (barrier to the last operation completed, or to the
end of the step's tail), ``compute_us`` (the gaps and the tail it kept, as slept), ``comm_us``
(the time at least one of its operations was in flight, issue to completion, as the trace's
``comm_us`` counts the job's: operations in flight together count once, an asynchronous one
overlapping compute counts whole) and ``exposed_us`` (the step less its compute: the time it
waited on communication beyond the compute); ``exposed_share``, the median of exposed / step
over the steps (1 back to back, where there is no compute)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from fabbench.results.records import Nested, Record, Times, kind

__all__ = ["Replay", "ReplayOp"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplayOp(Nested):
    """One distinct operation of the trace (op, group, bytes, dtype, root or peer, async),
    timed each time a rank issued it in the timed steps, the slowest issuing rank's time per
    occurrence: issue to completion (an asynchronous one in gaps mode: to its wait's return)."""

    op: str
    group: int
    group_size: int
    bytes: int
    dtype: str
    peer: int | None
    async_op: bool
    ranks: int          # the ranks that issue it
    per_step: float     # issued per step by one of them
    calls: int          # occurrences timed (per rank)
    time_us: Times
    # nccl-tests' bus bandwidth of the median (fabbench.workloads.ops; send and recv: bytes / t,
    # reduce: as broadcast); None for a barrier or a group of one rank
    busbw_gbyte_s: float | None
    recorded_us: float | None   # the job's own median (the trace's dur_us), if recorded


@kind("replay")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Replay(Record):
    """A trace replayed: per step and per operation (module docstring)."""

    trace: str
    trace_sha256: str
    trace_world: int
    trace_steps: int
    groups: int
    mode: str
    ranks: int
    steps: int
    warmup: int
    transport: str | None
    ops_per_step: float        # per rank, the mean over the ranks
    bytes_per_step: int        # per rank, the most over the ranks
    step_us: Times
    compute_us: Times
    comm_us: Times
    exposed_us: Times
    exposed_share: float
    step_samples_us: Sequence[float]
    exposed_samples_us: Sequence[float]
    recorded_step_us: float | None   # the job's own step (the trace's wall_us), median
    recorded_comm_us: float | None   # the job's own communication (its comm_us), median
    link_gbit_s: float | None        # the emulated link's rate, where the ranks ran on one
    ops: Sequence[ReplayOp]
