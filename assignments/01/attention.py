"""# Assignment 01: attention from scratch

Implement the four parts below, following the contract in `README.md` of this folder.
Conventions: tensors are float32 on whatever device the input is on (never hard-code
`"cuda"` or `"cpu"`); boolean masks mean True = may attend; bad arguments raise
`ValueError` with a message (never a bare `assert`).

Write `softmax` yourself: `torch.softmax`, `F.softmax`, `log_softmax` and `nn.Softmax`
are not allowed in it (the grader notices and gives no points for that part).

Check your work with `pytest assignments/01` (public tests) and
`grade assignments/01` (the grader, with hints).
"""

import math

import torch
from torch import nn


def attention_scores(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Raw dot-product scores query @ keys^T over the last two dimensions, no scaling.

    query: (..., T_q, d), keys: (..., T_k, d) -> (..., T_q, T_k).
    """
    raise NotImplementedError("attention_scores: see assignments/01/README.md")


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax of x along dim; same shape as x.

    Must not overflow for inputs of 1e4 and must handle rows with some -inf entries.
    Do not call torch.softmax, F.softmax, log_softmax or nn.Softmax.
    """
    raise NotImplementedError("softmax: see assignments/01/README.md")


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention (Vaswani et al. 2017, section 3.2.1).

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v), mask: bool, broadcastable
    to (..., T_q, T_k), True = may attend. Returns (output, weights):
    weights = softmax(q k^T / sqrt(d_k)) with masked positions excluded before the
    softmax, (..., T_q, T_k); output = weights @ v, (..., T_q, d_v).
    """
    raise NotImplementedError("scaled_dot_product_attention: see assignments/01/README.md")


class SelfAttention(nn.Module):
    """Single-head self-attention with learned projections.

    Submodules (names are part of the contract): W_query, W_key, W_value, each
    nn.Linear(d_in, d_out, bias=qkv_bias). forward(x: (B, T, d_in)) -> (B, T, d_out).
    """

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        raise NotImplementedError("SelfAttention.__init__: see assignments/01/README.md")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, T, d_in) -> (B, T, d_out)."""
        raise NotImplementedError("SelfAttention.forward: see assignments/01/README.md")
