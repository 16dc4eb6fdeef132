"""Stock pieces for the 07 suite: grader-owned stand-ins, not the reference solution's code.

When a Block's attention or MLP (or a GPT's block) has other parameter names than the
contract's (a fused ``qkv`` projection, an ``nn.Sequential`` MLP named ``net``, Karpathy's
``sa``/``ffwd``), the reference's weights cannot be loaded into it. The suite then sends
this file's text into the student's process (``student.define``) and puts a stock piece,
with the contract's names, in its place (``grader.suite.new_graded_like``): the part is
graded on its own wiring, and the piece's names cost points where the piece is graded. It
needs only torch; it computes what the contract says, written independently of ``reference/``.

:class:`GPT` is the model generate is graded with when the student's own GPT does not compute
what the contract's GPT does with the same parameters (a GPT mistake costs points in GPT
only; see the generate tests).
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


# By the contract's names: what stands in for the student's own piece when a part that uses it
# fails (the contract's ``uses``), to tell whether that piece is the cause (grader.engine.plugin).
# One a line: what stands in for one piece brings no other along (engine.plugin.StandIns.source_for).
Head = StockHead
MultiHead = StockMultiHead
MLP = StockMLP
Block = StockBlock


class GPT(nn.Module):
    """The contract's GPT, with its names and its ``context_length``: ``forward(idx, targets=None)
    -> (logits, loss)``, ValueError for a sequence longer than the context."""

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int, context_length: int,
                 dropout: float = 0.0):
        super().__init__()
        self.context_length = context_length
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(context_length, d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(StockBlock(d_model, num_heads, context_length, dropout) for _ in range(num_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        length = idx.size(1)
        if length > self.context_length:
            raise ValueError(f"sequence length {length} exceeds context_length={self.context_length}")
        x = self.dropout(self.token_embedding(idx) + self.position_embedding(torch.arange(length, device=idx.device)))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss
