"""Stock models for the 06 suite: not secret, and not the reference solution's code.

The suite sends this file's text into the student's process
(``student.define("stock", SOURCE)``) and imports the same file on the trusted side, so
both sides build identical models from a seed and the student's ``train_step`` and
``greedy_decode`` can be compared with the reference on equal terms. It needs only torch.
"""

import torch
from torch import nn


class TinySeq2Seq(nn.Module):
    """A GRU encoder-decoder with dot-product attention over the source.

    ``forward(src, tgt_in) -> logits (B, T, V)``. Causal by construction (the decoder GRU
    reads left to right), source padding is masked in the attention. No dropout and no
    fused fast paths, so the same inputs give the same outputs in every process.
    """

    def __init__(self, vocab_size: int, d_model: int = 32, pad_idx: int = 0):
        super().__init__()
        self.pad_idx = pad_idx
        self.src_embed = nn.Embedding(vocab_size, d_model)
        self.tgt_embed = nn.Embedding(vocab_size, d_model)
        self.encoder = nn.GRU(d_model, d_model, batch_first=True)
        self.decoder = nn.GRU(d_model, d_model, batch_first=True)
        self.out = nn.Linear(2 * d_model, vocab_size)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, state = self.encoder(self.src_embed(src))  # (B, S, D), (1, B, D)
        hidden, _ = self.decoder(self.tgt_embed(tgt_in), state)  # (B, T, D)
        scores = hidden @ memory.transpose(1, 2)  # (B, T, S)
        scores = scores.masked_fill((src == self.pad_idx)[:, None, :], float("-inf"))
        context = torch.softmax(scores, dim=-1) @ memory  # (B, T, D)
        return self.out(torch.cat([hidden, context], dim=-1))  # (B, T, V)

    def grads(self) -> dict:
        """Each parameter's ``.grad`` (None where there is none), for the trusted side."""
        return {name: p.grad for name, p in self.named_parameters()}


def make(seed: int = 0, device="cpu", vocab_size: int = 12, d_model: int = 32, pad_idx: int = 0,
         optimizer: str = "sgd", lr: float = 0.5, init_scale: float = 1.0):
    """A freshly initialised TinySeq2Seq on ``device`` and its optimizer ("sgd" or "adam").

    ``init_scale`` multiplies the initial parameters (larger gradients, for clipping tests).
    The global random state is left as it was, so building a stock model changes nothing
    else in the process.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinySeq2Seq(vocab_size, d_model, pad_idx)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(init_scale)
    model.to(device)
    optimizers = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}
    return model, optimizers[optimizer](model.parameters(), lr=lr)

