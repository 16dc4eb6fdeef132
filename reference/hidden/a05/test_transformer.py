import pytest
import torch

from grader.suite import (
    CheckFailed,
    StudentError,
    StudentException,
    diagnosing,
    expect_causal,
    expect_computes_with,
    expect_contract_parameters,
    expect_follows_device,
    expect_gradients,
    expect_tensor,
    expect_wiring,
    in_eval_mode,
    materialized,
    noting_stock,
)
from reference.hidden.a05 import variants
from reference.hidden.a05.conftest import (
    D_MODEL,
    PAD,
    SHAPE_HINT,
    SRC_VOCAB,
    TGT_VOCAB,
    TRANSFORMER_ARGS,
    masks,
    transformer_modules,
    transformer_pieces,
)
from reference.layers import Transformer

pytestmark = pytest.mark.part("Transformer")

# Embeddings, 2 + 2 layers and the generator in float32: the reference itself is within
# ~4e-7 of a float64 run (logits up to ~1.5); a correct model computed in another order
# stays far inside 1e-4, and the mistakes differ by more than 1e-2
# (tests/test_variants_0405.py checks that).
ATOL, RTOL = 1e-4, 1e-4
NAMES = ("src_embed, tgt_embed (TokenEmbedding), pos_encoding (PositionalEncoding), encoder_layers, "
         "decoder_layers (nn.ModuleList), generator (nn.Linear(d_model, tgt_vocab_size))")


def _tokens(make_tokens, seed, *, src_pad=(0, 2), tgt_pad=(1, 0), tgt_len=5):
    """A batch of 2: sources of length 7, targets of length ``tgt_len``, padded at the end."""
    return (make_tokens(2, 7, SRC_VOCAB, seed=seed, pad=src_pad),
            make_tokens(2, tgt_len, TGT_VOCAB, seed=seed + 1, pad=tgt_pad))


def _forward(model, src, tgt_in):
    """``model(src, tgt_in)``; when that raises because decode already applies the
    generator (forward then applies it twice), say so."""
    try:
        return model(src, tgt_in)
    except StudentException as exc:
        if exc.stub:
            raise
        try:
            src_mask, tgt_mask = masks(src, tgt_in)
            states = model.method("decode", tgt_in, model.method("encode", src, src_mask), tgt_mask, src_mask)
        except StudentError:
            raise exc from None
        if isinstance(states, torch.Tensor) and states.dim() > 0 and states.shape[-1] == TGT_VOCAB:
            raise CheckFailed(f"{exc}\n{exc.traceback}".strip(), variants.DECODE_RETURNS_LOGITS) from None
        raise


def _expect_forward(what, model, reference, src, tgt_in):
    """Logits at the real target positions against the reference, else against the
    contract's wiring of the student's own embeddings and layers (part isolation)."""
    modules = transformer_modules(model, reference)
    pieces = transformer_pieces(modules, reference, src, tgt_in)
    batch, length = tgt_in.shape
    with noting_stock(model), diagnosing(pieces):
        got = _forward(model, src, tgt_in)
        wrong_width = isinstance(got, torch.Tensor) and tuple(got.shape) == (batch, length, D_MODEL)
        expect_tensor(what, got, shape=(batch, length, TGT_VOCAB), hint=variants.NO_GENERATOR if wrong_width else None)
        expect_wiring(what, got, reference(src, tgt_in), lambda: variants.transformer(src, tgt_in, PAD, modules),
                      atol=ATOL, rtol=RTOL, mistakes=variants.transformer_mistakes(src, tgt_in, PAD, modules),
                      pieces=pieces, unusable_hint=variants.PIECES_UNUSABLE, mask=(tgt_in != PAD)[..., None],
                      fallback_hint=variants.WIRING)


def test_transformer_has_the_contract_parameters(new_for_names, new_graded, reference_transformer, make_tokens):
    # pos_encoding.pe registered as a parameter is assignment 04's mistake, graded there; the
    # layers' pieces' names are graded where the pieces are (stock pieces).
    src, tgt_in = _tokens(make_tokens, seed=200)
    model = new_for_names(reference_transformer, "Transformer", SRC_VOCAB, TGT_VOCAB, **TRANSFORMER_ARGS)
    expect_contract_parameters("Transformer(...)", materialized(model, lambda: _forward(model, src, tgt_in)),
                               Transformer(SRC_VOCAB, TGT_VOCAB, **TRANSFORMER_ARGS),
                               names_hint=f"use the contract's submodules: {NAMES}", shape_hint=SHAPE_HINT,
                               ignore=("pos_encoding.pe",))
    # The names are the student process's word: the module must compute with them.
    model = in_eval_mode(new_graded(reference_transformer, "Transformer", SRC_VOCAB, TGT_VOCAB, dropout=0.0,
                                    **TRANSFORMER_ARGS))
    expect_computes_with("Transformer(src, tgt_in)", model, reference_transformer, lambda: _forward(model, src, tgt_in),
                         pieces=("src_embed", "tgt_embed", "encoder_layers", "decoder_layers"))


def test_transformer_forward_shape(student_transformer, make_tokens):
    src, tgt_in = _tokens(make_tokens, seed=100)
    got = _forward(student_transformer, src, tgt_in)
    wrong_width = isinstance(got, torch.Tensor) and tuple(got.shape) == (2, 5, D_MODEL)
    expect_tensor("Transformer(src: (2, 7), tgt_in: (2, 5))", got, shape=(2, 5, TGT_VOCAB),
                  hint=variants.NO_GENERATOR if wrong_width else None)


@pytest.mark.part("Transformer", points=4)
def test_transformer_forward_values(student_transformer, reference_transformer, make_tokens):
    src, tgt_in = _tokens(make_tokens, seed=102)
    _expect_forward("Transformer(src, tgt_in) at the real (non-pad) target positions", student_transformer,
                    reference_transformer, src, tgt_in)


@pytest.mark.part("Transformer", points=2)
def test_transformer_no_target_position_sees_a_later_one(student_transformer, reference_transformer, make_tokens):
    src, tgt_in = _tokens(make_tokens, seed=108, tgt_pad=(0, 0))
    modules = transformer_modules(student_transformer, reference_transformer)

    def logits_with_change_at(later):
        changed = tgt_in.clone()
        if later is not None:
            changed[:, later] = changed[:, later] % (TGT_VOCAB - 1) + 1  # another word, never PAD
        return _forward(student_transformer, src, changed)

    expect_causal("Transformer(src, tgt_in)", logits_with_change_at, tgt_in.shape[1], atol=ATOL, rtol=RTOL,
                  hint=variants.FUTURE_VISIBLE_IN_DECODER, shape=(*tgt_in.shape, TGT_VOCAB),
                  mistakes=variants.transformer_mistakes(src, tgt_in, PAD, modules))


@pytest.mark.part("Transformer", points=2)
def test_transformer_encode(student_transformer, reference_transformer, make_tokens):
    src, tgt_in = _tokens(make_tokens, seed=104)
    src_mask, _ = masks(src, tgt_in)
    modules = transformer_modules(student_transformer, reference_transformer)
    pieces = transformer_pieces(modules, reference_transformer, src, tgt_in, side="encoder")
    with diagnosing(pieces):
        got = student_transformer.method("encode", src, src_mask)
        expect_tensor("Transformer.encode(src: (2, 7), src_mask)", got, shape=(2, 7, D_MODEL))
        expect_wiring("Transformer.encode(src, src_mask)", got, reference_transformer.encode(src, src_mask),
                      lambda: variants.encode(src, src_mask, modules), atol=ATOL, rtol=RTOL, pieces=pieces,
                      unusable_hint=variants.PIECES_UNUSABLE,
                      mistakes={
                          variants.NO_POSITIONS_SRC: lambda: variants.encode(src, src_mask, modules, positions=False),
                          variants.NO_ENCODER_MASK: lambda: variants.encode(src, None, modules)},
                      fallback_hint="encode is: x = pos_encoding(src_embed(src)); then x = layer(x, src_mask) "
                                    "for each encoder layer")


@pytest.mark.part("Transformer", points=2)
def test_transformer_decode(student_transformer, reference_transformer, make_tokens):
    src, tgt_in = _tokens(make_tokens, seed=106)
    src_mask, tgt_mask = masks(src, tgt_in)
    with torch.no_grad():
        memory = reference_transformer.encode(src, src_mask)  # the reference's: decode is graded on its own
    modules = transformer_modules(student_transformer, reference_transformer)
    pieces = transformer_pieces(modules, reference_transformer, src, tgt_in, side="decoder")
    with diagnosing(pieces):
        got = student_transformer.method("decode", tgt_in, memory, tgt_mask, src_mask)
        logits = isinstance(got, torch.Tensor) and tuple(got.shape) == (2, 5, TGT_VOCAB)
        expect_tensor("Transformer.decode(tgt_in: (2, 5), memory: (2, 7, 16), tgt_mask, memory_mask)", got,
                      shape=(2, 5, D_MODEL), hint=variants.DECODE_RETURNS_LOGITS if logits else None)
        expect_wiring("Transformer.decode(tgt_in, memory, tgt_mask, memory_mask) at the real target positions", got,
                      reference_transformer.decode(tgt_in, memory, tgt_mask, src_mask),
                      lambda: variants.decode(tgt_in, memory, tgt_mask, src_mask, modules), atol=ATOL, rtol=RTOL,
                      pieces=pieces, unusable_hint=variants.PIECES_UNUSABLE, mask=(tgt_in != PAD)[..., None],
                      mistakes={variants.NO_POSITIONS_TGT:
                                lambda: variants.decode(tgt_in, memory, tgt_mask, src_mask, modules, positions=False)},
                      fallback_hint="decode is: y = pos_encoding(tgt_embed(tgt_in)); then "
                                    "y = layer(y, memory, tgt_mask, memory_mask) for each decoder layer")


def test_transformer_target_of_length_one(student_transformer, reference_transformer, make_tokens):
    src, tgt_in = _tokens(make_tokens, seed=108, tgt_pad=(), tgt_len=1)
    _expect_forward("Transformer(src: (2, 7), tgt_in: (2, 1))", student_transformer, reference_transformer, src, tgt_in)


def test_transformer_dropout_is_off_in_eval_mode(new_graded, reference_transformer, make_tokens, device):
    args = dict(TRANSFORMER_ARGS, dropout=0.1)
    model = new_graded(reference_transformer, "Transformer", SRC_VOCAB, TGT_VOCAB, **args)
    model.method("eval")
    src, tgt_in = _tokens(make_tokens, seed=110)
    _expect_forward("Transformer(dropout=0.1) in eval mode", model, reference_transformer, src, tgt_in)


def test_transformer_gradients_reach_every_submodule(student_transformer, reference_transformer, make_tokens,
                                                    make_input):
    src, tgt_in = _tokens(make_tokens, seed=112)
    expect_gradients("Transformer", student_transformer, reference_transformer, (src, tgt_in),
                     make_input(2, 5, TGT_VOCAB, seed=114), inputs={})


def test_transformer_follows_the_input_device(student, make_tokens, device):
    src, tgt_in = _tokens(make_tokens, seed=116)

    def output_on(where):
        model = student.new("Transformer", SRC_VOCAB, TGT_VOCAB, dropout=0.0, **TRANSFORMER_ARGS)
        model.method("to", where)
        return model(src.to(where), tgt_in.to(where))

    expect_follows_device("Transformer(src, tgt_in)", output_on, device, shape=(*tgt_in.shape, TGT_VOCAB))
