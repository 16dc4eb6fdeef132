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
    decoder_modules,
    expect_sublayers_dropped,
    ffn_piece,
    pieces_in_eval_mode,
)
from reference.layers import DecoderLayer

pytestmark = pytest.mark.part("DecoderLayer")

# Two attentions, a feed-forward network and three LayerNorms in float32: a correct layer
# is within ~3e-7 of a float64 run; the mistakes differ by more than 1e-2
# (tests/test_variants_0405.py checks that).
ATOL, RTOL = 1e-5, 1e-4
NAMES = ("self_attn, cross_attn (MultiHeadAttention), ffn (a FeedForward), norm1, norm2, norm3 "
         "(nn.LayerNorm(d_model))")


def _expect_layer(what, layer, reference, x, memory, tgt_mask=None, memory_mask=None):
    """The student's layer against post-norm wiring of its own attentions and ffn (part isolation)."""
    modules = decoder_modules(layer, reference)
    pieces = attention_pieces(modules, reference, ("self_attn", (x, x, x, tgt_mask)),
                              ("cross_attn", (x, memory, memory, memory_mask))) + ffn_piece(modules, reference, x)
    with noting_stock(layer), diagnosing(pieces):
        got = layer(x, memory, tgt_mask, memory_mask)
        expect_wiring(what, got, reference(x, memory, tgt_mask, memory_mask),
                      lambda: variants.decoder_layer(x, memory, tgt_mask, memory_mask, **modules), atol=ATOL, rtol=RTOL,
                      mistakes=variants.decoder_mistakes(x, memory, tgt_mask, memory_mask, modules), pieces=pieces,
                      unusable_hint=variants.PIECES_UNUSABLE)


def test_decoder_layer_has_the_contract_parameters(student, new_for_names, new_graded, reference_decoder_layer,
                                                   make_input):
    # The layer's own names; its pieces' names are graded where the pieces are (stock pieces),
    # when the student wrote those pieces' classes.
    x, memory = make_input(2, 3, D_MODEL, seed=200), make_input(2, 4, D_MODEL, seed=201)
    expect_replaced_pieces_written(f"DecoderLayer({D_MODEL}, {NUM_HEADS}, {D_FF})",
                                   student, student.new("DecoderLayer", D_MODEL, NUM_HEADS, D_FF),
                                   reference_decoder_layer, PIECE_CLASSES,
                                   names_hint=f"use the contract's submodules: {NAMES}")
    layer = new_for_names(reference_decoder_layer, "DecoderLayer", D_MODEL, NUM_HEADS, D_FF)
    expect_contract_parameters(f"DecoderLayer({D_MODEL}, {NUM_HEADS}, {D_FF})",
                               materialized(layer, lambda: layer(x, memory)), DecoderLayer(D_MODEL, NUM_HEADS, D_FF),
                               names_hint=f"use the contract's submodules: {NAMES}", shape_hint=SHAPE_HINT)
    # The names are the student process's word: the module must compute with them.
    layer = in_eval_mode(new_graded(reference_decoder_layer, "DecoderLayer", D_MODEL, NUM_HEADS, D_FF))
    expect_computes_with("DecoderLayer(x, memory)", layer, reference_decoder_layer, lambda: layer(x, memory),
                         pieces=("self_attn", "cross_attn", "ffn"))


def test_decoder_layer_shape(student_decoder_layer, make_input):
    x, memory = make_input(2, 5, D_MODEL, seed=80), make_input(2, 7, D_MODEL, seed=81)
    expect_tensor("DecoderLayer(x: (2, 5, 16), memory: (2, 7, 16))", student_decoder_layer(x, memory),
                  shape=(2, 5, D_MODEL))


@pytest.mark.part("DecoderLayer", points=3)
def test_decoder_layer_values(student_decoder_layer, reference_decoder_layer, make_input):
    x, memory = make_input(2, 5, D_MODEL, seed=82), make_input(2, 7, D_MODEL, seed=83)
    _expect_layer("DecoderLayer(x: T=5, memory: S=7)", student_decoder_layer, reference_decoder_layer, x, memory)


@pytest.mark.part("DecoderLayer", points=2)
def test_decoder_layer_with_causal_and_memory_masks(student_decoder_layer, reference_decoder_layer, make_input,
                                                    device):
    x, memory = make_input(2, 5, D_MODEL, seed=84), make_input(2, 7, D_MODEL, seed=85)
    tgt_mask = torch.ones(5, 5, dtype=torch.bool, device=device).tril().view(1, 1, 5, 5)
    memory_mask = torch.tensor([[1] * 5 + [0] * 2, [1] * 7], dtype=torch.bool, device=device).view(2, 1, 1, 7)
    _expect_layer("DecoderLayer(x, memory, tgt_mask=causal (1, 1, 5, 5), memory_mask=padding (2, 1, 1, 7))",
                  student_decoder_layer, reference_decoder_layer, x, memory, tgt_mask, memory_mask)


def test_decoder_layer_target_of_length_one(student_decoder_layer, reference_decoder_layer, make_input):
    x, memory = make_input(2, 1, D_MODEL, seed=86), make_input(2, 3, D_MODEL, seed=87)
    _expect_layer("DecoderLayer(x: (2, 1, 16), memory: (2, 3, 16))", student_decoder_layer, reference_decoder_layer,
                  x, memory)


def test_decoder_layer_dropout_is_off_in_eval_mode(new_graded, reference_decoder_layer, make_input, device):
    layer = new_graded(reference_decoder_layer, "DecoderLayer", D_MODEL, NUM_HEADS, D_FF, dropout=0.5)
    layer.method("eval")
    x, memory = make_input(2, 4, D_MODEL, seed=88), make_input(2, 6, D_MODEL, seed=89)
    _expect_layer("DecoderLayer(dropout=0.5) in eval mode", layer, reference_decoder_layer, x, memory)


def test_decoder_layer_dropout_on_each_sublayer_in_training_mode(new_graded, reference_decoder_layer, make_input,
                                                                 seed_student):
    # The layer's own dropout, its pieces in eval mode (theirs is graded where they are).
    x, memory = make_input(2, 4, D_MODEL, seed=95), make_input(2, 6, D_MODEL, seed=96)
    sublayers = ("self_attn", "cross_attn", "ffn")
    outputs, again = {}, {}
    for p in (0.0, 0.5, 1.0):
        layer = in_eval_mode(new_graded(reference_decoder_layer, "DecoderLayer", D_MODEL, NUM_HEADS, D_FF, dropout=p))
        what = f"DecoderLayer(dropout={p})(x, memory)"
        kept = expect_tensor(f"{what} in eval mode", layer(x, memory), shape=x.shape, floating=True)
        layer.method("train")
        pieces_in_eval_mode(layer, sublayers)
        seed_student(97)
        outputs[p] = expect_tensor(f"{what} in training mode", layer(x, memory), shape=x.shape, floating=True), kept
        again[p] = layer(x, memory)  # the next call drops other units (expect_new_draws)
    expect_no_dropout_at_zero("DecoderLayer(dropout=0.0)", *outputs[0.0], atol=ATOL, rtol=RTOL)
    modules = decoder_modules(layer, reference_decoder_layer)
    expect_sublayers_dropped("DecoderLayer(dropout=1.0) in training mode", outputs[1.0][0], outputs[0.0][1],
                             lambda **modules: variants.decoder_layer(x, memory, None, None, **modules),
                             lambda modules: variants.decoder_mistakes(x, memory, None, None, modules), modules)
    # p=1 drops every unit on every call: p=0.5 shows whether the next call drops others.
    expect_new_draws("DecoderLayer(dropout=0.5)(x, memory) in training mode", outputs[0.5][0], again[0.5],
                     outputs[0.0][1], atol=ATOL, rtol=RTOL)


def test_decoder_layer_gradients_reach_every_submodule(student_decoder_layer, reference_decoder_layer, make_input):
    x = make_input(2, 4, D_MODEL, seed=90).requires_grad_(True)
    memory = make_input(2, 6, D_MODEL, seed=91).requires_grad_(True)
    expect_gradients("DecoderLayer", student_decoder_layer, reference_decoder_layer, (x, memory),
                     make_input(2, 4, D_MODEL, seed=92),
                     inputs={0: ("the input x", GRAPH_CUT), 1: ("memory", variants.CROSS_OVER_OWN_STATES)})


def test_decoder_layer_follows_the_input_device(student, make_input, device):
    x, memory = make_input(1, 2, D_MODEL, seed=93), make_input(1, 3, D_MODEL, seed=94)

    def output_on(where):
        layer = student.new("DecoderLayer", D_MODEL, NUM_HEADS, D_FF)
        layer.method("to", where)
        return layer(x.to(where), memory.to(where))

    expect_follows_device("DecoderLayer(x, memory)", output_on, device, shape=(1, 2, D_MODEL))
