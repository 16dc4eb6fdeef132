"""Assignment 03: multi-head attention.

Vaswani et al., "Attention Is All You Need" (2017), section 3.2.2: project queries, keys
and values, split the model dimension into ``num_heads`` heads of ``d_k = d_model / H``
features, attend in each head, then concatenate the heads and project again.
"""

import torch
from torch import nn

from reference.attention import scaled_dot_product_attention


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, D/H); head h holds features h*D/H ... (h+1)*D/H - 1."""
    batch, length, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    d_k = d_model // num_heads
    return x.view(batch, length, num_heads, d_k).transpose(1, 2)  # (B, H, T, d_k)


def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`split_heads`: (B, H, T, d_k) -> (B, T, H*d_k)."""
    batch, num_heads, length, d_k = x.shape
    return x.transpose(1, 2).contiguous().view(batch, length, num_heads * d_k)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        q = split_heads(self.W_q(query), self.num_heads)  # (B, H, T_q, d_k)
        k = split_heads(self.W_k(key), self.num_heads)  # (B, H, T_k, d_k)
        v = split_heads(self.W_v(value), self.num_heads)  # (B, H, T_k, d_k)
        # scaled_dot_product_attention divides by sqrt(d_k), the head dimension.
        _, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T_q, T_k)
        heads = self.dropout(weights) @ v  # (B, H, T_q, d_k)
        return self.W_o(combine_heads(heads))  # (B, T_q, d_model)
