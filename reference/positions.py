"""Assignment 04: positions and embeddings.

Vaswani et al., "Attention Is All You Need" (2017), sections 3.4 and 3.5: token
embeddings are multiplied by sqrt(d_model), and fixed sinusoidal encodings
``PE[pos, 2i] = sin(pos / 10000^(2i/d_model))``, ``PE[pos, 2i+1] = cos(...)`` are added
so that attention, which is order-blind, can use token positions.
"""

import math

import torch
from torch import nn


def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, d_model) table with sin on even and cos on odd feature indices."""
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even to interleave sin and cos, got {d_model}")
    if max_len < 0:
        raise ValueError(f"max_len must be non-negative, got {max_len}")
    # Computed in float64 so large positions keep their precision, returned as float32.
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d_model/2,)
    angle = position / 10000.0 ** (two_i / d_model)  # (max_len, d_model/2)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()  # (max_len, d_model)


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table to a (B, T, d_model) input, then applies dropout."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.max_len = max_len
        # A buffer, not a parameter: it moves with .to(device) but is never trained.
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))  # (max_len, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.size(1)
        if T > self.max_len:
            raise ValueError(f"sequence length {T} exceeds max_len={self.max_len}")
        return self.dropout(x + self.pe[:T].to(x.dtype))  # (B, T, d_model)


class TokenEmbedding(nn.Module):
    """Token ids (B, T) -> embeddings (B, T, d_model) scaled by sqrt(d_model)."""

    def __init__(self, vocab_size: int, d_model: int, padding_idx: int | None = None):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embedding(tokens) * math.sqrt(self.d_model)  # (B, T, d_model)
