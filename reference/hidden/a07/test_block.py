import pytest

from grader.suite import (
    GRAPH_CUT,
    Piece,
    black_box,
    diagnosing,
    expect_computes_with,
    expect_contract_parameters,
    expect_follows_device,
    expect_gradients,
    expect_replaced_pieces_written,
    expect_tensor,
    expect_wiring,
    in_eval_mode,
    materialized,
    noting_stock,
)
from reference.gpt import Block
from reference.hidden.a07 import variants
from reference.hidden.a07.conftest import CONTEXT, D_MODEL, NUM_HEADS, PIECE_CLASSES, SHAPE_HINT, graded_block

pytestmark = pytest.mark.part("Block")

# Attention, an MLP and two LayerNorms in float32: a correct block is within ~1e-6 of the
# reference; the wiring mistakes differ by more than 1e-1.
ATOL, RTOL = 1e-5, 1e-4
NAMES = "ln1, ln2 (nn.LayerNorm(d_model)), attn (a MultiHead), mlp (an MLP)"


def own_pieces(block, reference: Block) -> dict:
    """The student's attn and mlp as black boxes (each result checked against the reference's),
    the reference's norms (same weights)."""
    return dict(attn=black_box(block.attr("attn"), reference.attn), mlp_=black_box(block.attr("mlp"), reference.mlp),
                ln1=reference.ln1, ln2=reference.ln2)


def expect_block(what: str, block, reference: Block, x) -> None:
    """Against the reference, else against pre-norm wiring of the student's own attn and mlp."""
    pieces = own_pieces(block, reference)
    with_inputs = [Piece("MultiHead", "attn", "the MultiHead part", lambda: pieces["attn"](reference.ln1(x)),
                         lambda: reference.attn(reference.ln1(x))),
                   Piece("MLP", "mlp", "the MLP part", lambda: pieces["mlp_"](reference.ln2(x)),
                         lambda: reference.mlp(reference.ln2(x)))]
    with noting_stock(block), diagnosing(with_inputs):
        got = block(x)
        expect_tensor(what, got, shape=x.shape)
        expect_wiring(what, got, reference(x), lambda: variants.block(x, **pieces), atol=ATOL, rtol=RTOL,
                      mistakes=variants.block_mistakes(x, pieces), pieces=with_inputs,
                      unusable_hint=variants.PIECES_UNUSABLE)


def test_block_has_the_contract_parameters(student, new_for_names, new_graded, reference_block, make_input):
    # The block's own names; its pieces' names are graded where the pieces are (stock pieces),
    # when the student wrote those pieces' classes.
    x = make_input(2, CONTEXT, D_MODEL, seed=500)
    expect_replaced_pieces_written(f"Block({D_MODEL}, {NUM_HEADS}, {CONTEXT})", student,
                                   student.new("Block", D_MODEL, NUM_HEADS, CONTEXT), reference_block, PIECE_CLASSES,
                                   names_hint=f"use the contract's submodules: {NAMES}")
    block = new_for_names(reference_block, "Block", D_MODEL, NUM_HEADS, CONTEXT)
    expect_contract_parameters(f"Block({D_MODEL}, {NUM_HEADS}, {CONTEXT})", materialized(block, lambda: block(x)),
                               reference_block, names_hint=f"use the contract's submodules: {NAMES}",
                               shape_hint=SHAPE_HINT)
    block = in_eval_mode(new_graded(reference_block, "Block", D_MODEL, NUM_HEADS, CONTEXT))
    expect_computes_with("Block(x)", block, reference_block, lambda: block(x), pieces=("attn", "mlp"))


def test_block_shape(student_block, make_input):
    expect_tensor(f"Block(x: (2, {CONTEXT}, {D_MODEL}))", student_block(make_input(2, CONTEXT, D_MODEL, seed=501)),
                  shape=(2, CONTEXT, D_MODEL))


@pytest.mark.part("Block", points=3)
def test_block_values(student_block, reference_block, make_input):
    expect_block("Block(x)", student_block, reference_block, make_input(2, CONTEXT, D_MODEL, seed=502))


@pytest.mark.part("Block", points=2)
def test_block_shorter_than_the_context(new_graded, reference_block, own_else_stock_pieces, make_input):
    # Else with a stock attn and mlp: a Head that cannot take T < context_length costs points in Head.
    def check(block, args, stock):
        expect_block(f"Block(x: (2, 5, {D_MODEL})){' with a stock attn and mlp' if stock else ''}", block,
                     reference_block, *args)

    own_else_stock_pieces(check, lambda: graded_block(new_graded, reference_block), reference_block, ["attn", "mlp"],
                          [(make_input(2, 5, D_MODEL, seed=503),)])


def test_block_dropout_is_off_in_eval_mode(new_graded, reference_block, make_input):
    block = new_graded(reference_block, "Block", D_MODEL, NUM_HEADS, CONTEXT, dropout=0.5)
    block.method("eval")
    expect_block("Block(dropout=0.5) in eval mode", block, reference_block, make_input(2, CONTEXT, D_MODEL, seed=505))


def test_block_gradients_reach_every_submodule(student_block, reference_block, make_input):
    x = make_input(2, CONTEXT, D_MODEL, seed=506).requires_grad_(True)
    expect_gradients("Block", student_block, reference_block, (x,), make_input(2, CONTEXT, D_MODEL, seed=507),
                     inputs={0: ("the input x", GRAPH_CUT)})


def test_block_follows_the_input_device(student, make_input, device):
    x = make_input(1, CONTEXT, D_MODEL, seed=508)

    def output_on(where):
        block = student.new("Block", D_MODEL, NUM_HEADS, CONTEXT)
        block.method("to", where)
        return block(x.to(where))

    expect_follows_device("Block(x)", output_on, device, shape=(1, CONTEXT, D_MODEL))
