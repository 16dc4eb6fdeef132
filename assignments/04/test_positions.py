"""Public tests for assignment 04: shapes and sanity checks you can run yourself.

    pytest assignments/04

They are a subset in spirit of what the grader checks; passing them does not mean full
marks. Run `grade assignments/04` for the graded result and hints.
"""

import math

import pytest
import torch

from positions import PositionalEncoding, TokenEmbedding, sinusoidal_encoding


def test_sinusoidal_encoding_shape_and_dtype():
    pe = sinusoidal_encoding(10, 8)
    assert pe.shape == (10, 8) and pe.dtype == torch.float32


def test_sinusoidal_encoding_position_zero_is_sin_0_cos_0():
    assert torch.equal(sinusoidal_encoding(3, 6)[0], torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0, 1.0]))


def test_sinusoidal_encoding_first_pair_is_sin_and_cos_of_the_position():
    pe = sinusoidal_encoding(5, 4)
    positions = torch.arange(5, dtype=torch.float32)
    assert not torch.allclose(pe[:, 0], torch.cos(positions), atol=1e-6), "mistake: sin and cos swapped"
    second_sine = torch.sin(positions * 10000 ** (-2 / 4))  # what a concatenated [sin..., cos...] puts second
    assert not torch.allclose(pe[:, 1], second_sine, atol=1e-6), \
        "mistake: sin and cos concatenated instead of interleaved"
    assert torch.allclose(pe[:, 0], torch.sin(positions), atol=1e-6)
    assert torch.allclose(pe[:, 1], torch.cos(positions), atol=1e-6)


def test_sinusoidal_encoding_second_pair_has_frequency_10000_to_the_minus_2_over_d_model():
    d_model = 8
    pe = sinusoidal_encoding(6, d_model)
    positions = torch.arange(6, dtype=torch.float32)
    # Pair i (columns 2i and 2i+1) turns at 10000 ** (-2i / d_model): for i = 1, the exponent is 2 / d_model.
    assert not torch.allclose(pe[:, 2], torch.sin(positions * 10000 ** (-1 / d_model)), atol=1e-5), \
        "mistake: exponent `i/d_model` instead of `2i/d_model`"
    assert torch.allclose(pe[:, 2], torch.sin(positions * 10000 ** (-2 / d_model)), atol=1e-5)


def test_sinusoidal_encoding_rejects_odd_d_model():
    with pytest.raises(ValueError):
        sinusoidal_encoding(4, 5)


def test_positional_encoding_keeps_pe_as_a_buffer():
    module = PositionalEncoding(d_model=8, max_len=20)
    assert "pe" in dict(module.named_buffers())
    assert "pe" not in dict(module.named_parameters())


def test_positional_encoding_adds_the_table():
    x = torch.zeros(2, 6, 8)
    assert torch.allclose(PositionalEncoding(8, max_len=20)(x), sinusoidal_encoding(20, 8)[:6].expand(2, 6, 8))


def test_positional_encoding_rejects_too_long_input():
    with pytest.raises(ValueError):
        PositionalEncoding(8, max_len=4)(torch.zeros(1, 5, 8))


def test_token_embedding_is_scaled_by_sqrt_d_model():
    module = TokenEmbedding(vocab_size=10, d_model=16)
    tokens = torch.tensor([[1, 2, 3]])
    assert isinstance(module.embedding, torch.nn.Embedding)
    assert torch.allclose(module(tokens), module.embedding(tokens) * math.sqrt(16))
