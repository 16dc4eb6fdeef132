import pytest

from grader.suite import (
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
    module = in_eval_mode(student.new_like(reference_mlp, "MLP", D_MODEL))
    expect_computes_with("MLP(x)", module, reference_mlp, lambda: module(x))


def test_mlp_shape(student_mlp, make_input):
    expect_tensor(f"MLP(x: (2, 5, {D_MODEL}))", student_mlp(make_input(2, 5, D_MODEL, seed=301)),
                  shape=(2, 5, D_MODEL))


@pytest.mark.part("MLP", points=3)
def test_mlp_values(student_mlp, reference_mlp, make_input):
    x = make_input(2, 5, D_MODEL, seed=302, scale=SCALE)
    expect_close("MLP(x)", student_mlp(x), reference_mlp(x), atol=ATOL, rtol=RTOL,
                 mistakes=variants.mlp_mistakes(x, params(reference_mlp)))


def test_mlp_dropout_comes_last(student, reference_mlp, make_input, seed_student):
    # Each output zero or twice what the same MLP gives in eval mode (grader.suite.dropout).
    x = make_input(4, 6, D_MODEL, seed=303)
    outputs, again = {}, {}
    for p in (0.0, 0.5):
        module = in_eval_mode(student.new_like(reference_mlp, "MLP", D_MODEL, dropout=p))
        what = f"MLP(dropout={p})(x)"
        kept = expect_tensor(f"{what} in eval mode", module(x), shape=x.shape, floating=True)
        module.method("train")
        seed_student(304)
        outputs[p] = expect_tensor(f"{what} in training mode", module(x), shape=x.shape, floating=True), kept
        again[p] = module(x)  # the next call drops other units (expect_new_draws)
    expect_no_dropout_at_zero("MLP(dropout=0.0)", *outputs[0.0], atol=ATOL, rtol=RTOL)
    # Kept: the same weights with dropout=0.0, in eval mode; this module's own eval mode is another test's.
    expect_dropout("MLP(dropout=0.5) in training mode", outputs[0.5][0], outputs[0.0][1], 0.5, atol=ATOL, rtol=RTOL,
                   named=DropoutHints(missing=variants.MLP_DROPOUT_MISSING, misplaced=variants.MLP_DROPOUT_MISPLACED))
    expect_new_draws("MLP(dropout=0.5) in training mode", outputs[0.5][0], again[0.5], outputs[0.0][1], atol=ATOL,
                     rtol=RTOL)


def test_mlp_dropout_is_off_in_eval_mode(student, reference_mlp, make_input):
    module = student.new_like(reference_mlp, "MLP", D_MODEL, dropout=0.5)
    module.method("eval")
    x = make_input(2, 5, D_MODEL, seed=304, scale=SCALE)
    expect_close("MLP(dropout=0.5) in eval mode", module(x), reference_mlp(x), atol=ATOL, rtol=RTOL,
                 mistakes=variants.mlp_mistakes(x, params(reference_mlp)))


def test_mlp_gradients(student_mlp, reference_mlp, make_input):
    expect_same_gradients(student_mlp, reference_mlp, make_input(2, 3, D_MODEL, seed=305),
                          make_input(2, 3, D_MODEL, seed=306), mistakes=lambda t: variants.mlp_mistakes(t["x"], t))


def test_mlp_follows_the_input_device(student, make_input, device):
    x = make_input(1, 2, D_MODEL, seed=307)

    def output_on(where):
        module = student.new("MLP", D_MODEL)
        module.method("to", where)
        return module(x.to(where))

    expect_follows_device("MLP(x)", output_on, device, shape=(1, 2, D_MODEL))
