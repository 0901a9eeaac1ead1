"""Where a captured operation's time goes (issue 49: sendrecv in a CUDA graph took 5-17 times
nccl-tests -G on an H200, the collectives did not): one rank, torch's NCCL, each variant captured
as a graph of N operations and replayed, its GPU time per operation read with CUDA events and
its host time with the clock; the median of 7 replays. Prints one JSON object per line.

    python bench/gpu/graph_probe.py [--sizes 8,1048576] [--ops N]

Variants: fabbench's sendrecv (batch_isend_irecv, then wait on each work), the same without the
waits, all_to_all_single (on one rank NCCL's grouped send and receive to itself, as sendrecv's),
all_gather_into_tensor (a collective, for comparison) and a
plain copy_ (the GPU's copy, no NCCL). Exit 2 without a GPU (one line)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="graph_probe")
    ap.add_argument("--sizes", default="8,65536,1048576")
    ap.add_argument("--ops", type=int, default=100)
    args = ap.parse_args(argv)
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        print("graph_probe: error: no GPU (torch sees none)", file=sys.stderr)
        return 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1)

    def timed(name: str, fn, nbytes: int) -> None:
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as exc:
            print(json.dumps({"variant": name, "bytes": nbytes,
                              "failed": str(exc).splitlines()[0][:300]}), flush=True)
            return
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                for _ in range(args.ops):
                    fn()
        except Exception as exc:
            print(json.dumps({"variant": name, "bytes": nbytes,
                              "capture_failed": str(exc).splitlines()[0][:300]}), flush=True)
            return
        graph.replay()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        gpu, host = [], []
        for _ in range(7):
            t0 = time.perf_counter()
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            host.append((time.perf_counter() - t0) * 1e6 / args.ops)
            gpu.append(start.elapsed_time(end) * 1e3 / args.ops)
        print(json.dumps({"variant": name, "bytes": nbytes, "ops": args.ops,
                          "gpu_us": round(statistics.median(gpu), 3),
                          "host_us": round(statistics.median(host), 3)}), flush=True)

    for nbytes in (int(x) for x in args.sizes.split(",")):
        for name, fn in variants(torch, dist, nbytes):
            timed(name, fn, nbytes)
    dist.destroy_process_group()
    return 0


def variants(torch, dist, nbytes: int) -> list:
    """(name, one operation) of each variant, on buffers of ``nbytes``."""
    send = torch.ones(max(1, nbytes // 4), device="cuda")
    recv = torch.zeros_like(send)
    p2p = [dist.P2POp(dist.isend, send, 0), dist.P2POp(dist.irecv, recv, 0)]

    def batched() -> None:
        for work in dist.batch_isend_irecv(p2p):
            work.wait()

    def batched_no_wait() -> None:
        dist.batch_isend_irecv(p2p)

    return [("sendrecv: batch_isend_irecv + wait (fabbench)", batched),
            ("sendrecv: batch_isend_irecv, no wait", batched_no_wait),
            ("all_to_all_single (NCCL's own send and receive to itself)",
             lambda: dist.all_to_all_single(recv, send)),
            ("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(recv, send)),
            ("copy_", lambda: recv.copy_(send))]


if __name__ == "__main__":
    sys.exit(main())
