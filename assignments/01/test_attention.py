"""Public tests for assignment 01: shapes and sanity checks you can run yourself.

    pytest assignments/01

They are a subset in spirit of what the grader checks; passing them does not mean full
marks. Run `grade assignments/01` for the graded result and hints.
"""

import math

import torch

from attention import SelfAttention, attention_scores, scaled_dot_product_attention, softmax


def test_attention_scores_shape_and_values():
    query, keys = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    scores = attention_scores(query, keys)
    assert scores.shape == (2, 3, 5)
    assert torch.allclose(scores[1, 2, 4], query[1, 2] @ keys[1, 4])


def test_softmax_rows_sum_to_one():
    x = torch.randn(3, 4, 5)
    assert torch.allclose(softmax(x, dim=-1).sum(dim=-1), torch.ones(()), atol=1e-6)
    for dim in (0, 1):  # right along the last dimension, wrong along the one asked for
        assert torch.allclose(softmax(x, dim=dim).sum(dim=dim), torch.ones(()), atol=1e-6), \
            "mistake: softmax over the wrong dimension"


def test_softmax_does_not_overflow():
    out = softmax(torch.tensor([[1e4, 1e4, 0.0]]))
    assert torch.isfinite(out).all(), "mistake: no max subtraction (overflow to nan/inf)"
    assert torch.allclose(out, torch.tensor([[0.5, 0.5, 0.0]]))


def test_softmax_is_your_own(monkeypatch):
    used = []
    for owner in (torch, torch.nn.functional, torch.special, torch.Tensor):
        def recording(*args, built_in=getattr(owner, "softmax"), **kwargs):
            used.append(built_in)
            return built_in(*args, **kwargs)
        monkeypatch.setattr(owner, "softmax", recording)
    softmax(torch.randn(3, 4), dim=-1)
    assert not used, "mistake: a forbidden built-in softmax"


def test_softmax_gives_zero_weight_to_minus_inf():
    out = softmax(torch.tensor([[1.0, float("-inf"), 1.0]]))
    assert torch.allclose(out, torch.tensor([[0.5, 0.0, 0.5]]))


def test_scaled_dot_product_attention_returns_output_and_weights():
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 6)
    output, weights = scaled_dot_product_attention(q, k, v)
    assert output.shape == (2, 3, 6) and weights.shape == (2, 3, 5)
    assert torch.allclose(weights, softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1), atol=1e-6)


def test_scaled_dot_product_attention_scales_by_sqrt_d_k():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 6)  # d_k = 8, T = 5
    _, weights = scaled_dot_product_attention(q, k, v)
    scores = q @ k.transpose(-2, -1)
    for wrong_scale, mistake in ((1.0, "scores not scaled"), (8.0, "scores scaled by `d_k` instead of `sqrt(d_k)`"),
                                 (math.sqrt(5), "scores scaled by `sqrt(T)`, the sequence length")):
        assert not torch.allclose(weights, torch.softmax(scores / wrong_scale, dim=-1), atol=1e-5), f"mistake: {mistake}"
    assert torch.allclose(weights, torch.softmax(scores / math.sqrt(8), dim=-1), atol=1e-5)


def test_scaled_dot_product_attention_gives_masked_keys_no_weight():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 4), torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    mask = torch.tensor([True, True, False])  # True = may attend
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    scores = q @ k.transpose(-2, -1) / 2  # sqrt(d_k) = 2
    for wrong, mistake in (
            (torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1), 'mask inverted (True read as "blocked")'),
            (torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0), "mask applied after the softmax"),
            (torch.softmax(scores.masked_fill(~mask, 0.0), dim=-1),
             "masked scores filled with a value that is not very negative (0, `1e-15`)")):
        assert not torch.allclose(weights, wrong, atol=1e-6), f"mistake: {mistake}"
    assert torch.all(weights[..., 2] == 0) and torch.allclose(weights.sum(-1), torch.ones(1, 2), atol=1e-6)


def test_self_attention_shape_and_submodules():
    attention = SelfAttention(d_in=6, d_out=4)
    assert attention(torch.randn(2, 5, 6)).shape == (2, 5, 4)
    for name in ("W_query", "W_key", "W_value"):
        layer = getattr(attention, name)
        assert isinstance(layer, torch.nn.Linear) and layer.bias is None
