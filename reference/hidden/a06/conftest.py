"""The toy task, the stock models and shared checks for the 06 suite.

The toy translation task reverses a sentence: ``src = [w1 .. wn PAD ..]`` and
``tgt = [BOS wn .. w1 EOS PAD ..]`` with n from 2 to 5, so every batch has padding in
both. Every batch has its own seed.

``train_step`` and ``greedy_decode`` run on stock models (``stock.py``) that live in the
student's process: the suite sends that file's text with ``student.define`` and builds
the model and optimizer there. The same file, imported here, builds an identical pair
from the same seed for the reference, so parameters and losses can be compared exactly;
greedy_decode's model holds parameters trained here (``trained_parameters``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grader.suite import (
    CheckFailed,
    Student,
    StudentError,
    describe_difference,
    expect_close,
    expect_objects,
    once_per_grader,
)
from reference.hidden.a06 import stock, variants
from reference.training import train_step

PAD, BOS, EOS = 0, 1, 2
VOCAB = 12  # ids 3 .. 11 are words
STOCK_SOURCE = Path(stock.__file__).read_text(encoding="utf-8")


def reverse_batch(batch: int, *, seed: int, device, min_len: int = 2, max_len: int = 5):
    """(src (B, max_len), tgt (B, max_len + 2)) of the reversal task, padded with PAD."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (batch,), generator=generator)
    src = torch.full((batch, max_len), PAD, dtype=torch.long)
    tgt = torch.full((batch, max_len + 2), PAD, dtype=torch.long)
    for row, length in enumerate(lengths.tolist()):
        words = torch.randint(3, VOCAB, (length,), generator=generator)
        src[row, :length] = words
        tgt[row, 0], tgt[row, 1:length + 1], tgt[row, length + 1] = BOS, words.flip(0), EOS
    return src.to(device), tgt.to(device)


@pytest.fixture
def make_batch(device):
    def make(batch: int, *, seed: int, **kwargs):
        return reverse_batch(batch, seed=seed, device=device, **kwargs)
    return make


@pytest.fixture
def remote_stock(student):
    """The stock module, defined in the student's process."""
    return student.define("stock", STOCK_SOURCE)


@once_per_grader
def trained_parameters() -> dict[str, torch.Tensor]:
    """A stock seq2seq model trained briefly on the reversal task (here, with the reference):
    the model greedy_decode is graded with. Trained on the CPU, whatever the grading device,
    once per grader process (it depends on no submission); move it to the device."""
    model, optimizer = stock.make(seed=3, device="cpu", optimizer="adam", lr=1e-2)
    batches = [reverse_batch(16, seed=300 + i, device="cpu") for i in range(4)]
    for step in range(60):
        train_step(model, *batches[step % 4], optimizer, PAD)
    return {name: p.detach().clone() for name, p in model.named_parameters()}


@pytest.fixture
def make_pair(remote_stock, device):
    """make_pair(**options) -> ((model, optimizer) in the student's process, a twin here)."""
    def make(**options):
        return (expect_objects("the grader's stock make(...) in your process", remote_stock.method(
            "make", device=device, **options), 2), stock.make(device=device, **options))
    return make


def as_loss(what: str, value) -> float:
    """The student's returned loss as a float; a one-element tensor is accepted here (the
    train_step part checks the type on its own)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.is_floating_point():
        return float(value)
    if isinstance(value, float):
        return value
    raise CheckFailed(f"{what}: expected the loss as a float, got {getattr(value, 'type_name', type(value).__name__)}",
                      variants.LOSS_NOT_FLOAT)


def flat(state: dict, names) -> torch.Tensor:
    return torch.cat([state[name].detach().double().cpu().reshape(-1) for name in names])


def expect_parameters(what: str, got: dict, want: dict, *, atol: float, rtol: float, mistakes: dict) -> None:
    """The student's model parameters equal ``want``; else name the parameter that differs
    most and the mistake (``mistakes``: hint -> callable returning a state dict) it matches."""
    names = list(want)
    if not isinstance(got, dict) or set(got) != set(names):
        raise CheckFailed(f"{what}: the model's state_dict came back with other names: {sorted(got)[:8]}")
    flat_mistakes = {hint: (lambda make=make: flat(make(), names)) for hint, make in mistakes.items()}
    try:
        expect_close(what, flat(got, names), flat(want, names), atol=atol, rtol=rtol, mistakes=flat_mistakes)
    except CheckFailed as failure:
        worst = max(names, key=lambda name: float((got[name].double().cpu() - want[name].double().cpu()).abs().max()))
        raise failure.reworded(f"{what}: parameter {worst!r}: {describe_difference(got[worst], want[worst])} "
                               f"(tolerance atol={atol:g}, rtol={rtol:g})") from None


def student_pieces(student: Student, device: torch.device) -> tuple[dict, list[str]]:
    """What the student's own teacher_forcing_split and translation_loss do.

    Returns ``(changes, wrong)``: ``changes`` are ``variants.train_steps`` keyword arguments
    that reproduce a known mistake in either piece (empty when both are correct or not
    implemented); ``wrong`` names the pieces that are wrong in a way no variant explains.
    train_step is graded on top of the student's own pieces, so a mistake made there
    costs points in that part only.
    """
    changes: dict = {}
    wrong: list[str] = []
    _, tgt = reverse_batch(3, seed=990, device=device)
    try:
        got = student.call("teacher_forcing_split", tgt)
    except StudentError:
        got = None  # not implemented: the student's train_step does not use it
    if got is not None and not _same_pair(got, variants.split(tgt)):
        hint = next((hint for hint, shift in variants.SPLIT_MISTAKES.items()
                     if _same_pair(got, variants.split(tgt, shift=shift))), None)
        if hint is None:
            wrong.append("teacher_forcing_split")
        else:
            changes.update(variants.STEP_MISTAKES[hint])
    generator = torch.Generator().manual_seed(991)
    logits = (2 * torch.randn(3, 4, VOCAB, generator=generator)).to(device)
    labels = torch.tensor([[4, 5, 2, 0], [7, 2, 0, 0], [3, 9, 8, 2]], device=device)
    try:
        got = student.call("translation_loss", logits, labels, PAD)
    except StudentError:
        got = None
    if got is not None and not _same_loss(got, variants.translation_loss(logits, labels, PAD)):
        hint = next((hint for hint, change in variants.LOSS_MISTAKES.items()
                     if _same_loss(got, variants.translation_loss(logits, labels, PAD, **change))), None)
        if hint is None:
            wrong.append("translation_loss")
        else:
            changes.update(variants.STEP_MISTAKES[hint])
    return changes, wrong


def _same_pair(got, want) -> bool:
    return (isinstance(got, (tuple, list)) and len(got) == 2
            and all(isinstance(g, torch.Tensor) and g.shape == w.shape and torch.equal(g.cpu(), w.cpu())
                    for g, w in zip(got, want)))


def _same_loss(got, want) -> bool:
    return (isinstance(got, torch.Tensor) and got.numel() == 1
            and abs(float(got) - float(want)) <= 1e-5 + 1e-5 * abs(float(want)))
