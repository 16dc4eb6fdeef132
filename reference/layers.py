"""Assignment 05: encoder and decoder.

Vaswani et al., "Attention Is All You Need" (2017), section 3.1 and figure 1: an
encoder stack of self-attention + feed-forward layers and a decoder stack that adds
cross-attention over the encoder output. Every sublayer is wrapped post-norm,
``x = LayerNorm(x + Dropout(sublayer(x)))``; the position-wise feed-forward network
is ``linear2(relu(linear1(x)))`` (section 3.3).
"""

import torch
from torch import nn

from reference.masks import causal_mask, padding_mask
from reference.multihead import MultiHeadAttention
from reference.positions import PositionalEncoding, TokenEmbedding


class FeedForward(nn.Module):
    """Position-wise feed-forward network: d_model -> d_ff -> d_model."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))  # (B, T, d_model)


class EncoderLayer(nn.Module):
    """Self-attention, then feed-forward, each with a residual connection and post-norm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, src_mask)))  # (B, S, d_model)
        return self.norm2(x + self.dropout(self.ffn(x)))  # (B, S, d_model)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over ``memory``, then feed-forward; post-norm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)))  # (B, T, d_model)
        # Queries come from the decoder, keys and values from the encoder output.
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, memory_mask)))
        return self.norm3(x + self.dropout(self.ffn(x)))  # (B, T, d_model)


class Transformer(nn.Module):
    """The encoder-decoder Transformer for sequence-to-sequence tasks such as translation."""

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
        self.pad_idx = pad_idx
        self.src_embed = TokenEmbedding(src_vocab_size, d_model, padding_idx=pad_idx)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model, padding_idx=pad_idx)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_encoder_layers)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_decoder_layers)
        )
        self.generator = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Token ids (B, S) -> memory (B, S, d_model)."""
        x = self.pos_encoding(self.src_embed(src))  # (B, S, d_model)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return x

    def decode(
        self,
        tgt_in: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Token ids (B, T) and memory (B, S, d_model) -> decoder states (B, T, d_model).

        Returns hidden states, not logits: ``forward`` applies ``generator`` to them.
        """
        x = self.pos_encoding(self.tgt_embed(tgt_in))  # (B, T, d_model)
        for layer in self.decoder_layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return x

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Token ids (B, S), (B, T) -> logits (B, T, tgt_vocab_size)."""
        src_mask = padding_mask(src, self.pad_idx)  # (B, 1, 1, S)
        tgt_mask = padding_mask(tgt_in, self.pad_idx) & causal_mask(
            tgt_in.size(1), device=tgt_in.device
        )  # (B, 1, T, T)
        memory = self.encode(src, src_mask)  # (B, S, d_model)
        return self.generator(self.decode(tgt_in, memory, tgt_mask, src_mask))
