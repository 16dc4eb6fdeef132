"""Assignment 01 end to end: reference, stubs, each named mistake, forbidden built-ins.

Buggy submissions are the reference with one edit (a mutant), so each differs from a
correct solution in exactly the way its name says, and none is a hand-kept copy.
"""

from __future__ import annotations


import pytest

from grader import hints
from grader.report import GradeReport
from reference import as_submission
from reference.hidden.a01 import variants
from tests.conftest import ROOT, assert_mistake_named, mutant, part

pytestmark = pytest.mark.slow
ASSIGNMENT_01 = ROOT / "assignments" / "01"
REFERENCE = as_submission("attention")


@pytest.fixture
def grade_01(grade_source):
    def run(text, suffix=".py", **kwargs) -> GradeReport:
        return grade_source(text, suffix=suffix, assignment=ASSIGNMENT_01, **kwargs)
    return run


def test_missing_part_scores_zero_and_others_are_graded(grade_01):
    report = grade_01(mutant(REFERENCE, "def attention_scores(", "def attention_scores_renamed("))
    assert part(report, "attention_scores").score == 0
    assert part(report, "attention_scores").hint == hints.NOT_FOUND
    assert part(report, "softmax").score == part(report, "softmax").max_score


SOFTMAX_BODY = "    exp = torch.exp(x - row_max)\n    return exp / exp.sum(dim=dim, keepdim=True)\n"

MISTAKES = {
    "softmax ignores dim": (
        ("    row_max = x.amax(dim=dim, keepdim=True)\n",
         "    dim = -1\n    row_max = x.amax(dim=dim, keepdim=True)\n"),
        {"softmax": variants.SOFTMAX_WRONG_DIM}),
    "no max subtraction": (
        ("exp = torch.exp(x - row_max)", "exp = torch.exp(x)"),
        {"softmax": variants.NO_MAX_SUBTRACTION}),
    "max over the whole tensor": (
        ("row_max = x.amax(dim=dim, keepdim=True)", "row_max = x.max()"),
        {"softmax": variants.GLOBAL_MAX}),
    "forbidden torch.softmax": (
        (SOFTMAX_BODY, "    return torch.softmax(x, dim=dim)\n"),
        {"softmax": variants.FORBIDDEN_SOFTMAX}),
    "scores scaled": (
        ("return query @ keys.transpose(-2, -1)", "return query @ keys.transpose(-2, -1) / math.sqrt(query.size(-1))"),
        # scaled_dot_product_attention scales again, and SelfAttention calls it.
        {"attention_scores": variants.SCORES_SCALED, "scaled_dot_product_attention": variants.SCALE_D_K,
         "SelfAttention": variants.SCALE_D_K}),
    "scores transposed": (
        ("return query @ keys.transpose(-2, -1)", "return keys @ query.transpose(-2, -1)"),
        {"attention_scores": variants.SCORES_TRANSPOSED, "scaled_dot_product_attention": variants.OWN_PIECES_WRONG,
         "SelfAttention": variants.OWN_SDPA_WRONG}),
    "not scaled": (
        ("/ math.sqrt(d_k)", "/ 1.0"),
        # SelfAttention calls the student's own scaled_dot_product_attention, so it breaks too.
        {"scaled_dot_product_attention": variants.NO_SCALE, "SelfAttention": variants.NO_SCALE}),
    "scaled by d_k": (
        ("/ math.sqrt(d_k)", "/ d_k"),
        {"scaled_dot_product_attention": variants.SCALE_D_K, "SelfAttention": variants.SCALE_D_K}),
    "attention softmax over the wrong dimension": (
        ("weights = softmax(scores, dim=-1)", "weights = softmax(scores, dim=-2)"),
        {"scaled_dot_product_attention": variants.SOFTMAX_DIM, "SelfAttention": variants.SOFTMAX_DIM}),
    "mask inverted": (
        ("scores.masked_fill(~mask,", "scores.masked_fill(mask,"),
        {"scaled_dot_product_attention": variants.MASK_INVERTED}),
    "mask inverted, filled with -1e9": (
        ('scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(mask, -1e9)"),
        {"scaled_dot_product_attention": variants.MASK_INVERTED}),
    "mask applied after the softmax": (
        ('        scores = scores.masked_fill(~mask, float("-inf"))\n    weights = softmax(scores, dim=-1)',
         "        pass\n    weights = softmax(scores, dim=-1)\n"
         "    if mask is not None:\n        weights = weights.masked_fill(~mask, 0.0)"),
        {"scaled_dot_product_attention": variants.MASK_AFTER_SOFTMAX}),
    "mask ignored": (
        ('scores = scores.masked_fill(~mask, float("-inf"))', "pass"),
        {"scaled_dot_product_attention": variants.MASK_IGNORED}),
    "returns (weights, output)": (
        ("return weights @ v, weights", "return weights, weights @ v"),
        {"scaled_dot_product_attention": variants.RETURN_ORDER, "SelfAttention": variants.OWN_SDPA_WRONG}),
    "W_query and W_key swapped": (
        ("q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)",
         "q, k, v = self.W_key(x), self.W_query(x), self.W_value(x)"),
        {"SelfAttention": variants.QUERY_KEY_SWAPPED}),
}


@pytest.mark.parametrize("name", MISTAKES)
def test_mistake_loses_points_in_its_part_with_its_hint(grade_01, name):
    (old, new), expected_hints = MISTAKES[name]
    report = grade_01(mutant(REFERENCE, old, new))
    assert_mistake_named(report, expected_hints, name)


# Every route to a built-in softmax, and the name the grader sees for it.
FORBIDDEN = {
    "torch.softmax": ("torch.softmax(x, dim=dim)", "softmax"),
    "F.softmax": ("torch.nn.functional.softmax(x, dim=dim)", "softmax"),
    "nn.Softmax": ("nn.Softmax(dim=dim)(x)", "softmax"),
    "Tensor.softmax": ("x.softmax(dim)", "softmax"),
    "log_softmax": ("torch.log_softmax(x, dim=dim).exp()", "log_softmax"),
    "torch.special.softmax": ("torch.special.softmax(x, dim)", "special_softmax"),
    "aten._softmax": ("torch.ops.aten._softmax(x, dim, False)", "_softmax"),
}


@pytest.mark.parametrize("name", FORBIDDEN)
def test_a_built_in_softmax_scores_zero_in_softmax_and_is_named(grade_01, name):
    call, seen = FORBIDDEN[name]
    report = grade_01(mutant(REFERENCE, SOFTMAX_BODY, f"    return {call}\n"))
    softmax = part(report, "softmax")
    assert softmax.score == 0 and all(t.outcome == "failed" for t in softmax.tests)
    assert variants.FORBIDDEN_SOFTMAX in softmax.hint and f"({seen}" in softmax.hint, softmax.hint
    for part_id in ("attention_scores", "scaled_dot_product_attention", "SelfAttention"):
        assert part(report, part_id).score == part(report, part_id).max_score, part_id
