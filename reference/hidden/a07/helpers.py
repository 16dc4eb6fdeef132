"""Grader-owned helpers for 07's generate and end_to_end, run in the student's process.

The suite sends this file's text with ``student.define``; it needs only torch and is written
independently of ``reference/``. Nothing here is a model or steers one, and nothing it does
is taken as a verdict: the suite checks the tokens that ``generate`` returns, and computes
losses and greedy decodings itself from parameters it fetches and checks.

- :func:`make_generator`: a seeded ``torch.Generator`` on a device, as a caller makes one.
- :func:`seed`: the process's global seed, before the stock training loop.
- :func:`train`: the stock training loop of end_to_end (AdamW, random windows of a corpus).
"""

import torch
import torch.nn.functional as F
from torch import nn


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
