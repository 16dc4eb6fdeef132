"""# Assignment 06: training for translation

Implement the four functions below, following the contract in `README.md` of this folder:
split a target batch for teacher forcing, the translation loss, one training step, and
greedy decoding. The grader also trains a small model with your `train_step` and expects
its loss to fall (the `end_to_end` part).

Conventions: token ids are `torch.long`; tensors stay on whatever device the input is on
(never hard-code `"cuda"` or `"cpu"`); bad arguments raise `ValueError` with a message
(never a bare `assert`). `train_step` and `greedy_decode` must work for any
`model(src, tgt_in) -> logits`, not only your own Transformer.

Check your work with `pytest assignments/06` (public tests) and
`grade assignments/06` (the grader, with hints).
"""

import torch
import torch.nn.functional as F
from torch import nn


def teacher_forcing_split(tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Split a target batch for teacher forcing.

    tgt: (B, T) token ids, each row [BOS w1 .. wn EOS PAD ..].
    Returns (decoder_input, labels), each (B, T-1): the decoder reads tgt[:, :-1] and
    must predict the next token at every position, tgt[:, 1:].
    Raise ValueError unless tgt is 2-D with T >= 2.
    """
    raise NotImplementedError("teacher_forcing_split: see assignments/06/README.md")


def translation_loss(
    logits: torch.Tensor, labels: torch.Tensor, pad_idx: int, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Mean cross-entropy over the non-pad labels.

    logits: (B, T, V), labels: (B, T) token ids. Positions whose label is pad_idx do not
    count, neither in the sum nor in the number averaged over. label_smoothing as in
    F.cross_entropy: the target puts 1 - label_smoothing on the label and spreads
    label_smoothing uniformly over all V classes.
    Returns a 0-dim tensor (differentiable). Raise ValueError if logits.shape[:-1] !=
    labels.shape.
    """
    raise NotImplementedError("translation_loss: see assignments/06/README.md")


def train_step(
    model: nn.Module,
    src: torch.Tensor,
    tgt: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    pad_idx: int,
    clip_norm: float = 1.0,
) -> float:
    """One teacher-forced optimisation step on a batch, for any model(src, tgt_in) -> logits.

    src: (B, S) and tgt: (B, T) token ids. In order: zero the gradients, split tgt
    (teacher_forcing_split), forward, translation_loss, backward, clip the global
    gradient norm to clip_norm, optimizer step. Returns the loss as a Python float.
    """
    raise NotImplementedError("train_step: see assignments/06/README.md")


def greedy_decode(
    model: nn.Module,
    src: torch.Tensor,
    bos_idx: int,
    eos_idx: int,
    pad_idx: int,
    max_len: int,
) -> torch.Tensor:
    """Translate src one token at a time, keeping the most probable token at each step.

    src: (B, S) token ids; model(src, tgt_in: (B, t)) -> logits (B, t, V), and the next
    token comes from the logits at the last position. Returns a LongTensor (B, L),
    L <= max_len (BOS included), each row BOS w1 w2 ...; a row stops at its EOS (which
    it keeps) and is filled with pad_idx after it. Stop when every row has produced EOS
    or the output has max_len tokens. Raise ValueError if max_len < 1.
    """
    raise NotImplementedError("greedy_decode: see assignments/06/README.md")
