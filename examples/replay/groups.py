"""A job of two process groups: data parallel over pairs of ranks (DDP on its own group,
ranks {0, 1}, {2, 3}, ...), and after each step an all-reduce of a metric across the other
group (the ranks of one position in each pair: {0, 2, ...} and {1, 3, ...}), plus a broadcast
on the default group. Needs an even number of ranks: `torchrun --nproc-per-node 4
examples/replay/groups.py` (2 ranks: one pair and the same-position groups of one rank)."""

from __future__ import annotations

import torch
import torch.distributed as dist
from _common import batch, finish, model, options, start, train_step

args = options("gpt-tiny")
rank = start()
world = dist.get_world_size()
pairs = [dist.new_group([r, r + 1]) for r in range(0, world, 2)]
across = [dist.new_group(list(range(p, world, 2))) for p in (0, 1)]
mine, other = pairs[rank // 2], across[rank % 2]
net = torch.nn.parallel.DistributedDataParallel(model(args.model), process_group=mine,
                                                bucket_cap_mb=1)
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
for _ in range(args.steps):
    train_step(net, optimizer, args.model, batch(args.model, args.batch, args.input))
    metric = torch.ones(1024)
    dist.all_reduce(metric, group=other)
    flag = torch.zeros(16)
    dist.broadcast(flag, src=0)
finish()
