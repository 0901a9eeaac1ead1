"""FSDP2 (torch.distributed.fsdp.fully_shard) training of fabbench's GPT-style model on CPU with
gloo: each block sharded, then the whole model; all-gathers in forward and backward,
reduce-scatters of the gradients. Run with `torchrun --nproc-per-node 2
examples/replay/fsdp.py`."""

from __future__ import annotations

import torch
from _common import batch, finish, model, options, start, train_step
from torch.distributed.fsdp import fully_shard

args = options("gpt-tiny")
start()
net = model(args.model)
for block in net.blocks:  # type: ignore[union-attr]
    fully_shard(block)
fully_shard(net)
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
for _ in range(args.steps):
    train_step(net, optimizer, args.model, batch(args.model, args.batch, args.input))
finish()
