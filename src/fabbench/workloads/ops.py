"""The collective operations: sizes, bandwidth factors, and expected results for --check.

Sizes and bandwidths follow nccl-tests (docs/methods.md): ``bytes`` is S, the per-rank buffer for
allreduce, broadcast and sendrecv and the whole array for allgather, reduce_scatter and alltoall;
algbw = S / t and busbw = algbw x factor(n), with GB = 1e9 bytes. A world of one rank has no bus:
its busbw is 0 and the console, the report and the floors show none (console.ONE_RANK).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DTYPE_SIZES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class Op:
    name: str
    whole_array: bool  # S counts the whole (n x chunk) array

    @property
    def exchange(self) -> bool:
        """Point to point between ranks (sendrecv): --timing osu times it as osu_bibw does."""
        return self.name == "sendrecv"

    def busbw_factor(self, n: int) -> float:
        """nccl-tests' factor; 0 for a world of one rank, where nothing crosses between ranks
        (nccl-tests keeps 1 for broadcast and sendrecv there: an in-place broadcast that copies
        nothing then reads as tens of TB/s)."""
        if n <= 1:
            return 0.0
        if self.name == "allreduce":
            return 2 * (n - 1) / n
        if self.whole_array:
            return (n - 1) / n
        return 1.0

    def counts(self, nbytes: int, dtype: str, n: int) -> tuple[int, int] | None:
        """(send count, recv count) in elements for a requested size, or None when the size is
        too small for this many ranks. Whole-array sizes are rounded down to a multiple of n."""
        elems = nbytes // DTYPE_SIZES[dtype]
        if self.whole_array:
            elems -= elems % n
            chunk = elems // n
            if chunk == 0:
                return None
            return {"allgather": (chunk, elems), "reduce_scatter": (elems, chunk),
                    "alltoall": (elems, elems)}[self.name]
        if elems == 0:
            return None
        return (elems, elems)

    def bytes_moved(self, counts: tuple[int, int], dtype: str) -> int:
        """S as nccl-tests defines it for this op."""
        return max(counts) * DTYPE_SIZES[dtype]


OPS: dict[str, Op] = {op.name: op for op in (
    Op("allreduce", False), Op("allgather", True), Op("reduce_scatter", True),
    Op("broadcast", False), Op("alltoall", True), Op("sendrecv", False),
)}


def fill(rank: int, start: int, count: int) -> np.ndarray:
    """The value rank ``rank`` puts at global indices start..start+count: small integers, so sums
    over up to 64 ranks are exact in float16 and bfloat16 too."""
    return ((np.arange(start, start + count, dtype=np.int64) + 7 * rank) % 5).astype(np.float64)


def send_data(op: str, rank: int, n: int, counts: tuple[int, int]) -> np.ndarray:
    send, _ = counts
    if op == "broadcast" and rank != 0:
        return np.full(send, -1.0)  # overwritten by the root's data
    return fill(rank, 0, send)


def expected(op: str, rank: int, n: int, counts: tuple[int, int]) -> np.ndarray:
    """What rank ``rank`` must hold after the op (the receive buffer; broadcast is in place)."""
    send, recv = counts
    if op == "allreduce":
        return sum((fill(r, 0, send) for r in range(n)), np.zeros(send))
    if op == "allgather":
        return np.concatenate([fill(r, 0, send) for r in range(n)])
    if op == "reduce_scatter":
        return sum((fill(r, rank * recv, recv) for r in range(n)), np.zeros(recv))
    if op == "alltoall":
        chunk = send // n
        return np.concatenate([fill(r, rank * chunk, chunk) for r in range(n)])
    if op == "broadcast":
        return fill(0, 0, send)
    if op == "sendrecv":
        return fill((rank - 1) % n, 0, send)
    raise KeyError(op)
