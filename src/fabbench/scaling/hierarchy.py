"""Multi-dimensional hierarchical collectives (Won et al., 2021; LIBRA).

D dimensions; dimension d has p_d members and a per-rank bandwidth B_d; the message m enters
dimension 1 (the innermost, e.g. the ranks of a node):

    allreduce       for d = 1..D: m_d = 2·m·(p_d−1)/p_d, then m ← m/p_d
    reduce_scatter  for d = 1..D: m_d = m·(p_d−1)/p_d,   then m ← m/p_d
    allgather       for d = D..1: m_d = m·(p_d−1),       then m ← m·p_d
    alltoall        m_d = m·(p_d−1)/p_d, m unchanged

t_d = m_d / B_d, and a pipelined collective takes T = max_d t_d (bandwidth terms only). Under a
budget Σ B_d = B the best split is B_d ∝ m_d, which makes every t_d equal to Σ m_d / B.
"""

from __future__ import annotations

from collections.abc import Sequence

from fabbench.errors import UsageError


def dimension_bytes(op: str, nbytes: float, sizes: Sequence[int]) -> list[float]:
    """m_d per dimension (dimension 1 first) for ``op`` of ``nbytes`` over ``sizes`` = p_d."""
    if not sizes or any(p < 1 for p in sizes):
        raise UsageError(f"dimension sizes must be >= 1, not {list(sizes)}")
    m = float(nbytes)
    out: list[float] = []
    if op == "allreduce":
        for p in sizes:
            out.append(2 * m * (p - 1) / p)
            m /= p
    elif op == "reduce_scatter":
        for p in sizes:
            out.append(m * (p - 1) / p)
            m /= p
    elif op == "allgather":
        # m is what a rank holds on entry to dimension D (the whole array over all members)
        for p in sizes:
            m /= p
        rev = []
        for p in reversed(sizes):
            rev.append(m * (p - 1))
            m *= p
        out = rev[::-1]
    elif op == "alltoall":
        out = [m * (p - 1) / p for p in sizes]
    else:
        raise UsageError(f"no hierarchical model for {op!r} (allreduce, reduce_scatter, "
                         "allgather, alltoall)")
    return out


def collective_time_s(op: str, nbytes: float, sizes: Sequence[int],
                      bandwidths: Sequence[float]) -> tuple[float, list[float]]:
    """(T = max_d t_d, [t_d]) with ``bandwidths`` B_d in bytes/s per rank."""
    if len(bandwidths) != len(sizes) or any(not b > 0 for b in bandwidths):
        raise UsageError("one bandwidth > 0 per dimension is needed")
    times = [m / b for m, b in zip(dimension_bytes(op, nbytes, sizes), bandwidths, strict=True)]
    return max(times), times


def optimal_split(op: str, nbytes: float, sizes: Sequence[int], total: float) -> list[float]:
    """B_d ∝ m_d with Σ B_d = ``total``: the split that minimises max_d t_d."""
    ms = dimension_bytes(op, nbytes, sizes)
    volume = sum(ms)
    if volume == 0:
        return [total / len(ms)] * len(ms)
    return [total * m / volume for m in ms]
