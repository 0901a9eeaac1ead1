"""The op table against an independent numpy model of each collective over n ranks."""

import numpy as np
import pytest

from fabbench.workloads.ops import OPS, expected, fill, send_data


def simulate(op: str, n: int, counts: tuple[int, int]) -> list[np.ndarray]:
    sends = [send_data(op, r, n, counts) for r in range(n)]
    if op == "allreduce":
        return [np.sum(sends, axis=0)] * n
    if op == "allgather":
        return [np.concatenate(sends)] * n
    if op == "reduce_scatter":
        total = np.sum(sends, axis=0)
        return list(np.split(total, n))
    if op == "alltoall":
        blocks = [np.split(s, n) for s in sends]
        return [np.concatenate([blocks[src][dst] for src in range(n)]) for dst in range(n)]
    if op == "broadcast":
        return [sends[0]] * n
    if op == "sendrecv":
        return [sends[(r - 1) % n] for r in range(n)]
    raise KeyError(op)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_expected_matches_simulation(op, n):
    counts = OPS[op].counts(4 * 96, "float32", n)
    got = simulate(op, n, counts)
    for rank in range(n):
        np.testing.assert_array_equal(got[rank], expected(op, rank, n, counts))


def test_busbw_factors_are_nccl_tests():
    n = 8
    assert OPS["allreduce"].busbw_factor(n) == pytest.approx(2 * 7 / 8)
    for op in ("allgather", "reduce_scatter", "alltoall"):
        assert OPS[op].busbw_factor(n) == pytest.approx(7 / 8)
    for op in ("broadcast", "sendrecv"):
        assert OPS[op].busbw_factor(n) == 1.0


def test_one_rank_has_no_bus():
    """nccl-tests keeps factor 1 for broadcast at one rank: an in-place broadcast that copies
    nothing read 45,460 GB/s on an H200 (issue 49). Nothing crosses between ranks: 0."""
    assert {op: OPS[op].busbw_factor(1) for op in OPS} == dict.fromkeys(OPS, 0.0)


def test_whole_array_sizes_round_to_rank_multiple():
    # 100 bytes of float32 = 25 elements; over 4 ranks: 24 elements, 6 per rank
    assert OPS["allgather"].counts(100, "float32", 4) == (6, 24)
    assert OPS["reduce_scatter"].counts(100, "float32", 4) == (24, 6)
    assert OPS["allgather"].bytes_moved((6, 24), "float32") == 96
    assert OPS["alltoall"].counts(8, "float32", 4) is None  # too small for 4 ranks
    assert OPS["allreduce"].counts(2, "float32", 4) is None


def test_fill_sums_exact_in_half_precision():
    # 64 ranks of values <= 4 sum to <= 256: exact in bfloat16 and float16
    total = sum(fill(r, 0, 1000) for r in range(64))
    assert total.max() <= 256
    assert np.array_equal(total.astype(np.float16).astype(np.float64), total)
