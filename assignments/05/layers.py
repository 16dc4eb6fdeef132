"""# Assignment 05: encoder and decoder

Build the Transformer of Vaswani et al. 2017 (figure 1) from the pieces of the earlier
assignments: a position-wise feed-forward network, encoder and decoder layers, and the
whole encoder-decoder model. Follow the contract in `README.md` of this folder.

This file is graded on its own, so it must contain the earlier pieces it uses: paste
your solutions from assignments 02, 03 and 04 into the first cells (with any helper
they call, such as `split_heads` or `sinusoidal_encoding`). They are not graded here;
each part below is graded with your own pieces as they are, so a mistake in an earlier
piece does not cost points in this assignment.

Conventions: tensors are float32 on whatever device the input is on (never hard-code
`"cuda"` or `"cpu"`); boolean masks mean True = may attend; bad arguments raise
`ValueError` with a message (never a bare `assert`).

Check your work with `pytest assignments/05` (public tests) and
`grade assignments/05` (the grader, with hints).
"""

import math

import torch
from torch import nn


# ---- From earlier assignments: paste your solutions here -----------------------------


def causal_mask(T: int, device: torch.device | str | None = None) -> torch.Tensor:
    """From assignment 02: bool (T, T), True on and below the diagonal."""
    raise NotImplementedError("causal_mask: from assignment 02: paste your solution here")


def padding_mask(tokens: torch.Tensor, pad_idx: int) -> torch.Tensor:
    """From assignment 02: (B, T) token ids -> bool (B, 1, 1, T), True where tokens != pad_idx."""
    raise NotImplementedError("padding_mask: from assignment 02: paste your solution here")


class MultiHeadAttention(nn.Module):
    """From assignment 03 (paste it with the helpers it calls, e.g. split_heads).

    Submodules W_q, W_k, W_v, W_o; forward(query, key, value, mask=None) -> (B, T_q, d_model).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        raise NotImplementedError("MultiHeadAttention: from assignment 03: paste your solution here")

    def forward(self, query, key, value, mask=None):
        raise NotImplementedError("MultiHeadAttention: from assignment 03: paste your solution here")


class PositionalEncoding(nn.Module):
    """From assignment 04 (paste it with your sinusoidal_encoding).

    Buffer pe (max_len, d_model); forward(x: (B, T, d_model)) = dropout(x + pe[:T]).
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        raise NotImplementedError("PositionalEncoding: from assignment 04: paste your solution here")

    def forward(self, x):
        raise NotImplementedError("PositionalEncoding: from assignment 04: paste your solution here")


class TokenEmbedding(nn.Module):
    """From assignment 04: submodule embedding; forward(tokens) = embedding(tokens) * sqrt(d_model)."""

    def __init__(self, vocab_size: int, d_model: int, padding_idx: int | None = None):
        super().__init__()
        raise NotImplementedError("TokenEmbedding: from assignment 04: paste your solution here")

    def forward(self, tokens):
        raise NotImplementedError("TokenEmbedding: from assignment 04: paste your solution here")


# ---- Assignment 05 ---------------------------------------------------------------------


class FeedForward(nn.Module):
    """Position-wise feed-forward network (section 3.3): d_model -> d_ff -> d_model.

    Submodules (names are part of the contract): linear1 = nn.Linear(d_model, d_ff),
    linear2 = nn.Linear(d_ff, d_model).
    forward(x: (B, T, d_model)) = linear2(dropout(relu(linear1(x)))), (B, T, d_model).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        raise NotImplementedError("FeedForward.__init__: see assignments/05/README.md")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("FeedForward.forward: see assignments/05/README.md")


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each wrapped post-norm:
    x = norm(x + dropout(sublayer(x))).

    Submodules: self_attn (a MultiHeadAttention), ffn (a FeedForward), norm1, norm2
    (nn.LayerNorm(d_model)).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        raise NotImplementedError("EncoderLayer.__init__: see assignments/05/README.md")

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, S, d_model), src_mask: bool, broadcastable to (B, H, S, S). Returns (B, S, d_model)."""
        raise NotImplementedError("EncoderLayer.forward: see assignments/05/README.md")


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, then the
    feed-forward network, each wrapped post-norm.

    Submodules: self_attn, cross_attn (MultiHeadAttention), ffn (FeedForward), norm1,
    norm2, norm3 (nn.LayerNorm(d_model)).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        raise NotImplementedError("DecoderLayer.__init__: see assignments/05/README.md")

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x: (B, T, d_model) decoder states, memory: (B, S, d_model) encoder output;
        tgt_mask: bool, broadcastable to (B, H, T, T); memory_mask: bool, broadcastable to
        (B, H, T, S). Cross-attention takes its queries from the decoder and its keys and
        values from memory. Returns (B, T, d_model)."""
        raise NotImplementedError("DecoderLayer.forward: see assignments/05/README.md")


class Transformer(nn.Module):
    """The encoder-decoder Transformer.

    Submodules: src_embed, tgt_embed (TokenEmbedding with padding_idx=pad_idx),
    pos_encoding (PositionalEncoding(d_model, max_len, dropout)), encoder_layers,
    decoder_layers (nn.ModuleList of EncoderLayer / DecoderLayer), generator
    (nn.Linear(d_model, tgt_vocab_size)).
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        num_heads: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        d_ff: int = 2048,
        max_len: int = 5000,
        dropout: float = 0.1,
        pad_idx: int = 0,
    ):
        super().__init__()
        raise NotImplementedError("Transformer.__init__: see assignments/05/README.md")

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src: (B, S) token ids -> memory (B, S, d_model): embed, add positions, run the
        encoder layers with src_mask."""
        raise NotImplementedError("Transformer.encode: see assignments/05/README.md")

    def decode(
        self,
        tgt_in: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """tgt_in: (B, T) token ids, memory: (B, S, d_model) -> decoder states (B, T, d_model).
        Hidden states, not logits: forward applies the generator."""
        raise NotImplementedError("Transformer.decode: see assignments/05/README.md")

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """src: (B, S), tgt_in: (B, T) token ids -> logits (B, T, tgt_vocab_size).

        Builds the masks itself: src_mask = padding mask of src (also the memory_mask of
        the decoder); tgt_mask = padding mask of tgt_in AND the causal mask."""
        raise NotImplementedError("Transformer.forward: see assignments/05/README.md")
