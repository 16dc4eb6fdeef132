"""End to end: the student's train_step trains a small stock model on the reversal task.

A stock GRU encoder-decoder with attention (``stock.TinySeq2Seq``) lives in the student's
process; the suite feeds it 4 fixed batches in turn, 40 steps with Adam (lr 1e-2). The
losses train_step returns are the student's word, so they are not what is graded here:
the suite fetches the trained parameters and measures the loss on the same batches
itself, with the stock model's twin, before and after. With the reference the loss falls
to ~0.03 of where it started; the test asks for less than half.

Part isolation: the loss is measured as train_step should minimise it, and also as each
known mistake in teacher forcing or in the loss would (``variants.STEP_MISTAKES``); a step
that trains, but on such a wrong objective, costs points in train_step, not here.
"""

from __future__ import annotations

import math

import pytest
import torch

from grader.suite import CheckFailed, call_part, expect_named_tensors, expect_objects
from reference.hidden.a06 import stock, variants
from reference.hidden.a06.conftest import PAD, expect_parameters

pytestmark = pytest.mark.part("end_to_end")

STEPS, BATCHES, BATCH_SIZE = 40, 4, 16
REQUIRED_DROP = 0.5
STOCK = dict(seed=7, optimizer="adam", lr=1e-2)
# The objective train_step should minimise, then those of the known mistakes in its pieces.
OBJECTIVES = [{}] + [change for change in variants.STEP_MISTAKES.values()
                     if change.keys() <= {"split", "loss", "feed"}]


def mean_loss(model: torch.nn.Module, batches, *, split=variants.split, loss=variants.translation_loss,
              feed: str = "shifted") -> float:
    """The loss over ``batches``, computed here: the model's parameters are values, the
    computation is the grader's."""
    with torch.no_grad():
        values = []
        for src, tgt in batches:
            values.append(float(loss(*variants.scored_outputs(model, src, tgt, split=split, feed=feed), PAD)))
    return sum(values) / len(values)


def fetched_state(what: str, model, twin: torch.nn.Module) -> dict:
    """The student-side model's parameters as tensors shaped like the twin's (checked before
    the grader computes with them)."""
    return expect_named_tensors(f"{what}: the stock model's state_dict", model.method("state_dict"), twin.state_dict())


@pytest.mark.part("end_to_end", points=3)
def test_training_with_your_train_step_lowers_the_loss(student, remote_stock, make_batch, device):
    model, optimizer = expect_objects("the grader's stock make(...) in your process",
                                      remote_stock.method("make", device=device, **STOCK), 2)
    twin, _ = stock.make(device=device, **STOCK)
    initial = {name: tensor.clone() for name, tensor in twin.state_dict().items()}
    # Exactly the twin's: code that changes how the stock model is built would start it trained.
    expect_parameters("the stock model before training", fetched_state("before training", model, twin), initial,
                      atol=0.0, rtol=0.0, mistakes={})
    batches = [make_batch(BATCH_SIZE, seed=700 + i) for i in range(BATCHES)]
    for step in range(STEPS):
        src, tgt = batches[step % BATCHES]
        call_part(student, "train_step", model, src, tgt, optimizer, PAD)  # what it returns is graded in train_step
    trained = fetched_state(f"after {STEPS} train_step calls", model, twin)
    what = f"training the stock model with your train_step for {STEPS} steps"
    if not all(bool(torch.isfinite(tensor).all()) for tensor in trained.values()):
        raise CheckFailed(f"{what}: the parameters became nan or inf", variants.NOT_FINITE)
    before = [mean_loss(twin, batches, **objective) for objective in OBJECTIVES]
    twin.load_state_dict(trained)
    after = [mean_loss(twin, batches, **objective) for objective in OBJECTIVES]
    if any(a < REQUIRED_DROP * b for a, b in zip(after, before)):
        return
    if not math.isfinite(after[0]):
        raise CheckFailed(f"{what}: the loss became {after[0]}", variants.NOT_FINITE)
    unchanged = all(torch.equal(trained[name], initial[name]) for name in initial)
    raise CheckFailed(f"{what}: the grader measured the loss on the {BATCHES} training batches before and after: "
                      f"{before[0]:.3f}, then {after[0]:.3f}; expected below {REQUIRED_DROP * before[0]:.3f}",
                      variants.NO_STEP if unchanged else variants.NO_LEARNING)
