"""α-β-γ formulas against hand-computed values, Won et al.'s hierarchy, and unit parsing."""

from __future__ import annotations

import pytest

from fabbench.errors import UsageError
from fabbench.scaling import costs, hierarchy
from fabbench.scaling.quantities import format_bandwidth, parse_bandwidth, parse_duration

P = costs.Params(alpha_s=1e-6, beta_s_per_byte=1e-9, gamma_s_per_byte=1e-10)
S = 1_000_000


def test_allreduce_formulas_by_hand():
    # p = 8: ring 2·7·1 µs + 2·7/8·1 ms + 7/8·0.1 ms
    assert costs.time_s("allreduce", "ring", 8, S, P) == pytest.approx(14e-6 + 1.75e-3 + 87.5e-6)
    # Rabenseifner: 2·3 α + same β and γ terms
    assert costs.time_s("allreduce", "rabenseifner", 8, S, P) == pytest.approx(
        6e-6 + 1.75e-3 + 87.5e-6)
    # recursive doubling: lg p (α + Sβ + Sγ) = 3 (1 µs + 1 ms + 0.1 ms)
    assert costs.time_s("allreduce", "recursive_doubling", 8, S, P) == pytest.approx(3 * 1.101e-3)


def test_other_ops_by_hand():
    assert costs.time_s("reduce_scatter", "ring", 4, S, P) == pytest.approx(
        3e-6 + 0.75e-3 + 0.075e-3)
    assert costs.time_s("allgather", "ring", 4, S, P) == pytest.approx(3e-6 + 0.75e-3)
    assert costs.time_s("allgather", "recursive_doubling", 4, S, P) == pytest.approx(2e-6 + 0.75e-3)
    assert costs.time_s("broadcast", "binomial", 16, S, P) == pytest.approx(4 * (1e-6 + 1e-3))
    assert costs.time_s("alltoall", "pairwise", 4, S, P) == pytest.approx(3e-6 + 0.75e-3)
    assert costs.time_s("sendrecv", "direct", 2, S, P) == pytest.approx(1e-6 + 1e-3)


def test_ring_busbw_tends_to_the_link_and_bound_holds():
    link = costs.Params(alpha_s=5e-6, beta_s_per_byte=1 / 12.5e9)  # 100 Gb/s
    t = costs.time_s("allreduce", "ring", 64, 1 << 30, link)
    assert costs.busbw_gbyte_s("allreduce", 64, 1 << 30, t) == pytest.approx(12.5, rel=1e-2)
    for alg in costs.algorithms("allreduce"):
        assert costs.time_s("allreduce", alg, 64, S, link) >= costs.allreduce_lower_bound_s(
            64, S, 12.5e9)


def test_best_picks_latency_algorithm_small_and_bandwidth_algorithm_large():
    link = costs.Params(alpha_s=5e-6, beta_s_per_byte=1 / 3.125e9)
    assert costs.best("allreduce", 64, 8, link)[0] == "recursive_doubling"
    assert costs.best("allreduce", 64, 1 << 28, link)[0] == "rabenseifner"
    assert costs.best("allreduce", 48, 1 << 28, link)[0] == "ring"  # not a power of two


def test_one_rank_costs_nothing_and_bad_names_refused():
    assert costs.time_s("allreduce", "ring", 1, S, P) == 0
    with pytest.raises(UsageError):
        costs.coefficients("allreduce", "tree-of-life", 4)
    with pytest.raises(UsageError):
        costs.algorithms("reduce")


def test_won_dimension_messages_and_time():
    # 2 dimensions of 4 and 8, m = 64 MB: allreduce m1 = 2·64·3/4 = 96, m2 = 2·16·7/8 = 28
    assert hierarchy.dimension_bytes("allreduce", 64, [4, 8]) == pytest.approx([96, 28])
    assert hierarchy.dimension_bytes("reduce_scatter", 64, [4, 8]) == pytest.approx([48, 14])
    # all-gather is the mirror of reduce-scatter: same bytes per dimension
    assert hierarchy.dimension_bytes("allgather", 64, [4, 8]) == pytest.approx([48, 14])
    assert hierarchy.dimension_bytes("alltoall", 64, [4, 8]) == pytest.approx([48, 56])
    t, parts = hierarchy.collective_time_s("allreduce", 64, [4, 8], [96, 7])
    assert parts == pytest.approx([1, 4]) and t == pytest.approx(4)


@pytest.mark.parametrize("op", ["allreduce", "reduce_scatter", "allgather", "alltoall"])
def test_won_optimal_split_is_proportional_to_m_d(op):
    sizes, total = [8, 4, 16], 300.0
    ms = hierarchy.dimension_bytes(op, 1e6, sizes)
    split = hierarchy.optimal_split(op, 1e6, sizes, total)
    assert sum(split) == pytest.approx(total)
    assert [b / total for b in split] == pytest.approx([m / sum(ms) for m in ms])
    best, parts = hierarchy.collective_time_s(op, 1e6, sizes, split)
    assert parts == pytest.approx([sum(ms) / total] * 3)  # every dimension equally busy
    equal, _ = hierarchy.collective_time_s(op, 1e6, sizes, [total / 3] * 3)
    assert best <= equal


@pytest.mark.parametrize(("text", "bytes_per_s"), [
    ("25Gbit", 3.125e9), ("25Gb/s", 3.125e9), ("25gbps", 3.125e9), ("100G", 12.5e9),
    ("12.5GB/s", 12.5e9), ("100M", 12.5e6), ("1e9", 1.25e8), ("400 Gbit/s", 50e9),
    (".5e3G", 62.5e9)])
def test_parse_bandwidth(text, bytes_per_s):
    assert parse_bandwidth(text) == pytest.approx(bytes_per_s)


@pytest.mark.parametrize("text", ["fast", "", "25Qbit", "-1G", "0G", "G"])
def test_parse_bandwidth_refuses(text):
    with pytest.raises(UsageError, match="bandwidth"):
        parse_bandwidth(text)


def test_parse_duration_and_format():
    assert parse_duration("5us") == pytest.approx(5e-6)
    assert parse_duration("1.5ms") == pytest.approx(1.5e-3)
    assert parse_duration("3") == pytest.approx(3e-6)
    assert parse_duration(".5e3us") == pytest.approx(5e-4)
    with pytest.raises(UsageError, match="latency"):
        parse_duration("soon")
    assert format_bandwidth(3.125e9) == "25 Gb/s"
