"""Reference loop for fabbench's fidelity benchmark: a bare torch.distributed (Gloo) all_reduce.

Started as N processes with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT; rank 0 prints
"bytes p50_us samples batch" per size. Same timing shape as mpi_allreduce.c.
"""

import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

SAMPLES = 25


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    scalar = torch.zeros(1, dtype=torch.float64)
    for arg in sys.argv[1:]:
        nbytes = int(arg)
        buf = torch.zeros(nbytes // 4, dtype=torch.float32)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(10):
            dist.all_reduce(buf)
        scalar.fill_((time.perf_counter() - t0) / 10)
        dist.all_reduce(scalar, op=dist.ReduceOp.MAX)
        batch = max(1, min(1000, int(0.005 / scalar.item())))
        samples = []
        for _ in range(SAMPLES):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(batch):
                dist.all_reduce(buf)
            scalar.fill_((time.perf_counter() - t0) / batch)
            dist.all_reduce(scalar, op=dist.ReduceOp.MAX)
            samples.append(scalar.item())
        if dist.get_rank() == 0:
            print(f"{nbytes} {statistics.median(samples) * 1e6:.3f} {SAMPLES} {batch}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
