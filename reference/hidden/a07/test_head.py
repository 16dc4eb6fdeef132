import pytest
import torch

from grader.suite import (
    CheckFailed,
    DropoutHints,
    StudentException,
    expect_causal,
    expect_close,
    expect_computes_with,
    expect_contract_parameters,
    expect_dropout,
    expect_follows_device,
    expect_new_draws,
    expect_no_dropout_at_zero,
    expect_raises,
    expect_same_gradients,
    expect_tensor,
    in_eval_mode,
    is_close,
    materialized,
    weights_behind,
    without_unexpected_biases,
)
from reference.gpt import Head
from reference.hidden.a07 import variants
from reference.hidden.a07.conftest import CONTEXT, D_MODEL, HEAD_SIZE, SHAPE_HINT, params

pytestmark = pytest.mark.part("Head")

# Three float32 projections and a softmax: a correct head is within ~1e-6 of the reference;
# the mistakes differ by more than 0.1 (the variants, at these sizes).
ATOL, RTOL = 1e-5, 1e-4
# Attention weights recovered from an output (a solve against 8 value vectors of width 8):
# float32 rounding becomes up to ~1e-4 in the weights, which lie in [0, 2].
WEIGHTS_ATOL, WEIGHTS_RTOL = 1e-3, 1e-3
NAMES = "key, query, value = nn.Linear(d_model, head_size, bias=False)"


def call_head(what: str, head, x: torch.Tensor):
    """head(x); a crash for T < context_length that T == context_length does not have is
    the mask not cropped to T."""
    try:
        return head(x)
    except StudentException as exc:
        if exc.stub or x.size(1) == CONTEXT:
            raise
        try:
            head(torch.zeros(1, CONTEXT, D_MODEL, device=x.device))
        except StudentException:
            raise exc from None
        raise CheckFailed(f"{what}: {exc}", variants.MASK_NOT_CROPPED) from None


def expect_head(what: str, head, reference: Head, x: torch.Tensor) -> None:
    expect_close(what, call_head(what, head, x), reference(x), atol=ATOL, rtol=RTOL,
                 mistakes=variants.head_mistakes(x, params(reference)))


def test_head_has_the_contract_parameters_and_a_causal_buffer(student, reference_head, make_input):
    x = make_input(2, CONTEXT, D_MODEL, seed=100)
    head = student.new("Head", D_MODEL, HEAD_SIZE, CONTEXT)
    expect_contract_parameters(f"Head({D_MODEL}, {HEAD_SIZE}, {CONTEXT})", materialized(head, lambda: head(x)),
                               reference_head, names_hint=f"use the contract's submodules: {NAMES}",
                               shape_hint=SHAPE_HINT,
                               unexpected_hints={name: f"{name}: unexpected bias: {NAMES}"
                                                 for name in ("key.bias", "query.bias", "value.bias")})
    buffers = head.inspect()["buffers"]
    if buffers.get("tril") != [CONTEXT, CONTEXT]:
        raise CheckFailed(f"Head buffers: expected tril ({CONTEXT}, {CONTEXT}), got {buffers}",
                          "register the causal mask as a buffer: self.register_buffer('tril', "
                          "torch.tril(torch.ones(context_length, context_length)))")
    # The names are the student process's word: the module must compute with them.
    head = in_eval_mode(without_unexpected_biases(student.new_like(reference_head, "Head", D_MODEL, HEAD_SIZE, CONTEXT),
                                                  reference_head))
    expect_computes_with("Head(x)", head, reference_head, lambda: head(x))


def test_head_shape(student_head, make_input):
    x = make_input(2, 5, D_MODEL, seed=101)
    expect_tensor(f"Head(x: (2, 5, {D_MODEL}))", call_head("Head(x)", student_head, x), shape=(2, 5, HEAD_SIZE))


@pytest.mark.part("Head", points=3)
def test_head_values_at_full_context(student_head, reference_head, make_input):
    expect_head(f"Head(x: (2, {CONTEXT}, {D_MODEL}))", student_head, reference_head,
                make_input(2, CONTEXT, D_MODEL, seed=102))


@pytest.mark.part("Head", points=2)
def test_head_values_shorter_than_the_context(student_head, reference_head, make_input):
    expect_head(f"Head(x: (2, 5, {D_MODEL}))", student_head, reference_head, make_input(2, 5, D_MODEL, seed=103))


@pytest.mark.part("Head", points=2)
def test_head_no_position_sees_a_later_one(student_head, reference_head, make_input):
    x = make_input(2, 6, D_MODEL, seed=104)

    def output_with_change_at(later):
        changed = x.clone()
        if later is not None:
            changed[:, later] += 1.0
        return call_head("Head(x)", student_head, changed)

    expect_causal("Head(x)", output_with_change_at, 6, atol=ATOL, rtol=RTOL, hint=variants.FUTURE_VISIBLE,
                  mistakes=variants.head_mistakes(x, params(reference_head)), shape=(2, 6, HEAD_SIZE))


def test_head_length_one(student_head, reference_head, make_input):
    expect_head(f"Head(x: (1, 1, {D_MODEL}))", student_head, reference_head, make_input(1, 1, D_MODEL, seed=105))


def test_head_rejects_a_sequence_longer_than_the_context(student_head, make_input):
    x = make_input(1, CONTEXT + 1, D_MODEL, seed=106)
    expect_raises(ValueError, f"Head(x) with T = {CONTEXT + 1} > context_length = {CONTEXT}", lambda: student_head(x))


def test_head_dropout_is_off_in_eval_mode(student, reference_head, make_input):
    head = in_eval_mode(without_unexpected_biases(student.new_like(reference_head, "Head", D_MODEL, HEAD_SIZE, CONTEXT,
                                                                   dropout=0.5), reference_head))
    expect_head("Head(dropout=0.5) in eval mode", head, reference_head, make_input(2, 5, D_MODEL, seed=107))


def test_head_dropout_zeroes_attention_weights_in_training_mode(student, reference_head, make_input, seed_student):
    # Judged against the same head in eval mode, through the attention weights behind its
    # output (grader.suite.dropout): any correct way of dropping passes, and a mistake in the
    # weights themselves is in both, graded by the value tests.
    x = make_input(8, CONTEXT, D_MODEL, seed=111)
    outputs, again = {}, {}
    for p in (0.0, 0.5):
        head = student.new_like(reference_head, "Head", D_MODEL, HEAD_SIZE, CONTEXT, dropout=p)
        head = without_unexpected_biases(head, reference_head)
        what = f"Head(dropout={p})(x)"
        seed_student(112)
        train = expect_tensor(f"{what} in training mode", head(x), shape=(8, CONTEXT, HEAD_SIZE), floating=True)
        again[p] = head(x)  # the next call drops other units (expect_new_draws)
        head.method("eval")
        outputs[p] = train, expect_tensor(f"{what} in eval mode", head(x), shape=(8, CONTEXT, HEAD_SIZE), floating=True)
    expect_no_dropout_at_zero("Head(dropout=0.0)", *outputs[0.0], atol=ATOL, rtol=RTOL)
    # Kept: the same weights with dropout=0.0, in eval mode; this module's own eval mode is another test's.
    train, kept = outputs[0.5][0], outputs[0.0][1]
    what = "Head(dropout=0.5) in training mode"
    values = x @ params(reference_head)["value.weight"].T  # (B, T, head_size)
    weights = weights_behind(kept, values, atol=ATOL, rtol=RTOL)
    if weights is None:  # no weighted sum of value(x) (the value tests' to grade): only a change shows
        if is_close(train, kept, atol=ATOL, rtol=RTOL):
            raise CheckFailed(f"{what}: the output is the one without dropout", variants.HEAD_DROPOUT_MISSING)
    else:
        expect_dropout(f"{what}: the attention weights behind its output",
                       weights_behind(train, values, atol=ATOL, rtol=RTOL), weights, 0.5, atol=WEIGHTS_ATOL,
                       rtol=WEIGHTS_RTOL, named=DropoutHints(missing=variants.HEAD_DROPOUT_MISSING,
                                                             misplaced=variants.HEAD_DROPOUT_MISPLACED),
                       elsewhere={variants.HEAD_DROPOUT_ON_OUTPUT: (train, kept)})
    expect_new_draws(what, train, again[0.5], kept, atol=ATOL, rtol=RTOL)


def test_head_gradients(student_head, reference_head, make_input):
    expect_same_gradients(student_head, reference_head, make_input(2, 4, D_MODEL, seed=108),
                          make_input(2, 4, HEAD_SIZE, seed=109), mistakes=lambda t: variants.head_mistakes(t["x"], t))


def test_head_follows_the_input_device(student, make_input, device):
    x = make_input(1, 2, D_MODEL, seed=110)

    def output_on(where):
        head = student.new("Head", D_MODEL, HEAD_SIZE, CONTEXT)
        head.method("to", where)
        return head(x.to(where))

    expect_follows_device("Head(x)", output_on, device, shape=(1, 2, HEAD_SIZE))
