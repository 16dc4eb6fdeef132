"""Assignment 02: masks and dropout.

Vaswani et al., "Attention Is All You Need" (2017): the decoder's self-attention is
masked so that position i sees only positions <= i (section 3.2.3), and residual
dropout regularises the model (section 5.4; Srivastava et al., 2014). Masks are
boolean with True = may attend, as in ``torch.nn.functional.scaled_dot_product_attention``.
"""

import torch
from torch import nn

from reference.attention import scaled_dot_product_attention


def causal_mask(T: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Bool (T, T), True on and below the diagonal: query i may attend to keys 0..i."""
    if T < 0:
        raise ValueError(f"T must be non-negative, got {T}")
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def padding_mask(tokens: torch.Tensor, pad_idx: int) -> torch.Tensor:
    """(B, T) token ids -> bool (B, 1, 1, T), True where the key is a real token."""
    if tokens.dim() != 2:
        raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
    return (tokens != pad_idx)[:, None, None, :]  # (B, 1, 1, T)


def dropout(
    x: torch.Tensor,
    p: float,
    training: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Inverted dropout: zero each element with probability ``p``, scale survivors by 1/(1-p).

    Scaling at training time keeps the expected value of every element unchanged, so
    evaluation (``training=False``) is the identity.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return torch.zeros_like(x)
    dtype = x.dtype if x.is_floating_point() else torch.float32
    keep = torch.rand(x.shape, generator=generator, device=x.device, dtype=dtype) >= p
    return x * keep / (1.0 - p)


class CausalSelfAttention(nn.Module):
    """Single-head self-attention in which each position attends only to earlier ones."""

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float = 0.0,
        qkv_bias: bool = False,
    ):
        super().__init__()
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {dropout}")
        self.context_length = context_length
        self.dropout_p = dropout
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.register_buffer("mask", causal_mask(context_length))  # (context, context)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.size(1)
        if T > self.context_length:
            raise ValueError(f"sequence length {T} exceeds context_length={self.context_length}")
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)  # (B, T, d_out) each
        _, weights = scaled_dot_product_attention(q, k, v, self.mask[:T, :T])  # (B, T, T)
        weights = dropout(weights, self.dropout_p, self.training)
        return weights @ v  # (B, T, d_out)
