import pytest
import torch

from grader.suite import (
    GRAPH_CUT,
    diagnosing,
    expect_computes_with,
    expect_contract_parameters,
    expect_follows_device,
    expect_gradients,
    expect_new_draws,
    expect_no_dropout_at_zero,
    expect_replaced_pieces_written,
    expect_tensor,
    expect_wiring,
    in_eval_mode,
    materialized,
    noting_stock,
)
from reference.hidden.a05 import variants
from reference.hidden.a05.conftest import (
    D_FF,
    D_MODEL,
    NUM_HEADS,
    PIECE_CLASSES,
    SHAPE_HINT,
    attention_pieces,
    encoder_modules,
    expect_sublayers_dropped,
    ffn_piece,
    pieces_in_eval_mode,
)
from reference.layers import EncoderLayer

pytestmark = pytest.mark.part("EncoderLayer")

# Attention, a feed-forward network and two LayerNorms in float32: a correct layer is
# within ~3e-7 of a float64 run; the mistakes differ by more than 1e-2
# (tests/test_variants_0405.py checks that).
ATOL, RTOL = 1e-5, 1e-4
NAMES = "self_attn (a MultiHeadAttention), ffn (a FeedForward), norm1, norm2 (nn.LayerNorm(d_model))"


def _expect_layer(what, layer, reference, x, mask=None):
    """The student's layer against post-norm wiring of its own self_attn and ffn (part isolation)."""
    modules = encoder_modules(layer, reference)
    pieces = attention_pieces(modules, reference, ("self_attn", (x, x, x, mask))) + ffn_piece(modules, reference, x)
    with noting_stock(layer), diagnosing(pieces):
        got = layer(x) if mask is None else layer(x, mask)
        expect_wiring(what, got, reference(x, mask), lambda: variants.encoder_layer(x, mask, **modules),
                      atol=ATOL, rtol=RTOL, mistakes=variants.encoder_mistakes(x, mask, modules), pieces=pieces,
                      unusable_hint=variants.PIECES_UNUSABLE)


def test_encoder_layer_has_the_contract_parameters(student, new_for_names, new_graded, reference_encoder_layer,
                                                   make_input):
    # The layer's own names; its pieces' names are graded where the pieces are (stock pieces),
    # when the student wrote those pieces' classes.
    x = make_input(2, 3, D_MODEL, seed=200)
    expect_replaced_pieces_written(f"EncoderLayer({D_MODEL}, {NUM_HEADS}, {D_FF})",
                                   student, student.new("EncoderLayer", D_MODEL, NUM_HEADS, D_FF),
                                   reference_encoder_layer, PIECE_CLASSES,
                                   names_hint=f"use the contract's submodules: {NAMES}")
    layer = new_for_names(reference_encoder_layer, "EncoderLayer", D_MODEL, NUM_HEADS, D_FF)
    expect_contract_parameters(f"EncoderLayer({D_MODEL}, {NUM_HEADS}, {D_FF})", materialized(layer, lambda: layer(x)),
                               EncoderLayer(D_MODEL, NUM_HEADS, D_FF),
                               names_hint=f"use the contract's submodules: {NAMES}", shape_hint=SHAPE_HINT)
    # The names are the student process's word: the module must compute with them.
    layer = in_eval_mode(new_graded(reference_encoder_layer, "EncoderLayer", D_MODEL, NUM_HEADS, D_FF))
    expect_computes_with("EncoderLayer(x)", layer, reference_encoder_layer, lambda: layer(x),
                         pieces=("self_attn", "ffn"))


def test_encoder_layer_shape(student_encoder_layer, make_input):
    expect_tensor("EncoderLayer(x: (2, 6, 16))", student_encoder_layer(make_input(2, 6, D_MODEL, seed=70)),
                  shape=(2, 6, D_MODEL))


@pytest.mark.part("EncoderLayer", points=3)
def test_encoder_layer_values(student_encoder_layer, reference_encoder_layer, make_input):
    x = make_input(2, 6, D_MODEL, seed=71)
    _expect_layer("EncoderLayer(x)", student_encoder_layer, reference_encoder_layer, x)


@pytest.mark.part("EncoderLayer", points=2)
def test_encoder_layer_with_padding_mask(student_encoder_layer, reference_encoder_layer, make_input, device):
    x = make_input(2, 6, D_MODEL, seed=72)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool, device=device).view(2, 1, 1, 6)
    _expect_layer("EncoderLayer(x, src_mask=padding (2, 1, 1, 6))", student_encoder_layer, reference_encoder_layer,
                  x, mask)


def test_encoder_layer_batch_and_length_of_one(student_encoder_layer, reference_encoder_layer, make_input):
    x = make_input(1, 1, D_MODEL, seed=73)
    _expect_layer("EncoderLayer(x: (1, 1, 16))", student_encoder_layer, reference_encoder_layer, x)


def test_encoder_layer_dropout_is_off_in_eval_mode(new_graded, reference_encoder_layer, make_input, device):
    layer = new_graded(reference_encoder_layer, "EncoderLayer", D_MODEL, NUM_HEADS, D_FF, dropout=0.5)
    layer.method("eval")
    x = make_input(2, 5, D_MODEL, seed=74)
    _expect_layer("EncoderLayer(dropout=0.5) in eval mode", layer, reference_encoder_layer, x)


def test_encoder_layer_dropout_on_each_sublayer_in_training_mode(new_graded, reference_encoder_layer, make_input,
                                                                 seed_student):
    # The layer's own dropout, its pieces in eval mode (theirs is graded where they are).
    x = make_input(2, 5, D_MODEL, seed=78)
    outputs, again = {}, {}
    for p in (0.0, 0.5, 1.0):
        layer = in_eval_mode(new_graded(reference_encoder_layer, "EncoderLayer", D_MODEL, NUM_HEADS, D_FF, dropout=p))
        what = f"EncoderLayer(dropout={p})(x)"
        kept = expect_tensor(f"{what} in eval mode", layer(x), shape=x.shape, floating=True)
        layer.method("train")
        pieces_in_eval_mode(layer, ("self_attn", "ffn"))
        seed_student(79)
        outputs[p] = expect_tensor(f"{what} in training mode", layer(x), shape=x.shape, floating=True), kept
        again[p] = layer(x)  # the next call drops other units (expect_new_draws)
    expect_no_dropout_at_zero("EncoderLayer(dropout=0.0)", *outputs[0.0], atol=ATOL, rtol=RTOL)
    modules = encoder_modules(layer, reference_encoder_layer)
    expect_sublayers_dropped("EncoderLayer(dropout=1.0) in training mode", outputs[1.0][0], outputs[0.0][1],
                             lambda **modules: variants.encoder_layer(x, None, **modules),
                             lambda modules: variants.encoder_mistakes(x, None, modules), modules)
    # p=1 drops every unit on every call: p=0.5 shows whether the next call drops others.
    expect_new_draws("EncoderLayer(dropout=0.5)(x) in training mode", outputs[0.5][0], again[0.5], outputs[0.0][1],
                     atol=ATOL, rtol=RTOL)


def test_encoder_layer_gradients_reach_every_submodule(student_encoder_layer, reference_encoder_layer, make_input):
    x = make_input(2, 4, D_MODEL, seed=75).requires_grad_(True)
    expect_gradients("EncoderLayer", student_encoder_layer, reference_encoder_layer, (x,),
                     make_input(2, 4, D_MODEL, seed=76), inputs={0: ("the input x", GRAPH_CUT)})


def test_encoder_layer_follows_the_input_device(student, make_input, device):
    x = make_input(1, 2, D_MODEL, seed=77)

    def output_on(where):
        layer = student.new("EncoderLayer", D_MODEL, NUM_HEADS, D_FF)
        layer.method("to", where)
        return layer(x.to(where))

    expect_follows_device("EncoderLayer(x)", output_on, device, shape=(1, 2, D_MODEL))
