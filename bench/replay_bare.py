"""A bare torch.distributed loop of a fabbench-trace/1 document's operations, each completed
before the next, no gaps: what `--replay-mode back-to-back` must come near (run by torchrun
from tests/integration/test_replay.py and bench/replay_fidelity.py; written without fabbench,
from the document's JSON). Prints, on rank 0, the median over the timed steps of the slowest
rank's step time in microseconds."""

import json
import mmap
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

path, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("gloo")
me, doc = dist.get_rank(), json.loads(Path(path).read_text())
groups = [dist.group.WORLD] + [dist.new_group(g["ranks"]) for g in doc["groups"][1:]]
SIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1,
        "int32": 4, "int64": 8, "bool": 1}  # every dtype a fabbench-trace/1 op may have


def host(count, kind):
    """count elements in a page-aligned mapping of their own (OSU's buffers, nccl-tests' on a
    host, and every bare loop of this repo: in the interpreter's heap a buffer's place depends
    on what the process allocated before, and its transfers' speed with it)."""
    if count == 0:
        return torch.empty(0, dtype=kind)
    size = count * torch.empty(0, dtype=kind).element_size()
    return torch.frombuffer(mmap.mmap(-1, size), dtype=kind, count=count).fill_(1)


def call(op):
    g, members = groups[op["group"]], doc["groups"][op["group"]]["ranks"]
    n, count = len(members), op["bytes"] // SIZE[op.get("dtype", "float32")]
    kind = getattr(torch, op.get("dtype", "float32"))
    part, whole = host(count, kind), host(count * n, kind)
    name = op["op"]
    if name == "allreduce":
        return lambda: dist.all_reduce(part, group=g)
    if name == "allgather":
        return lambda: dist.all_gather_into_tensor(whole, part, group=g)
    if name == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(part, whole, group=g)
    if name == "broadcast":
        return lambda: dist.broadcast(part, src=members[op["peer"]], group=g)
    if name == "send":
        return lambda: dist.send(part, dst=op["peer"], group=g)
    if name == "recv":
        return lambda: dist.recv(part, src=op["peer"], group=g)
    raise SystemExit(f"replay_bare.py has no {name}")


program = [[call(op) for op in s["ops"]] for s in doc["ranks"][me]["steps"]]
clock, times = time.perf_counter, []
flag = torch.zeros(1)
for i in range(warmup + steps):
    dist.all_reduce(flag)
    t0 = clock()
    for issue in program[i % len(program)]:
        issue()
    took = torch.tensor([clock() - t0])
    dist.all_reduce(took, op=dist.ReduceOp.MAX)
    if i >= warmup:
        times.append(took.item() * 1e6)
if me == 0:
    print(json.dumps({"step_us_p50": statistics.median(times)}), flush=True)
dist.barrier()
# out without tearing Gloo down: a rank that destroys its group while its peer's connection
# closes may abort in Gloo's threads ("terminate called without an active exception", seen
# once in 16 runs here); fabbench's ranks end the same way (launch/rank.py)
os._exit(0)
