"""Assignment 06: training for translation.

Vaswani et al., "Attention Is All You Need" (2017), sections 3.1 and 5: the decoder is
trained with teacher forcing (it reads the gold target shifted right and predicts the
next token at every position), with cross-entropy over the real (non-pad) tokens and
optional label smoothing (section 5.4). At inference the output is generated one token
at a time; greedy decoding keeps the most probable token at each step.
"""

import torch
import torch.nn.functional as F
from torch import nn


def teacher_forcing_split(tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[BOS w1 .. wn EOS PAD ..]`` (B, T) -> (decoder input, labels), each (B, T-1)."""
    if tgt.dim() != 2 or tgt.size(1) < 2:
        raise ValueError(f"tgt must have shape (B, T) with T >= 2, got {tuple(tgt.shape)}")
    return tgt[:, :-1], tgt[:, 1:]


def translation_loss(
    logits: torch.Tensor, labels: torch.Tensor, pad_idx: int, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Mean cross-entropy of logits (B, T, V) against labels (B, T), ignoring pad labels."""
    if logits.shape[:-1] != labels.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} do not match labels {tuple(labels.shape)}"
        )
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)),  # (B*T, V)
        labels.reshape(-1),  # (B*T,)
        ignore_index=pad_idx,
        label_smoothing=label_smoothing,
    )


def train_step(
    model: nn.Module,
    src: torch.Tensor,
    tgt: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    pad_idx: int,
    clip_norm: float = 1.0,
) -> float:
    """One teacher-forced optimisation step on a batch; returns the loss as a float."""
    tgt_in, labels = teacher_forcing_split(tgt)  # (B, T-1) each
    optimizer.zero_grad()
    logits = model(src, tgt_in)  # (B, T-1, V)
    loss = translation_loss(logits, labels, pad_idx)
    loss.backward()
    # Clip the global gradient norm before the step, or the step uses unclipped gradients.
    nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    return loss.item()


@torch.no_grad()
def greedy_decode(
    model: nn.Module,
    src: torch.Tensor,
    bos_idx: int,
    eos_idx: int,
    pad_idx: int,
    max_len: int,
) -> torch.Tensor:
    """Generate (B, <= max_len) token ids starting with BOS, most probable token first.

    Works for any ``model(src, tgt_in) -> logits``: the full forward is re-run on the
    prefix at every step. A row that has produced EOS is padded with ``pad_idx``; the
    loop stops once every row has finished. The model runs in evaluation mode (no
    dropout) and is put back into its previous mode afterwards.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1 (room for BOS), got {max_len}")
    was_training = model.training
    model.eval()
    try:
        batch = src.size(0)
        out = torch.full((batch, 1), bos_idx, dtype=torch.long, device=src.device)  # (B, 1)
        finished = torch.zeros(batch, dtype=torch.bool, device=src.device)  # (B,)
        for _ in range(max_len - 1):
            logits = model(src, out)  # (B, t, V)
            next_token = logits[:, -1].argmax(dim=-1)  # (B,)
            next_token = next_token.masked_fill(finished, pad_idx)
            out = torch.cat([out, next_token[:, None]], dim=1)  # (B, t+1)
            finished |= next_token == eos_idx
            if finished.all():
                break
        return out
    finally:
        model.train(was_training)
