"""Public tests for assignment 02: shapes and sanity checks you can run yourself.

    pytest assignments/02

They are a subset in spirit of what the grader checks; passing them does not mean full
marks. Run `grade assignments/02` for the graded result and hints.
"""

import math

import pytest
import torch

from masks import CausalSelfAttention, causal_mask, dropout, padding_mask


def test_causal_mask_is_lower_triangular_and_bool():
    mask = causal_mask(3)
    assert mask.dtype == torch.bool
    expected = torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
    for wrong, mistake in ((expected.T, "a causal mask built with `triu` instead of `tril`"),
                           (~expected, 'a causal mask inverted (True read as "blocked")'),
                           (expected & ~torch.eye(3, dtype=torch.bool), "the diagonal left out of the causal mask")):
        assert not torch.equal(mask, wrong), f"mistake: {mistake}"
    assert torch.equal(mask, expected)


def test_padding_mask_shape_and_values():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 8, 9, 0]])
    mask = padding_mask(tokens, pad_idx=0)
    assert mask.shape == (2, 1, 1, 4) and mask.dtype == torch.bool
    assert torch.equal(mask[:, 0, 0], torch.tensor([[True, True, False, False], [True, True, True, False]]))


def test_dropout_zeroes_about_p_and_scales_the_rest():
    x = torch.ones(100, 100)
    out = dropout(x, 0.25, generator=torch.Generator().manual_seed(0))
    assert not 0.7 < (out == 0).float().mean() < 0.8, "mistake: `p` used as the keep probability"
    assert 0.2 < (out == 0).float().mean() < 0.3
    kept = out[out != 0]
    assert not torch.allclose(kept, torch.tensor(1.0)), "mistake: dropout without the `1/(1-p)` scaling"
    assert not torch.allclose(kept, torch.tensor(0.75)), "mistake: dropout scaled by `(1-p)`"
    assert torch.allclose(kept, torch.tensor(1 / 0.75))


def test_dropout_is_the_identity_when_not_training():
    x = torch.randn(4, 5)
    assert torch.equal(dropout(x, 0.5, training=False), x), "mistake: dropout active at evaluation"


def test_dropout_rejects_p_outside_0_1():
    with pytest.raises(ValueError):
        dropout(torch.ones(3), 1.5)


def test_causal_self_attention_shape_and_buffer():
    attention = CausalSelfAttention(d_in=6, d_out=4, context_length=5)
    assert attention(torch.randn(2, 3, 6)).shape == (2, 3, 4)
    assert "mask" in dict(attention.named_buffers())


def test_causal_self_attention_scales_by_sqrt_d_out_and_blocks_the_future():
    torch.manual_seed(0)
    attention = CausalSelfAttention(d_in=6, d_out=4, context_length=5)  # d_out = 4, d_in = 6, T = 5
    x = torch.randn(2, 5, 6)
    q, k, v = attention.W_query(x), attention.W_key(x), attention.W_value(x)
    future = torch.ones(5, 5, dtype=torch.bool).triu(1)

    def attend(scale: float, fill: float = float("-inf")) -> torch.Tensor:
        return torch.softmax((q @ k.transpose(-2, -1) / scale).masked_fill(future, fill), dim=-1) @ v

    out = attention(x)
    for wrong, mistake in ((attend(math.sqrt(5)), "scores scaled by `sqrt(T)`, the sequence length"),
                           (attend(math.sqrt(6)), "scores scaled by the input width (`C ** -0.5` with C = d_in)"),
                           (attend(2.0, 0.0), "masked scores filled with a value that is not very negative (0, `1e-15`)")):
        assert not torch.allclose(out, wrong, atol=1e-5), f"mistake: {mistake}"
    assert torch.allclose(out, attend(2.0), atol=1e-5)


def test_causal_self_attention_does_not_look_ahead():
    attention = CausalSelfAttention(d_in=6, d_out=4, context_length=5)
    x = torch.randn(1, 5, 6)
    changed = x.clone()
    changed[:, 3:] += 1.0  # only the last two positions change
    assert torch.allclose(attention(x)[:, :3], attention(changed)[:, :3], atol=1e-6)


def test_causal_self_attention_rejects_too_long_input():
    with pytest.raises(ValueError):
        CausalSelfAttention(d_in=6, d_out=4, context_length=5)(torch.randn(1, 6, 6))
