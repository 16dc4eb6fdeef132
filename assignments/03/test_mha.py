"""Public tests for assignment 03: shapes and sanity checks you can run yourself.

    pytest assignments/03

They are a subset in spirit of what the grader checks; passing them does not mean full
marks. Run `grade assignments/03` for the graded result and hints.

Tests that check values compare your output on stored inputs with the stored right output, and
with what common mistakes output on them (test_mha.safetensors, beside this file).
"""

import pytest
import torch
from mha import MultiHeadAttention, combine_heads, split_heads

from grader.core.public_cases import Cases

CASES = Cases(__file__)


def test_split_heads_shape():
    x = torch.randn(2, 5, 12)
    assert split_heads(x, 3).shape == (2, 3, 5, 4)


def test_split_heads_gives_each_head_its_own_features():
    case = CASES["split_heads"]
    case.expect(split_heads(case.tensor("x", 2, 4, 6), 2),
                mistakes=("heads split with `view` and no `transpose` (features of different heads mixed)",))


def test_split_heads_rejects_indivisible_dimension():
    with pytest.raises(ValueError):
        split_heads(torch.randn(1, 2, 10), 3)


def test_combine_heads_puts_each_heads_features_side_by_side():
    # Made by hand, not with your split_heads: a mistake there must not cost points here too.
    heads = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)  # (batch, heads, length, d_k)
    combined = combine_heads(heads)
    assert combined.shape == (2, 4, 15)
    assert torch.equal(combined[:, :, 5:10], heads[:, 1])  # head 1's features come second


def test_multi_head_attention_output_shape():
    mha = MultiHeadAttention(d_model=16, num_heads=4)
    query, memory = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    assert mha(query, memory, memory).shape == (2, 3, 16)


def test_multi_head_attention_scales_by_sqrt_d_k_and_masks_with_minus_inf():
    case = CASES["multi_head_attention"]
    mha = case.load(MultiHeadAttention(d_model=16, num_heads=2)).eval()  # d_k = 8: sqrt(d_k) ~ 2.8, sqrt(d_model) = 4
    x = case.tensor("x", 2, 5, 16)
    causal = torch.ones(5, 5, dtype=torch.bool).tril().view(1, 1, 5, 5)  # True = may attend
    case.expect(mha(x, x, x, mask=causal), mistakes=(
        "scores not scaled",
        "scores scaled by `d_k` instead of `sqrt(d_k)`",
        "scores scaled by `sqrt(d_model)` instead of the head dimension",
        "softmax over the wrong dimension",
        'mask inverted (True read as "blocked")',
        "masked scores filled with a value that is not very negative (0, `1e-15`)"))


def test_multi_head_attention_has_the_contract_submodules():
    mha = MultiHeadAttention(d_model=8, num_heads=2, bias=False)
    for name in ("W_q", "W_k", "W_v", "W_o"):
        layer = getattr(mha, name)
        assert isinstance(layer, torch.nn.Linear) and layer.bias is None
