"""The mistake variants of assignments 04 and 05: defaults equal the reference, and each
mistake is far enough from it (on the hidden suites' dimensions) to be told apart.

A variant whose defaults drift from the reference would grade correct work against the
wrong answer; one too close to the reference would name a mistake nobody made.
"""

import pytest
import torch

from reference.hidden.a04 import variants as v04
from reference.hidden.a04.conftest import D_MODEL as D04
from reference.hidden.a04.conftest import MAX_LEN as MAX_LEN04
from reference.hidden.a05 import variants as v05
from reference.hidden.a05.conftest import (
    D_FF,
    D_MODEL,
    NUM_HEADS,
    PAD,
    SRC_VOCAB,
    TGT_VOCAB,
    TRANSFORMER_ARGS,
    randomize_norms,
    reference_modules,
)
from reference.layers import DecoderLayer, EncoderLayer, FeedForward, Transformer
from reference.masks import causal_mask, padding_mask
from reference.positions import PositionalEncoding, TokenEmbedding, sinusoidal_encoding

# Far apart: the suites compare with atol <= 1e-4 (1e-3 for the long table).
APART = 1e-2


def _randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _tokens(batch, length, vocab, seed, pad=()):
    tokens = torch.randint(1, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))
    for row, count in enumerate(pad):
        if count:
            tokens[row, length - count:] = PAD
    return tokens


def _assert_apart(mistakes: dict, want: torch.Tensor, where=None):
    for hint, run in mistakes.items():
        got = run() if callable(run) else run
        if got.shape != want.shape:
            continue
        difference = (got - want).abs() if where is None else ((got - want).abs() * where)
        assert difference.max() > APART, f"indistinguishable from the reference: {hint}"


# ---- 04 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_len, d_model", [(1, 2), (3, 4), (MAX_LEN04, D04), (5000, 64)])
def test_sinusoidal_variant_defaults_equal_the_reference(max_len, d_model):
    assert torch.equal(v04.sinusoidal_encoding(max_len, d_model), sinusoidal_encoding(max_len, d_model))


@pytest.mark.parametrize("max_len, d_model", [(MAX_LEN04, D04), (9, 6), (5000, 64)])
def test_sinusoidal_mistakes_are_apart(max_len, d_model):
    _assert_apart(v04.encoding_mistakes(max_len, d_model), sinusoidal_encoding(max_len, d_model))


def test_positional_encoding_variant_defaults_equal_the_reference():
    x = _randn(2, 7, D04, seed=1)
    pe = sinusoidal_encoding(MAX_LEN04, D04)
    want = PositionalEncoding(D04, max_len=MAX_LEN04)(x)
    assert torch.equal(v04.positional_encoding(x, pe), want)
    _assert_apart(v04.positional_encoding_mistakes(x, pe), want)


def test_token_embedding_variant_defaults_equal_the_reference():
    torch.manual_seed(0)
    module = TokenEmbedding(23, D04, padding_idx=0)
    tokens = _tokens(2, 6, 23, seed=2, pad=(0, 2))
    want = module(tokens)
    assert torch.equal(v04.token_embedding(tokens, module.embedding.weight), want)
    _assert_apart(v04.embedding_mistakes(tokens, module.embedding.weight.detach()), want.detach())


# ---- 05 ------------------------------------------------------------------------------------


def _params(module):
    return {name: p.detach() for name, p in module.named_parameters()}


@torch.no_grad()
def test_feed_forward_variant_defaults_equal_the_reference():
    torch.manual_seed(1)
    module = FeedForward(D_MODEL, D_FF)
    x = _randn(2, 5, D_MODEL, seed=3)
    want = module(x)
    torch.testing.assert_close(v05.feed_forward(x, _params(module)), want, rtol=0, atol=1e-6)
    _assert_apart(v05.feed_forward_mistakes(x, _params(module)), want)


def _encoder_modules(layer):
    return dict(self_attn=layer.self_attn, ffn=layer.ffn, norm1=layer.norm1, norm2=layer.norm2)


def _decoder_modules(layer):
    return dict(self_attn=layer.self_attn, cross_attn=layer.cross_attn, ffn=layer.ffn,
                norm1=layer.norm1, norm2=layer.norm2, norm3=layer.norm3)


@torch.no_grad()
@pytest.mark.parametrize("masked", [False, True])
def test_encoder_layer_variant_defaults_equal_the_reference(masked):
    torch.manual_seed(2)
    layer = randomize_norms(EncoderLayer(D_MODEL, NUM_HEADS, D_FF), seed=2)
    x = _randn(2, 6, D_MODEL, seed=4)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1] * 6], dtype=torch.bool).view(2, 1, 1, 6) if masked else None
    want = layer(x, mask)
    torch.testing.assert_close(v05.encoder_layer(x, mask, **_encoder_modules(layer)), want, rtol=0, atol=1e-6)
    _assert_apart(v05.encoder_mistakes(x, mask, _encoder_modules(layer)), want)


@torch.no_grad()
@pytest.mark.parametrize("masked", [False, True])
def test_decoder_layer_variant_defaults_equal_the_reference(masked):
    torch.manual_seed(3)
    layer = randomize_norms(DecoderLayer(D_MODEL, NUM_HEADS, D_FF), seed=3)
    x, memory = _randn(2, 5, D_MODEL, seed=5), _randn(2, 7, D_MODEL, seed=6)
    tgt_mask = causal_mask(5).view(1, 1, 5, 5) if masked else None
    memory_mask = torch.tensor([[1] * 5 + [0] * 2, [1] * 7], dtype=torch.bool).view(2, 1, 1, 7) if masked else None
    want = layer(x, memory, tgt_mask, memory_mask)
    got = v05.decoder_layer(x, memory, tgt_mask, memory_mask, **_decoder_modules(layer))
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    mistakes = v05.decoder_mistakes(x, memory, tgt_mask, memory_mask, _decoder_modules(layer))
    assert (v05.CROSS_OVER_OWN_STATES in mistakes) == (not masked)
    _assert_apart(mistakes, want)


@torch.no_grad()
def test_transformer_variant_defaults_equal_the_reference():
    torch.manual_seed(4)
    model = randomize_norms(Transformer(SRC_VOCAB, TGT_VOCAB, dropout=0.0, **TRANSFORMER_ARGS), seed=4)
    src, tgt_in = _tokens(2, 7, SRC_VOCAB, seed=7, pad=(0, 2)), _tokens(2, 5, TGT_VOCAB, seed=8, pad=(1, 0))
    modules = reference_modules(model)
    want = model(src, tgt_in)
    torch.testing.assert_close(v05.transformer(src, tgt_in, PAD, modules), want, rtol=0, atol=1e-6)
    src_mask = padding_mask(src, PAD)
    tgt_mask = padding_mask(tgt_in, PAD) & causal_mask(5)
    memory = model.encode(src, src_mask)
    torch.testing.assert_close(v05.encode(src, src_mask, modules), memory, rtol=0, atol=1e-6)
    torch.testing.assert_close(v05.decode(tgt_in, memory, tgt_mask, src_mask, modules),
                               model.decode(tgt_in, memory, tgt_mask, src_mask), rtol=0, atol=1e-6)
    # The suite compares logits only at real target positions: the mistakes must show there.
    _assert_apart(v05.transformer_mistakes(src, tgt_in, PAD, modules), want, where=(tgt_in != PAD)[..., None])
