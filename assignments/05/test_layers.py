"""Public tests for assignment 05: shapes and sanity checks you can run yourself.

    pytest assignments/05

They need the pieces of earlier assignments pasted into layers.py. They are a subset in
spirit of what the grader checks; passing them does not mean full marks. Run
`grade assignments/05` for the graded result and hints.
"""

import torch

from layers import DecoderLayer, EncoderLayer, FeedForward, Transformer


def test_feed_forward_shape_and_submodules():
    ffn = FeedForward(d_model=8, d_ff=32)
    assert ffn.linear1.weight.shape == (32, 8) and ffn.linear2.weight.shape == (8, 32)
    assert ffn(torch.randn(2, 5, 8)).shape == (2, 5, 8)


def test_encoder_layer_shape_and_submodules():
    layer = EncoderLayer(d_model=8, num_heads=2, d_ff=16)
    for name in ("self_attn", "ffn", "norm1", "norm2"):
        assert hasattr(layer, name), name
    mask = torch.tensor([[True, True, True, False]]).view(1, 1, 1, 4)
    assert layer(torch.randn(1, 4, 8), mask).shape == (1, 4, 8)


def test_encoder_layer_is_post_norm():
    # With LayerNorm last, every position of the output has mean ~0 and std ~1.
    out = EncoderLayer(d_model=8, num_heads=2, d_ff=16)(3 * torch.randn(2, 5, 8) + 1)
    assert torch.allclose(out.mean(-1), torch.zeros(2, 5), atol=1e-5), "mistake: pre-norm instead of post-norm"


def test_encoder_layer_keeps_a_residual_around_the_feed_forward_network():
    torch.manual_seed(0)
    layer = EncoderLayer(d_model=8, num_heads=2, d_ff=16).eval()
    with torch.no_grad():  # the feed-forward network now outputs 0: only the residual carries x on
        layer.ffn.linear2.weight.zero_()
        layer.ffn.linear2.bias.zero_()
    out = layer(torch.randn(2, 5, 8))
    assert out.abs().max() > 0.1, "mistake: a missing residual"


def test_decoder_layer_attends_to_the_memory():
    torch.manual_seed(0)
    layer = DecoderLayer(d_model=8, num_heads=2, d_ff=16).eval()
    x, causal = torch.randn(1, 3, 8), torch.ones(3, 3, dtype=torch.bool).tril()
    # Memories as long as the target, and no memory mask: a layer that attends to the wrong states still runs.
    first, second = layer(x, torch.randn(1, 3, 8), causal), layer(x, torch.randn(1, 3, 8), causal)
    assert not torch.allclose(first, second, atol=1e-5), "mistake: cross-attention over the decoder's own states"


def test_decoder_layer_cross_attention_with_unequal_lengths():
    layer = DecoderLayer(d_model=8, num_heads=2, d_ff=16)
    for name in ("self_attn", "cross_attn", "ffn", "norm1", "norm2", "norm3"):
        assert hasattr(layer, name), name
    x, memory = torch.randn(2, 3, 8), torch.randn(2, 6, 8)
    causal = torch.ones(3, 3, dtype=torch.bool).tril()
    assert layer(x, memory, causal, torch.ones(2, 1, 1, 6, dtype=torch.bool)).shape == (2, 3, 8)


def test_transformer_forward_returns_logits():
    model = Transformer(11, 13, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
                        d_ff=32, max_len=20, dropout=0.0)
    src = torch.tensor([[5, 6, 7, 0], [1, 2, 3, 4]])
    tgt_in = torch.tensor([[1, 8, 9], [1, 10, 0]])
    assert model(src, tgt_in).shape == (2, 3, 13)
    memory = model.encode(src)
    assert memory.shape == (2, 4, 16)
    assert model.decode(tgt_in, memory).shape == (2, 3, 16)  # hidden states, not logits


def test_transformer_first_logits_ignore_later_target_tokens():
    torch.manual_seed(0)
    model = Transformer(11, 13, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
                        d_ff=32, max_len=20, dropout=0.0)
    src = torch.tensor([[5, 6, 7, 4]])
    a, b = torch.tensor([[1, 8, 9]]), torch.tensor([[1, 8, 3]])
    assert torch.allclose(model(src, a)[:, :2], model(src, b)[:, :2], atol=1e-5)
