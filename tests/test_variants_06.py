"""The 06 mistake variants: their defaults equal the reference, and each mistake differs.

A hint is only as good as its variant: with the defaults, every functional variant in
``reference/hidden/a06/variants.py`` must compute what ``reference.training`` computes, so
that each keyword argument changes exactly one thing. The stock models the suite uses
must also keep the mistakes apart (clipping active, padding present, rows that differ).
"""

from __future__ import annotations

import pytest
import torch

from reference import training
from reference.hidden.a06 import stock, variants
from reference.hidden.a06.conftest import BOS, EOS, PAD, VOCAB, reverse_batch, trained_parameters
from reference.hidden.a06.test_greedy_decode import PROBE_MAX_LEN, PROBE_SEED, ROWS, eos_first_parameters, same_tokens



def _batches(*seeds: int):
    return [reverse_batch(6, seed=seed, device="cpu") for seed in seeds]


def _state_close(a: dict, b: dict, tol: float = 1e-6) -> bool:
    return all(torch.allclose(a[name], b[name], atol=tol, rtol=tol) for name in a)


def test_split_default_is_the_reference():
    _, tgt = reverse_batch(4, seed=1, device="cpu")
    for got, want in zip(variants.split(tgt), training.teacher_forcing_split(tgt)):
        assert torch.equal(got, want)


@pytest.mark.parametrize("shift", sorted(set(variants.SPLIT_MISTAKES.values())))
def test_each_split_mistake_differs(shift):
    _, tgt = reverse_batch(4, seed=1, device="cpu")
    got, want = variants.split(tgt, shift=shift), training.teacher_forcing_split(tgt)
    assert any(g.shape != w.shape or not torch.equal(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("pad_idx", [0, 3])
def test_translation_loss_default_is_the_reference(smoothing, pad_idx):
    logits = 2 * torch.randn(4, 6, VOCAB, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    labels = torch.tensor([[5, 9, 4, 2, 0, 0], [7, 2, 3, 3, 0, 0], [3, 8, 11, 6, 10, 2], [4, 4, 2, 0, 0, 0]])
    torch.testing.assert_close(variants.translation_loss(logits, labels, pad_idx, smoothing),
                               training.translation_loss(logits, labels, pad_idx, smoothing), rtol=1e-12, atol=1e-12)


def test_each_loss_mistake_differs_from_the_reference_and_the_others():
    logits = 2 * torch.randn(4, 6, VOCAB, generator=torch.Generator().manual_seed(3))
    labels = torch.tensor([[5, 9, 4, 2, 0, 0], [7, 2, 0, 0, 0, 0], [3, 8, 11, 6, 10, 2], [4, 4, 2, 0, 0, 0]])
    values = {hint: make() for hint, make in variants.loss_mistakes(logits, labels, PAD, 0.1).items()}
    values["reference"] = training.translation_loss(logits, labels, PAD, 0.1)
    numbers = sorted(float(v) for v in values.values())
    assert all(b - a > 1e-3 for a, b in zip(numbers, numbers[1:])), values


@pytest.mark.parametrize("options, clip_norm", [({}, 0.1), ({}, 100.0), ({"init_scale": 3.0}, 1.0),
                                                ({"optimizer": "adam", "lr": 1e-2}, 0.1)])
def test_train_steps_default_is_the_reference(options, clip_norm):
    batches = _batches(21, 22)
    model, optimizer = stock.make(**options)
    want = [training.train_step(model, src, tgt, optimizer, PAD, clip_norm=clip_norm) for src, tgt in batches]
    twin, twin_optimizer = stock.make(**options)
    got = variants.train_steps(twin, twin_optimizer, batches, PAD, clip_norm)
    assert got == pytest.approx(want, rel=1e-6)
    assert _state_close(twin.state_dict(), model.state_dict())


def test_clipping_is_active_where_the_suite_needs_it():
    src, tgt = _batches(22)[0]
    for options, clip_norm in (({}, 0.1), ({"init_scale": 3.0}, 1.0)):
        model, _ = stock.make(**options)
        training.translation_loss(model(src, tgt[:, :-1]), tgt[:, 1:], PAD).backward()
        norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))
        assert norm > 2 * clip_norm, (options, float(norm))


def _short(hint: str) -> str:
    return hint.split(":")[0][:40]


@pytest.mark.parametrize("hint", list(variants.STEP_MISTAKES), ids=_short)
def test_each_train_step_mistake_changes_the_losses_or_parameters(hint):
    batches = _batches(23, 24)  # two steps: needed for zero_grad
    # Rescaling to clip_norm shows only where the norm is below it (the suite's clip_norm=100 test).
    clip_norm = 100.0 if hint == variants.CLIP_RESCALES else 0.1
    reference, reference_optimizer = stock.make()
    want = variants.train_steps(reference, reference_optimizer, batches, PAD, clip_norm)
    model, optimizer = stock.make()
    got = variants.train_steps(model, optimizer, batches, PAD, clip_norm, **variants.STEP_MISTAKES[hint])
    assert got != pytest.approx(want, rel=1e-4) or not _state_close(model.state_dict(), reference.state_dict(), 1e-4)


def test_stock_models_build_the_same_model_from_a_seed_and_leave_the_random_state_alone():
    state = torch.random.get_rng_state()
    first, second = stock.make(seed=4)[0], stock.make(seed=4)[0]
    assert torch.equal(torch.random.get_rng_state(), state)
    assert _state_close(first.state_dict(), second.state_dict(), 0.0)
    assert not _state_close(first.state_dict(), stock.make(seed=5)[0].state_dict())


def _trained() -> torch.nn.Module:
    model, _ = stock.make(seed=3)
    model.load_state_dict(trained_parameters())
    return model


def test_the_trained_models_rows_of_the_suite_end_after_3_4_5_steps_and_never():
    out = training.greedy_decode(_trained(), torch.tensor(ROWS), BOS, EOS, PAD, 6)
    ends = [row.index(EOS) if EOS in row else None for row in out.tolist()]
    assert ends == [3, 4, 5, None]


def test_the_eos_first_model_ends_every_row_at_once():
    model = _trained()
    model.load_state_dict(eos_first_parameters(model))
    assert training.greedy_decode(model, torch.tensor(ROWS), BOS, EOS, PAD, 6).tolist() == [[BOS, EOS]] * 4


@pytest.mark.parametrize("max_len", [1, 4, 6, 10])
def test_greedy_decode_default_is_the_reference(max_len):
    model, src = _trained(), torch.tensor(ROWS)
    assert torch.equal(variants.greedy_decode(model, src, BOS, EOS, PAD, max_len),
                       training.greedy_decode(model, src, BOS, EOS, PAD, max_len))
    seq2seq, _ = stock.make(seed=3)
    src, _ = reverse_batch(8, seed=310, device="cpu")
    assert torch.equal(variants.greedy_decode(seq2seq, src, BOS, EOS, PAD, max_len),
                       training.greedy_decode(seq2seq, src, BOS, EOS, PAD, max_len))


@pytest.mark.parametrize("hint", list(variants.DECODE_MISTAKES), ids=_short)
def test_each_decode_mistake_differs_on_the_rows_of_the_suite(hint):
    model, src = _trained(), torch.tensor(ROWS)
    got = variants.greedy_decode(model, src, BOS, EOS, PAD, 6, **variants.DECODE_MISTAKES[hint])
    want = training.greedy_decode(model, src, BOS, EOS, PAD, 6)
    assert got.shape != want.shape or not torch.equal(got, want)


# The mistakes of what is fed and which logits are read: on the trained model BOS fed over and
# over and the first position's logits give the same tokens; the suite's probe tells them apart.
FEEDING_MISTAKES = (variants.FIRST_POSITION, variants.PREFIX_NOT_FED, variants.LAST_TOKEN_ONLY)


def test_the_probe_model_tells_every_feeding_mistake_from_the_others_and_the_reference():
    model, _ = stock.make(seed=PROBE_SEED)
    src = torch.tensor(ROWS)
    made = {hint: [variants.greedy_decode(model, src, BOS, EOS, PAD, PROBE_MAX_LEN,
                                          **{"stop": stop, **variants.DECODE_MISTAKES[hint]})
                   for stop in ("all", "never")]
            for hint in FEEDING_MISTAKES}
    for hint, outputs in made.items():
        others = [training.greedy_decode(model, src, BOS, EOS, PAD, PROBE_MAX_LEN)]
        others += [output for other, theirs in made.items() if other != hint for output in theirs]
        assert not any(same_tokens(output, other) for output in outputs for other in others), hint
