"""The allocator state a rank measures in: the same steady state as a fresh C process's.

Open MPI's, Gloo's and Horovod's collectives malloc a scratch buffer as large as the message on
every call. In a fresh C process glibc raises its mmap threshold after the first one, so later
calls reuse heap pages; a Python rank whose threshold is fixed (a ``MALLOC_*`` tunable, a
library's ``mallopt``) or whose heap is trimmed maps fresh pages every call, about 3x the time of
a 1 MiB allreduce (docs/methods.md, "Fidelity"). ``settle`` pins the C process's state: scratch
up to glibc's dynamic ceiling (32 MiB on 64-bit) from an untrimmed heap, larger scratch mapped
per call. It changes nothing a library computes."""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass

# glibc's mallopt parameters (malloc.h) and the ceiling of its dynamic mmap threshold
# (DEFAULT_MMAP_THRESHOLD_MAX: 4 MiB * sizeof(long)).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_CEILING = 4 * 1024 * 1024 * ctypes.sizeof(ctypes.c_long)


@dataclass(frozen=True)
class HeapState:
    allocator: str  # "glibc 2.36" or what the process links instead
    mmap_threshold: int | None  # bytes, None where the allocator is not glibc's
    trim_threshold: int | None

    def to_json(self) -> dict[str, object]:
        return {"allocator": self.allocator, "mmap_threshold": self.mmap_threshold,
                "trim_threshold": self.trim_threshold}


def settle() -> HeapState:
    """Pin glibc's thresholds at the C process's steady state; elsewhere change nothing and say
    which allocator it is. Raises OSError naming the call if glibc refuses a value."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
    version = getattr(libc, "gnu_get_libc_version", None)
    if version is None:
        return HeapState(allocator="not glibc", mmap_threshold=None, trim_threshold=None)
    version.restype = ctypes.c_char_p
    trim = 2 * MMAP_CEILING
    for param, value, name in ((M_MMAP_THRESHOLD, MMAP_CEILING, "M_MMAP_THRESHOLD"),
                               (M_TRIM_THRESHOLD, trim, "M_TRIM_THRESHOLD")):
        if libc.mallopt(param, value) != 1:
            raise OSError(f"mallopt({name}, {value}) refused by glibc {version().decode()}")
    return HeapState(allocator=f"glibc {version().decode()}", mmap_threshold=MMAP_CEILING,
                     trim_threshold=trim)
