"""Assignment 06 end to end: reference, stubs, each named mistake.

Buggy submissions are the reference with one edit (a mutant), so each differs from a
correct solution in exactly the way its name says, and none is a hand-kept copy.
train_step is graded on top of the student's own teacher_forcing_split and
translation_loss, so a mistake made in one of those costs points there only.
"""

from __future__ import annotations


import pytest

from grader import hints
from grader.report import GradeReport
from reference import as_submission
from reference.hidden.a06 import variants
from tests.conftest import ROOT, assert_mistake_named, mutant, part

pytestmark = pytest.mark.slow
ASSIGNMENT_06 = ROOT / "assignments" / "06"
PARTS = ("teacher_forcing_split", "translation_loss", "train_step", "greedy_decode", "end_to_end")
REFERENCE = as_submission("training")


@pytest.fixture
def grade_06(grade_source):
    def run(text, **kwargs) -> GradeReport:
        return grade_source(text, assignment=ASSIGNMENT_06, **kwargs)
    return run


def test_train_step_calling_an_unfinished_part_says_which(grade_06):
    source = mutant(REFERENCE, "    return F.cross_entropy(\n",
                    "    raise NotImplementedError('translation_loss: see assignments/06/README.md')\n"
                    "    return F.cross_entropy(\n")
    report = grade_06(source)
    assert part(report, "train_step").hint == hints.NOT_IMPLEMENTED
    assert any("calls translation_loss" in t.message for t in part(report, "train_step").tests)
    assert part(report, "greedy_decode").score == part(report, "greedy_decode").max_score


def test_missing_part_scores_zero_and_others_are_graded(grade_06):
    report = grade_06(mutant(REFERENCE, "def greedy_decode(", "def greedy_decode_renamed("))
    assert part(report, "greedy_decode").score == 0
    assert part(report, "greedy_decode").hint == hints.NOT_FOUND
    assert all(part(report, p).score == part(report, p).max_score for p in PARTS if p != "greedy_decode")


CLIP_THEN_STEP = "    nn.utils.clip_grad_norm_(model.parameters(), clip_norm)\n    optimizer.step()\n"

MISTAKES = {
    # teacher forcing
    "labels not shifted, in teacher_forcing_split": (
        ("return tgt[:, :-1], tgt[:, 1:]", "return tgt[:, :-1], tgt[:, :-1]"),
        # train_step uses the student's own split: graded on top of it, it keeps its points.
        {"teacher_forcing_split": variants.LABELS_NOT_SHIFTED}),
    "decoder input and labels swapped": (
        ("return tgt[:, :-1], tgt[:, 1:]", "return tgt[:, 1:], tgt[:, :-1]"),
        {"teacher_forcing_split": variants.SPLIT_SWAPPED}),
    "labels not shifted, in train_step": (
        ("tgt_in, labels = teacher_forcing_split(tgt)", "tgt_in, labels = tgt[:, :-1], tgt[:, :-1]"),
        {"train_step": variants.LABELS_NOT_SHIFTED}),
    # the loss
    "padding not ignored, in translation_loss": (
        ("        ignore_index=pad_idx,\n", ""),
        {"translation_loss": variants.PAD_NOT_IGNORED}),
    "padding not ignored, in train_step": (
        ("loss = translation_loss(logits, labels, pad_idx)",
         "loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())"),
        {"train_step": variants.PAD_NOT_IGNORED}),
    "pad index hard-coded": (
        ("ignore_index=pad_idx,", "ignore_index=0,"),
        {"translation_loss": variants.PAD_HARDCODED}),
    "label smoothing ignored": (
        ("        label_smoothing=label_smoothing,\n", ""),
        {"translation_loss": variants.SMOOTHING_IGNORED}),
    "translation_loss wrong in an unknown way": (
        ("    return F.cross_entropy(\n", "    return 2 * F.cross_entropy(\n"),
        # train_step returns twice the loss too: its hint points at translation_loss.
        {"translation_loss": None, "train_step": variants.SUBPART_WRONG.format(name="translation_loss")}),
    # the step
    "no zero_grad": (
        ("    optimizer.zero_grad()\n", ""),
        {"train_step": variants.NO_ZERO_GRAD}),
    "no optimizer step": (
        ("    optimizer.step()\n", ""),
        {"train_step": variants.NO_STEP, "end_to_end": variants.NO_STEP}),
    "clipping after the step": (
        (CLIP_THEN_STEP, "    optimizer.step()\n    nn.utils.clip_grad_norm_(model.parameters(), clip_norm)\n"),
        {"train_step": variants.CLIP_AFTER_STEP}),
    "no clipping": (
        ("    nn.utils.clip_grad_norm_(model.parameters(), clip_norm)\n", ""),
        {"train_step": variants.NO_CLIP}),
    "clipping by value": (
        ("nn.utils.clip_grad_norm_(model.parameters(), clip_norm)",
         "nn.utils.clip_grad_value_(model.parameters(), clip_norm)"),
        {"train_step": variants.CLIP_BY_VALUE}),
    "loss returned as a tensor": (
        ("    return loss.item()\n", "    return loss\n"),
        {"train_step": variants.LOSS_NOT_FLOAT}),
    # greedy decoding
    "not padded after EOS": (
        ("            next_token = next_token.masked_fill(finished, pad_idx)\n", ""),
        {"greedy_decode": variants.NOT_PADDED_AFTER_EOS}),
    "logits of the first position": (
        ("logits[:, -1].argmax(dim=-1)", "logits[:, 0].argmax(dim=-1)"),
        {"greedy_decode": variants.FIRST_POSITION}),
    "stops when the first row finishes": (
        ("if finished.all():", "if finished.any():"),
        {"greedy_decode": variants.STOPS_AT_FIRST_EOS}),
    "one token more than max_len": (
        ("for _ in range(max_len - 1):", "for _ in range(max_len):"),
        {"greedy_decode": variants.MAX_LEN_OFF_BY_ONE}),
    "BOS left out": (
        ("        return out\n", "        return out[:, 1:]\n"),
        {"greedy_decode": variants.NO_BOS}),
}


@pytest.mark.parametrize("name", MISTAKES)
def test_mistake_loses_points_in_its_part_with_its_hint(grade_06, name):
    (old, new), expected_hints = MISTAKES[name]
    report = grade_06(mutant(REFERENCE, old, new))
    assert_mistake_named(report, expected_hints, name)
