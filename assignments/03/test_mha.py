"""Public tests for assignment 03: shapes and sanity checks you can run yourself.

    pytest assignments/03

They are a subset in spirit of what the grader checks; passing them does not mean full
marks. Run `grade assignments/03` for the graded result and hints.
"""

import math

import pytest
import torch

from mha import MultiHeadAttention, combine_heads, split_heads


def test_split_heads_shape():
    x = torch.randn(2, 5, 12)
    assert split_heads(x, 3).shape == (2, 3, 5, 4)


def test_split_heads_first_head_holds_first_features():
    x = torch.arange(2 * 4 * 6, dtype=torch.float32).reshape(2, 4, 6)
    assert torch.equal(split_heads(x, 2)[:, 0], x[:, :, :3]), \
        "mistake: heads split with `view` and no `transpose` (features of different heads mixed)"


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
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=32, num_heads=2).eval()  # d_k = 16: sqrt(d_k) = 4, sqrt(d_model) ~ 5.7
    x = torch.randn(2, 5, 32)
    causal = torch.ones(5, 5, dtype=torch.bool).tril().view(1, 1, 5, 5)  # True = may attend

    def heads(t: torch.Tensor) -> torch.Tensor:  # made by hand, not with your split_heads
        return t.view(2, 5, 2, 16).transpose(1, 2)

    q, k, v = heads(mha.W_q(x)), heads(mha.W_k(x)), heads(mha.W_v(x))

    def attend(scale: float, dim: int = -1, blocked: torch.Tensor = ~causal, fill: float = float("-inf")):
        weights = torch.softmax((q @ k.transpose(-2, -1) / scale).masked_fill(blocked, fill), dim=dim)
        return mha.W_o((weights @ v).transpose(1, 2).reshape(2, 5, 32))

    out = mha(x, x, x, mask=causal)
    for wrong, mistake in (
            (attend(1.0), "scores not scaled"),
            (attend(16.0), "scores scaled by `d_k` instead of `sqrt(d_k)`"),
            (attend(math.sqrt(32)), "scores scaled by `sqrt(d_model)` instead of the head dimension"),
            (attend(4.0, dim=-2), "softmax over the wrong dimension"),
            (attend(4.0, blocked=causal), 'mask inverted (True read as "blocked")'),
            (attend(4.0, fill=0.0), "masked scores filled with a value that is not very negative (0, `1e-15`)")):
        assert not torch.allclose(out, wrong, atol=1e-5, equal_nan=True), f"mistake: {mistake}"
    assert torch.allclose(out, attend(4.0), atol=1e-5)


def test_multi_head_attention_has_the_contract_submodules():
    mha = MultiHeadAttention(d_model=8, num_heads=2, bias=False)
    for name in ("W_q", "W_k", "W_v", "W_o"):
        layer = getattr(mha, name)
        assert isinstance(layer, torch.nn.Linear) and layer.bias is None
