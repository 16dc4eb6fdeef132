"""Grader-owned helpers for 07's GPT, generate and end_to_end, run in the student's process.

The suite sends this file's text with ``student.define``; it needs only torch and is written
independently of ``reference/``. Nothing here computes what a part asks for (no answers, so
the process that receives it serves later tests), and nothing it does is taken as a verdict:
the suite checks the tokens that ``generate`` returns and the gradients a model computes, and
computes losses and greedy decodings itself from parameters it fetches and checks.

- :func:`make_generator`: a seeded ``torch.Generator`` on a device, as a caller makes one.
- :func:`seed`: the process's global seed, before the stock training loop.
- :func:`train`: the stock training loop of end_to_end (AdamW, random windows of a corpus).
- :func:`showing_gradients`: a GPT whose logits show whether autograd records for it.
- :class:`LogitsOnly`: a GPT seen through its logits, for a gradient check.
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
    """AdamW on random windows of ``data`` (a 1-D LongTensor), next-token cross-entropy; with
    autograd on, whatever the student's code left it at (a generate that turned it off)."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    with torch.enable_grad():
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


def showing_gradients(model: nn.Module) -> nn.Module:
    """``model`` (a GPT that computes what the contract's does), but while autograd records for
    its parameters its logits put all the probability on the last token of the vocabulary. No
    real model's values show whether it ran with gradients, so generate's "no gradients" is
    graded with this one. Only its instance's ``forward`` changes, wrapping the one it had:
    its class, names and parameters stay, so a generate sees the model it was given."""
    own = model.forward

    def forward(*args, **kwargs):
        records = torch.is_grad_enabled() and any(p.requires_grad for p in model.parameters())
        logits, loss = own(*args, **kwargs)
        if records:
            logits = torch.full_like(logits, -30.0)
            logits[..., -1] = 30.0
        return logits, loss

    model.forward = forward
    return model


class LogitsOnly(nn.Module):
    """A GPT seen through its logits, ``model(idx)[0]``, with the GPT's own parameter names:
    for a gradient check, whose loss is an inner product with one output tensor."""

    def __init__(self, model: nn.Module):
        super().__init__()
        for name, child in model.named_children():
            self.add_module(name, child)
        object.__setattr__(self, "model", model)  # not registered: its parameters are the children's

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.model(idx)[0]
