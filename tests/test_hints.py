"""A part's hints end to end, on submissions written the way tutorials write them: the
costliest mistake is the headline, a second distinct one follows, and a part whose own
pieces fail says to fix those first."""

from __future__ import annotations

import pytest

from grader.core import hints
from reference.hidden.a03 import variants
from tests.conftest import assert_valid, part

pytestmark = pytest.mark.slow

# Einsum, as blog posts write it; W_o always has a bias (bias=bias forgotten: one point),
# and the mask is read as nn.MultiheadAttention's attn_mask, True = blocked (three points).
EINSUM_MHA = '''
import math
import torch
from torch import nn


def split_heads(x, num_heads):
    B, T, D = x.shape
    if D % num_heads:
        raise ValueError("d_model must be divisible by num_heads")
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)


def combine_heads(x):
    B, H, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_k)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.W_q(query), self.h)
        k = split_heads(self.W_k(key), self.h)
        v = split_heads(self.W_v(value), self.h)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        attn = self.drop(scores.softmax(dim=-1))
        return self.W_o(combine_heads(torch.einsum("bhqk,bhkd->bhqd", attn, v)))
'''

# A loop over heads that slices the features per head, and a split_heads that reshapes
# without the transpose: MultiHeadAttention calls that split_heads.
LOOP_SPLIT = '''
import torch
from torch import nn


def split_heads(x, num_heads):
    B, T, D = x.shape
    if D % num_heads != 0:
        raise ValueError("d_model % num_heads != 0")
    return x.reshape(B, num_heads, T, D // num_heads)


def combine_heads(x):
    return torch.cat([x[:, h] for h in range(x.size(1))], dim=-1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model % num_heads != 0")
        self.num_heads = num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q, k, v = (split_heads(W(x), self.num_heads) for W, x in ((self.W_q, query), (self.W_k, key), (self.W_v, value)))
        scores = q @ k.transpose(-2, -1) / (q.size(-1) ** 0.5)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        return self.W_o(combine_heads(self.dropout(scores.softmax(-1)) @ v))
'''


def test_the_costliest_mistake_is_the_headline_and_the_cheaper_one_follows(grade_source):
    report = grade_source(EINSUM_MHA)
    assert_valid(report)
    mha = part(report, "MultiHeadAttention")
    assert part(report, "split_heads").score == part(report, "split_heads").max_score
    assert len(mha.hints) == 2 and mha.hint == mha.hints[0], mha.hints
    assert variants.MASK_INVERTED in mha.hints[0], mha.hints
    assert "W_o: unexpected bias" in mha.hints[1], mha.hints


def test_a_part_over_a_failing_piece_says_fix_that_first_and_keeps_its_own_hint(grade_source):
    report = grade_source(LOOP_SPLIT)
    assert_valid(report)
    assert variants.NO_TRANSPOSE_SPLIT in part(report, "split_heads").hint
    assert part(report, "combine_heads").score == part(report, "combine_heads").max_score
    mha = part(report, "MultiHeadAttention")
    assert mha.hints[0] == "fix split_heads first (it fails its own tests)", mha.hints
    assert variants.NO_TRANSPOSE_SPLIT in mha.hints[1], mha.hints


@pytest.mark.parametrize("message, owner, shown", [
    # The handout's stub names its owner; a student's own raise may not, or may say "TODO: ...".
    ("Head.forward: see assignments/07/README.md", None, "MultiHead uses your Head, which is still a stub (see assignments/07/README.md)"),
    ("", "Head", "MultiHead uses your Head, which is still a stub"),
    ("TODO: implement the attention", "Head", "MultiHead uses your Head, which is still a stub (TODO: implement the attention)"),
    ("MultiHead.forward: see the README", "MultiHead", None),  # its own stub: "not implemented"
    ("", None, None),
])
def test_another_parts_stub_names_the_owner_of_the_raise_before_the_one_the_message_names(message, owner, shown):
    assert hints.another_parts_stub(message, "MultiHead", owner) == shown
