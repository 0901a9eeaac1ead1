"""timing.heap.settle: a per-call scratch buffer stops costing fresh pages, whatever state the
process's allocator was left in (here: a MALLOC_ tunable, which fixes glibc's thresholds)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fabbench.timing import heap

# Allocate, touch and free a 1 MiB scratch buffer 50 times, as Open MPI's allreduce does per
# call, and print the minor page faults per cycle.
SCRATCH = """
import ctypes, resource, sys
from fabbench.timing import heap
if sys.argv[1] == "settle":
    heap.settle()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def cycle():
    p = libc.malloc(1 << 20)
    ctypes.memset(p, 1, 1 << 20)
    libc.free(p)
cycle()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    cycle()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50)
"""


def faults_per_cycle(mode: str) -> float:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    out = subprocess.run([sys.executable, "-c", SCRATCH, mode], env=env, capture_output=True,
                         text=True, timeout=60, check=True)
    return float(out.stdout)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux")
def test_settle_keeps_scratch_on_pages_already_mapped():
    state = heap.settle()
    if state.mmap_threshold is None:
        pytest.skip(f"allocator is {state.allocator}, not glibc's")
    assert faults_per_cycle("plain") >= 200  # 256 pages of 4 KiB mapped afresh every cycle
    assert faults_per_cycle("settle") < 5


def test_settle_says_what_it_set():
    state = heap.settle()
    if state.mmap_threshold is None:
        assert state.to_json() == {"allocator": "not glibc", "mmap_threshold": None,
                                   "trim_threshold": None}
    else:
        assert state.allocator.startswith("glibc ")
        assert state.mmap_threshold == heap.MMAP_CEILING
        assert state.trim_threshold == 2 * heap.MMAP_CEILING
