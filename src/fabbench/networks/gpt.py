"""A GPT-style decoder-only transformer (pre-norm, GELU MLP, learned positions, tied input and
output embeddings), in plain torch, using PyTorch's fused scaled-dot-product attention."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)

    def forward(self, x: Tensor) -> Tensor:
        n, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(n, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(n, t, c))
        out: Tensor = x + self.out(F.gelu(self.fc(self.ln2(x))))  # __call__ is typed Any
        return out


class GPT(nn.Module):
    def __init__(self, *, layers: int, width: int, heads: int, vocab: int, context: int) -> None:
        super().__init__()
        if width % heads:
            raise ValueError("width must be a multiple of heads")
        self.context = context
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.blocks = nn.Sequential(*(Block(width, heads) for _ in range(layers)))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as GPT-2

    def forward(self, idx: Tensor) -> Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.blocks(self.tok(idx) + self.pos(pos))
        logits: Tensor = self.head(self.ln(x))  # nn.Module's __call__ is typed Any
        return logits


def gpt(*, layers: int, width: int, heads: int, vocab: int, context: int) -> GPT:
    return GPT(layers=layers, width=width, heads=heads, vocab=vocab, context=context)
