"""Assignment 01: attention from scratch.

Scaled dot-product attention as in Vaswani et al., "Attention Is All You Need" (2017),
section 3.2.1: ``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``.
"""

import math

import torch
from torch import nn


def attention_scores(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Raw dot-product scores ``query @ keys^T``: (..., T_q, d), (..., T_k, d) -> (..., T_q, T_k)."""
    return query @ keys.transpose(-2, -1)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax without torch's built-in one.

    Subtracting the row maximum keeps ``exp`` from overflowing; a row that is entirely
    ``-inf`` has no finite maximum, so it is shifted by 0 instead (and yields nan, as
    ``torch.softmax`` does).
    """
    row_max = x.amax(dim=dim, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exp = torch.exp(x - row_max)
    return exp / exp.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(output, weights)``; ``mask`` is boolean, True = may attend."""
    d_k = q.size(-1)
    scores = attention_scores(q, k) / math.sqrt(d_k)  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)  # (..., T_q, T_k)
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)


class SelfAttention(nn.Module):
    """Single-head self-attention with learned query, key and value projections."""

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)  # (B, T, d_out) each
        output, _ = scaled_dot_product_attention(q, k, v)
        return output  # (B, T, d_out)
