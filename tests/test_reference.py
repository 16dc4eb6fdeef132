"""Check the reference solutions against independent PyTorch built-ins.

The grader trusts ``reference/`` as ground truth, so each part is compared with code
it does not share: ``torch.softmax``, ``F.scaled_dot_product_attention``,
``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` and friends, or a direct
transcription of the paper's formula.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import reference
from reference.attention import (
    SelfAttention,
    attention_scores,
    scaled_dot_product_attention,
    softmax,
)
from reference.layers import DecoderLayer, EncoderLayer, FeedForward, Transformer
from reference.masks import CausalSelfAttention, causal_mask, dropout, padding_mask
from reference.multihead import MultiHeadAttention, combine_heads, split_heads
from reference.positions import PositionalEncoding, TokenEmbedding, sinusoidal_encoding
from reference.training import greedy_decode, train_step, teacher_forcing_split, translation_loss

CONTRACT = {
    "attention": ["attention_scores", "softmax", "scaled_dot_product_attention", "SelfAttention"],
    "masks": ["causal_mask", "padding_mask", "dropout", "CausalSelfAttention"],
    "multihead": ["split_heads", "combine_heads", "MultiHeadAttention"],
    "positions": ["sinusoidal_encoding", "PositionalEncoding", "TokenEmbedding"],
    "layers": ["FeedForward", "EncoderLayer", "DecoderLayer", "Transformer"],
    "training": ["teacher_forcing_split", "translation_loss", "train_step", "greedy_decode"],
}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _close(actual: torch.Tensor, expected: torch.Tensor, tol: float = 1e-10) -> None:
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol, equal_nan=True)


# ---- 01: attention -------------------------------------------------------------------


def test_attention_scores_is_unscaled_dot_product():
    q = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    k = torch.randn(2, 3, 7, 4, dtype=torch.float64)
    _close(attention_scores(q, k), torch.einsum("bhqd,bhkd->bhqk", q, k))


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_matches_torch(dim):
    x = torch.randn(4, 6, 5, dtype=torch.float64) * 3
    _close(softmax(x, dim=dim), torch.softmax(x, dim=dim))


def test_softmax_large_inputs_do_not_overflow():
    x = torch.tensor([[1e4, 1e4 - 1.0, 0.0], [-1e4, 1e4, 1e4]])
    out = softmax(x)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, torch.softmax(x, dim=-1))


def test_softmax_rows_with_minus_inf():
    inf = float("inf")
    x = torch.tensor(
        [[0.5, -inf, 2.0, -inf], [-inf, -inf, -inf, 3.0], [-inf, -inf, -inf, -inf]],
        dtype=torch.float64,
    )
    _close(softmax(x), torch.softmax(x, dim=-1))


def test_scaled_dot_product_attention_matches_torch_with_bool_mask():
    q = torch.randn(2, 3, 5, 8, dtype=torch.float64)
    k = torch.randn(2, 3, 7, 8, dtype=torch.float64)
    v = torch.randn(2, 3, 7, 6, dtype=torch.float64)
    mask = torch.rand(2, 1, 5, 7) > 0.4
    mask[..., 0] = True  # every query keeps at least one key
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    _close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    scores = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~mask, -math.inf)
    _close(weights, torch.softmax(scores, dim=-1))
    assert (weights[~mask.expand_as(weights)] == 0).all()
    out_nomask, _ = scaled_dot_product_attention(q, k, v)
    _close(out_nomask, F.scaled_dot_product_attention(q, k, v))


def test_self_attention_module():
    torch.set_default_dtype(torch.float64)
    try:
        module = SelfAttention(6, 4, qkv_bias=True)
        x = torch.randn(2, 5, 6)
        expected = F.scaled_dot_product_attention(
            module.W_query(x), module.W_key(x), module.W_value(x)
        )
        assert set(module.state_dict()) == {
            f"{n}.{p}" for n in ("W_query", "W_key", "W_value") for p in ("weight", "bias")
        }
        _close(module(x), expected)
    finally:
        torch.set_default_dtype(torch.float32)


# ---- 02: masks and dropout -----------------------------------------------------------


@pytest.mark.parametrize("T", [1, 2, 7])
def test_causal_mask_is_tril(T):
    mask = causal_mask(T)
    assert mask.dtype == torch.bool and mask.shape == (T, T)
    assert torch.equal(mask, torch.tril(torch.ones(T, T)).bool())
    assert causal_mask(T, device="cpu").device.type == "cpu"


def test_padding_mask():
    tokens = torch.tensor([[5, 3, 0, 0], [0, 2, 9, 1]])
    mask = padding_mask(tokens, pad_idx=0)
    assert mask.dtype == torch.bool and mask.shape == (2, 1, 1, 4)
    assert mask[:, 0, 0].tolist() == [[True, True, False, False], [False, True, True, True]]
    assert padding_mask(tokens, pad_idx=9)[1, 0, 0].tolist() == [True, True, False, True]


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_statistics(p):
    x = torch.rand(200, 500) + 0.5  # strictly positive, so zeros come from dropout only
    gen = torch.Generator().manual_seed(123)
    out = dropout(x, p, training=True, generator=gen)
    dropped = out == 0
    assert abs(dropped.float().mean().item() - p) < 0.01
    _close(out[~dropped], x[~dropped] / (1 - p), tol=1e-6)
    assert abs(out.mean().item() / x.mean().item() - 1.0) < 0.02


def test_dropout_uses_generator():
    x = torch.ones(1000)
    a = dropout(x, 0.5, generator=torch.Generator().manual_seed(7))
    b = dropout(x, 0.5, generator=torch.Generator().manual_seed(7))
    c = dropout(x, 0.5, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_dropout_edge_cases():
    x = torch.randn(10, 10)
    assert torch.equal(dropout(x, 0.7, training=False), x)
    assert torch.equal(dropout(x, 0.0), x)
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    for p in (-0.1, 1.5):
        with pytest.raises(ValueError):
            dropout(x, p)


def test_causal_self_attention_matches_torch():
    torch.set_default_dtype(torch.float64)
    try:
        module = CausalSelfAttention(6, 4, context_length=8, qkv_bias=True)
        assert "mask" in dict(module.named_buffers())
        assert "mask" in module.state_dict()
        assert set(dict(module.named_parameters())) == {
            f"{n}.{p}" for n in ("W_query", "W_key", "W_value") for p in ("weight", "bias")
        }
        for T in (1, 5, 8):
            x = torch.randn(3, T, 6)
            expected = F.scaled_dot_product_attention(
                module.W_query(x), module.W_key(x), module.W_value(x), is_causal=True
            )
            _close(module(x), expected)
        with pytest.raises(ValueError):
            module(torch.randn(1, 9, 6))
    finally:
        torch.set_default_dtype(torch.float32)


def test_causal_self_attention_dropout_only_in_training():
    module = CausalSelfAttention(6, 4, context_length=8, dropout=0.5)
    x = torch.randn(2, 8, 6)
    module.eval()
    evaluated = module(x)
    torch.testing.assert_close(module(x), evaluated)
    module.train()
    assert not torch.allclose(module(x), evaluated)


# ---- 03: multi-head attention --------------------------------------------------------


def test_split_and_combine_heads():
    x = torch.randn(2, 5, 12)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    for h in range(3):
        assert torch.equal(heads[:, h], x[..., 4 * h : 4 * (h + 1)])
    assert torch.equal(combine_heads(heads), x)
    with pytest.raises(ValueError):
        split_heads(x, 5)


def _copy_mha(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))
        theirs.out_proj.weight.copy_(ours.W_o.weight)
        theirs.out_proj.bias.copy_(ours.W_o.bias)


def test_multihead_attention_matches_torch():
    d_model, heads = 12, 3
    ours = MultiHeadAttention(d_model, heads).double()
    theirs = nn.MultiheadAttention(d_model, heads, batch_first=True).double()
    _copy_mha(ours, theirs)
    query = torch.randn(2, 4, d_model, dtype=torch.float64)
    memory = torch.randn(2, 6, d_model, dtype=torch.float64)
    allowed = torch.ones(2, 6, dtype=torch.bool)
    allowed[0, 4:] = False
    expected, _ = theirs(query, memory, memory, key_padding_mask=~allowed)
    _close(ours(query, memory, memory, allowed[:, None, None, :]), expected)
    # Self-attention with a causal mask.
    expected, _ = theirs(memory, memory, memory, attn_mask=~causal_mask(6))
    _close(ours(memory, memory, memory, causal_mask(6)), expected)
    with pytest.raises(ValueError):
        MultiHeadAttention(10, 3)


# ---- 04: positions and embeddings ----------------------------------------------------


def test_sinusoidal_encoding_matches_formula():
    max_len, d_model = 50, 16
    expected = torch.empty(max_len, d_model, dtype=torch.float64)
    for pos in range(max_len):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            expected[pos, 2 * i] = math.sin(angle)
            expected[pos, 2 * i + 1] = math.cos(angle)
    pe = sinusoidal_encoding(max_len, d_model)
    assert pe.shape == (max_len, d_model) and pe.dtype == torch.float32
    torch.testing.assert_close(pe.double(), expected, rtol=0, atol=1e-6)
    with pytest.raises(ValueError):
        sinusoidal_encoding(10, 7)


def test_positional_encoding_module():
    module = PositionalEncoding(8, max_len=20)
    assert list(dict(module.named_parameters())) == []
    assert "pe" in dict(module.named_buffers()) and "pe" in module.state_dict()
    x = torch.randn(3, 11, 8)
    torch.testing.assert_close(module(x), x + sinusoidal_encoding(20, 8)[:11])
    with pytest.raises(ValueError):
        module(torch.randn(1, 21, 8))
    module_with_dropout = PositionalEncoding(8, max_len=20, dropout=0.5)
    assert (module_with_dropout(x) == 0).any()
    module_with_dropout.eval()
    torch.testing.assert_close(module_with_dropout(x), module(x))


def test_token_embedding():
    module = TokenEmbedding(11, 9, padding_idx=0)
    assert list(module.state_dict()) == ["embedding.weight"]
    tokens = torch.tensor([[1, 4, 0], [10, 2, 2]])
    torch.testing.assert_close(module(tokens), module.embedding.weight[tokens] * 3.0)
    assert (module(tokens)[0, 2] == 0).all()


# ---- 05: encoder and decoder ---------------------------------------------------------


def _copy_ffn_and_norms(ours: nn.Module, theirs: nn.Module, norms: int) -> None:
    with torch.no_grad():
        for name in ("linear1", "linear2"):
            getattr(theirs, name).weight.copy_(getattr(ours.ffn, name).weight)
            getattr(theirs, name).bias.copy_(getattr(ours.ffn, name).bias)
        for n in range(1, norms + 1):
            getattr(theirs, f"norm{n}").load_state_dict(getattr(ours, f"norm{n}").state_dict())


def _torch_encoder_layer(ours: EncoderLayer, d_model: int, heads: int, d_ff: int) -> nn.Module:
    theirs = nn.TransformerEncoderLayer(d_model, heads, d_ff, dropout=0.0, batch_first=True)
    theirs.double()
    _copy_mha(ours.self_attn, theirs.self_attn)
    _copy_ffn_and_norms(ours, theirs, norms=2)
    return theirs


def _torch_decoder_layer(ours: DecoderLayer, d_model: int, heads: int, d_ff: int) -> nn.Module:
    theirs = nn.TransformerDecoderLayer(d_model, heads, d_ff, dropout=0.0, batch_first=True)
    theirs.double()
    _copy_mha(ours.self_attn, theirs.self_attn)
    _copy_mha(ours.cross_attn, theirs.multihead_attn)
    _copy_ffn_and_norms(ours, theirs, norms=3)
    return theirs


def test_feed_forward():
    ffn = FeedForward(6, 10).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64)
    hidden = F.relu(F.linear(x, ffn.linear1.weight, ffn.linear1.bias))
    expected = F.linear(hidden, ffn.linear2.weight, ffn.linear2.bias)
    _close(ffn(x), expected)


def test_encoder_layer_matches_torch():
    d_model, heads, d_ff = 12, 3, 20
    ours = EncoderLayer(d_model, heads, d_ff).double()
    with torch.no_grad():  # non-trivial LayerNorm parameters, so norm1/norm2 swaps show
        for p in (ours.norm1.weight, ours.norm1.bias, ours.norm2.weight, ours.norm2.bias):
            p.normal_()
    theirs = _torch_encoder_layer(ours, d_model, heads, d_ff)
    x = torch.randn(2, 5, d_model, dtype=torch.float64)
    keep = torch.tensor([[True] * 5, [True, True, True, False, False]])
    expected = theirs(x, src_key_padding_mask=~keep)
    _close(ours(x, keep[:, None, None, :]), expected)
    _close(ours(x), theirs(x))


def test_decoder_layer_matches_torch():
    d_model, heads, d_ff = 12, 3, 20
    ours = DecoderLayer(d_model, heads, d_ff).double()
    with torch.no_grad():
        for norm in (ours.norm1, ours.norm2, ours.norm3):
            norm.weight.normal_()
            norm.bias.normal_()
    theirs = _torch_decoder_layer(ours, d_model, heads, d_ff)
    x = torch.randn(2, 4, d_model, dtype=torch.float64)
    memory = torch.randn(2, 6, d_model, dtype=torch.float64)
    keep = torch.tensor([[True] * 6, [True, True, False, False, False, False]])
    expected = theirs(x, memory, tgt_mask=~causal_mask(4), memory_key_padding_mask=~keep)
    _close(ours(x, memory, causal_mask(4), keep[:, None, None, :]), expected)


def _tiny_transformer(**kwargs) -> Transformer:
    config = dict(
        src_vocab_size=13, tgt_vocab_size=11, d_model=16, num_heads=2,
        num_encoder_layers=2, num_decoder_layers=2, d_ff=32, max_len=40, dropout=0.0,
    )
    config.update(kwargs)
    return Transformer(**config)


def test_transformer_parameter_names():
    model = _tiny_transformer()
    prefixes = {key.split(".")[0] for key in model.state_dict()}
    assert prefixes == {
        "src_embed", "tgt_embed", "pos_encoding", "encoder_layers", "decoder_layers", "generator"
    }
    assert "pos_encoding.pe" in model.state_dict()
    assert "decoder_layers.1.cross_attn.W_o.weight" in model.state_dict()
    assert "encoder_layers.1.norm2.bias" in model.state_dict()
    assert isinstance(model.encoder_layers, nn.ModuleList) and len(model.decoder_layers) == 2
    assert model.generator.out_features == 11


def test_transformer_matches_torch_stack():
    pad = 0
    model = _tiny_transformer(pad_idx=pad).double().eval()
    src = torch.tensor([[3, 4, 5, 6, 7], [8, 9, 2, pad, pad]])
    tgt_in = torch.tensor([[1, 5, 6, 7], [1, 3, pad, pad]])
    encoder_layers = [_torch_encoder_layer(layer, 16, 2, 32) for layer in model.encoder_layers]
    decoder_layers = [_torch_decoder_layer(layer, 16, 2, 32) for layer in model.decoder_layers]
    pe = torch.tensor(
        [[math.sin(p / 10000 ** (i / 16)) if i % 2 == 0 else math.cos(p / 10000 ** ((i - 1) / 16))
          for i in range(16)] for p in range(5)],
        dtype=torch.float64,
    )
    memory = model.src_embed.embedding.weight[src] * 4.0 + pe[:5]
    for layer in encoder_layers:
        memory = layer(memory, src_key_padding_mask=src == pad)
    x = model.tgt_embed.embedding.weight[tgt_in] * 4.0 + pe[:4]
    # Target padding only affects rows at padded positions; compare the real ones.
    for layer in decoder_layers:
        x = layer(x, memory, tgt_mask=~causal_mask(4), memory_key_padding_mask=src == pad)
    expected = model.generator(x)
    logits = model(src, tgt_in)
    assert logits.shape == (2, 4, 11)
    real = tgt_in != pad
    # The model's pe buffer is float32 (see test above), hence 1e-6 and not 1e-10.
    torch.testing.assert_close(logits[real], expected[real], rtol=1e-6, atol=1e-6)


def test_transformer_is_causal_and_ignores_padding():
    model = _tiny_transformer().eval()
    src = torch.tensor([[3, 4, 5, 6], [8, 9, 2, 0]])
    tgt_in = torch.tensor([[1, 5, 6, 7, 2], [1, 3, 4, 8, 9]])
    logits = model(src, tgt_in)
    changed = tgt_in.clone()
    changed[:, 3:] = 10
    torch.testing.assert_close(model(src, changed)[:, :3], logits[:, :3])
    padded_src = torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(padded_src, tgt_in), logits, rtol=1e-5, atol=1e-5)
    memory = model.encode(src, padding_mask(src, 0))
    tgt_mask = causal_mask(5)
    decoded = model.decode(tgt_in, memory, tgt_mask, padding_mask(src, 0))
    torch.testing.assert_close(model.generator(decoded), logits)


# ---- 06: training --------------------------------------------------------------------


def test_teacher_forcing_split():
    tgt = torch.tensor([[1, 5, 6, 2, 0], [1, 7, 2, 0, 0]])
    tgt_in, labels = teacher_forcing_split(tgt)
    assert tgt_in.tolist() == [[1, 5, 6, 2], [1, 7, 2, 0]]
    assert labels.tolist() == [[5, 6, 2, 0], [7, 2, 0, 0]]


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_translation_loss_ignores_padding(smoothing):
    pad = 0
    logits = torch.randn(3, 5, 7, dtype=torch.float64)
    labels = torch.tensor([[4, 2, 6, 0, 0], [1, 0, 0, 0, 0], [5, 5, 3, 2, 1]])
    real = labels != pad
    log_probs = torch.log_softmax(logits[real], dim=-1)  # (N, V)
    nll = -log_probs.gather(1, labels[real][:, None]).squeeze(1)
    expected = ((1 - smoothing) * nll - smoothing * log_probs.mean(dim=-1)).mean()
    _close(translation_loss(logits, labels, pad, label_smoothing=smoothing), expected)
    if smoothing == 0.0:
        _close(translation_loss(logits, labels, pad), F.cross_entropy(logits[real], labels[real]))


class _BagModel(nn.Module):
    """A tiny stand-in for a seq2seq model: logits from target embeddings plus a source summary."""

    def __init__(self, vocab: int = 9, dim: int = 5):
        super().__init__()
        self.src_embed = nn.Embedding(vocab, dim)
        self.tgt_embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.out(self.tgt_embed(tgt_in) + self.src_embed(src).mean(dim=1, keepdim=True))


def test_train_step_matches_manual_steps():
    """Two SGD steps: catches a missing zero_grad, clipping after the step and unshifted labels."""
    src = torch.tensor([[3, 4, 5], [6, 7, 0]])
    tgt = torch.tensor([[1, 5, 6, 2], [1, 8, 2, 0]])
    ours, manual = _BagModel(), _BagModel()
    manual.load_state_dict(ours.state_dict())
    opt_ours = torch.optim.SGD(ours.parameters(), lr=0.5)
    opt_manual = torch.optim.SGD(manual.parameters(), lr=0.5)
    for _ in range(2):
        loss = train_step(ours, src, tgt, opt_ours, pad_idx=0, clip_norm=0.1)
        manual.zero_grad()
        logits = manual(src, tgt[:, :-1])
        expected = F.cross_entropy(logits.reshape(-1, 9), tgt[:, 1:].reshape(-1), ignore_index=0)
        expected.backward()
        grads = [p.grad for p in manual.parameters()]
        total = torch.sqrt(sum((g**2).sum() for g in grads))
        assert total > 0.1  # clipping is active
        for g in grads:
            g.mul_(0.1 / total)
        opt_manual.step()
        assert isinstance(loss, float)
        assert loss == pytest.approx(expected.item(), rel=1e-6)
    for p, q in zip(ours.parameters(), manual.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_train_step_learns_copy_task():
    torch.manual_seed(0)
    pad, bos, eos = 0, 1, 2
    model = _tiny_transformer(
        src_vocab_size=10, tgt_vocab_size=10, num_encoder_layers=1, num_decoder_layers=1
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    words = torch.randint(3, 10, (16, 5))
    src = words
    tgt = torch.cat([torch.full((16, 1), bos), words, torch.full((16, 1), eos)], dim=1)
    losses = [train_step(model, src, tgt, optimizer, pad_idx=pad) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]


class _ScriptedModel(nn.Module):
    """Emits ``script[b][t]`` as the token after a prefix of length t + 1 (any src)."""

    def __init__(self, script: list[list[int]], vocab: int = 10):
        super().__init__()
        self.script, self.vocab = script, vocab
        self.calls: list[bool] = []

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        self.calls.append(self.training)
        batch, length = tgt_in.shape
        logits = torch.zeros(batch, length, self.vocab)
        for b in range(batch):
            logits[b, -1, self.script[b][length - 1]] = 1.0
        return logits


def test_greedy_decode_stops_at_eos_and_pads():
    bos, eos, pad = 1, 2, 0
    model = _ScriptedModel([[5, 2, 7, 7, 7, 7], [6, 6, 6, 2, 8, 8], [4, 4, 4, 4, 4, 4]])
    src = torch.zeros(3, 4, dtype=torch.long)
    out = greedy_decode(model, src, bos, eos, pad, max_len=6)
    assert out.dtype == torch.long
    assert out.tolist() == [[1, 5, 2, 0, 0, 0], [1, 6, 6, 6, 2, 0], [1, 4, 4, 4, 4, 4]]
    assert model.training and model.calls and not any(model.calls)  # eval inside, restored after
    early = _ScriptedModel([[5, 2, 7, 7, 7], [2, 8, 8, 8, 8]])
    out = greedy_decode(early, torch.zeros(2, 3, dtype=torch.long), bos, eos, pad, max_len=5)
    assert out.tolist() == [[1, 5, 2], [1, 2, 0]]


def test_greedy_decode_with_transformer():
    model = _tiny_transformer()
    src = torch.tensor([[3, 4, 5], [6, 7, 0]])
    out = greedy_decode(model, src, bos_idx=1, eos_idx=2, pad_idx=0, max_len=7)
    assert out.shape[0] == 2 and 1 < out.shape[1] <= 7
    assert (out[:, 0] == 1).all()
    for row in out.tolist():
        if 2 in row:
            assert all(token == 0 for token in row[row.index(2) + 1 :])


# ---- submissions ---------------------------------------------------------------------


@pytest.mark.parametrize("module", sorted(CONTRACT))
def test_as_submission_is_self_contained(module):
    source = reference.as_submission(module)
    assert "from reference" not in source and "import reference" not in source
    namespace: dict = {"__name__": f"submission_{module}"}
    exec(compile(source, f"<submission {module}>", "exec"), namespace)
    missing = [name for name in CONTRACT[module] if name not in namespace]
    assert not missing, f"{module} submission lacks {missing}"


def test_submission_transformer_loads_reference_weights():
    namespace: dict = {"__name__": "submission_layers"}
    exec(reference.as_submission("layers"), namespace)
    theirs = namespace["Transformer"](13, 11, 16, 2, 2, 2, 32, 40, 0.0)
    ours = _tiny_transformer()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    src, tgt_in = torch.tensor([[3, 4, 5, 0]]), torch.tensor([[1, 5, 6]])
    torch.testing.assert_close(theirs(src, tgt_in), ours(src, tgt_in))
