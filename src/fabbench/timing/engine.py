"""Warm up, then sample; each sample times a batch of back-to-back operations and counts the
slowest rank's time. Every decision (batch size, when to stop) is taken from values all ranks
share after a max-reduction, so every rank runs exactly the same number of operations.

Stopping aims at the one rule for "stable" (timing.stats.STABLE_RULE), within ``min_samples``,
``max_samples``, the point's time budget and ``patience``; the record says when a point is not
stable. Protocols (docs/methods.md, "Timing"): ``batch`` times a sample's operations as one
stretch (nccl-tests); ``osu`` uses OSU's counts and loops, so a figure compares with another
tool's only under its protocol. Under ``batch`` a sample may be one CUDA graph replayed
(``--cuda-graph``), timing what the library does on the device, as nccl-tests' ``-G``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from fabbench.errors import UsageError
from fabbench.timing.stats import MIN_CI_SAMPLES, STABLE_REL, is_stable, median_ci95_rel

PROTOCOLS = ("batch", "osu")
OSU_LARGE_BYTES = 8192  # OSU's large-message threshold: fewer operations skipped and timed above
OSU_SAMPLES = 10  # the osu protocol's timed operations, cut into this many equal samples


@dataclass(frozen=True, kw_only=True)
class TimingPolicy:
    budget_s: float = 0.1  # measured time per point (op, size, dtype)
    min_samples: int = 5
    max_samples: int = 200
    samples_target: int = 20  # the batch is sized so that the budget holds about this many
    max_batch: int = 1000
    warmup_s: float = 0.02
    patience: float = 3.0  # budgets an unstable point may take to become stable
    protocol: str = "batch"  # or "osu" (PROTOCOLS)
    cuda_graph: bool = False  # a sample's operations issued as one CUDA graph (batch only)

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise UsageError(f"--timing takes {' or '.join(PROTOCOLS)}, not {self.protocol!r}")
        if not self.budget_s > 0:
            raise UsageError("budget must be > 0 seconds")
        if not 1 <= self.min_samples <= self.max_samples:
            raise UsageError("min samples must be between 1 and max samples")
        if self.max_batch < 1 or self.samples_target < 1:
            raise UsageError("max batch and samples target must be >= 1")
        if not self.patience >= 1:
            raise UsageError("patience must be >= 1 (budgets)")
        if self.cuda_graph and self.protocol != "batch":
            raise UsageError(f"--cuda-graph on times back-to-back operations (--timing batch); "
                             f"--timing {self.protocol} times each operation alone, eagerly")


@dataclass(frozen=True)
class Measurement:
    samples_us: tuple[float, ...]  # per-operation time of each sample, slowest rank
    batch: int  # operations per sample
    warmup: int  # operations run before the first sample
    own_us: tuple[float, ...] = ()  # this rank's own time of each sample (see measure)

    @property
    def iters(self) -> int:
        return self.batch * len(self.samples_us)


class Group(Protocol):
    """What the engine needs from a communicator."""

    def barrier(self) -> None: ...
    def synchronize(self) -> None: ...
    def max_scalar(self, value: float) -> float: ...


def _loop(op: Callable[[], None]) -> Callable[[int], None]:
    def run(n: int) -> None:
        for _ in range(n):
            op()
    return run


def _each(op: Callable[[], None], group: Group) -> Callable[[int], float]:
    """OSU's protocol from Python (for a primitive without a C loop): each operation timed
    alone to its completion, a barrier after it; returns the operations' seconds, summed."""
    clock = time.perf_counter

    def run(n: int) -> float:
        spent = 0.0
        for _ in range(n):
            t0 = clock()
            op()
            group.synchronize()
            spent += clock() - t0
            group.barrier()
        return spent
    return run


def _clamp(value: float, lo: int, hi: int) -> int:
    return int(max(lo, min(hi, value)))


class _HeldBack:
    """``op`` after a sleep of ``pause_s``; ``slept`` adds up the time really slept."""

    def __init__(self, op: Callable[[], None], pause_s: float) -> None:
        self.op, self.pause_s, self.slept = op, pause_s, 0.0

    def __call__(self) -> None:
        t0 = time.perf_counter()
        time.sleep(self.pause_s)
        self.slept += time.perf_counter() - t0
        self.op()


def osu_counts(nbytes: int, bandwidth: bool = False) -> tuple[int, int]:
    """OSU's skipped and timed operations for a message of ``nbytes`` (OSU 7's defaults: 200 and
    1000 up to 8 KiB, 10 and 100 above; its bandwidth tests' (``bandwidth``): 10 and 100 up to
    8 KiB, 2 and 20 above)."""
    small = nbytes <= OSU_LARGE_BYTES
    if bandwidth:
        return (10, 100) if small else (2, 20)
    return (200, 1000) if small else (10, 100)


def measure(op: Callable[[], None], group: Group, policy: TimingPolicy,
            arm: Callable[[float, str], None], timeout_s: float, what: str,
            pause_s: float = 0.0, nbytes: int | None = None,
            bandwidth: bool = False) -> Measurement:
    """Time ``op``. ``arm(seconds, label)`` sets the watchdog before each blocking stretch.
    An ``op`` with ``batch(n)`` (comm.batch_loop) runs a batch in one call, one with ``each(n)`` the
    osu protocol's, one with ``ready(n)`` (a CUDA graph) is readied before a stretch's clock starts.
    Each rank also keeps its own time per operation (from the sample's common start to the end of
    its batch). ``pause_s`` is a test hook (a rank that arrives late), left out of its own time.
    Under the osu protocol OSU's counts apply (osu_counts) and the budget and sample bounds do not;
    ``bandwidth`` (sendrecv, pairs) runs as osu_bibw: one barrier, then the operations back to
    back."""
    held = _HeldBack(op, pause_s) if pause_s > 0 else None
    if held is not None:
        op = held
    osu = policy.protocol == "osu"
    alone = osu and not bandwidth  # each operation timed alone: a stretch's time is their own
    clock = time.perf_counter
    if alone:
        each = getattr(op, "each", None) or _each(op, group)
    else:
        batched = getattr(op, "batch", None) or _loop(op)
    ready = getattr(op, "ready", None)
    arm(timeout_s, f"{what} (first call)")
    group.barrier()
    t0 = clock()
    op()
    group.synchronize()
    t_one = max(group.max_scalar(clock() - t0), 1e-7)

    def stretch(n: int) -> float:
        """Seconds that n operations took on this rank, under the protocol."""
        if alone:
            return each(n)
        if ready is not None:
            ready(n)
        t0 = clock()
        batched(n)
        group.synchronize()
        return clock() - t0

    if osu:
        if nbytes is None:
            raise ValueError("the osu protocol needs the message size (nbytes)")
        skip, timed = osu_counts(nbytes, bandwidth)
        warmup, batch, wanted = skip - 1, timed // OSU_SAMPLES, OSU_SAMPLES
        if bandwidth:
            return _streamed(stretch, group, arm, held, timeout_s, what, t_one,
                             warmup, batch, wanted)
    else:
        warmup, wanted = _clamp(policy.warmup_s / t_one, 2, policy.max_batch), None
    arm(timeout_s + warmup * t_one * 4, f"{what} (warm-up)")
    group.barrier()
    t_op = max(group.max_scalar(stretch(warmup) / warmup), 1e-7) if warmup else t_one

    if not osu:
        batch = _clamp(policy.budget_s / policy.samples_target / t_op, 1, policy.max_batch)
    samples: list[float] = []
    own: list[float] = []
    spent = 0.0
    while True:
        arm(timeout_s + batch * t_op * 4, what)
        group.barrier()
        mine, its_own = _sample(stretch, batch, held)
        own.append(its_own)
        slowest = group.max_scalar(mine)
        samples.append(slowest)
        spent += slowest * batch
        n = len(samples)
        if wanted is not None:  # osu: OSU's count, nothing else decides
            if n >= wanted:
                break
            continue
        if n >= policy.max_samples:
            break
        if n >= policy.min_samples and _done(samples, spent, policy):
            break
    return Measurement(tuple(s * 1e6 for s in samples), batch, warmup + 1,
                       tuple(s * 1e6 for s in own))


def _streamed(stretch: Callable[[int], float], group: Group,
              arm: Callable[[float, str], None], held: _HeldBack | None, timeout_s: float,
              what: str, t_one: float, warmup: int, batch: int, wanted: int) -> Measurement:
    """OSU's bandwidth protocol: after one barrier, ``warmup`` operations, then ``wanted``
    samples of ``batch`` operations, all back to back; the slowest rank's time per sample is
    gathered once they are done, so that no collective falls among the operations."""
    arm(timeout_s + (warmup + wanted * batch) * t_one * 4, what)
    group.barrier()
    if warmup:
        stretch(warmup)
    taken = [_sample(stretch, batch, held) for _ in range(wanted)]
    samples = [group.max_scalar(mine) for mine, _ in taken]
    return Measurement(tuple(s * 1e6 for s in samples), batch, warmup + 1,
                       tuple(own * 1e6 for _, own in taken))


def _sample(stretch: Callable[[int], float], batch: int,
            held: _HeldBack | None) -> tuple[float, float]:
    """One sample of ``batch`` operations on this rank: (seconds per operation, the same without
    the test hook's sleeps: this rank's own time)."""
    slept = held.slept if held is not None else 0.0
    elapsed = stretch(batch)
    mine = elapsed / batch
    if held is not None:
        elapsed -= held.slept - slept
    return mine, max(0.0, elapsed / batch)


def _done(samples: list[float], spent: float, policy: TimingPolicy) -> bool:
    """Past min_samples: stop? (The rule needs MIN_CI_SAMPLES to judge a point at all: a slow
    point gets up to twice its patience to reach them.)"""
    waited = spent / (policy.budget_s * policy.patience)
    if waited >= 2 or (waited >= 1 and len(samples) >= MIN_CI_SAMPLES):
        return True
    rel = median_ci95_rel(samples)
    if len(samples) >= 10 and rel is not None and rel <= STABLE_REL / 5:
        return True
    return spent >= policy.budget_s and is_stable(rel)
