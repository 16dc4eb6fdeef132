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
from reference.hidden.a07 import variants
from reference.hidden.a07.conftest import D_MODEL, SHAPE_HINT, params

pytestmark = pytest.mark.part("MLP")

# Two float32 linear layers: a correct MLP is within ~1e-6. Inputs of scale 3 put the
# pre-activations where the tanh approximation of GELU is off by ~1e-3, well past the tolerance.
ATOL, RTOL = 1e-5, 1e-5
SCALE = 3.0
NAMES = "fc = nn.Linear(d_model, 4 * d_model), proj = nn.Linear(4 * d_model, d_model)"


def test_mlp_has_the_contract_parameters(student, reference_mlp, make_input):
    x = make_input(2, 3, D_MODEL, seed=300)
    module = student.new("MLP", D_MODEL)
    expect_contract_parameters(f"MLP({D_MODEL})", materialized(module, lambda: module(x)), reference_mlp,
                               names_hint=f"use the contract's submodules: {NAMES}", shape_hint=SHAPE_HINT)
    module = student.new_like(reference_mlp, "MLP", D_MODEL)
    expect_computes_with("MLP(x)", module, reference_mlp, lambda: module(x))


def test_mlp_shape(student_mlp, make_input):
    expect_tensor(f"MLP(x: (2, 5, {D_MODEL}))", student_mlp(make_input(2, 5, D_MODEL, seed=301)),
                  shape=(2, 5, D_MODEL))


@pytest.mark.part("MLP", points=3)
def test_mlp_values(student_mlp, reference_mlp, make_input):
    x = make_input(2, 5, D_MODEL, seed=302, scale=SCALE)
    expect_close("MLP(x)", student_mlp(x), reference_mlp(x), atol=ATOL, rtol=RTOL,
                 mistakes=variants.mlp_mistakes(x, params(reference_mlp)))


def test_mlp_dropout_comes_last(student, reference_mlp, make_input):
    # With p=1 in training mode dropout zeroes everything after it: where it sits shows
    # without randomness.
    module = student.new_like(reference_mlp, "MLP", D_MODEL, dropout=1.0)
    x = make_input(2, 4, D_MODEL, seed=303)
    expect_close("MLP(dropout=1.0) in training mode", module(x), torch.zeros_like(x), atol=ATOL, rtol=RTOL,
                 mistakes={variants.MLP_DROPOUT_MISPLACED: params(reference_mlp)["proj.bias"].expand_as(x)})


def test_mlp_dropout_is_off_in_eval_mode(student, reference_mlp, make_input):
    module = student.new_like(reference_mlp, "MLP", D_MODEL, dropout=0.5)
    module.method("eval")
    x = make_input(2, 5, D_MODEL, seed=304, scale=SCALE)
    expect_close("MLP(dropout=0.5) in eval mode", module(x), reference_mlp(x), atol=ATOL, rtol=RTOL,
                 mistakes=variants.mlp_mistakes(x, params(reference_mlp)))


def test_mlp_gradients(student_mlp, reference_mlp, make_input):
    expect_same_gradients(student_mlp, reference_mlp, make_input(2, 3, D_MODEL, seed=305),
                          make_input(2, 3, D_MODEL, seed=306), mistakes=lambda t: variants.mlp_mistakes(t["x"], t))


def test_mlp_follows_the_input_device(student_mlp, make_input, device):
    expect_tensor("MLP output", student_mlp(make_input(1, 2, D_MODEL, seed=307)), device=device)
