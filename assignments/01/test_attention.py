"""Public tests for assignment 01: shapes and sanity checks you can run yourself.

    pytest assignments/01

They are a subset in spirit of what the grader checks; passing them does not mean full
marks. Run `grade assignments/01` for the graded result and hints.

Tests that check values compare your output on stored inputs with the stored right output, and
with what common mistakes output on them (test_attention.safetensors, beside this file).
"""

import torch
from attention import SelfAttention, attention_scores, scaled_dot_product_attention, softmax

from grader.core.public_cases import Cases

CASES = Cases(__file__)


def test_attention_scores_shape_and_values():
    case = CASES["attention_scores"]
    case.expect(attention_scores(case.tensor("query", 2, 3, 4), case.tensor("keys", 2, 5, 4)))


def test_softmax_rows_sum_to_one():
    x = torch.randn(3, 4, 5)
    assert torch.allclose(softmax(x, dim=-1).sum(dim=-1), torch.ones(()), atol=1e-6)
    for dim in (0, 1):  # right along the last dimension, wrong along the one asked for
        assert torch.allclose(softmax(x, dim=dim).sum(dim=dim), torch.ones(()), atol=1e-6), \
            "mistake: softmax over the wrong dimension"


def test_softmax_does_not_overflow():
    out = softmax(torch.tensor([[1e4, 1e4, 0.0]]))
    assert torch.isfinite(out).all(), "mistake: no max subtraction (overflow to nan/inf)"
    # float32 holds numbers near 1e4 only to 1e-3: a stable softmax is right to about that much.
    assert torch.allclose(out, torch.tensor([[0.5, 0.5, 0.0]]), atol=2e-3)


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


def test_scaled_dot_product_attention_scales_by_sqrt_d_k():
    case = CASES["scaled_dot_product_attention"]  # d_k = 8, T = 5
    _, weights = scaled_dot_product_attention(case.tensor("q", 2, 5, 8), case.tensor("k", 2, 5, 8),
                                              case.tensor("v", 2, 5, 6))
    case.expect(weights, mistakes=("scores not scaled", "scores scaled by `d_k` instead of `sqrt(d_k)`",
                                   "scores scaled by `sqrt(T)`, the sequence length"))


def test_scaled_dot_product_attention_gives_masked_keys_no_weight():
    case = CASES["masked_attention"]
    mask = torch.tensor([True, True, False])  # True = may attend
    _, weights = scaled_dot_product_attention(case.tensor("q", 1, 2, 4), case.tensor("k", 1, 3, 4),
                                              case.tensor("v", 1, 3, 4), mask)
    case.expect(weights, mistakes=('mask inverted (True read as "blocked")', "mask applied after the softmax",
                                   "masked scores filled with a value that is not very negative (0, `1e-15`)"))


def test_self_attention_shape_and_submodules():
    attention = SelfAttention(d_in=6, d_out=4)
    assert attention(torch.randn(2, 5, 6)).shape == (2, 5, 4)
    for name in ("W_query", "W_key", "W_value"):
        layer = getattr(attention, name)
        assert isinstance(layer, torch.nn.Linear) and layer.bias is None
