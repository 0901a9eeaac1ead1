"""What the example jobs share: a built-in model of fabbench's, a batch of synthetic data and
the training step; each job script is a plain torchrun script (no fabbench in its loop)."""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist

from fabbench.networks import build, get


def options(default_model: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=default_model)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--input", type=int, default=32, help="image side or sequence length")
    return parser.parse_args()


def start() -> int:
    """The default process group (gloo on CPU, torchrun's environment); this rank."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    torch.manual_seed(dist.get_rank())
    return dist.get_rank()


def model(name: str) -> torch.nn.Module:
    torch.manual_seed(0)  # the same weights on every rank
    return build(name)  # type: ignore[no-any-return]


def batch(name: str, size: int, side: int) -> tuple[torch.Tensor, torch.Tensor]:
    spec = get(name)
    if spec.family == "image":
        return torch.randn(size, 3, side, side), torch.randint(0, 1000, (size,))
    vocab = spec.kwargs["vocab"]
    tokens = torch.randint(0, vocab, (size, side + 1))
    return tokens[:, :-1], tokens[:, 1:]


def train_step(net: torch.nn.Module, optimizer: torch.optim.Optimizer, name: str,
               data: tuple[torch.Tensor, torch.Tensor]) -> None:
    inputs, target = data
    out = net(inputs)
    loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def finish() -> None:
    if os.environ.get("RANK") == "0":
        print("done", flush=True)
    dist.destroy_process_group()
