import pytest
import torch

from grader.suite import (
    DropoutHints,
    Piece,
    StudentError,
    black_box,
    diagnosing,
    expect_computes_with,
    expect_contract_parameters,
    expect_dropout,
    expect_follows_device,
    expect_new_draws,
    expect_no_dropout_at_zero,
    expect_raises,
    expect_replaced_pieces_written,
    expect_tensor,
    expect_wiring,
    in_eval_mode,
    materialized,
    noting_stock,
)
from reference.gpt import MultiHead
from reference.hidden.a07 import variants
from reference.hidden.a07.conftest import CONTEXT, D_MODEL, NUM_HEADS, PIECE_CLASSES, SHAPE_HINT, graded_multihead

pytestmark = pytest.mark.part("MultiHead")

# Heads and a projection in float32: a correct module is within ~1e-6; the mistakes differ
# by more than 1e-2.
ATOL, RTOL = 1e-5, 1e-4
NAMES = "heads (nn.ModuleList of Head), proj = nn.Linear(d_model, d_model)"


def own_heads(module, reference: MultiHead) -> list:
    """The student's heads as black boxes, each result checked against the reference's head."""
    heads = module.attr("heads")
    return [black_box(heads.method("__getitem__", i), reference.heads[i]) for i in range(NUM_HEADS)]


def expect_multihead(what: str, module, reference: MultiHead, x: torch.Tensor) -> None:
    """Against the reference, else against proj(cat) of the student's own heads (part isolation)."""
    heads = own_heads(module, reference)
    pieces = [Piece("Head", f"heads[{i}]", "the Head part", lambda h=h: h(x), lambda i=i: reference.heads[i](x))
              for i, h in enumerate(heads)]
    with noting_stock(module), diagnosing(pieces):
        got = module(x)
        expect_tensor(what, got, shape=x.shape)
        expect_wiring(what, got, reference(x), lambda: reference.proj(torch.cat([h(x) for h in heads], dim=-1)),
                      atol=ATOL, rtol=RTOL, pieces=pieces, unusable_hint=variants.PIECES_UNUSABLE,
                      mistakes={variants.NO_PROJECTION: lambda: torch.cat([h(x) for h in heads], dim=-1),
                                variants.PROJECTED_TWICE: lambda: reference.proj(reference.proj(
                                    torch.cat([h(x) for h in heads], dim=-1)))})


def test_multihead_has_the_contract_parameters(student, new_for_names, new_graded, reference_multihead, make_input):
    x = make_input(2, CONTEXT, D_MODEL, seed=400)
    expect_replaced_pieces_written(f"MultiHead({D_MODEL}, {NUM_HEADS}, {CONTEXT})", student,
                                   student.new("MultiHead", D_MODEL, NUM_HEADS, CONTEXT), reference_multihead,
                                   PIECE_CLASSES, names_hint=f"use the contract's submodules: {NAMES}")
    module = new_for_names(reference_multihead, "MultiHead", D_MODEL, NUM_HEADS, CONTEXT)
    expect_contract_parameters(f"MultiHead({D_MODEL}, {NUM_HEADS}, {CONTEXT})",
                               materialized(module, lambda: module(x)), reference_multihead,
                               names_hint=f"use the contract's submodules: {NAMES}", shape_hint=SHAPE_HINT)
    module = in_eval_mode(new_graded(reference_multihead, "MultiHead", D_MODEL, NUM_HEADS, CONTEXT))
    expect_computes_with("MultiHead(x)", module, reference_multihead, lambda: module(x), pieces=("heads",),
                         unused={"proj": variants.NO_PROJECTION})


def test_multihead_shape(student_multihead, make_input):
    expect_tensor(f"MultiHead(x: (2, {CONTEXT}, {D_MODEL}))",
                  student_multihead(make_input(2, CONTEXT, D_MODEL, seed=401)), shape=(2, CONTEXT, D_MODEL))


@pytest.mark.part("MultiHead", points=3)
def test_multihead_values(student_multihead, reference_multihead, make_input):
    expect_multihead("MultiHead(x)", student_multihead, reference_multihead, make_input(2, CONTEXT, D_MODEL, seed=402))


@pytest.mark.part("MultiHead", points=2)
def test_multihead_shorter_than_the_context(new_graded, reference_multihead, own_else_stock_pieces, make_input):
    # Else with stock heads: a Head that cannot take T < context_length costs points in Head.
    def check(module, args, stock):
        expect_multihead(f"MultiHead(x: (2, {args[0].size(1)}, {D_MODEL})){' with stock heads' if stock else ''}",
                         module, reference_multihead, *args)

    own_else_stock_pieces(check, lambda: graded_multihead(new_graded, reference_multihead), reference_multihead,
                          [f"heads.{i}" for i in range(NUM_HEADS)],
                          [(make_input(2, length, D_MODEL, seed=seed),) for length, seed in ((5, 403), (1, 406))])


def test_multihead_rejects_d_model_not_divisible_by_num_heads(student):
    expect_raises(ValueError, "MultiHead(16, 3, 8)", lambda: student.new("MultiHead", 16, 3, CONTEXT))


def test_multihead_dropout_is_off_in_eval_mode(new_graded, reference_multihead, make_input):
    module = new_graded(reference_multihead, "MultiHead", D_MODEL, NUM_HEADS, CONTEXT, dropout=0.5)
    module.method("eval")
    expect_multihead("MultiHead(dropout=0.5) in eval mode", module, reference_multihead,
                     make_input(2, CONTEXT, D_MODEL, seed=404))


def test_multihead_dropout_after_the_projection_in_training_mode(new_graded, reference_multihead, make_input,
                                                                 seed_student):
    # Its own dropout, its heads in eval mode (theirs is graded in Head): each output zero or
    # twice the eval-mode one (grader.suite.dropout).
    x = make_input(4, CONTEXT, D_MODEL, seed=407)
    outputs, again = {}, {}
    for p in (0.0, 0.5):
        module = in_eval_mode(new_graded(reference_multihead, "MultiHead", D_MODEL, NUM_HEADS, CONTEXT, dropout=p))
        what = f"MultiHead(dropout={p})(x)"
        kept = expect_tensor(f"{what} in eval mode", module(x), shape=x.shape, floating=True)
        module.method("train")
        try:
            module.attr("heads").method("eval")
        except StudentError:  # heads named otherwise (their names are graded): theirs may act too
            pass
        seed_student(408)
        outputs[p] = expect_tensor(f"{what} in training mode", module(x), shape=x.shape, floating=True), kept
        again[p] = module(x)  # the next call drops other units (expect_new_draws)
    expect_no_dropout_at_zero("MultiHead(dropout=0.0)", *outputs[0.0], atol=ATOL, rtol=RTOL)
    # Kept: the same weights with dropout=0.0, in eval mode; this module's own eval mode is another test's.
    expect_dropout("MultiHead(dropout=0.5) in training mode", outputs[0.5][0], outputs[0.0][1], 0.5, atol=ATOL,
                   rtol=RTOL,
                   named=DropoutHints(missing=variants.MULTIHEAD_DROPOUT_MISSING,
                                      misplaced=variants.MULTIHEAD_DROPOUT_MISPLACED))
    expect_new_draws("MultiHead(dropout=0.5) in training mode", outputs[0.5][0], again[0.5], outputs[0.0][1],
                     atol=ATOL, rtol=RTOL)


def test_multihead_follows_the_input_device(student, make_input, device):
    x = make_input(1, CONTEXT, D_MODEL, seed=405)

    def output_on(where):
        module = student.new("MultiHead", D_MODEL, NUM_HEADS, CONTEXT)
        module.method("to", where)
        return module(x.to(where))

    expect_follows_device("MultiHead(x)", output_on, device, shape=(1, CONTEXT, D_MODEL))
