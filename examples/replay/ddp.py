"""DistributedDataParallel training of one of fabbench's models (default gpt-tiny) on CPU with
gloo: run with `torchrun --nproc-per-node 2 examples/replay/ddp.py`, record it with
`fabbench trace --out t -- torchrun --nproc-per-node 2 examples/replay/ddp.py`."""

from __future__ import annotations

import torch
from _common import batch, finish, model, options, start, train_step

args = options("gpt-tiny")
start()
net = torch.nn.parallel.DistributedDataParallel(model(args.model), bucket_cap_mb=1)
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
for _ in range(args.steps):
    train_step(net, optimizer, args.model, batch(args.model, args.batch, args.input))
finish()
