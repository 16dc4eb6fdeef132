"""train_step on a stock model that lives in the student's process.

The student's step and the reference's run on twin models (same seed, same optimizer);
the suite compares the returned losses and the parameters read back with ``state_dict``.
SGD makes every mistake visible in the parameters: with clip_norm=0.1 clipping is active
(the stock model's gradient norm is ~0.6), so clipping too late or not at all changes
the step; two steps on different batches show gradients accumulating.

train_step is graded on top of the student's own teacher_forcing_split and
translation_loss: if the result is what the reference would do with the mistake those
pieces make, train_step keeps its points (the pieces lose theirs).
"""

from __future__ import annotations

from functools import cache, partial

import pytest
import torch

from grader.suite import CheckFailed, call_part, expect_close, expect_named_tensors, is_close
from reference.hidden.a06 import stock, variants
from reference.hidden.a06.conftest import PAD, as_loss, expect_parameters, student_pieces
from reference.training import train_step

pytestmark = pytest.mark.part("train_step")

# One SGD step (lr 0.5, clipped gradients) moves parameters by ~1e-3 to 1e-2; two correct
# implementations differ by ~1e-7 (float32 reduction order); every mistake by > 1e-4.
ATOL, RTOL = 1e-5, 1e-4
# The loss itself: float32 cross-entropy of order 1, computed in different orders.
LOSS_ATOL, LOSS_RTOL = 1e-5, 1e-5


def check_training(student, make_pair, device, batches, *, what, check=("losses", "parameters"),
                   options=None, **kwargs):
    """Run the student's train_step and the reference's on twin stock models; compare."""
    options = options or {}
    (model, optimizer), (ref_model, ref_optimizer) = make_pair(**options)
    got_losses = [as_loss(what, call_part(student, "train_step", model, src, tgt, optimizer, PAD, **kwargs))
                  for src, tgt in batches]
    got_state = expect_named_tensors(f"{what}: the model's state_dict afterwards", model.method("state_dict"),
                                     ref_model.state_dict())
    want_losses = [train_step(ref_model, src, tgt, ref_optimizer, PAD, **kwargs) for src, tgt in batches]
    want_state = ref_model.state_dict()

    @cache
    def run(**change):
        """losses, state and grads of the reference with ``change`` (a variants.train_steps mistake)."""
        variant_model, variant_optimizer = stock.make(device=device, **options)
        losses = variants.train_steps(variant_model, variant_optimizer, batches, PAD, **kwargs, **change)
        return torch.tensor(losses, dtype=torch.float64), variant_model.state_dict(), variant_model.grads()

    got = torch.tensor(got_losses, dtype=torch.float64)
    if _matches(got, got_state, torch.tensor(want_losses, dtype=torch.float64), want_state, check):
        return
    # Graded on top of the student's own pieces: their mistakes are charged to those parts.
    pieces, wrong = student_pieces(student, device)
    if pieces and _matches(got, got_state, *run(**pieces)[:2], check):
        return
    # Each mistake on top of the student's pieces, then (if those are wrong) the reference's.
    mistakes = {hint: [{**base, **change} for base in ([pieces, {}] if pieces else [{}])]
                for hint, change in variants.STEP_MISTAKES.items()}
    try:
        if "losses" in check:
            expect_close(f"{what}: the returned losses", got, torch.tensor(want_losses, dtype=torch.float64),
                         atol=LOSS_ATOL, rtol=LOSS_RTOL, mistakes=_candidates(
                             mistakes, run, 0, lambda losses: _losses_close(got, losses)))
        if "parameters" in check:
            expect_parameters(f"{what}: the parameters afterwards", got_state, want_state, atol=ATOL, rtol=RTOL,
                              mistakes=_candidates(mistakes, run, 1, lambda state: _state_close(got_state, state)))
    except CheckFailed as failure:
        if failure.hint == variants.UNCLIPPED_STEP:
            failure.hint = _which_unclipped(model, run, mistakes[variants.UNCLIPPED_STEP])
        if failure.hint is None and wrong:
            failure.hint = variants.SUBPART_WRONG.format(name=wrong[0])
        raise failure from None


def _losses_close(got: torch.Tensor, want: torch.Tensor) -> bool:
    return got.shape == want.shape and torch.allclose(got, want, atol=LOSS_ATOL, rtol=LOSS_RTOL)


def _state_close(got: dict, want: dict) -> bool:
    return set(got) == set(want) and all(
        torch.allclose(got[name].double().cpu(), want[name].double().cpu(), atol=ATOL, rtol=RTOL) for name in want)


def _matches(got_losses, got_state, want_losses, want_state, check) -> bool:
    return (("losses" not in check or _losses_close(got_losses, want_losses))
            and ("parameters" not in check or _state_close(got_state, want_state)))


def _candidates(mistakes: dict, run, index: int, close) -> dict:
    """hint -> callable giving that mistake's losses (index 0) or state (index 1); where a
    hint has two variants (on the student's pieces and on the reference's), the one that
    ``close`` accepts."""
    def value(changes):
        values = [run(**change)[index] for change in changes]
        return next((v for v in values if close(v)), values[0])
    return {hint: partial(value, changes) for hint, changes in mistakes.items()}


def _which_unclipped(model, run, changes) -> str:
    """Clipping after the step and no clipping give the same parameters; the gradients left
    in the model tell them apart (clipped, or not), when the student's code keeps them."""
    got = model.method("grads")
    got = got if isinstance(got, dict) else {}
    for base in changes:
        for clip, hint in (("after", variants.CLIP_AFTER_STEP), ("none", variants.NO_CLIP)):
            want = run(**{**base, "clip": clip})[2]
            if all(g is not None and is_close(got.get(name), g, atol=ATOL, rtol=RTOL) for name, g in want.items()):
                return hint
    return variants.UNCLIPPED_STEP


def test_train_step_returns_the_loss_as_a_float(student, make_pair, make_batch):
    (model, optimizer), _ = make_pair()
    src, tgt = make_batch(6, seed=20)
    got = call_part(student, "train_step", model, src, tgt, optimizer, PAD)
    if not isinstance(got, float):
        kind = "a tensor" if isinstance(got, torch.Tensor) else getattr(got, "type_name", type(got).__name__)
        raise CheckFailed(f"train_step(...) returned {kind}, expected the loss as a Python float",
                          variants.LOSS_NOT_FLOAT)


@pytest.mark.part("train_step", points=2)
def test_train_step_returns_the_teacher_forced_loss(student, make_pair, make_batch, device):
    check_training(student, make_pair, device, [make_batch(6, seed=21)], check=("losses",), clip_norm=0.1,
                   what="train_step(model, src, tgt, optimizer, pad_idx, clip_norm=0.1)")


@pytest.mark.part("train_step", points=2)
def test_train_step_updates_the_parameters(student, make_pair, make_batch, device):
    check_training(student, make_pair, device, [make_batch(6, seed=22)], check=("parameters",), clip_norm=0.1,
                   what="one train_step(..., clip_norm=0.1) with SGD")


@pytest.mark.part("train_step", points=2)
def test_train_step_twice_on_two_batches(student, make_pair, make_batch, device):
    check_training(student, make_pair, device, [make_batch(6, seed=23), make_batch(5, seed=24)], clip_norm=0.1,
                   what="two train_step(..., clip_norm=0.1) calls with SGD")


def test_train_step_clips_at_norm_one_by_default(student, make_pair, make_batch, device):
    # Parameters scaled by 3 give a gradient norm of ~3, so the default clip_norm=1.0 acts.
    batches, options = [make_batch(6, seed=25)], {"init_scale": 3.0}
    what = "train_step(model, src, tgt, optimizer, pad_idx) without clip_norm"
    try:
        check_training(student, make_pair, device, batches, what=what, options=options)
    except CheckFailed as failure:
        try:  # the same step with clip_norm=1.0 spelled out: right there means a wrong default
            check_training(student, make_pair, device, batches, what=what, options=options, clip_norm=1.0)
        except CheckFailed:
            raise failure from None
        raise CheckFailed(failure.message, variants.CLIP_DEFAULT) from None


def test_train_step_leaves_small_gradients_unclipped(student, make_pair, make_batch, device):
    check_training(student, make_pair, device, [make_batch(6, seed=26)], clip_norm=100.0,
                   what="train_step(..., clip_norm=100.0): a gradient norm far below clip_norm")


def test_train_step_with_adam(student, make_pair, make_batch, device):
    check_training(student, make_pair, device, [make_batch(6, seed=27), make_batch(6, seed=28)],
                   options={"optimizer": "adam", "lr": 1e-2}, clip_norm=0.1,
                   what="two train_step(..., clip_norm=0.1) calls with Adam")
