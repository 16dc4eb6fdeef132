import pytest
import torch

from grader.suite import (
    CheckFailed,
    expect_causal,
    expect_close,
    expect_computes_with,
    expect_contract_parameters,
    expect_raises,
    expect_same_gradients,
    expect_tensor,
    is_close,
    materialized,
)
from reference.hidden.a02 import variants
from reference.hidden.a02.conftest import CONTEXT, D_IN, D_OUT
from reference.masks import CausalSelfAttention

pytestmark = pytest.mark.part("CausalSelfAttention")

# Three projections, a softmax and a matmul in float32: a correct result differs by ~1e-6;
# the mistakes differ by more than 1e-2 (or by nan rows where a mask blocks everything).
ATOL, RTOL = 1e-5, 1e-4


def _params(module):
    return {name: p.detach() for name, p in module.named_parameters()}


def expect_csa(what, got, reference, x):
    expect_close(what, got, reference(x), atol=ATOL, rtol=RTOL,
                 mistakes=variants.causal_self_attention_mistakes(_params(reference), x))


def test_csa_has_the_contract_parameters(student, make_input, device):
    for bias in (False, True):
        torch.manual_seed(2)
        reference = CausalSelfAttention(D_IN, D_OUT, CONTEXT, qkv_bias=bias).to(device)
        x = make_input(2, 4, D_IN, seed=101)
        fresh = student.new("CausalSelfAttention", D_IN, D_OUT, CONTEXT, qkv_bias=bias)
        fresh.method("to", device)
        expect_contract_parameters(f"CausalSelfAttention(qkv_bias={bias})", materialized(fresh, lambda: fresh(x)),
                          reference,
                          names_hint="use W_query, W_key, W_value = nn.Linear(d_in, d_out, bias=qkv_bias)",
                          shape_hint="a parameter has the wrong shape: nn.Linear(d_in, d_out)",
                          unexpected_hints={"mask": variants.MASK_NOT_A_BUFFER})
        # The names are the student process's word: the module must compute with them.
        module = student.new_like(reference, "CausalSelfAttention", D_IN, D_OUT, CONTEXT, qkv_bias=bias)
        expect_computes_with(f"CausalSelfAttention(qkv_bias={bias})(x)", module, reference, lambda: module(x))


def test_csa_mask_is_a_registered_buffer(student, reference_csa, make_input):
    got = student.new("CausalSelfAttention", D_IN, D_OUT, CONTEXT).inspect()
    if "mask" not in got["buffers"]:
        raise CheckFailed(f"CausalSelfAttention buffers: got {sorted(got['buffers'])}, expected a buffer named "
                          "'mask'", variants.MASK_NOT_A_BUFFER)
    # Which buffers a module has is the student process's word; what it computes is checked:
    # loaded with its mask transposed (the future instead of the past), the module's output
    # must change. Whether the output is right is the value tests' to grade.
    module = student.new_like(reference_csa, "CausalSelfAttention", D_IN, D_OUT, CONTEXT)
    state = module.method("state_dict")
    mask = state.get("mask") if isinstance(state, dict) else None
    if not (isinstance(mask, torch.Tensor) and mask.dim() >= 2 and tuple(mask.shape[-2:]) == (CONTEXT, CONTEXT)):
        raise CheckFailed(f"CausalSelfAttention.state_dict()['mask']: expected the ({CONTEXT}, {CONTEXT}) causal mask",
                          variants.MASK_NOT_A_BUFFER)
    x = make_input(2, CONTEXT, D_IN, seed=102)
    before = module(x)
    module.method("load_state_dict", {**state, "mask": mask.transpose(-2, -1).contiguous()})
    after = module(x)
    if isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor) and before.shape == after.shape \
            and torch.equal(before, after):
        unmasked = is_close(before, variants.causal_self_attention(_params(reference_csa), x, mask_mode="ignored"),
                            atol=ATOL, rtol=RTOL)
        raise CheckFailed("CausalSelfAttention loaded with its mask transposed: the output stays the same",
                          variants.NO_CAUSAL_MASK if unmasked else variants.MASK_BUFFER_UNUSED)


@pytest.mark.part("CausalSelfAttention", points=3)
def test_csa_values_at_the_context_length(student_csa, reference_csa, make_input):
    x = make_input(2, CONTEXT, D_IN, seed=90)
    got = student_csa(x)
    expect_tensor(f"CausalSelfAttention(x: (2, {CONTEXT}, {D_IN}))", got, shape=(2, CONTEXT, D_OUT))
    expect_csa("CausalSelfAttention(x)", got, reference_csa, x)


@pytest.mark.part("CausalSelfAttention", points=2)
def test_csa_values_shorter_than_the_context(student_csa, reference_csa, make_input):
    x = make_input(2, 4, D_IN, seed=91)
    expect_csa(f"CausalSelfAttention(context_length={CONTEXT})(x: (2, 4, {D_IN}))", student_csa(x), reference_csa, x)


@pytest.mark.part("CausalSelfAttention", points=2)
def test_csa_no_position_sees_a_later_one(student_csa, reference_csa, make_input):
    x = make_input(2, CONTEXT, D_IN, seed=93)
    change = make_input(2, D_IN, seed=94)

    def output_with_change_at(later):
        changed = x.clone()
        if later is not None:
            changed[:, later] += change
        return student_csa(changed)

    expect_causal("CausalSelfAttention(x)", output_with_change_at, CONTEXT, atol=ATOL, rtol=RTOL,
                  hint=variants.FUTURE_VISIBLE, shape=(2, CONTEXT, D_OUT),
                  mistakes=variants.causal_self_attention_mistakes(_params(reference_csa), x))


def test_csa_batch_and_length_of_one(student_csa, reference_csa, make_input):
    x = make_input(1, 1, D_IN, seed=92)
    expect_csa(f"CausalSelfAttention(x: (1, 1, {D_IN}))", student_csa(x), reference_csa, x)


def test_csa_with_bias(student, make_input, device):
    torch.manual_seed(1)
    reference = CausalSelfAttention(D_IN, D_OUT, CONTEXT, qkv_bias=True).to(device)
    module = student.new_like(reference, "CausalSelfAttention", D_IN, D_OUT, CONTEXT, qkv_bias=True)
    x = make_input(2, 5, D_IN, seed=93)
    expect_csa("CausalSelfAttention(qkv_bias=True)(x)", module(x), reference, x)


def test_csa_gradients(student_csa, reference_csa, make_input):
    # Backward through the projections and a masked softmax in float32: rounding ~1e-6.
    params = _params(reference_csa)
    expect_same_gradients(student_csa, reference_csa, make_input(2, 5, D_IN, seed=94),
                          make_input(2, 5, D_OUT, seed=95, scale=1.0),
                          mistakes=lambda t: variants.causal_self_attention_mistakes({n: t[n] for n in params}, t["x"]))


def test_csa_rejects_input_longer_than_the_context(student_csa, make_input):
    x = make_input(1, CONTEXT + 1, D_IN, seed=96)
    expect_raises(ValueError, f"CausalSelfAttention(context_length={CONTEXT})(x: (1, {CONTEXT + 1}, {D_IN}))",
                  lambda: student_csa(x))


@pytest.mark.part("CausalSelfAttention", points=2)
def test_csa_dropout_is_off_in_eval_mode(student, reference_csa, make_input, device):
    module = student.new_like(reference_csa, "CausalSelfAttention", D_IN, D_OUT, CONTEXT, dropout=0.5)
    module.method("eval")
    x = make_input(2, 5, D_IN, seed=97)
    first = module(x)

    def random_again():  # a second call differs from the first: dropout is still on
        second = module(x)
        differs = isinstance(second, torch.Tensor) and second.shape == first.shape \
            and not torch.equal(second.cpu(), first.cpu())
        return first if differs else None

    mistakes = {variants.CSA_DROPOUT_IN_EVAL: random_again,
                **variants.causal_self_attention_mistakes(_params(reference_csa), x)}
    expect_close("CausalSelfAttention(dropout=0.5) in eval mode", first, reference_csa(x), atol=ATOL, rtol=RTOL,
                 mistakes=mistakes)


def test_csa_dropout_is_on_in_training_mode(student, reference_csa, make_input, device, seed_student):
    module = student.new_like(reference_csa, "CausalSelfAttention", D_IN, D_OUT, CONTEXT, dropout=0.5)
    x = make_input(2, 5, D_IN, seed=98)
    seed_student(99)
    got = module(x)
    expect_tensor("CausalSelfAttention(dropout=0.5) in training mode", got, shape=(2, 5, D_OUT), device=device)
    # With half the weights dropped, some output moves by far more than rounding.
    if torch.allclose(got.detach(), reference_csa(x).detach(), atol=1e-3, rtol=0):
        raise CheckFailed("CausalSelfAttention(dropout=0.5) in training mode gave the output without dropout",
                          variants.CSA_NO_DROPOUT)


def test_csa_follows_the_input_device(student_csa, make_input, device):
    x = make_input(1, 3, D_IN, seed=100)
    expect_tensor("CausalSelfAttention output", student_csa(x), device=device)
