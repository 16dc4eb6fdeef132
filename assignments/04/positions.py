"""# Assignment 04: positions and embeddings

Attention is order-blind: it sees a set of tokens, not a sequence. Implement the three
parts below, following the contract in `README.md` of this folder: the sinusoidal
position table of the paper, a module that adds it to its input, and token embeddings
scaled by `sqrt(d_model)`.
Conventions: tensors are float32 on whatever device the input is on (never hard-code
`"cuda"` or `"cpu"`); bad arguments raise `ValueError` with a message (never a bare
`assert`).

Check your work with `pytest assignments/04` (public tests) and
`grade assignments/04` (the grader, with hints).
"""

import math

import torch
from torch import nn


def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The fixed position table of Vaswani et al. 2017, section 3.5.

    Returns a float32 tensor of shape (max_len, d_model) with, for each position pos and
    each i in 0 .. d_model/2 - 1:
        PE[pos, 2i]   = sin(pos / 10000^(2i / d_model))
        PE[pos, 2i+1] = cos(pos / 10000^(2i / d_model))
    (sin on even and cos on odd feature indices: interleaved, not concatenated).
    Raise ValueError if d_model is odd.
    """
    raise NotImplementedError("sinusoidal_encoding: see assignments/04/README.md")


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal table to its input, then applies dropout.

    Keep the table as a registered buffer named `pe` of shape (max_len, d_model): a
    buffer moves with `.to(device)` and is saved in the state dict, but it is not a
    parameter (it is never trained).
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        raise NotImplementedError("PositionalEncoding.__init__: see assignments/04/README.md")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, T, d_model) -> dropout(x + pe[:T]), (B, T, d_model).
        Raise ValueError if T > max_len."""
        raise NotImplementedError("PositionalEncoding.forward: see assignments/04/README.md")


class TokenEmbedding(nn.Module):
    """Token ids -> vectors, scaled by sqrt(d_model) (section 3.4 of the paper).

    Submodule (its name is part of the contract): embedding, an
    nn.Embedding(vocab_size, d_model, padding_idx=padding_idx).
    """

    def __init__(self, vocab_size: int, d_model: int, padding_idx: int | None = None):
        super().__init__()
        raise NotImplementedError("TokenEmbedding.__init__: see assignments/04/README.md")

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens: (B, T) int64 -> embedding(tokens) * sqrt(d_model), (B, T, d_model)."""
        raise NotImplementedError("TokenEmbedding.forward: see assignments/04/README.md")
