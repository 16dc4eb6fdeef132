"""What common mistakes in assignment 06 produce, computed on the trusted side.

One functional version per part, whose keyword arguments switch on one mistake each and
whose defaults equal ``reference.training`` (``tests/test_variants_06.py`` checks that):

- ``split`` (``teacher_forcing_split``), with ``shift=``;
- ``translation_loss``, with ``ignore_pad=``, ``reduction=``, ``smoothing=``;
- ``train_steps`` (``train_step`` applied to a sequence of batches), with ``split=`` and
  ``loss=`` (the pieces it uses, so a mistake in either can be reproduced), ``feed=``,
  ``zero_grad=``, ``step=``, ``clip=``;
- ``greedy_decode``, with ``pad_after_eos=``, ``keep_eos=``, ``keep_bos=``, ``position=``,
  ``steps=``, ``stop=``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial

import torch
from torch import nn
from grader.suite import Mistake


# ---- teacher_forcing_split -------------------------------------------------------------
LABELS_NOT_SHIFTED = ("labels not shifted: the decoder reads tgt[:, :-1] and must predict the next token, "
                      "so labels = tgt[:, 1:] (you score it on the token it already sees)")
LABELS_NOT_SHIFTED_FULL = ("labels not shifted: the model read all of tgt and was scored on tgt itself; "
                           "feed tgt[:, :-1] and score against tgt[:, 1:]")
SPLIT_SWAPPED = "decoder input and labels swapped: return (tgt[:, :-1], tgt[:, 1:]), input first"
NOT_A_PAIR = "return a pair (decoder_input, labels): return tgt[:, :-1], tgt[:, 1:]"

# ---- translation_loss ------------------------------------------------------------------
PAD_NOT_IGNORED = "padding not ignored in the loss: pad labels must not count (ignore_index=pad_idx)"
PAD_IN_MEAN = ("pad positions counted in the mean: divide the summed loss by the number of non-pad labels, "
               "not by B*T")
SUM_NOT_MEAN = "loss summed instead of averaged over the non-pad labels"
PER_SENTENCE_MEAN = ("loss averaged per sentence, then over sentences: average over all non-pad labels of the "
                     "batch at once, so that every token counts the same")
SMOOTHING_IGNORED = "label_smoothing is ignored: pass it on, e.g. F.cross_entropy(..., label_smoothing=label_smoothing)"
SMOOTHING_OVER_OTHERS = ("label smoothing spread over the V-1 wrong classes only; spread it uniformly over all V "
                         "classes, as F.cross_entropy(label_smoothing=...) does")
SMOOTHING_HARDCODED = ("label smoothing hard-coded (a value written in, label_smoothing=0.1): the loss is smoothed "
                       "whatever its caller asks for; smooth only by translation_loss's label_smoothing argument "
                       "(pass it on, F.cross_entropy(..., label_smoothing=label_smoothing)), which train_step leaves "
                       "at 0")
SMOOTHING_ANNOTATED = ("label smoothing the annotated-transformer way (KL divergence to a distribution that spreads "
                       "eps over V-2 classes, none on the pad class): the contract spreads eps uniformly over all V "
                       "classes, as F.cross_entropy(..., label_smoothing=eps) does")
PAD_HARDCODED = "pad index hard-coded: ignore the labels equal to the pad_idx argument, whatever its value"
NOT_DIFFERENTIABLE = ("the loss is cut off from the graph: compute it from the logits with torch operations "
                      "(no .item(), .detach(), .tolist() or numpy)")
NOT_A_SCALAR = "return one number: the mean over the non-pad labels, a 0-dim tensor (keep it a tensor for backward)"

# ---- train_step ------------------------------------------------------------------------
LABEL_LEAKS = ("the label leaks into the input: the model was fed all of tgt and output[:, 1:] was scored against "
               "tgt[:, 1:], so each position reads the token it must predict (an RNN habit; the loss collapses "
               "without learning to translate); feed tgt[:, :-1] and score it against tgt[:, 1:]")
NO_ZERO_GRAD = ("gradients accumulate across steps: call optimizer.zero_grad() before loss.backward(), "
                "or each step adds the previous steps' gradients")
NO_STEP = "the parameters did not change: call optimizer.step() after backward() and clipping"
CLIP_AFTER_STEP = ("gradients clipped after optimizer.step(): the step used unclipped gradients; clip between "
                   "loss.backward() and optimizer.step()")
NO_CLIP = ("gradients not clipped: call nn.utils.clip_grad_norm_(model.parameters(), clip_norm) between "
           "loss.backward() and optimizer.step()")
UNCLIPPED_STEP = ("the step used unclipped gradients: clip the global norm with nn.utils.clip_grad_norm_ between "
                  "loss.backward() and optimizer.step()")
CLIP_BY_VALUE = ("gradients clipped by value; clip their global norm: "
                 "nn.utils.clip_grad_norm_(model.parameters(), clip_norm)")
CLIP_RESCALES = ("gradients scaled up to clip_norm: clipping only scales gradients down, when their global norm "
                 "exceeds clip_norm (nn.utils.clip_grad_norm_)")
CLIP_DEFAULT = "the default clip_norm must be 1.0 (see the signature in the contract)"
LOSS_NOT_FLOAT = "return the loss as a Python float: return loss.item()"
SUBPART_WRONG = "your {name} is wrong too (see its part); train_step depends on it: fix that first"

# ---- greedy_decode ---------------------------------------------------------------------
NOT_PADDED_AFTER_EOS = ("a row kept generating after its EOS: once a row has produced EOS, fill the rest of it "
                        "with pad_idx")
EOS_DROPPED = "the EOS token itself was replaced: keep EOS in the output and pad only after it"
NO_BOS = "the output must start with BOS: begin with a column of bos_idx and keep it in the result"
MAX_LEN_OFF_BY_ONE = "one token too many: max_len counts every token of the output, BOS included"
FIRST_POSITION = "the next token comes from the logits at the last position, logits[:, -1], not the first"
PREFIX_NOT_FED = ("the model is fed BOS over and over, not the tokens decoded so far: call model(src, out) on the "
                  "output built so far, BOS first")
LAST_TOKEN_ONLY = ("the model is fed only the last token, not the whole sequence so far (an RNN decoder's habit): "
                   "call model(src, out) on the output built so far, BOS first; it reads every earlier token itself")
STOPS_AT_FIRST_EOS = "decoding stopped when the first row finished: stop only when every row has produced EOS"
NOT_LONG = "return token ids as a LongTensor (torch.long), e.g. from argmax"

# ---- end to end ------------------------------------------------------------------------
NO_LEARNING = "the loss does not fall: see the train_step part for what your step does differently"
NOT_FINITE = "the loss became nan or inf: check the loss (padding, log of 0) and that gradients are clipped"


# The contract's words (assignments/06/assignment.toml's mistakes) for the mistakes these hints
# name: a check whose value matches one of them carries those words, the rubric's evidence.
LABELS_NOT_SHIFTED = Mistake(LABELS_NOT_SHIFTED, 'labels not shifted')
LABELS_NOT_SHIFTED_FULL = Mistake(LABELS_NOT_SHIFTED_FULL, 'labels not shifted')
PAD_NOT_IGNORED = Mistake(PAD_NOT_IGNORED, 'padding not ignored in the loss')
NO_ZERO_GRAD = Mistake(NO_ZERO_GRAD, 'no `zero_grad`')
NO_STEP = Mistake(NO_STEP, 'no optimizer step')
CLIP_AFTER_STEP = Mistake(CLIP_AFTER_STEP, 'clipping after the step')
SMOOTHING_HARDCODED = Mistake(SMOOTHING_HARDCODED, 'label smoothing hard-coded')
SMOOTHING_ANNOTATED = Mistake(SMOOTHING_ANNOTATED,
                              "label smoothing spread over `V-2` classes (the annotated transformer's KL divergence)")
LABEL_LEAKS = Mistake(LABEL_LEAKS, "the whole target fed to the model, the label leaking into the input")


# ---- teacher_forcing_split -------------------------------------------------------------


def split(tgt: torch.Tensor, *, shift: str = "next") -> tuple[torch.Tensor, torch.Tensor]:
    """``shift``: "next" (reference), "none" (labels = decoder input), "full" (both all of
    tgt), "swapped" (labels first)."""
    if shift == "next":
        return tgt[:, :-1], tgt[:, 1:]
    if shift == "none":
        return tgt[:, :-1], tgt[:, :-1]
    if shift == "full":
        return tgt, tgt
    if shift == "swapped":
        return tgt[:, 1:], tgt[:, :-1]
    raise ValueError(shift)


SPLIT_MISTAKES = {LABELS_NOT_SHIFTED: "none", LABELS_NOT_SHIFTED_FULL: "full", SPLIT_SWAPPED: "swapped"}


# ---- translation_loss ------------------------------------------------------------------


def translation_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    pad_idx: int,
    label_smoothing: float = 0.0,
    *,
    ignore_pad: bool = True,
    reduction: str = "mean",
    smoothing: str = "uniform",
) -> torch.Tensor:
    """Cross-entropy written out: ``reduction`` "mean" (reference: over the non-pad labels),
    "mean_over_all" (masked sum / B*T), "sum", "per_sentence"; ``smoothing`` "uniform"
    (reference: eps/V on every class), "ignored", "hardcoded" (eps = HARDCODED_SMOOTHING
    whatever the argument), "others" (eps/(V-1) on the wrong ones), "annotated" (the
    annotated transformer's KL divergence to 1-eps on the label and eps/(V-2) on the
    classes that are neither the label nor pad)."""
    log_probs = torch.log_softmax(logits, dim=-1)  # (B, T, V)
    nll = -log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)  # (B, T)
    eps = {"ignored": 0.0, "hardcoded": HARDCODED_SMOOTHING}.get(smoothing, label_smoothing)
    vocab = logits.size(-1)
    if smoothing == "others":
        others = (-log_probs.sum(dim=-1) - nll) / (vocab - 1)  # mean over the V-1 wrong classes
        per_token = (1 - eps) * nll + eps * others
    elif smoothing == "annotated":
        spread = eps / (vocab - 2)
        others = -log_probs.sum(dim=-1) - nll + log_probs[..., pad_idx]  # sum over the V-2 other classes
        entropy = _x_log_x(1 - eps) + (vocab - 2) * _x_log_x(spread)  # KL = cross-entropy - entropy
        per_token = (1 - eps) * nll + spread * others + entropy
    else:
        per_token = (1 - eps) * nll + eps * -log_probs.mean(dim=-1)  # (B, T)
    keep = (labels != pad_idx) if ignore_pad else torch.ones_like(labels, dtype=torch.bool)
    per_token = per_token * keep
    if reduction == "mean":
        return per_token.sum() / keep.sum()
    if reduction == "mean_over_all":
        return per_token.sum() / labels.numel()
    if reduction == "sum":
        return per_token.sum()
    if reduction == "per_sentence":
        return (per_token.sum(dim=1) / keep.sum(dim=1)).mean()
    raise ValueError(reduction)


# The value a hard-coded label smoothing usually has (the paper's).
HARDCODED_SMOOTHING = 0.1


def _x_log_x(p: float) -> float:
    return p * math.log(p) if p > 0 else 0.0


LOSS_MISTAKES = {
    PAD_NOT_IGNORED: {"ignore_pad": False},
    PAD_IN_MEAN: {"reduction": "mean_over_all"},
    PER_SENTENCE_MEAN: {"reduction": "per_sentence"},
    SUM_NOT_MEAN: {"reduction": "sum"},
    SMOOTHING_HARDCODED: {"smoothing": "hardcoded"},
}
SMOOTHING_MISTAKES = {
    SMOOTHING_IGNORED: {"smoothing": "ignored"},
    SMOOTHING_OVER_OTHERS: {"smoothing": "others"},
    SMOOTHING_ANNOTATED: {"smoothing": "annotated"},
}


def loss_mistakes(logits, labels, pad_idx, label_smoothing=0.0) -> dict:
    """Hint -> lazily computed loss of that mistake, for ``grader.suite.checks.expect_close``."""
    table = dict(LOSS_MISTAKES)
    if label_smoothing == HARDCODED_SMOOTHING:
        del table[SMOOTHING_HARDCODED]  # it gives the right loss here
    if label_smoothing:
        table.update(SMOOTHING_MISTAKES)
    return {hint: partial(translation_loss, logits, labels, pad_idx, label_smoothing, **change)
            for hint, change in table.items()}


# ---- train_step ------------------------------------------------------------------------


def scored_outputs(model: nn.Module, src: torch.Tensor, tgt: torch.Tensor, *, split: Callable = split,
                   feed: str = "shifted") -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, labels) a step scores: the model fed ``split(tgt)``'s input, or with ``feed``
    "whole" fed all of tgt, its outputs from position 1 on scored against ``tgt[:, 1:]``."""
    if feed == "whole":
        return model(src, tgt)[:, 1:], tgt[:, 1:]
    tgt_in, labels = split(tgt)
    return model(src, tgt_in), labels


def train_steps(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Sequence[tuple[torch.Tensor, torch.Tensor]],
    pad_idx: int,
    clip_norm: float = 1.0,
    *,
    split: Callable = split,
    loss: Callable = translation_loss,
    feed: str = "shifted",
    zero_grad: bool = True,
    step: bool = True,
    clip: str = "before",
) -> list[float]:
    """``train_step`` on each ``(src, tgt)`` in turn; returns the losses, changes the model.

    ``split(tgt)`` and ``loss(logits, labels, pad_idx)`` are the pieces train_step uses;
    ``feed`` "whole" feeds all of tgt and scores ``logits[:, 1:]`` against ``tgt[:, 1:]``;
    ``clip`` is "before" the step (reference), "after" it, "none", "value"
    (``clip_grad_value_`` instead of the global norm) or "rescale" (every step scaled to
    norm ``clip_norm``, even a smaller one).
    """
    losses = []
    for src, tgt in batches:
        if zero_grad:
            optimizer.zero_grad()
        value = loss(*scored_outputs(model, src, tgt, split=split, feed=feed), pad_idx)
        value.backward()
        if clip == "before":
            nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        elif clip == "value":
            nn.utils.clip_grad_value_(model.parameters(), clip_norm)
        elif clip == "rescale":  # scaled to clip_norm even when the norm is smaller
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
            for g in grads:
                g.mul_(clip_norm / total)
        if step:
            optimizer.step()
        if clip == "after":
            nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        losses.append(value.item())
    return losses


# What each train_step mistake changes in ``train_steps``; the pieces' mistakes first.
STEP_MISTAKES = {
    **{hint: {"split": partial(split, shift=shift)} for hint, shift in SPLIT_MISTAKES.items()},
    **{hint: {"loss": partial(translation_loss, **change)} for hint, change in LOSS_MISTAKES.items()},
    LABEL_LEAKS: {"feed": "whole"},
    NO_ZERO_GRAD: {"zero_grad": False},
    NO_STEP: {"step": False},
    UNCLIPPED_STEP: {"clip": "after"},  # the same parameters as not clipping at all
    CLIP_BY_VALUE: {"clip": "value"},
    CLIP_RESCALES: {"clip": "rescale"},
}


# ---- greedy_decode ---------------------------------------------------------------------


@torch.no_grad()
def greedy_decode(
    model: nn.Module,
    src: torch.Tensor,
    bos_idx: int,
    eos_idx: int,
    pad_idx: int,
    max_len: int,
    *,
    pad_after_eos: bool = True,
    keep_eos: bool = True,
    keep_bos: bool = True,
    position: int = -1,
    steps: str = "max_len",
    stop: str = "all",
    feed: str = "prefix",
) -> torch.Tensor:
    """``steps`` "max_len" (reference: BOS plus at most max_len-1 tokens) or "one_more";
    ``stop`` "all" (reference: when every row has finished), "any" (when the first has),
    "never" (run to max_len; not a mistake, the rest is padding); ``feed`` "prefix" (the
    reference: the tokens so far), "bos" (BOS repeated as often: the model sees a length) or
    "last" (only the last token, as an RNN decoder is fed step by step)."""
    was_training = model.training
    model.eval()
    try:
        out = torch.full((src.size(0), 1), bos_idx, dtype=torch.long, device=src.device)  # (B, 1)
        finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)  # (B,)
        for _ in range(max_len - (0 if steps == "one_more" else 1)):
            fed = {"prefix": out, "bos": torch.full_like(out, bos_idx), "last": out[:, -1:]}[feed]
            token = model(src, fed)[:, position].argmax(dim=-1)  # (B,)
            is_eos = token == eos_idx
            if pad_after_eos:
                token = token.masked_fill(finished, pad_idx)
            if not keep_eos:
                token = token.masked_fill(is_eos & ~finished, pad_idx)
            out = torch.cat([out, token[:, None]], dim=1)
            finished |= is_eos
            if (stop == "all" and finished.all()) or (stop == "any" and finished.any()):
                break
        return out if keep_bos else out[:, 1:]
    finally:
        model.train(was_training)


DECODE_MISTAKES = {
    NOT_PADDED_AFTER_EOS: {"pad_after_eos": False},
    EOS_DROPPED: {"keep_eos": False},
    NO_BOS: {"keep_bos": False},
    MAX_LEN_OFF_BY_ONE: {"steps": "one_more"},
    FIRST_POSITION: {"position": 0},
    STOPS_AT_FIRST_EOS: {"stop": "any"},
    PREFIX_NOT_FED: {"feed": "bos"},
    LAST_TOKEN_ONLY: {"feed": "last"},
}

