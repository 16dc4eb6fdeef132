import pytest

from grader.suite import (
    CheckFailed,
    DropoutHints,
    expect_close,
    expect_computes_with,
    expect_contract_parameters,
    expect_dropout,
    expect_follows_device,
    expect_new_draws,
    expect_no_dropout_at_zero,
    expect_same_gradients,
    expect_tensor,
    in_eval_mode,
    is_close,
    materialized,
    seed_reference,
    weights_behind,
)
from reference.hidden.a05 import variants
from reference.hidden.a05.conftest import D_FF, D_MODEL, SHAPE_HINT
from reference.layers import FeedForward

pytestmark = pytest.mark.part("FeedForward")

# Two float32 linear layers: a correct module is within ~1e-6; the mistakes differ by >1e-2.
ATOL, RTOL = 1e-5, 1e-4
NARROW = 8  # a d_ff below d_model, for the dropout test


def _params(module):
    return {name: p.detach() for name, p in module.named_parameters()}


def test_feed_forward_has_the_contract_parameters(student, new_for_names, reference_ffn, make_input):
    x = make_input(2, 3, D_MODEL, seed=200)
    module = new_for_names(reference_ffn, "FeedForward", D_MODEL, D_FF)
    expect_contract_parameters(f"FeedForward({D_MODEL}, {D_FF})", materialized(module, lambda: module(x)),
                      FeedForward(D_MODEL, D_FF), shape_hint=SHAPE_HINT, names_hint="use the contract's submodules: "
                      "linear1 = nn.Linear(d_model, d_ff), linear2 = nn.Linear(d_ff, d_model)")
    # The names are the student process's word: the module must compute with them.
    module = in_eval_mode(student.new_like(reference_ffn, "FeedForward", D_MODEL, D_FF))
    expect_computes_with("FeedForward(x)", module, reference_ffn, lambda: module(x))


def test_feed_forward_shape(student_ffn, make_input):
    expect_tensor("FeedForward(x: (2, 5, 16))", student_ffn(make_input(2, 5, D_MODEL, seed=60)), shape=(2, 5, D_MODEL))


@pytest.mark.part("FeedForward", points=3)
def test_feed_forward_values(student_ffn, reference_ffn, make_input):
    x = make_input(2, 5, D_MODEL, seed=61)
    expect_close("FeedForward(x)", student_ffn(x), reference_ffn(x), atol=ATOL, rtol=RTOL,
                 mistakes=variants.feed_forward_mistakes(x, _params(reference_ffn)))


def test_feed_forward_dropout_sits_between_relu_and_linear2(student, make_input, device, seed_student):
    # With d_ff = 8 < d_model = 16, linear2 can be undone: the hidden values behind the output
    # are compared with those of the same module in eval mode (grader.suite.dropout), so any
    # correct way of dropping passes, and a mistake in the values is graded elsewhere, once.
    seed_reference(6)
    reference = FeedForward(D_MODEL, NARROW).to(device)
    x = make_input(8, 6, D_MODEL, seed=62)
    outputs, again = {}, {}
    for p in (0.0, 0.5):
        module = in_eval_mode(student.new_like(reference, "FeedForward", D_MODEL, NARROW, dropout=p))
        what = f"FeedForward({D_MODEL}, {NARROW}, dropout={p})(x)"
        kept = expect_tensor(f"{what} in eval mode", module(x), shape=x.shape, floating=True)
        module.method("train")
        seed_student(63)
        outputs[p] = expect_tensor(f"{what} in training mode", module(x), shape=x.shape, floating=True), kept
        again[p] = module(x)  # the next call drops other units (expect_new_draws)
    expect_no_dropout_at_zero(f"FeedForward({D_MODEL}, {NARROW}, dropout=0.0)", *outputs[0.0], atol=ATOL, rtol=RTOL)
    # Kept: the same weights with dropout=0.0, in eval mode; this module's own eval mode is another test's.
    train, kept = outputs[0.5][0], outputs[0.0][1]
    params = _params(reference)

    def hidden(output):  # the d_ff values linear2 maps to ``output``, if it maps any
        return weights_behind((output - params["linear2.bias"]).reshape(-1, D_MODEL), params["linear2.weight"].T,
                              atol=ATOL, rtol=RTOL)

    kept_hidden = hidden(kept)
    what = f"FeedForward({D_MODEL}, {NARROW}, dropout=0.5) in training mode"
    if kept_hidden is None:  # no linear2 of anything (the value tests' to grade): only a change shows
        if is_close(train, kept, atol=ATOL, rtol=RTOL):
            raise CheckFailed(f"{what}: the output is the one without dropout", variants.DROPOUT_MISSING)
    else:
        # The hidden values come from a solve against linear2 (16 x 8, well conditioned): ~1e-6 of rounding.
        expect_dropout(f"{what}: the hidden values behind its output", hidden(train), kept_hidden, 0.5,
                       atol=1e-4, rtol=1e-3,
                       named=DropoutHints(missing=variants.DROPOUT_MISSING, misplaced=variants.DROPOUT_MISPLACED),
                       elsewhere={variants.DROPOUT_ON_OUTPUT: (train, kept)})
    expect_new_draws(what, train, again[0.5], kept, atol=ATOL, rtol=RTOL)


def test_feed_forward_dropout_is_off_in_eval_mode(student, reference_ffn, make_input, device):
    module = student.new_like(reference_ffn, "FeedForward", D_MODEL, D_FF, dropout=0.5)
    module.method("eval")
    x = make_input(2, 5, D_MODEL, seed=63)
    expect_close("FeedForward(dropout=0.5) in eval mode", module(x), reference_ffn(x), atol=ATOL, rtol=RTOL)


def test_feed_forward_gradients(student_ffn, reference_ffn, make_input):
    expect_same_gradients(student_ffn, reference_ffn, make_input(2, 3, D_MODEL, seed=64),
                          make_input(2, 3, D_MODEL, seed=65))


def test_feed_forward_follows_the_input_device(student, make_input, device):
    x = make_input(1, 2, D_MODEL, seed=66)

    def output_on(where):
        module = student.new("FeedForward", D_MODEL, D_FF)
        module.method("to", where)
        return module(x.to(where))

    expect_follows_device("FeedForward(x)", output_on, device, shape=(1, 2, D_MODEL))
