"""End to end: the student's train_step trains a small stock model on the reversal task.

A stock GRU encoder-decoder with attention (``stock.TinySeq2Seq``) lives in the student's
process; the suite feeds it 4 fixed batches in turn, 40 steps with Adam (lr 1e-2), and
reads the losses train_step returns. With the reference the mean loss of the last two
rounds of batches is ~0.1 of the first two's; the test asks for less than half.
"""

from __future__ import annotations

import math
import statistics

import pytest

from grader.checks import CheckFailed
from reference.hidden.a06 import variants
from reference.hidden.a06.conftest import PAD, as_loss, call_part

pytestmark = pytest.mark.part("end_to_end")

STEPS, BATCHES, BATCH_SIZE = 40, 4, 16
WINDOW = 2 * BATCHES  # compare whole rounds of batches: each batch has its own loss level
REQUIRED_DROP = 0.5


@pytest.mark.part("end_to_end", points=3)
def test_training_with_your_train_step_lowers_the_loss(student, remote_stock, make_batch, device):
    model, optimizer = remote_stock.method("make", seed=7, device=device, optimizer="adam", lr=1e-2)
    batches = [make_batch(BATCH_SIZE, seed=700 + i) for i in range(BATCHES)]
    losses = []
    for step in range(STEPS):
        src, tgt = batches[step % BATCHES]
        what = f"train_step at step {step + 1} of {STEPS}"
        losses.append(as_loss(what, call_part(student, "train_step", model, src, tgt, optimizer, PAD)))
        if not math.isfinite(losses[-1]):
            raise CheckFailed(f"{what} returned {losses[-1]}", variants.NOT_FINITE)
    first, last = statistics.mean(losses[:WINDOW]), statistics.mean(losses[-WINDOW:])
    if last < REQUIRED_DROP * first:
        return
    same_batch = zip(losses, losses[BATCHES:])  # a batch's loss one round later
    unchanged = all(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7) for a, b in same_batch)
    trace = ", ".join(f"{loss:.3f}" for loss in losses[::BATCHES])
    raise CheckFailed(f"training the stock model with your train_step for {STEPS} steps: the mean loss went from "
                      f"{first:.3f} (first {WINDOW} steps) to {last:.3f} (last {WINDOW}); expected below "
                      f"{REQUIRED_DROP * first:.3f}. Loss every {BATCHES} steps: {trace}",
                      variants.NO_STEP if unchanged else variants.NO_LEARNING)

