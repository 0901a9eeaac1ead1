"""fabbench's fidelity reference in Python: one library's own loop, nothing else.

    python py_loop.py LIBRARY OP BYTES...   (one process per rank, fabbench's own launcher)

LIBRARY: mpi4py, torch (gloo, or nccl with FABBENCH_LOOP_DEVICE=cuda) or horovod; OP: allreduce
or sendrecv (a ring). Rank 0 prints "bytes p50_us samples batch" per size. Standard library and
the chosen library only: this is the bare loop fabbench's figures are held to, with
mpi_loop.c's protocol (calibration, 20 ms warm-up, batches of FABBENCH_LOOP_BATCH_S seconds,
25 samples after a barrier, the slowest rank's time, the median printed) and page-aligned host
buffers, as OSU and fabbench allocate them."""

from __future__ import annotations

import mmap
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# what a library gives the loop: (rank, one operation, a barrier, the slowest rank's value)
Ops = tuple[int, Callable[[], None], Callable[[], None], Callable[[float], float]]

SAMPLES, CALIBRATE, MAX_BATCH, WARMUP_S = 25, 10, 1000, 0.02
BATCH_S = float(os.environ.get("FABBENCH_LOOP_BATCH_S", "0.005"))


def mpi4py_ops(op: str, nbytes: int) -> Ops:
    import mpi4py

    mpi4py.rc.threads = False  # THREAD_SINGLE, like a plain C MPI_Init (and fabbench's ranks)
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    count = max(1, nbytes // 4)
    send = np.frombuffer(mmap.mmap(-1, count * 4), np.float32)
    send[:] = (np.arange(count) + 7 * rank) % 5
    recv = np.frombuffer(mmap.mmap(-1, count * 4), np.float32)
    if op == "allreduce":
        def once() -> None:
            comm.Allreduce(send, recv, MPI.SUM)
    else:
        nxt, prv = (rank + 1) % size, (rank - 1) % size

        def once() -> None:
            comm.Sendrecv(send, nxt, 0, recv, prv, 0)
    return rank, once, comm.Barrier, lambda x: comm.allreduce(x, MPI.MAX)


def host_tensor(count: int) -> torch.Tensor:
    """float32 zeros in a page-aligned mapping of their own."""
    import torch

    return torch.frombuffer(mmap.mmap(-1, count * 4), dtype=torch.float32, count=count)


def torch_ops(op: str, nbytes: int) -> Ops:
    import datetime

    import torch
    import torch.distributed as dist

    device = os.environ.get("FABBENCH_LOOP_DEVICE", "cpu")
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device == "cuda" else "gloo",
                                timeout=datetime.timedelta(seconds=120))
    rank, size = dist.get_rank(), dist.get_world_size()
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    count = max(1, nbytes // 4)
    send, recv = (host_tensor(count).to(device) for _ in range(2))
    send.copy_((torch.arange(count) + 7 * rank) % 5)
    scalar = torch.zeros(1, dtype=torch.float64, device=device)
    sync: Callable[[], None] = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if op == "allreduce":
        def once() -> None:
            dist.all_reduce(recv)
    else:
        p2p = [dist.P2POp(dist.isend, send, (rank + 1) % size),
               dist.P2POp(dist.irecv, recv, (rank - 1) % size)]

        def once() -> None:
            for work in dist.batch_isend_irecv(p2p):
                work.wait()

    def barrier() -> None:
        # an all-reduce of one element, as fabbench's barrier: after dist.barrier() Gloo's next
        # 1 MiB allreduces measured 2-3x slower on a 2-core host (docs/methods.md, Fidelity)
        scalar.zero_()
        dist.all_reduce(scalar)
        sync()

    def slowest(x: float) -> float:
        sync()
        scalar.fill_(x)
        dist.all_reduce(scalar, op=dist.ReduceOp.MAX)
        return scalar.item()
    return rank, once, barrier, slowest


def horovod_ops(op: str, nbytes: int) -> Ops:
    if op != "allreduce":
        raise SystemExit("py_loop: horovod has allreduce only here")
    import horovod.torch as hvd
    import torch

    if not hvd.is_initialized():
        hvd.init()
    count = max(1, nbytes // 4)
    recv = host_tensor(count)
    recv.copy_((torch.arange(count) + 7 * hvd.rank()) % 5)
    name = f"loop.{nbytes}"

    def once() -> None:
        hvd.allreduce_(recv, op=hvd.Sum, name=name)

    def slowest(x: float) -> float:
        # horovod ships no types: its result is a one-element float64 tensor
        out: float = hvd.allreduce(torch.tensor([x], dtype=torch.float64), op=hvd.Max,
                                   name="loop.max").item()
        return out
    return hvd.rank(), once, hvd.barrier, slowest


LIBRARIES = {"mpi4py": mpi4py_ops, "torch": torch_ops, "horovod": horovod_ops}


def measure(once: Callable[[], None], barrier: Callable[[], None],
            slowest: Callable[[float], float]) -> tuple[float, int]:
    barrier()
    t0 = time.perf_counter()
    for _ in range(CALIBRATE):
        once()
    one = slowest((time.perf_counter() - t0) / CALIBRATE)
    for _ in range(int(WARMUP_S / one)):
        once()
    batch = max(1, min(MAX_BATCH, int(BATCH_S / one)))
    samples = []
    for _ in range(SAMPLES):
        barrier()
        t0 = time.perf_counter()
        for _ in range(batch):
            once()
        samples.append(slowest((time.perf_counter() - t0) / batch))
    return statistics.median(samples), batch


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in LIBRARIES or argv[1] not in ("allreduce", "sendrecv"):
        print("usage: py_loop.py mpi4py|torch|horovod allreduce|sendrecv BYTES...",
              file=sys.stderr)
        return 2
    for arg in argv[2:]:
        nbytes = int(arg)
        rank, once, barrier, slowest = LIBRARIES[argv[0]](argv[1], nbytes)
        p50, batch = measure(once, barrier, slowest)
        if rank == 0:
            print(f"{max(1, nbytes // 4) * 4} {p50 * 1e6:.3f} {SAMPLES} {batch}", flush=True)
    if argv[0] == "torch":  # Gloo's threads abort the process if they outlive the group
        import torch.distributed as dist

        dist.destroy_process_group()
    elif argv[0] == "horovod":
        import horovod.torch as hvd

        hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
