"""The one bucket planner: gradients cut into buckets the way data-parallel engines fuse them."""

from __future__ import annotations


def bucket_groups(sizes_bytes: list[int], cap_bytes: int, first_cap_bytes: int | None = None
                  ) -> list[list[int]]:
    """Greedy buckets over the gradients in reverse registration order (the order backward
    produces them), each up to its cap (the first one's may differ, as DDP's): the indices of
    the gradients in each bucket, in the order the buckets are exchanged."""
    buckets: list[list[int]] = []
    current: list[int] = []
    size = 0
    for index in reversed(range(len(sizes_bytes))):
        cap = first_cap_bytes if (first_cap_bytes is not None and not buckets) else cap_bytes
        if current and size + sizes_bytes[index] > cap:
            buckets.append(current)
            current, size = [], 0
        current.append(index)
        size += sizes_bytes[index]
    if current:
        buckets.append(current)
    return buckets


def bucket_plan(sizes_bytes: list[int], cap_bytes: int, first_cap_bytes: int | None = None
                ) -> list[int]:
    """Bytes per bucket of bucket_groups: DDP's and Horovod's fusion approximated, the mpi
    engine's buckets exactly."""
    return [sum(sizes_bytes[i] for i in group)
            for group in bucket_groups(sizes_bytes, cap_bytes, first_cap_bytes)]
