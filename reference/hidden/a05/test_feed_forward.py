import pytest
import torch

from grader.suite import (
    expect_close,
    expect_computes_with,
    expect_contract_parameters,
    expect_same_gradients,
    expect_tensor,
    materialized,
)
from reference.hidden.a05 import variants
from reference.hidden.a05.conftest import D_FF, D_MODEL, SHAPE_HINT
from reference.layers import FeedForward

pytestmark = pytest.mark.part("FeedForward")

# Two float32 linear layers: a correct module is within ~1e-6; the mistakes differ by >1e-2.
ATOL, RTOL = 1e-5, 1e-4


def _params(module):
    return {name: p.detach() for name, p in module.named_parameters()}


def test_feed_forward_has_the_contract_parameters(student, new_for_names, reference_ffn, make_input):
    x = make_input(2, 3, D_MODEL, seed=200)
    module = new_for_names(reference_ffn, "FeedForward", D_MODEL, D_FF)
    expect_contract_parameters(f"FeedForward({D_MODEL}, {D_FF})", materialized(module, lambda: module(x)),
                      FeedForward(D_MODEL, D_FF), shape_hint=SHAPE_HINT, names_hint="use the contract's submodules: "
                      "linear1 = nn.Linear(d_model, d_ff), linear2 = nn.Linear(d_ff, d_model)")
    # The names are the student process's word: the module must compute with them.
    module = student.new_like(reference_ffn, "FeedForward", D_MODEL, D_FF)
    expect_computes_with("FeedForward(x)", module, reference_ffn, lambda: module(x))


def test_feed_forward_shape(student_ffn, make_input):
    expect_tensor("FeedForward(x: (2, 5, 16))", student_ffn(make_input(2, 5, D_MODEL, seed=60)), shape=(2, 5, D_MODEL))


@pytest.mark.part("FeedForward", points=3)
def test_feed_forward_values(student_ffn, reference_ffn, make_input):
    x = make_input(2, 5, D_MODEL, seed=61)
    expect_close("FeedForward(x)", student_ffn(x), reference_ffn(x), atol=ATOL, rtol=RTOL,
                 mistakes=variants.feed_forward_mistakes(x, _params(reference_ffn)))


def test_feed_forward_dropout_sits_between_relu_and_linear2(student, reference_ffn, make_input, device):
    # With p=1 in training mode dropout zeroes its whole input, so where it sits shows in
    # the output without any randomness: linear2(0) = linear2.bias everywhere.
    module = student.new_like(reference_ffn, "FeedForward", D_MODEL, D_FF, dropout=1.0)
    x = make_input(2, 4, D_MODEL, seed=62)
    params = _params(reference_ffn)
    want = params["linear2.bias"].expand(2, 4, D_MODEL)
    with torch.no_grad():
        on_input = reference_ffn(torch.zeros_like(x))
    expect_close("FeedForward(dropout=1.0) in training mode", module(x), want, atol=ATOL, rtol=RTOL,
                 mistakes={variants.DROPOUT_ON_OUTPUT: torch.zeros_like(x),
                           variants.DROPOUT_ON_INPUT: on_input,
                           variants.DROPOUT_MISSING: lambda: reference_ffn(x)})


def test_feed_forward_dropout_is_off_in_eval_mode(student, reference_ffn, make_input, device):
    module = student.new_like(reference_ffn, "FeedForward", D_MODEL, D_FF, dropout=0.5)
    module.method("eval")
    x = make_input(2, 5, D_MODEL, seed=63)
    expect_close("FeedForward(dropout=0.5) in eval mode", module(x), reference_ffn(x), atol=ATOL, rtol=RTOL)


def test_feed_forward_gradients(student_ffn, reference_ffn, make_input):
    expect_same_gradients(student_ffn, reference_ffn, make_input(2, 3, D_MODEL, seed=64),
                          make_input(2, 3, D_MODEL, seed=65))


def test_feed_forward_follows_the_input_device(student_ffn, make_input, device):
    expect_tensor("FeedForward output", student_ffn(make_input(1, 2, D_MODEL, seed=66)), device=device)
