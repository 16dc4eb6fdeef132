"""Public tests for assignment 02: shapes and sanity checks you can run yourself.

    pytest assignments/02

They are a subset in spirit of what the grader checks; passing them does not mean full
marks. Run `grade assignments/02` for the graded result and hints.

Tests that check values compare your output on stored inputs with the stored right output, and
with what common mistakes output on them (test_masks.safetensors, beside this file).
"""

import pytest
import torch
from masks import CausalSelfAttention, causal_mask, dropout, padding_mask

from grader.core.public_cases import Cases

CASES = Cases(__file__)


def test_causal_mask_is_lower_triangular_and_bool():
    mask = causal_mask(3)
    assert mask.dtype == torch.bool
    CASES["causal_mask"].expect(mask, mistakes=("a causal mask built with `triu` instead of `tril`",
                                                'a causal mask inverted (True read as "blocked")',
                                                "the diagonal left out of the causal mask"))


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
    case = CASES["causal_self_attention"]  # d_out = 4, d_in = 6, T = 5
    attention = case.load(CausalSelfAttention(d_in=6, d_out=4, context_length=5)).eval()
    case.expect(attention(case.tensor("x", 2, 5, 6)), mistakes=(
        "scores scaled by `sqrt(T)`, the sequence length",
        "scores scaled by the input width (`C ** -0.5` with C = d_in)",
        "masked scores filled with a value that is not very negative (0, `1e-15`)"))


def test_causal_self_attention_does_not_look_ahead():
    attention = CausalSelfAttention(d_in=6, d_out=4, context_length=5)
    x = torch.randn(1, 5, 6)
    changed = x.clone()
    changed[:, 3:] += 1.0  # only the last two positions change
    assert torch.allclose(attention(x)[:, :3], attention(changed)[:, :3], atol=1e-6)


def test_causal_self_attention_rejects_too_long_input():
    with pytest.raises(ValueError):
        CausalSelfAttention(d_in=6, d_out=4, context_length=5)(torch.randn(1, 6, 6))
