"""α-β-γ costs of the collective algorithms (docs/methods.md, "Cost models of collectives", has
every formula and its source).

α is the latency of one message (s), β the time per byte on a rank's link (s/B), γ the time per
byte of a reduction (s/B), p the ranks; ``S`` follows nccl-tests (the per-rank buffer for
allreduce, broadcast and sendrecv, the whole p × chunk array for allgather, reduce_scatter and
alltoall). Every cost is ``a·α + b·S·β + c·S·γ``; :func:`coefficients` gives (a, b, c)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from fabbench.errors import UsageError


@dataclass(frozen=True, kw_only=True)
class Params:
    """α (s), β (s/B) and γ (s/B) of one link and one reduction engine."""

    alpha_s: float
    beta_s_per_byte: float
    gamma_s_per_byte: float = 0.0

    def __post_init__(self) -> None:
        for name in ("alpha_s", "beta_s_per_byte", "gamma_s_per_byte"):
            if not getattr(self, name) >= 0:
                raise UsageError(f"cost parameter {name} must be >= 0, not {getattr(self, name)}")

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return math.inf if self.beta_s_per_byte == 0 else 1 / self.beta_s_per_byte


def _lg(p: int) -> float:
    return math.log2(p)


def _power_of_two(p: int) -> bool:
    return p >= 1 and p & (p - 1) == 0


# op -> algorithm -> p -> (a, b, c)
_TABLE: dict[str, dict[str, Callable[[int], tuple[float, float, float]]]] = {
    "allreduce": {
        "ring": lambda p: (2 * (p - 1), 2 * (p - 1) / p, (p - 1) / p),
        "rabenseifner": lambda p: (2 * _lg(p), 2 * (p - 1) / p, (p - 1) / p),
        "recursive_doubling": lambda p: (_lg(p), _lg(p), _lg(p)),
    },
    "reduce_scatter": {
        "ring": lambda p: (p - 1, (p - 1) / p, (p - 1) / p),
        "recursive_halving": lambda p: (_lg(p), (p - 1) / p, (p - 1) / p),
    },
    "allgather": {
        "ring": lambda p: (p - 1, (p - 1) / p, 0.0),
        "recursive_doubling": lambda p: (_lg(p), (p - 1) / p, 0.0),
    },
    "broadcast": {
        "binomial": lambda p: (_lg(p), _lg(p), 0.0),
        "pipelined": lambda p: (_lg(p) + p - 1, 2 * (p - 1) / p, 0.0),
        "chain": lambda p: (p - 1, 1.0, 0.0),
    },
    "alltoall": {"pairwise": lambda p: (p - 1, (p - 1) / p, 0.0)},
    "sendrecv": {"direct": lambda p: (1.0, 1.0, 0.0)},
}
_NEEDS_POWER_OF_TWO = {"rabenseifner", "recursive_doubling", "recursive_halving", "binomial"}

# The algorithm whose β coefficient is nccl-tests' busbw factor: fitted β is then 1/busbw.
BUSBW_ALGORITHM = {"allreduce": "ring", "reduce_scatter": "ring", "allgather": "ring",
                   "broadcast": "chain", "alltoall": "pairwise", "sendrecv": "direct"}


def algorithms(op: str) -> tuple[str, ...]:
    if op not in _TABLE:
        raise UsageError(f"no cost model for op {op!r} (known: {', '.join(_TABLE)})")
    return tuple(_TABLE[op])


def exact(algorithm: str, p: int) -> bool:
    """Whether the formula is exact for p ranks (the lg p algorithms want a power of two;
    elsewhere they are the usual approximation with lg p)."""
    return algorithm not in _NEEDS_POWER_OF_TWO or _power_of_two(p)


def coefficients(op: str, algorithm: str, p: int) -> tuple[float, float, float]:
    """(a, b, c) of ``a·α + b·S·β + c·S·γ`` for ``op`` by ``algorithm`` over ``p`` ranks."""
    if algorithm not in algorithms(op):
        raise UsageError(f"no algorithm {algorithm!r} for {op} (known: "
                         f"{', '.join(algorithms(op))})")
    if p < 1:
        raise UsageError(f"ranks must be >= 1, not {p}")
    if p == 1:
        return (0.0, 0.0, 0.0)
    a, b, c = _TABLE[op][algorithm](p)
    return (float(a), float(b), float(c))


def time_s(op: str, algorithm: str, p: int, nbytes: float, params: Params) -> float:
    """Seconds for one ``op`` of S = ``nbytes`` (nccl-tests' convention) over ``p`` ranks."""
    a, b, c = coefficients(op, algorithm, p)
    return a * params.alpha_s + b * nbytes * params.beta_s_per_byte \
        + c * nbytes * params.gamma_s_per_byte


def best(op: str, p: int, nbytes: float, params: Params) -> tuple[str, float]:
    """The fastest algorithm (and its time) among those exact for p: what a tuned library
    would pick if its switch points were perfect."""
    options = [(time_s(op, alg, p, nbytes, params), alg) for alg in algorithms(op)
               if exact(alg, p)]
    t, alg = min(options)
    return alg, t


def busbw_factor(op: str, p: int) -> float:
    """nccl-tests' factor: allreduce 2(p−1)/p; allgather, reduce_scatter, alltoall (p−1)/p;
    broadcast, sendrecv 1."""
    if op == "allreduce":
        return 2 * (p - 1) / p
    if op in ("allgather", "reduce_scatter", "alltoall"):
        return (p - 1) / p
    return 1.0


def busbw_gbyte_s(op: str, p: int, nbytes: float, seconds: float) -> float:
    """busbw in GB/s (1e9 B) of a time, as nccl-tests computes it."""
    return nbytes / seconds / 1e9 * busbw_factor(op, p) if seconds > 0 else math.inf


def allreduce_lower_bound_s(p: int, nbytes: float, link_bytes_per_s: float) -> float:
    """(S/B)·2(p−1)/p: no allreduce over links of B bytes/s per rank is faster."""
    return nbytes / link_bytes_per_s * 2 * (p - 1) / p
