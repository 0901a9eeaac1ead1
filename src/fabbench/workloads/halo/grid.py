"""The halo exchange's geometry: the periodic 3-D process grid (as MPI_Dims_create picks it),
a rank's place in it, its cube's side and the bytes it sends per iteration."""

from __future__ import annotations

from collections.abc import Sequence

DTYPE_BYTES = 8  # float64, as CFD codes use


def process_grid(n: int) -> tuple[int, int, int]:
    """Three factors of n, as equal as possible, largest first (MPI_Dims_create's answer)."""
    best: tuple[int, int, int] = (n, 1, 1)
    for a in range(1, n + 1):
        if n % a:
            continue
        for b in range(1, n // a + 1):
            if (n // a) % b:
                continue
            hi, mid, lo = sorted((a, b, n // a // b), reverse=True)
            if hi - lo < best[0] - best[2]:
                best = (hi, mid, lo)
    return best


def coords_of(rank: int, dims: tuple[int, int, int]) -> tuple[int, int, int]:
    return rank // (dims[1] * dims[2]), (rank // dims[2]) % dims[1], rank % dims[2]


def rank_of(coords: Sequence[int], dims: tuple[int, int, int]) -> int:
    c = [x % d for x, d in zip(coords, dims, strict=True)]
    return (c[0] * dims[1] + c[1]) * dims[2] + c[2]


def side_of(cells_per_rank: int) -> int:
    root: float = cells_per_rank ** (1 / 3)  # int ** float: typeshed's Any (a complex below 0)
    return max(2, round(root))


def bytes_per_iter(side: int, dims: tuple[int, int, int]) -> int:
    """Bytes one rank sends to other ranks per iteration (faces to itself are local copies)."""
    face = (side + 2) ** 2 * DTYPE_BYTES
    return sum(2 * face for d in dims if d > 1)
