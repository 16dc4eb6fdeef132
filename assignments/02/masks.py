"""# Assignment 02: masks and dropout

Implement the four parts below, following the contract in `README.md` of this folder.
Conventions: tensors are float32 on whatever device the input is on (never hard-code
`"cuda"` or `"cpu"`); boolean masks mean True = may attend; bad arguments raise
`ValueError` with a message (never a bare `assert`).

`CausalSelfAttention` needs scaled dot-product attention: paste your
`scaled_dot_product_attention` (and the `attention_scores` and `softmax` it uses) from
assignment 01 into this file; the grader grades this one file.

Check your work with `pytest assignments/02` (public tests) and
`grade assignments/02` (the grader, with hints).
"""

import math

import torch
from torch import nn


def causal_mask(T: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Bool (T, T) on `device`, True on and below the diagonal: query i may attend to
    keys 0..i (True = may attend)."""
    raise NotImplementedError("causal_mask: see assignments/02/README.md")


def padding_mask(tokens: torch.Tensor, pad_idx: int) -> torch.Tensor:
    """tokens: (B, T) token ids -> bool (B, 1, 1, T), True where tokens != pad_idx, so it
    broadcasts over heads and queries."""
    raise NotImplementedError("padding_mask: see assignments/02/README.md")


def dropout(
    x: torch.Tensor,
    p: float,
    training: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Inverted dropout: zero each element of x with probability p, scale the survivors
    by 1/(1-p); same shape as x.

    The identity when training is False or p == 0; all zeros when p == 1. Raise
    ValueError if p is outside [0, 1]. Draw the random numbers from `generator` when one
    is given (e.g. torch.rand(..., generator=generator)).
    """
    raise NotImplementedError("dropout: see assignments/02/README.md")


class CausalSelfAttention(nn.Module):
    """Single-head self-attention in which position i attends only to positions <= i.

    Submodules (names are part of the contract): W_query, W_key, W_value, each
    nn.Linear(d_in, d_out, bias=qkv_bias); a buffer `mask` registered with
    self.register_buffer, holding causal_mask(context_length). Dropout with probability
    `dropout` on the attention weights, only in training mode.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float = 0.0,
        qkv_bias: bool = False,
    ):
        super().__init__()
        raise NotImplementedError("CausalSelfAttention.__init__: see assignments/02/README.md")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, T, d_in) with T <= context_length -> (B, T, d_out).
        Raise ValueError if T > context_length."""
        raise NotImplementedError("CausalSelfAttention.forward: see assignments/02/README.md")
