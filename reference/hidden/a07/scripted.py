"""Grader-owned helpers for 07's generate and end_to_end, run in the student's process.

The suite sends this file's text with ``student.define``; it needs only torch and is written
independently of ``reference/``. Nothing it returns is taken as a verdict: the suite checks
the tokens that ``generate`` returns and computes losses and greedy decodings itself.

- :class:`ScriptedLM`: a language model whose logits the test chooses. The logits at the
  last position of the window are ``table[its token]`` (a transition table: greedy decoding
  is known in advance); every other position gets its token's row shifted by one, so reading
  another position's logits shows. It refuses windows longer than its context, as
  the contract's GPT does; in training mode (``strict="training"``) or with gradients on
  (``strict="gradients"``) it puts all the probability on the last token of the vocabulary,
  so a generate that leaves either on shows in the tokens it returns, not in anything this
  process says.
- :func:`train`: the stock training loop of end_to_end (AdamW, random windows of a corpus).
"""

import torch
import torch.nn.functional as F
from torch import nn


class ScriptedLM(nn.Module):
    def __init__(self, table: torch.Tensor, context_length: int, strict: str | None = None):
        super().__init__()
        self.context_length = context_length
        self.table = nn.Parameter(table.clone())  # (V, V); a parameter, so gradients could flow
        self.strict = strict

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        batch, length = idx.shape
        if length > self.context_length:
            raise ValueError(f"sequence length {length} exceeds context_length={self.context_length}")
        vocab = self.table.size(0)
        logits = self.table[idx].roll(1, dims=-1)  # (B, T, V): each position its token's row, shifted
        logits[:, -1] = self.table[idx[:, -1]]  # the last position: its token's row as it is
        if (self.strict == "training" and self.training) or (self.strict == "gradients" and torch.is_grad_enabled()):
            logits = torch.full_like(logits, -30.0)
            logits[..., vocab - 1] = 30.0
        return logits, None


def make_model(table: torch.Tensor, context_length: int, strict: str | None = None) -> ScriptedLM:
    return ScriptedLM(table, context_length, strict).to(table.device)


def make_generator(seed: int, device: str) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def seed(value: int) -> None:
    torch.manual_seed(value)


def train(model: nn.Module, data: torch.Tensor, steps: int, batch_size: int, context: int, lr: float,
          seed: int) -> None:
    """AdamW on random windows of ``data`` (a 1-D LongTensor), next-token cross-entropy."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        starts = torch.randint(0, data.numel() - context - 1, (batch_size,), generator=generator).tolist()
        x = torch.stack([data[s:s + context] for s in starts])
        y = torch.stack([data[s + 1:s + context + 1] for s in starts])
        logits = model(x)[0]
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
