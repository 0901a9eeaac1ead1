"""A 3-D stencil halo exchange, the communication pattern of CFD codes, as the ranks run it.

The ranks form a periodic 3-D process grid (dimensions as MPI_Dims_create picks them); each owns
a cube of side³ cells (side = round(cells_per_rank^(1/3))) with one ghost layer. One iteration
exchanges the six faces with the neighbours, one dimension after the other, whole faces including
ghosts (so edges and corners arrive too), then applies a 7-point Jacobi update.

The exchange goes through the communicator's ``shift``, the primitive's own point-to-point path
(MPI Sendrecv, torch.distributed's batched isend/irecv, Horovod's alltoall with splits). Before
timing, one exchange is checked exactly: every cell, ghosts included, must hold the periodic
global function f(x, y, z) = (x·Y + y)·Z + z.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from fabbench import config
from fabbench.comm.base import Communicator
from fabbench.plan import Plan
from fabbench.results import records
from fabbench.timing.stats import summarize
from fabbench.workloads.halo.grid import (
    bytes_per_iter,
    coords_of,
    process_grid,
    rank_of,
    side_of,
)
from fabbench.workloads.halo.record import Halo
from fabbench.workloads.halo.section import HaloConfig


class HaloExchange:
    """This rank's cube with its ghost layer, in the periodic process grid; faces exchanged
    through the communicator's ``shift``."""

    def __init__(self, comm: Communicator, side: int) -> None:
        import torch

        self.torch, self.comm, self.side = torch, comm, side
        self.dims = process_grid(comm.size)
        self.coords = coords_of(comm.rank, self.dims)
        self.device = comm.device
        n = side + 2
        self.u = torch.zeros((n, n, n), dtype=torch.float64, device=self.device)
        self.next = torch.empty_like(self.u)
        self.send = torch.empty((n, n), dtype=torch.float64, device=self.device)
        self.recv = torch.empty_like(self.send)

    def neighbours(self, d: int) -> tuple[int, int]:
        """(minus, plus) neighbour along dimension d."""
        lo, hi = list(self.coords), list(self.coords)
        lo[d] -= 1
        hi[d] += 1
        return rank_of(lo, self.dims), rank_of(hi, self.dims)

    def exchange(self) -> None:
        u, side = self.u, self.side
        send, recv = self.send, self.recv
        for d in range(3):
            minus, plus = self.neighbours(d)
            # my last interior layer goes up, my lower ghost comes from below; then the reverse
            for way, out_idx, in_idx, dest, source in ((0, side, 0, plus, minus),
                                                       (1, 1, side + 1, minus, plus)):
                send.copy_(u.select(d, out_idx))
                self.comm.shift(send.view(-1), dest, recv.view(-1), source, f"{d}.{way}")
                u.select(d, in_idx).copy_(recv)

    def stencil(self) -> None:
        u, v = self.u, self.next
        c = slice(1, -1)
        v[c, c, c] = (u[:-2, c, c] + u[2:, c, c] + u[c, :-2, c] + u[c, 2:, c]
                      + u[c, c, :-2] + u[c, c, 2:]) / 6.0
        self.u, self.next = v, u

    def synchronize(self) -> None:
        if self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def fill_global(self) -> Any:
        """u := f at the wrapped global coordinates of every cell (ghosts included); returns f."""
        torch, side = self.torch, self.side
        extent = [d * side for d in self.dims]
        axes = [(torch.arange(side + 2, device=self.device, dtype=torch.float64) - 1
                 + c * side) % e for c, e in zip(self.coords, extent, strict=True)]
        x, y, z = torch.meshgrid(*axes, indexing="ij")
        expected = (x * extent[1] + y) * extent[2] + z
        self.u.zero_()
        self.u[1:-1, 1:-1, 1:-1] = expected[1:-1, 1:-1, 1:-1]
        return expected

    def check(self) -> int:
        """One exchange from a known field; wrong cells on this rank."""
        expected = self.fill_global()
        self.exchange()
        self.synchronize()
        return int((self.u != expected).sum().item())


def run_halo(comm: Communicator, plan: Plan, transport: str,
             arm: Callable[[float, str], None]) -> Halo:
    options = config.section(plan, "halo", HaloConfig)
    side = side_of(options.cells_per_rank)
    halo = HaloExchange(comm, side)
    arm(plan.timeout_s * 2, "halo exchange check")
    wrong = comm.gather_objects(halo.check())
    clock = time.perf_counter
    iteration, exchange = [], []
    for i in range(3 + options.halo_iters):
        arm(plan.timeout_s, f"halo iteration {i + 1}")
        t0 = clock()
        halo.exchange()
        halo.synchronize()
        t1 = clock()
        halo.stencil()
        halo.synchronize()
        t2 = clock()
        if i >= 3:  # three warm-up iterations
            iteration.append(t2 - t0)
            exchange.append(t1 - t0)
    every = comm.gather_objects((iteration, exchange))
    slow_iter = [max(col) * 1e6 for col in zip(*(e[0] for e in every), strict=True)]
    slow_exch = [max(col) * 1e6 for col in zip(*(e[1] for e in every), strict=True)]
    sent = bytes_per_iter(side, halo.dims)
    ex = summarize(slow_exch)
    return Halo(
        run_id=plan.run_id, cells_per_rank=side**3, side=side, grid=halo.dims,
        ranks=comm.size, iterations=options.halo_iters, dtype="float64",
        transport=transport, time_us=records.Times.of(summarize(slow_iter)),
        exchange_us=records.Times.of(ex),
        samples_us=[round(t, 3) for t in slow_iter],  # per iteration, the slowest rank's
        compute_us_p50=statistics.median(slow_iter) - ex["p50"],
        bytes_per_iter=sent, messages_per_iter=sum(2 for d in halo.dims if d > 1),
        exchange_gbyte_s=sent / (ex["p50"] * 1e-6) / 1e9 if sent and ex["p50"] > 0 else 0.0,
        correct=not any(wrong), wrong=sum(wrong))
