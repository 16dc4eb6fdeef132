"""# Assignment 07: a GPT from scratch (decoder-only)

Build the decoder-only language model that ends most Transformer courses (GPT: Radford et
al. 2018 and 2019; the layout of Karpathy's "let's build GPT"): attention heads as modules
with a causal `tril` buffer, a list of heads and a projection, a GELU MLP, pre-norm
blocks, learned positions, and sampling with temperature and top-k. Follow the contract in
`README.md` of this folder.

This file stands alone: it needs nothing from earlier assignments.

Conventions: tensors are float32 on whatever device the input is on (never hard-code
`"cuda"` or `"cpu"`); bad arguments raise `ValueError` with a message (never a bare
`assert`).

Check your work with `pytest assignments/07` (public tests) and
`grade assignments/07` (the grader, with hints).
"""

import torch
import torch.nn.functional as F
from torch import nn


class Head(nn.Module):
    """One head of causal self-attention.

    Submodules (names are part of the contract): key, query, value, each
    nn.Linear(d_model, head_size, bias=False); a registered buffer tril
    (context_length, context_length), 1 on and below the diagonal.
    forward(x: (B, T, d_model)) -> (B, T, head_size): scores q @ k^T * head_size ** -0.5,
    future positions masked with tril[:T, :T], softmax, dropout on the weights, times v.
    ValueError when T > context_length.
    """

    def __init__(self, d_model: int, head_size: int, context_length: int, dropout: float = 0.0):
        super().__init__()
        raise NotImplementedError("Head.__init__: see assignments/07/README.md")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("Head.forward: see assignments/07/README.md")


class MultiHead(nn.Module):
    """num_heads Heads of size d_model // num_heads side by side.

    Submodules: heads (nn.ModuleList of Head), proj = nn.Linear(d_model, d_model).
    forward(x: (B, T, d_model)) = dropout(proj(cat([h(x) for h in heads], dim=-1))), (B, T, d_model).
    ValueError when d_model is not divisible by num_heads.
    """

    def __init__(self, d_model: int, num_heads: int, context_length: int, dropout: float = 0.0):
        super().__init__()
        raise NotImplementedError("MultiHead.__init__: see assignments/07/README.md")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("MultiHead.forward: see assignments/07/README.md")


class MLP(nn.Module):
    """The block's feed-forward network.

    Submodules: fc = nn.Linear(d_model, 4 * d_model), proj = nn.Linear(4 * d_model, d_model).
    forward(x: (B, T, d_model)) = dropout(proj(gelu(fc(x)))), exact (erf) GELU.
    """

    def __init__(self, d_model: int, dropout: float = 0.0):
        super().__init__()
        raise NotImplementedError("MLP.__init__: see assignments/07/README.md")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("MLP.forward: see assignments/07/README.md")


class Block(nn.Module):
    """A pre-norm Transformer block.

    Submodules: ln1, ln2 (nn.LayerNorm(d_model)), attn (a MultiHead), mlp (an MLP).
    forward(x: (B, T, d_model)): x = x + attn(ln1(x)), then x = x + mlp(ln2(x)).
    """

    def __init__(self, d_model: int, num_heads: int, context_length: int, dropout: float = 0.0):
        super().__init__()
        raise NotImplementedError("Block.__init__: see assignments/07/README.md")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("Block.forward: see assignments/07/README.md")


class GPT(nn.Module):
    """The language model.

    Submodules: token_embedding = nn.Embedding(vocab_size, d_model), position_embedding =
    nn.Embedding(context_length, d_model) (learned), blocks (nn.ModuleList of Block), ln_f
    (nn.LayerNorm(d_model)), lm_head = nn.Linear(d_model, vocab_size, bias=False); the
    attribute context_length.
    forward(idx: (B, T) token ids, targets: (B, T) or None) -> (logits (B, T, vocab_size),
    loss): loss the mean cross-entropy over all B*T positions, None without targets.
    ValueError when T > context_length.
    """

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int, context_length: int,
                 dropout: float = 0.0):
        super().__init__()
        raise NotImplementedError("GPT.__init__: see assignments/07/README.md")

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        raise NotImplementedError("GPT.forward: see assignments/07/README.md")


@torch.no_grad()
def generate(model: nn.Module, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """Sample max_new_tokens tokens after idx (B, T): returns (B, T + max_new_tokens), idx first.

    Each step: feed the last model.context_length tokens, take the logits at the last
    position, divide by temperature, keep the top_k largest (the rest -inf) when top_k is
    given, and sample with torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator).
    The model is in eval mode while generating. ValueError for temperature <= 0 or top_k < 1.
    """
    raise NotImplementedError("generate: see assignments/07/README.md")
