"""Stock pieces for the 07 suite: grader-owned stand-ins, not the reference solution's code.

When a Block's attention or MLP (or a GPT's block) has other parameter names than the
contract's (a fused ``qkv`` projection, an ``nn.Sequential`` MLP named ``net``, Karpathy's
``sa``/``ffwd``), the reference's weights cannot be loaded into it. The suite then sends
this file's text into the student's process (``student.define``) and puts a stock piece,
with the contract's names, in its place (``grader.suite.new_graded_like``): the part is
graded on its own wiring, and the piece's names cost points where the piece is graded. It
needs only torch; it computes what the contract says, written independently of ``reference/``.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class StockHead(nn.Module):
    def __init__(self, d_model: int, head_size: int, context_length: int, dropout: float = 0.0):
        super().__init__()
        self.key, self.query, self.value = (nn.Linear(d_model, head_size, bias=False) for _ in range(3))
        self.register_buffer("tril", torch.ones(context_length, context_length).tril().bool())
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.size(1)
        q, k, v = self.query(x), self.key(x), self.value(x)
        scores = torch.einsum("btd,bsd->bts", q, k) / math.sqrt(k.size(-1))
        scores = scores.masked_fill(~self.tril[:length, :length], float("-inf"))
        return self.dropout(scores.softmax(dim=-1)) @ v


class StockMultiHead(nn.Module):
    def __init__(self, d_model: int, num_heads: int, context_length: int, dropout: float = 0.0):
        super().__init__()
        self.heads = nn.ModuleList(StockHead(d_model, d_model // num_heads, context_length, dropout)
                                   for _ in range(num_heads))
        self.proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(torch.cat([head(x) for head in self.heads], dim=-1)))


class StockMLP(nn.Module):
    def __init__(self, d_model: int, dropout: float = 0.0):
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.proj = nn.Linear(4 * d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x))))


class StockBlock(nn.Module):
    def __init__(self, d_model: int, num_heads: int, context_length: int, dropout: float = 0.0):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = StockMultiHead(d_model, num_heads, context_length, dropout)
        self.mlp = StockMLP(d_model, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class LogitsOnly(nn.Module):
    """A GPT seen through its logits, ``model(idx)[0]``, with the GPT's own parameter names:
    for a gradient check, whose loss is an inner product with one output tensor."""

    def __init__(self, model: nn.Module):
        super().__init__()
        for name, child in model.named_children():
            self.add_module(name, child)
        object.__setattr__(self, "model", model)  # not registered: its parameters are the children's

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.model(idx)[0]
