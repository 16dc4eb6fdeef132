"""Assignment 02 end to end: reference, stubs and each named mistake.

Buggy submissions are the reference with one edit (a mutant), so each differs from a
correct solution in exactly the way its name says, and none is a hand-kept copy. The
reference submission inlines assignment 01's attention, as a student's would.
"""

from __future__ import annotations


import pytest

from grader import hints
from grader.report import GradeReport
from reference import as_submission
from reference.hidden.a02 import variants
from tests.conftest import ROOT, assert_mistake_named, mutant, part

pytestmark = pytest.mark.slow
ASSIGNMENT_02 = ROOT / "assignments" / "02"
REFERENCE = as_submission("masks")


@pytest.fixture
def grade_02(grade_source):
    def run(text, suffix=".py", **kwargs) -> GradeReport:
        return grade_source(text, suffix=suffix, assignment=ASSIGNMENT_02, **kwargs)
    return run


def test_missing_part_scores_zero_and_others_are_graded(grade_02):
    report = grade_02(mutant(REFERENCE, "def padding_mask(", "def padding_mask_renamed("))
    assert part(report, "padding_mask").score == 0
    assert part(report, "padding_mask").hint == hints.NOT_FOUND
    assert part(report, "causal_mask").score == part(report, "causal_mask").max_score


CAUSAL = "torch.ones(T, T, dtype=torch.bool, device=device).tril()"

MISTAKES = {
    # CausalSelfAttention builds its buffer with the student's own causal_mask, so it breaks too.
    "causal mask with triu": (
        (CAUSAL, CAUSAL.replace(".tril()", ".triu()")),
        {"causal_mask": variants.CAUSAL_TRIU, "CausalSelfAttention": variants.CAUSAL_TRIU}),
    "causal mask marks the blocked positions": (
        (CAUSAL, CAUSAL.replace(".tril()", ".triu(1)")),
        {"causal_mask": variants.CAUSAL_BLOCKED, "CausalSelfAttention": variants.CAUSAL_BLOCKED}),
    "causal mask without the diagonal": (
        (CAUSAL, CAUSAL.replace(".tril()", ".tril(-1)")),
        {"causal_mask": variants.CAUSAL_NO_DIAGONAL, "CausalSelfAttention": variants.CAUSAL_NO_DIAGONAL}),
    "padding mask inverted": (
        ("(tokens != pad_idx)", "(tokens == pad_idx)"),
        {"padding_mask": variants.PADDING_INVERTED}),
    "padding mask ignores pad_idx": (
        ("(tokens != pad_idx)", "(tokens != 0)"),
        {"padding_mask": variants.PAD_IDX_IGNORED}),
    "padding mask of shape (B, 1, T)": (
        ("[:, None, None, :]", "[:, None, :]"),
        {"padding_mask": variants.PADDING_SHAPE}),
    "padding mask over the queries": (
        ("[:, None, None, :]", "[:, None, :, None]"),
        {"padding_mask": variants.PADDING_OVER_QUERIES}),
    # CausalSelfAttention keeps full marks under the scaling mistakes: its tests check only
    # that dropout is on in training and off in eval.
    "dropout without 1/(1-p)": (
        ("return x * keep / (1.0 - p)", "return x * keep"),
        {"dropout": variants.DROPOUT_NO_SCALING}),
    "dropout scaled by (1-p)": (
        ("return x * keep / (1.0 - p)", "return x * keep * (1.0 - p)"),
        {"dropout": variants.DROPOUT_SCALED_BY_KEEP}),
    "dropout active at evaluation": (
        ("if not training or p == 0.0:", "if p == 0.0:"),
        {"dropout": variants.DROPOUT_IN_EVAL, "CausalSelfAttention": variants.CSA_DROPOUT_IN_EVAL}),
    "dropout with p as the keep probability": (
        ("dtype=dtype) >= p", "dtype=dtype) < p"),
        {"dropout": variants.DROPOUT_P_AS_KEEP}),
    "dropout ignores the generator": (
        ("generator=generator, device=x.device", "device=x.device"),
        {"dropout": variants.DROPOUT_GENERATOR_IGNORED}),
    "dropout divides by zero at p=1": (
        ("    if p == 1.0:\n        return torch.zeros_like(x)\n", ""),
        {"dropout": variants.DROPOUT_P_ONE}),
    "causal self-attention without the mask": (
        ("scaled_dot_product_attention(q, k, v, self.mask[:T, :T])", "scaled_dot_product_attention(q, k, v)"),
        {"CausalSelfAttention": variants.NO_CAUSAL_MASK}),
    "causal self-attention with the mask inverted": (
        ("scaled_dot_product_attention(q, k, v, self.mask[:T, :T])",
         "scaled_dot_product_attention(q, k, v, ~self.mask[:T, :T])"),
        {"CausalSelfAttention": variants.CAUSAL_BLOCKED}),
    "causal self-attention mask not a buffer": (
        ('self.register_buffer("mask", causal_mask(context_length))', "self.mask = causal_mask(context_length)"),
        {"CausalSelfAttention": variants.MASK_NOT_A_BUFFER}),
    "causal self-attention dropout in eval mode": (
        ("weights = dropout(weights, self.dropout_p, self.training)", "weights = dropout(weights, self.dropout_p)"),
        {"CausalSelfAttention": variants.CSA_DROPOUT_IN_EVAL}),
    "causal self-attention without dropout": (
        ("weights = dropout(weights, self.dropout_p, self.training)", "pass"),
        {"CausalSelfAttention": variants.CSA_NO_DROPOUT}),
    "causal self-attention not scaled": (
        ("/ math.sqrt(d_k)", "/ 1.0"),
        {"CausalSelfAttention": variants.NO_SCALE}),
}


@pytest.mark.parametrize("name", MISTAKES)
def test_mistake_loses_points_in_its_part_with_its_hint(grade_02, name):
    (old, new), expected_hints = MISTAKES[name]
    report = grade_02(mutant(REFERENCE, old, new))
    assert_mistake_named(report, expected_hints, name)
