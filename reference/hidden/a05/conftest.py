"""Dimensions, reference modules and the pieces of each part for the 05 suite.

Small dimensions keep the suite fast: d_model=16, 2 heads, d_ff=32, 2 encoder and 2
decoder layers. Every LayerNorm of a reference module gets random weights and biases, so
norm1, norm2 and norm3 differ and each wiring mistake changes the output visibly.

Part isolation (``grader.suite.part_isolation``, docs/writing-an-assignment.md): a layer is
checked against the contract's wiring computed with the student's own attention and
feed-forward modules as black boxes (``black_box(layer.attr("self_attn"), reference.self_attn)``
is callable, and each of its results has the reference piece's shape), and the
Transformer against the contract's wiring of its own embeddings, positional encoding and
layers. A mistake in an earlier piece (or in FeedForward) then costs points where it is
graded, not here. The pieces below are what those checks call. A piece whose parameter
names are not the contract's (an ``nn.Sequential`` FeedForward) cannot hold the reference's
weights: a stock piece (``stock.py``) takes its place (``grader.suite.new_graded_like``).
"""

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

from grader.suite import (
    CheckFailed,
    Piece,
    PieceUnusable,
    Remote,
    StockPiece,
    StudentError,
    black_box,
    in_eval_mode,
    is_close,
    randomize_norms,
    seed_reference,
    source_defining,
)
from reference.hidden.a05 import stock, variants
from reference.layers import DecoderLayer, EncoderLayer, FeedForward, Transformer
from reference.masks import causal_mask, padding_mask

D_MODEL, NUM_HEADS, D_FF = 16, 2, 32
SRC_VOCAB, TGT_VOCAB, PAD, MAX_LEN, NUM_LAYERS = 11, 13, 0, 32, 2
TRANSFORMER_ARGS = dict(d_model=D_MODEL, num_heads=NUM_HEADS, num_encoder_layers=NUM_LAYERS,
                        num_decoder_layers=NUM_LAYERS, d_ff=D_FF, max_len=MAX_LEN, pad_idx=PAD)


# ---- inputs ----------------------------------------------------------------------------


@pytest.fixture
def make_tokens(device):
    """Token ids in 1..vocab-1, with ``pad[row]`` PAD tokens at the end of each row."""
    def make(batch: int, length: int, vocab: int, *, seed: int, pad: tuple[int, ...] = ()) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        tokens = torch.randint(1, vocab, (batch, length), generator=generator)
        for row, count in enumerate(pad):
            if count:
                tokens[row, length - count:] = PAD
        return tokens.to(device)
    return make


# ---- reference modules and the student's, holding the same parameters -------------------------


@pytest.fixture
def reference_ffn(device):
    seed_reference(1)
    return FeedForward(D_MODEL, D_FF).to(device)


@pytest.fixture
def reference_encoder_layer(device):
    seed_reference(2)
    return randomize_norms(EncoderLayer(D_MODEL, NUM_HEADS, D_FF), seed=2).to(device)


@pytest.fixture
def reference_decoder_layer(device):
    seed_reference(3)
    return randomize_norms(DecoderLayer(D_MODEL, NUM_HEADS, D_FF), seed=3).to(device)


@pytest.fixture
def reference_transformer(device):
    seed_reference(4)
    return randomize_norms(Transformer(SRC_VOCAB, TGT_VOCAB, dropout=0.0, **TRANSFORMER_ARGS), seed=4).to(device)


STOCK_SOURCE = Path(stock.__file__).read_text(encoding="utf-8")


@pytest.fixture
def stock_pieces(student) -> list[StockPiece]:
    """Stand-ins for the FeedForward and MultiHeadAttention inside a layer, in the student's process,
    sent there only when a piece needs one, and each with only what it needs of ``stock.py``: they
    are answers (see ``student.define``), and the others there answer other parts."""
    stock = functools.cache(lambda name: student.define("stock", source_defining(STOCK_SOURCE, [name]), answers=True))
    return [StockPiece("FeedForward", lambda ffn: stock("StockFeedForward").method(
                "StockFeedForward", ffn.linear1.in_features, ffn.linear1.out_features, ffn.dropout.p)),
            StockPiece("MultiHeadAttention", lambda mha: stock("StockMultiHeadAttention").method(
                "StockMultiHeadAttention", mha.W_q.in_features, mha.num_heads, mha.dropout.p, mha.W_q.bias is not None))]


# The student's modules holding the reference's parameters, in eval mode: values are graded
# without dropout, which each part that owns one has a test of its own for.


@pytest.fixture
def student_ffn(student, reference_ffn):
    return in_eval_mode(student.new_like(reference_ffn, "FeedForward", D_MODEL, D_FF))


@pytest.fixture
def student_encoder_layer(new_graded, reference_encoder_layer):
    return in_eval_mode(new_graded(reference_encoder_layer, "EncoderLayer", D_MODEL, NUM_HEADS, D_FF))


@pytest.fixture
def student_decoder_layer(new_graded, reference_decoder_layer):
    return in_eval_mode(new_graded(reference_decoder_layer, "DecoderLayer", D_MODEL, NUM_HEADS, D_FF))


@pytest.fixture
def student_transformer(new_graded, reference_transformer):
    return in_eval_mode(new_graded(reference_transformer, "Transformer", SRC_VOCAB, TGT_VOCAB, dropout=0.0,
                                   **TRANSFORMER_ARGS))


SHAPE_HINT = "a parameter has the wrong shape; check the nn.Linear sizes against the contract"
# The classes of the pieces a layer may hold a stock piece for, with the arguments that build
# the student's own (grader.suite.expect_replaced_pieces_written).
PIECE_CLASSES = {"FeedForward": (D_MODEL, D_FF), "MultiHeadAttention": (D_MODEL, NUM_HEADS)}


def pieces_in_eval_mode(layer: Remote, names: tuple[str, ...]) -> None:
    """The layer's attention and feed-forward modules in eval mode, the layer as it is: in
    training mode only the layer's own dropout then acts (its pieces' is theirs to grade). A
    piece the layer names otherwise stays as it is."""
    for name in names:
        try:
            layer.attr(name).method("eval")
        except StudentError:
            pass


def expect_sublayers_dropped(what: str, train: torch.Tensor, kept: torch.Tensor, wiring: Callable[..., torch.Tensor],
                             mistakes: Callable[[dict], dict], modules: dict) -> None:
    """``train``: the layer's output with dropout p=1 in training mode (its pieces in eval mode),
    ``kept``: the same weights' with dropout=0.0 in eval mode; ``modules``: its pieces as black
    boxes and the reference's norms.
    Dropout on every sublayer's output, before the residual, zeroes what the sublayer adds:
    what is left is the wiring of the norms alone, the contract's (``wiring(**modules)``) or,
    when the layer's values show one, a wiring mistake's (``mistakes(modules)``: graded by the
    value tests, it costs nothing here)."""
    def adds_nothing(first, *_):
        return torch.zeros_like(first)

    sublayers = {name: adds_nothing for name in ("self_attn", "cross_attn", "ffn") if name in modules}
    with torch.no_grad():
        if is_close(train, wiring(**{**modules, **sublayers}), atol=1e-5, rtol=1e-4):
            return
        for hint, made in mistakes(modules).items():
            try:
                shown = made()
            except (StudentError, PieceUnusable):  # the student's pieces, called here: this mistake explains nothing
                continue
            if is_close(kept, shown, atol=1e-5, rtol=1e-4):
                if is_close(train, mistakes({**modules, **sublayers})[hint](), atol=1e-5, rtol=1e-4):
                    return
    hint = variants.DROPOUT_MISSING_IN_LAYER if is_close(train, kept, atol=1e-5, rtol=1e-4) \
        else variants.DROPOUT_MISPLACED_IN_LAYER
    raise CheckFailed(f"{what}: with dropout=1.0 every sublayer's output is zeroed before the residual, so the "
                      "output should be the norms of the input alone", hint)


# ---- the student's modules as black boxes ---------------------------------------------------------


def _own(module: Remote, reference: nn.Module, *names: str) -> dict:
    """The student's submodules ``names`` as black boxes, each checked against the reference's."""
    return {name: black_box(module.attr(name), getattr(reference, name)) for name in names}


def encoder_modules(layer: Remote, reference: EncoderLayer) -> dict:
    """The student's attention and feed-forward modules, reference norms with the same weights."""
    return dict(**_own(layer, reference, "self_attn", "ffn"), norm1=reference.norm1, norm2=reference.norm2)


def decoder_modules(layer: Remote, reference: DecoderLayer) -> dict:
    return dict(**_own(layer, reference, "self_attn", "cross_attn", "ffn"),
                norm1=reference.norm1, norm2=reference.norm2, norm3=reference.norm3)


def transformer_modules(model: Remote, reference: Transformer) -> dict:
    """The student's embeddings, positional encoding and layers; the generator is an
    nn.Linear holding the same weights, so the reference's serves."""
    encoder, decoder = model.attr("encoder_layers"), model.attr("decoder_layers")
    return dict(**_own(model, reference, "src_embed", "tgt_embed", "pos_encoding"),
                encoder_layers=[black_box(encoder.method("__getitem__", i), reference.encoder_layers[i])
                                for i in range(NUM_LAYERS)],
                decoder_layers=[black_box(decoder.method("__getitem__", i), reference.decoder_layers[i])
                                for i in range(NUM_LAYERS)],
                generator=reference.generator)


def reference_modules(reference: Transformer) -> dict:
    return dict(src_embed=reference.src_embed, tgt_embed=reference.tgt_embed, pos_encoding=reference.pos_encoding,
                encoder_layers=list(reference.encoder_layers), decoder_layers=list(reference.decoder_layers),
                generator=reference.generator)


def attention_pieces(modules: dict, reference: nn.Module, *calls) -> list[Piece]:
    """(module name, args) of attention calls -> the student's attention modules as Pieces."""
    return [Piece("MultiHeadAttention", name, "assignment 03", lambda name=name, args=args: modules[name](*args),
                  lambda name=name, args=args: getattr(reference, name)(*args)) for name, args in calls]


def ffn_piece(modules: dict, reference: nn.Module, x: torch.Tensor) -> list[Piece]:
    return [Piece("FeedForward", "ffn", "the FeedForward part", lambda: modules["ffn"](x), lambda: reference.ffn(x))]


def masks(src: torch.Tensor, tgt_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(src_mask (B, 1, 1, S), tgt_mask (B, 1, T, T)) as the contract's forward builds them."""
    return padding_mask(src, PAD), padding_mask(tgt_in, PAD) & causal_mask(tgt_in.size(1), device=tgt_in.device)


def transformer_pieces(modules: dict, reference: Transformer, src: torch.Tensor, tgt_in: torch.Tensor,
                       side: str = "both") -> list[Piece]:
    """The student's Transformer pieces on the reference's intermediate values, for ``side``
    "encoder" (what encode uses), "decoder" (what decode uses) or "both": embeddings and
    positional encoding (04); per layer its attention (03), feed-forward network and
    wiring (compared with the contract's wiring of its own sub-pieces), then the layer
    as a whole (does it run)."""
    src_mask, tgt_mask = masks(src, tgt_in)
    with torch.no_grad():
        src_x, tgt_x = reference.src_embed(src), reference.tgt_embed(tgt_in)
        encoder_inputs = [reference.pos_encoding(src_x)]
        for layer in reference.encoder_layers:
            encoder_inputs.append(layer(encoder_inputs[-1], src_mask))
        memory = encoder_inputs[-1]
        decoder_inputs = [reference.pos_encoding(tgt_x)]
        for layer in reference.decoder_layers:
            decoder_inputs.append(layer(decoder_inputs[-1], memory, tgt_mask, src_mask))

    encoder = [Piece("TokenEmbedding", "src_embed", "assignment 04", lambda: modules["src_embed"](src),
                     lambda: reference.src_embed(src))]
    decoder = [Piece("TokenEmbedding", "tgt_embed", "assignment 04", lambda: modules["tgt_embed"](tgt_in),
                     lambda: reference.tgt_embed(tgt_in))]
    for side_pieces in (encoder, decoder):
        side_pieces.append(Piece("PositionalEncoding", "pos_encoding", "assignment 04",
                                 lambda: modules["pos_encoding"](src_x), lambda: reference.pos_encoding(src_x)))
    for i, x in enumerate(encoder_inputs[:-1]):
        layer, ref_layer, attr = modules["encoder_layers"][i], reference.encoder_layers[i], f"encoder_layers[{i}]"
        own = encoder_modules(layer.remote, ref_layer)
        encoder += [dataclasses.replace(p, attr=f"{attr}.{p.attr}") for p in
                    attention_pieces(own, ref_layer, ("self_attn", (x, x, x, src_mask))) + ffn_piece(own, ref_layer, x)]
        encoder.append(Piece("EncoderLayer", attr, "the EncoderLayer part", lambda layer=layer, x=x: layer(x, src_mask),
                             lambda own=own, x=x: variants.encoder_layer(x, src_mask, **own)))
    for i, y in enumerate(decoder_inputs[:-1]):
        layer, ref_layer, attr = modules["decoder_layers"][i], reference.decoder_layers[i], f"decoder_layers[{i}]"
        own = decoder_modules(layer.remote, ref_layer)
        decoder += [dataclasses.replace(p, attr=f"{attr}.{p.attr}") for p in
                    attention_pieces(own, ref_layer, ("self_attn", (y, y, y, tgt_mask)),
                                     ("cross_attn", (y, memory, memory, src_mask))) + ffn_piece(own, ref_layer, y)]
        decoder.append(Piece("DecoderLayer", attr, "the DecoderLayer part",
                             lambda layer=layer, y=y: layer(y, memory, tgt_mask, src_mask),
                             lambda own=own, y=y: variants.decoder_layer(y, memory, tgt_mask, src_mask, **own)))
    if side == "encoder":
        return encoder
    if side == "decoder":
        return decoder
    return encoder + decoder[:1] + decoder[2:]  # pos_encoding once
