"""A part that uses another is told "fix X first" only where X is the cause: where its failing
tests pass once the grader's stock X stands in for the student's, and those tests cost it
nothing (X pays for its mistake in its own tests: a mistake costs once). Otherwise its own
mistake leads, and "X also fails its own tests" follows; under part isolation (05, 07) its own mistake
leads and the piece wrong by itself follows. Real code shapes, per assignment with dependent
parts, each with its exact headline and points.
"""

from __future__ import annotations

import pytest

from grader.core import hints
from reference import as_submission, module_for
from reference.hidden.a01 import variants as v01
from reference.hidden.a02 import variants as v02
from reference.hidden.a03 import variants as v03
from reference.hidden.a07 import variants as v07
from tests.conftest import ROOT, mutant, part

pytestmark = pytest.mark.slow


def edited(assignment_id: str, *edits: tuple[str, str]) -> str:
    source = as_submission(module_for(assignment_id))
    for old, new in edits:
        source = mutant(source, old, new)
    return source


# ---- 03: MultiHeadAttention uses split_heads and combine_heads, written as tutorials write them

SPLIT_WITH_ASSERT = '''
def split_heads(x, num_heads):
    B, T, D = x.shape
    assert D % num_heads == 0, "d_model must be divisible by num_heads"
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)
'''
SPLIT_SQUEEZED = '''
def split_heads(x, num_heads):
    B, T, D = x.shape
    if D % num_heads:
        raise ValueError("d_model must be divisible by num_heads")
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2).squeeze()
'''
SPLIT_WITHOUT_TRANSPOSE = '''
def split_heads(x, num_heads):
    B, T, D = x.shape
    if D % num_heads:
        raise ValueError("d_model must be divisible by num_heads")
    return x.reshape(B, num_heads, T, D // num_heads)
'''
COMBINE = '''
def combine_heads(x):
    B, H, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_k)
'''
MHA = '''
import math
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.W_q(query), self.h)
        k = split_heads(self.W_k(key), self.h)
        v = split_heads(self.W_v(value), self.h)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        attn = self.drop(scores.softmax(dim=-1))
        return self.W_o(combine_heads(attn @ v))
'''
# nn.MultiheadAttention's habit: (output, weights).
MHA_RETURNING_WEIGHTS = mutant(MHA, "        return self.W_o(combine_heads(attn @ v))",
                               "        return self.W_o(combine_heads(attn @ v)), attn")
# The mask read as nn.MultiheadAttention's attn_mask: True = blocked.
MHA_MASK_INVERTED = mutant(MHA, "scores.masked_fill(~mask,", "scores.masked_fill(mask,")
# Heads split inline (split_heads is never called), and scaled by sqrt(d_model).
MHA_INLINE_SQRT_D_MODEL = mutant(MHA, '''        q = split_heads(self.W_q(query), self.h)
        k = split_heads(self.W_k(key), self.h)
        v = split_heads(self.W_v(value), self.h)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)''', '''        B = query.size(0)
        q = self.W_q(query).view(B, -1, self.h, self.d_k).transpose(1, 2)
        k = self.W_k(key).view(B, -1, self.h, self.d_k).transpose(1, 2)
        v = self.W_v(value).view(B, -1, self.h, self.d_k).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.h * self.d_k)''')


@pytest.mark.parametrize("source, used, used_score, score, hints_shown", [
    # split_heads loses 1 of 7 (a bare assert); MultiHeadAttention returns a tuple, with a correct
    # split_heads too. Before: "fix split_heads first" led, and the tuple came second.
    pytest.param(SPLIT_WITH_ASSERT + COMBINE + MHA_RETURNING_WEIGHTS, "split_heads", 6, 2,
                 [hints.RETURNS_SEVERAL, "split_heads also fails its own tests"], id="tuple returned"),
    # split_heads squeezes a batch of 1 away (3 of 7); the mask is inverted. The device test, with
    # a batch of 1, fails because of split_heads (charged there); the mask tests fail whatever
    # split_heads does.
    pytest.param(SPLIT_SQUEEZED + COMBINE + MHA_MASK_INVERTED, "split_heads", 4, 13,
                 [v03.MASK_INVERTED, "split_heads also fails its own tests"], id="mask inverted"),
    # Its own heads, never split_heads: the scale is its own mistake (the rubric's 3 points).
    pytest.param(SPLIT_WITH_ASSERT + COMBINE + MHA_INLINE_SQRT_D_MODEL, "split_heads", 6, 13,
                 [v03.SCALE_D_MODEL, "split_heads also fails its own tests"], id="split inline, sqrt(d_model)"),
    # A correct MultiHeadAttention over a split_heads without the transpose: split_heads is the cause,
    # and pays for it alone.
    pytest.param(SPLIT_WITHOUT_TRANSPOSE + COMBINE + MHA, "split_heads", 4, 16,
                 ["fix split_heads first (it fails its own tests)", v03.NO_TRANSPOSE_SPLIT], id="split_heads the cause"),
    # combine_heads views without .contiguous(), so every forward raises; the mask is inverted too.
    # The mask tests fail with the stock combine_heads as well: the mistake they show there is
    # MultiHeadAttention's own, and leads. Before: combine_heads' crash hint led, the mask unnamed.
    pytest.param(edited("03", (".contiguous()", ""), ("masked_fill(~mask,", "masked_fill(mask,")), "combine_heads",
                 1, 13, [v03.MASK_INVERTED, "combine_heads also fails its own tests"], id="mask inverted, no contiguous"),
])
def test_03_names_split_heads_as_the_cause_only_where_it_is(grade_source, source, used, used_score, score, hints_shown,
                                                            student_processes):
    report = grade_source(source)
    assert part(report, used).score == used_score
    mha = part(report, "MultiHeadAttention")
    assert (mha.score, mha.max_score) == (score, 16)
    assert mha.hints == hints_shown
    # The tests run once in one student process; the failing MultiHeadAttention tests run again
    # in a second, given the stock part before its first request, which ends with the last rerun.
    assert len([test for test in mha.tests if test.passes_with_stock is not None]) >= 2
    assert student_processes() == 2


# ---- 01: scaled_dot_product_attention uses attention_scores and softmax; SelfAttention uses it

SCALED_SCORES = ("return query @ keys.transpose(-2, -1)", "return query @ keys.transpose(-2, -1) / math.sqrt(query.size(-1))")


@pytest.mark.parametrize("edits, scores, sdpa_hints, self_attention", [
    # attention_scores scales (5 of 7 lost); sdpa computes its scores itself and inverts the mask.
    pytest.param([SCALED_SCORES, ("scores = attention_scores(q, k) / math.sqrt(d_k)",
                                  "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)"),
                  ("scores = scores.masked_fill(~mask,", "scores = scores.masked_fill(mask,")],
                 {"attention_scores": 2, "scaled_dot_product_attention": 10, "SelfAttention": 9},
                 [v01.MASK_INVERTED, "attention_scores also fails its own tests"], [], id="scores inline, mask inverted"),
    # softmax loses 1 of 14 (float64 comes back float32); sdpa divides by d_k: its own mistake,
    # which SelfAttention shows and passes with the stock sdpa: charged in sdpa alone.
    pytest.param([("    return exp / exp.sum(dim=dim, keepdim=True)", "    return (exp / exp.sum(dim=dim, keepdim=True)).float()"),
                  ("scores = attention_scores(q, k) / math.sqrt(d_k)", "scores = attention_scores(q, k) / d_k")],
                 {"softmax": 13, "scaled_dot_product_attention": 10, "SelfAttention": 9},
                 [v01.SCALE_D_K, "softmax also fails its own tests"],
                 ["fix scaled_dot_product_attention first (it fails its own tests)", v01.SCALE_D_K], id="softmax float32"),
    # A correct sdpa over an attention_scores that scales: attention_scores is the cause, and the
    # only part that pays. SelfAttention is told so too, not to fix the sdpa that has full marks.
    pytest.param([SCALED_SCORES], {"attention_scores": 2, "scaled_dot_product_attention": 13, "SelfAttention": 9},
                 ["fix attention_scores first (it fails its own tests)", v01.SCALE_D_K],
                 ["fix attention_scores first (it fails its own tests)", v01.SCALE_D_K],
                 id="attention_scores the cause"),
])
def test_01_names_a_used_part_as_the_cause_only_where_it_is(grade_source, edits, scores, sdpa_hints, self_attention):
    report = grade_source(edited("01", *edits), assignment=ROOT / "assignments" / "01")
    assert {part_id: part(report, part_id).score for part_id in scores} == scores
    assert part(report, "scaled_dot_product_attention").hints == sdpa_hints
    assert part(report, "SelfAttention").hints == self_attention


# ---- 02: CausalSelfAttention uses causal_mask and dropout

TRIU = ("torch.ones(T, T, dtype=torch.bool, device=device).tril()", "torch.ones(T, T, dtype=torch.bool, device=device).triu()")


@pytest.mark.parametrize("edits, csa_score, csa_hints", [
    # Its own tril mask (causal_mask never called), masked scores filled with 0: its own mistake.
    pytest.param([TRIU, ('self.register_buffer("mask", causal_mask(context_length))',
                         'self.register_buffer("mask", torch.ones(context_length, context_length, dtype=torch.bool).tril())'),
                  ('scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(~mask, 0.0)")],
                 16, [v02.MASK_FILL_NOT_NEGATIVE, "causal_mask also fails its own tests"], id="own mask, filled with 0"),
    # A correct CausalSelfAttention over a triu causal_mask: causal_mask is the cause, and pays alone.
    pytest.param([TRIU], 18, ["fix causal_mask first (it fails its own tests)", v02.CAUSAL_TRIU], id="causal_mask the cause"),
])
def test_02_names_causal_mask_as_the_cause_only_where_it_is(grade_source, edits, csa_score, csa_hints):
    report = grade_source(edited("02", *edits), assignment=ROOT / "assignments" / "02")
    assert part(report, "causal_mask").score == 6  # triu: the rubric's 3 of 9
    csa = part(report, "CausalSelfAttention")
    assert (csa.score, csa.max_score, csa.hints) == (csa_score, 18, csa_hints)


# ---- 06: end_to_end trains with the student's train_step

def test_06_end_to_end_names_train_step_when_the_stock_train_step_trains(grade_source):
    report = grade_source(edited("06", ("    optimizer.step()\n", "")), assignment=ROOT / "assignments" / "06")
    end_to_end = part(report, "end_to_end")
    # Nothing of its own to write: it is train_step's work in use, and its tests count.
    assert (end_to_end.score, end_to_end.max_score, end_to_end.scored_by.charged_to) == (0, 3, [])
    assert end_to_end.hint == "fix train_step first (it fails its own tests)"
    assert all(test.passes_with_stock for test in end_to_end.tests)


# ---- 07: part isolation, MultiHead graded over its own heads

PROJECTED_TWICE = ("return self.dropout(self.proj(out))", "return self.dropout(self.proj(self.proj(out)))")


def test_07_a_multihead_that_projects_twice_leads_with_its_own_mistake_over_a_wrong_head(grade_source):
    # Its test with stock heads fails too: its heads are not its cause. Before: "fix first: your Head".
    report = grade_source(edited("07", PROJECTED_TWICE, (" * k.size(-1) ** -0.5", "")),
                          assignment=ROOT / "assignments" / "07")
    assert (part(report, "Head").score, part(report, "Head").hint) == (8, v07.NO_SCALE)
    multihead = part(report, "MultiHead")
    assert (multihead.score, multihead.max_score) == (5, 11)
    # Its own mistake, named as its rerun over stock heads shows it (before: "wrong in this part
    # itself"; then with a note on the heads that differ), then the Head that also fails.
    assert multihead.hints == [v07.PROJECTED_TWICE, "Head also fails its own tests"]


def test_07_a_head_that_raises_is_named_by_every_part_above_it_which_keep_their_points(grade_source):
    # MultiHead, Block and GPT fail only through the Head (each passes with the stock part it
    # uses): Head pays, they keep full marks, and each is told to fix Head, where the mistake is.
    # Before: Block said to fix MultiHead, GPT to fix Block, end_to_end to fix GPT, all full marks.
    report = grade_source(edited("07", ("        _, length, _ = x.shape\n", "        raise RuntimeError('todo')\n")),
                          assignment=ROOT / "assignments" / "07")
    scores = {p.id: (p.score, p.max_score) for p in report.parts}
    assert scores == {"Head": (1, 15), "MultiHead": (11, 11), "MLP": (9, 9), "Block": (10, 10), "GPT": (15, 15),
                      "generate": (20, 20), "end_to_end": (0, 5)}
    assert part(report, "MultiHead").hint.startswith("your Head (heads[0]) raises an exception")
    for user in ("Block", "GPT", "end_to_end"):
        assert part(report, user).hints == ["fix Head first (it fails its own tests)"], user
    assert [part(report, p).scored_by.charged_to for p in ("MultiHead", "Block", "GPT")] == [["Head"]] * 3


@pytest.mark.parametrize("raise_line", [
    "raise NotImplementedError('Head.forward: see assignments/07/README.md')",  # the handout's stub
    "raise NotImplementedError",  # before: MultiHead, Block and GPT each "not implemented", 42 in all
    "raise NotImplementedError('TODO: implement the attention')",  # before: "uses your TODO", 66 in all
])
def test_07_an_unfinished_head_costs_the_same_however_its_raise_is_worded(grade_source, raise_line):
    # Whose stub it is comes from where the raise is, not from the message's spelling. MultiHead
    # pays for calling a stub (docs/course.md: a piece not written has nothing to pay with).
    report = grade_source(edited("07", ("        _, length, _ = x.shape\n", f"        {raise_line}\n")),
                          assignment=ROOT / "assignments" / "07")
    scores = {p.id: (p.score, p.max_score) for p in report.parts}
    assert scores == {"Head": (1, 15), "MultiHead": (4, 11), "MLP": (9, 9), "Block": (10, 10), "GPT": (15, 15),
                      "generate": (20, 20), "end_to_end": (0, 5)}
    assert part(report, "Head").hint == hints.NOT_IMPLEMENTED
    for user in ("MultiHead", "Block", "GPT", "end_to_end"):
        assert part(report, user).hint.startswith(f"{user} uses your Head, which is still a stub"), user


# ---- the stock parts of a rerun bring no answer of the part under test ------------------------

# An attack on "charged where it is made": softmax loses 1 point on purpose (float64 comes back
# float32), so scaled_dot_product_attention's failing tests run again with the stock softmax;
# there, this sdpa hands back the stock sdpa's output, if the stock module holds one.
BORROWS_THE_STOCK_SDPA = '''    stock = softmax.__globals__
    if stock is not globals() and "scaled_dot_product_attention" in stock:
        return stock["scaled_dot_product_attention"](q, k, v, mask)
    return v, q @ k.transpose(-2, -1)
'''


def test_a_part_that_borrows_a_stock_answer_in_the_rerun_keeps_no_points(grade_source):
    report = grade_source(edited("01", ("    return exp / exp.sum(dim=dim, keepdim=True)\n",
                                        "    return (exp / exp.sum(dim=dim, keepdim=True)).float()\n"),
                                 ('    d_k = q.size(-1)\n    scores = attention_scores(q, k) / math.sqrt(d_k)',
                                  BORROWS_THE_STOCK_SDPA + '    d_k = q.size(-1)\n    scores = attention_scores(q, k) / math.sqrt(d_k)')),
                          assignment=ROOT / "assignments" / "01")
    assert part(report, "softmax").score == 13
    sdpa = part(report, "scaled_dot_product_attention")
    assert sdpa.score < 5 and not sdpa.scored_by.charged_to  # its tests failed with the stock softmax too
