"""Public tests for assignment 06: shapes and sanity checks you can run yourself.

    pytest assignments/06

They are a subset in spirit of what the grader checks; passing them does not mean full
marks. Run `grade assignments/06` for the graded result and hints.

Tests that check values compare your output on stored inputs with the stored right output, and
with what common mistakes output on them (test_training.safetensors, beside this file).
"""

import pytest
import torch
from torch import nn
from training import greedy_decode, teacher_forcing_split, train_step, translation_loss

from grader.core.public_cases import Cases

CASES = Cases(__file__)

PAD, BOS, EOS, VOCAB = 0, 1, 2, 10


class BagModel(nn.Module):
    """A tiny stand-in for a translation model: any model(src, tgt_in) -> logits will do."""

    def __init__(self):
        super().__init__()
        self.src_embed = nn.Embedding(VOCAB, 8)
        self.tgt_embed = nn.Embedding(VOCAB, 8)
        self.out = nn.Linear(8, VOCAB)

    def forward(self, src, tgt_in):
        return self.out(self.tgt_embed(tgt_in) + self.src_embed(src).mean(dim=1, keepdim=True))


class CountingModel(nn.Module):
    """Predicts 3, 4, 5, ... then EOS after `length[b]` words, whatever the source says."""

    def __init__(self, lengths):
        super().__init__()
        self.lengths = lengths

    def forward(self, src, tgt_in):
        batch, steps = tgt_in.shape
        logits = torch.zeros(batch, steps, VOCAB)
        for b in range(batch):
            for t in range(steps):
                logits[b, t, EOS if t >= self.lengths[b] else 3 + t] = 1.0
        return logits


def test_teacher_forcing_split_shifts_by_one():
    tgt = torch.tensor([[BOS, 5, 6, EOS, PAD], [BOS, 7, EOS, PAD, PAD]])
    decoder_input, labels = teacher_forcing_split(tgt)
    assert not torch.equal(labels, decoder_input), "mistake: labels not shifted"
    assert decoder_input.tolist() == [[BOS, 5, 6, EOS], [BOS, 7, EOS, PAD]]
    assert labels.tolist() == [[5, 6, EOS, PAD], [7, EOS, PAD, PAD]]


def test_teacher_forcing_split_rejects_a_1d_tensor():
    with pytest.raises(ValueError):
        teacher_forcing_split(torch.tensor([BOS, 5, EOS]))


def test_translation_loss_is_cross_entropy_without_padding():
    case = CASES["translation_loss"]
    loss = translation_loss(case.tensor("logits", 2, 3, VOCAB), torch.tensor([[4, 5, EOS], [6, 7, EOS]]), PAD)
    assert loss.shape == ()
    case.expect(loss, mistakes=("label smoothing hard-coded",))


def test_translation_loss_spreads_label_smoothing_over_every_class():
    # As F.cross_entropy's label_smoothing: 1 - 0.1 on the label, 0.1 spread over all V classes.
    case = CASES["label_smoothing"]
    labels = torch.tensor([[4, 5, EOS, PAD], [6, EOS, PAD, PAD]])
    loss = translation_loss(case.tensor("logits", 2, 4, VOCAB), labels, PAD, label_smoothing=0.1)
    case.expect(loss, mistakes=(
        "label smoothing spread over `V-2` classes (the annotated transformer's KL divergence)",))


def test_translation_loss_does_not_look_at_pad_positions():
    logits, labels = torch.randn(2, 4, VOCAB), torch.tensor([[4, 5, EOS, PAD], [6, EOS, PAD, PAD]])
    changed = logits.clone()
    changed[labels == PAD] = 100.0
    assert torch.allclose(translation_loss(changed, labels, PAD), translation_loss(logits, labels, PAD)), \
        "mistake: padding not ignored in the loss"


def test_train_step_returns_a_float_and_changes_the_parameters():
    torch.manual_seed(0)
    model = BagModel()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    src, tgt = torch.tensor([[3, 4, 5]]), torch.tensor([[BOS, 5, 4, 3, EOS]])
    loss = train_step(model, src, tgt, optimizer, PAD)
    assert isinstance(loss, float)
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters())), "mistake: no optimizer step"


def test_train_step_starts_from_fresh_gradients():
    torch.manual_seed(0)
    model = BagModel()
    for parameter in model.parameters():
        parameter.grad = torch.full_like(parameter, 1e3)  # left over from an earlier step
    before = [p.detach().clone() for p in model.parameters()]
    train_step(model, torch.tensor([[3, 4, 5]]), torch.tensor([[BOS, 5, 4, 3, EOS]]),
               torch.optim.SGD(model.parameters(), lr=0.1), PAD, clip_norm=1e9)
    moved = max((p.detach() - b).abs().max().item() for b, p in zip(before, model.parameters()))
    assert moved < 10, "mistake: no `zero_grad`"


def test_train_step_clips_the_gradients_before_the_step():
    torch.manual_seed(0)
    model = BagModel()
    before = [p.detach().clone() for p in model.parameters()]
    train_step(model, torch.tensor([[3, 4, 5]]), torch.tensor([[BOS, 5, 4, 3, EOS]]),
               torch.optim.SGD(model.parameters(), lr=1.0), PAD, clip_norm=1e-3)
    # Plain SGD moves the parameters by lr times the gradient: clipped first, by at most clip_norm in all.
    moved = torch.cat([(p.detach() - b).flatten() for b, p in zip(before, model.parameters())]).norm()
    gradients = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).norm()
    assert moved <= 1e-3 * 1.01, ("mistake: clipping after the step" if gradients <= 1e-3 * 1.01 else
                                  "the step is not clipped: call nn.utils.clip_grad_norm_ before optimizer.step()")


def test_train_step_feeds_the_model_the_target_without_its_last_token():
    seen = []

    class Recording(BagModel):
        def forward(self, src, tgt_in):
            seen.append(tgt_in.clone())
            return super().forward(src, tgt_in)

    model = Recording()
    tgt = torch.tensor([[BOS, 5, 4, 3, EOS]])
    train_step(model, torch.tensor([[3, 4, 5]]), tgt, torch.optim.SGD(model.parameters(), lr=0.1), PAD)
    assert seen[0].shape[1] == tgt.shape[1] - 1, \
        "mistake: the whole target fed to the model, the label leaking into the input"
    assert torch.equal(seen[0], tgt[:, :-1])


def test_train_step_lowers_the_loss_on_one_batch():
    torch.manual_seed(0)
    model = BagModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    src, tgt = torch.tensor([[3, 4, 5], [6, 7, PAD]]), torch.tensor([[BOS, 5, 4, 3, EOS], [BOS, 7, 6, EOS, PAD]])
    losses = [train_step(model, src, tgt, optimizer, PAD) for _ in range(20)]
    assert losses[-1] < losses[0]


def test_greedy_decode_starts_with_bos_and_pads_after_eos():
    model = CountingModel(lengths=[1, 3])
    out = greedy_decode(model, torch.zeros(2, 4, dtype=torch.long), BOS, EOS, PAD, max_len=8)
    assert out.dtype == torch.long and out.shape[0] == 2 and out.shape[1] <= 8
    rows = out.tolist()
    assert rows[0][:3] == [BOS, 3, EOS] and all(token == PAD for token in rows[0][3:])
    assert rows[1][:5] == [BOS, 3, 4, 5, EOS]


def test_greedy_decode_stops_at_max_len():
    out = greedy_decode(CountingModel(lengths=[9]), torch.zeros(1, 2, dtype=torch.long), BOS, EOS, PAD, max_len=4)
    assert out.tolist() == [[BOS, 3, 4, 5]]
