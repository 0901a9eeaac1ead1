"""Point-to-point operations, as pipeline-parallel jobs issue them: each step, in pairs of
ranks ({0, 1}, {2, 3}, ...) on their own group, the even rank sends its activations
(``dist.send``, blocking) and the odd one answers with ``isend``; then both exchange a buffer
with ``batch_isend_irecv``; a small model's step in between. Needs an even number of ranks:
`torchrun --nproc-per-node 2 examples/replay/p2p.py`."""

from __future__ import annotations

import torch
import torch.distributed as dist
from _common import finish, options, start

args = options("none")
rank = start()
world = dist.get_world_size()
pairs = [dist.new_group([r, r + 1]) for r in range(0, world, 2)]
pair, peer = pairs[rank // 2], rank ^ 1
net = torch.nn.Linear(64, 64)
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
for _ in range(args.steps):
    activations = torch.ones(1000)
    if rank % 2 == 0:
        dist.send(activations, peer, group=pair)
        dist.irecv(activations, peer, group=pair).wait()
    else:
        dist.recv(activations, peer, group=pair)
        dist.isend(activations, peer, group=pair).wait()
    exchange = [dist.P2POp(dist.isend, activations, peer),
                dist.P2POp(dist.irecv, torch.empty(1000), peer)]
    for request in dist.batch_isend_irecv(exchange):
        request.wait()
    net(torch.randn(4, 64)).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
finish()
