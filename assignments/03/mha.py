"""# Assignment 03: multi-head attention

Implement the three parts below, following the contract in `README.md` of this folder.
Conventions: tensors are float32 on whatever device the input is on (never hard-code
`"cuda"` or `"cpu"`); boolean masks mean True = may attend; bad arguments raise
`ValueError` with a message (never a bare `assert`).

Check your work with `pytest assignments/03` (public tests) and
`grade assignments/03` (the grader, with hints).
"""

import math

import torch
from torch import nn


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Split the feature dimension into heads.

    x: (B, T, D) -> (B, H, T, D/H), where head h holds features h*D/H ... (h+1)*D/H - 1.
    Raise ValueError if D is not divisible by num_heads.
    """
    raise NotImplementedError("split_heads: see assignments/03/README.md")


def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """Inverse of split_heads: (B, H, T, d_k) -> (B, T, H*d_k)."""
    raise NotImplementedError("combine_heads: see assignments/03/README.md")


class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al. 2017, section 3.2.2).

    Submodules (names are part of the contract): W_q, W_k, W_v, W_o, each
    nn.Linear(d_model, d_model, bias=bias). Scale scores by sqrt(d_model / num_heads).
    Raise ValueError if d_model is not divisible by num_heads.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        raise NotImplementedError("MultiHeadAttention.__init__: see assignments/03/README.md")

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """query: (B, T_q, D), key and value: (B, T_k, D), mask: bool, broadcastable to
        (B, H, T_q, T_k), True = may attend. Returns (B, T_q, D)."""
        raise NotImplementedError("MultiHeadAttention.forward: see assignments/03/README.md")
