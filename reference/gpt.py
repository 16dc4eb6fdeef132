"""Assignment 07: a GPT from scratch (decoder-only). The reference solution (the contract: docs/course.md).

Radford et al., "Improving Language Understanding by Generative Pre-Training" (2018) and
"Language Models are Unsupervised Multitask Learners" (2019, GPT-2: pre-norm blocks and a
final LayerNorm), in the shape most courses teach it (Karpathy's "let's build GPT"): each
head a module with its own causal `tril` buffer, a list of heads and a projection, a GELU
MLP, learned positions, and sampling with temperature and top-k. Written on its own, not
from 03: the contract's names and layout differ.
"""

import torch
import torch.nn.functional as F
from torch import nn


def _check_length(length: int, context_length: int) -> None:
    if length > context_length:
        raise ValueError(f"sequence length {length} exceeds context_length={context_length}")


class Head(nn.Module):
    """One head of causal self-attention: (B, T, d_model) -> (B, T, head_size)."""

    def __init__(self, d_model: int, head_size: int, context_length: int, dropout: float = 0.0):
        super().__init__()
        self.key = nn.Linear(d_model, head_size, bias=False)
        self.query = nn.Linear(d_model, head_size, bias=False)
        self.value = nn.Linear(d_model, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(context_length, context_length, dtype=torch.bool)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, length, _ = x.shape
        _check_length(length, self.tril.size(0))
        k, q, v = self.key(x), self.query(x), self.value(x)  # (B, T, hs) each
        scores = q @ k.transpose(-2, -1) * k.size(-1) ** -0.5  # (B, T, T)
        scores = scores.masked_fill(~self.tril[:length, :length], float("-inf"))
        weights = self.dropout(F.softmax(scores, dim=-1))  # (B, T, T)
        return weights @ v  # (B, T, hs)


class MultiHead(nn.Module):
    """``num_heads`` heads side by side, concatenated and projected: (B, T, d_model) -> (B, T, d_model)."""

    def __init__(self, d_model: int, num_heads: int, context_length: int, dropout: float = 0.0):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        head_size = d_model // num_heads
        self.heads = nn.ModuleList(Head(d_model, head_size, context_length, dropout) for _ in range(num_heads))
        self.proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.cat([head(x) for head in self.heads], dim=-1)  # (B, T, d_model)
        return self.dropout(self.proj(out))


class MLP(nn.Module):
    """Position-wise feed-forward network with a 4x hidden layer and exact GELU."""

    def __init__(self, d_model: int, dropout: float = 0.0):
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.proj = nn.Linear(4 * d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x))))  # (B, T, d_model)


class Block(nn.Module):
    """A pre-norm Transformer block: communication (attention), then computation (MLP)."""

    def __init__(self, d_model: int, num_heads: int, context_length: int, dropout: float = 0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MultiHead(d_model, num_heads, context_length, dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model, dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))  # (B, T, d_model)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token and learned position embeddings, ``num_layers`` blocks, a final LayerNorm and a
    linear head to the vocabulary."""

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int, context_length: int,
                 dropout: float = 0.0):
        super().__init__()
        self.context_length = context_length
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(context_length, d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d_model, num_heads, context_length, dropout) for _ in range(num_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        _, length = idx.shape
        _check_length(length, self.context_length)
        positions = torch.arange(length, device=idx.device)  # (T,)
        x = self.dropout(self.token_embedding(idx) + self.position_embedding(positions))  # (B, T, d_model)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, vocab_size)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())


@torch.no_grad()
def generate(model: nn.Module, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """Append ``max_new_tokens`` sampled tokens to ``idx`` (B, T): (B, T + max_new_tokens)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    model.eval()
    for _ in range(max_new_tokens):
        logits, _ = model(idx[:, -model.context_length:])
        logits = logits[:, -1, :] / temperature  # (B, V)
        if top_k is not None:
            kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]  # (B, 1)
            logits = logits.masked_fill(logits < kth, float("-inf"))
        next_token = torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)  # (B, 1)
        idx = torch.cat([idx, next_token], dim=1)
    return idx
