"""Stock pieces for the 05 suite: grader-owned stand-ins, not the reference solution's code.

When the student's FeedForward or MultiHeadAttention inside a layer has other parameter
names than the contract's (an ``nn.Sequential`` FeedForward, a fused ``qkv`` projection),
the reference's weights cannot be loaded into it. The suite then sends this file's text
into the student's process (``student.define``) and puts a stock piece, with the
contract's names, in its place (:func:`grader.suite.new_graded_like`): the layer is graded
on its own wiring, and the piece's names cost points where the piece is graded. It needs
only torch; it computes what the contract says, written independently of ``reference/``.
"""

import math

import torch
from torch import nn


class StockFeedForward(nn.Module):
    """linear2(dropout(relu(linear1(x)))), with the contract's names."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.linear1(x))  # (B, T, d_ff)
        return self.linear2(self.dropout(hidden))  # (B, T, d_model)


class StockMultiHeadAttention(nn.Module):
    """Multi-head attention with the contract's names (W_q, W_k, W_v, W_o) and masks
    (bool, True = may attend, broadcastable to (B, H, T_q, T_k))."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.num_heads = num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
        self.dropout = nn.Dropout(dropout)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        def heads(x: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> (B, H, T, D/H)
            return x.unflatten(-1, (self.num_heads, -1)).transpose(1, 2)

        q, k, v = heads(self.W_q(query)), heads(self.W_k(key)), heads(self.W_v(value))
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask.bool(), float("-inf"))
        weights = self.dropout(scores.softmax(dim=-1))  # (B, H, T_q, T_k)
        out = torch.einsum("bhqk,bhkd->bhqd", weights, v).transpose(1, 2).flatten(-2)  # (B, T_q, D)
        return self.W_o(out)



class StockEncoderLayer(nn.Module):
    """Post-norm self-attention, then feed-forward, with the contract's names."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.self_attn = StockMultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = StockFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, src_mask)))
        return self.norm2(x + self.dropout(self.ffn(x)))


class StockDecoderLayer(nn.Module):
    """Post-norm masked self-attention, cross-attention over ``memory``, feed-forward."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.self_attn = StockMultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = StockMultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = StockFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout(self.ffn(x)))


# By the contract's names: what stands in for the student's own piece when a part that uses it
# fails (the contract's ``uses``), to tell whether that piece is the cause (grader.engine.plugin).
# One a line: what stands in for one piece brings no other along (engine.plugin.StandIns.source_for).
FeedForward = StockFeedForward
EncoderLayer = StockEncoderLayer
DecoderLayer = StockDecoderLayer
