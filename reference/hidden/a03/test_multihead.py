import pytest
import torch

from grader.suite import (
    expect_causal,
    expect_close,
    expect_computes_with,
    expect_contract_parameters,
    expect_raises,
    expect_tensor,
    gradient_mistakes,
    is_close,
    materialized,
)
from reference.hidden.a03 import variants
from reference.hidden.a03.conftest import D_MODEL, NUM_HEADS
from reference.multihead import MultiHeadAttention

pytestmark = pytest.mark.part("MultiHeadAttention")

# float32 through four projections and a softmax: errors of a correct implementation
# are ~1e-6 here; the mistakes differ by more than 1e-2.
ATOL, RTOL = 1e-5, 1e-4


def _params(module):
    return {name: p.detach() for name, p in module.named_parameters()}


def test_mha_has_the_contract_parameters(student, make_input, device):
    for bias in (True, False):
        torch.manual_seed(2)
        reference = MultiHeadAttention(D_MODEL, NUM_HEADS, bias=bias).to(device)
        x = make_input(2, 4, D_MODEL, seed=21)
        fresh = student.new("MultiHeadAttention", D_MODEL, NUM_HEADS, bias=bias)
        fresh.method("to", device)
        expect_contract_parameters(f"MultiHeadAttention(bias={bias})", materialized(fresh, lambda: fresh(x, x, x)),
                          reference, names_hint="use W_q, W_k, W_v, W_o = nn.Linear(d_model, d_model, bias=bias)")
        # The names are the student process's word: the module must compute with them.
        module = student.new_like(reference, "MultiHeadAttention", D_MODEL, NUM_HEADS, bias=bias)
        expect_computes_with(f"MultiHeadAttention(bias={bias})(x, x, x)", module, reference, lambda: module(x, x, x))


@pytest.mark.part("MultiHeadAttention", points=3)
def test_mha_self_attention_values(student_mha, reference_mha, make_input):
    x = make_input(2, 6, D_MODEL, seed=10)
    want = reference_mha(x, x, x)
    expect_close("MultiHeadAttention(x, x, x)", student_mha(x, x, x), want, atol=ATOL, rtol=RTOL,
                 mistakes=variants.mistakes(_params(reference_mha), x, x, x, NUM_HEADS))


@pytest.mark.part("MultiHeadAttention", points=2)
def test_mha_cross_attention_with_unequal_lengths(student_mha, reference_mha, make_input):
    query, memory = make_input(2, 3, D_MODEL, seed=11), make_input(2, 7, D_MODEL, seed=12)
    want = reference_mha(query, memory, memory)
    got = student_mha(query, memory, memory)
    expect_tensor("MultiHeadAttention(query: T_q=3, key/value: T_k=7)", got, shape=want.shape)
    expect_close("MultiHeadAttention(query, memory, memory)", got, want, atol=ATOL, rtol=RTOL,
                 mistakes=variants.mistakes(_params(reference_mha), query, memory, memory, NUM_HEADS))


@pytest.mark.part("MultiHeadAttention", points=2)
def test_mha_causal_mask(student_mha, reference_mha, make_input, device):
    x = make_input(2, 5, D_MODEL, seed=13)
    mask = torch.tril(torch.ones(5, 5, dtype=torch.bool, device=device)).view(1, 1, 5, 5)
    want = reference_mha(x, x, x, mask)
    got = student_mha(x, x, x, mask=mask)
    mistakes = variants.mistakes(_params(reference_mha), x, x, x, NUM_HEADS, mask)
    what = "MultiHeadAttention(x, x, x, mask=causal (1, 1, 5, 5))"
    if not is_close(got, want, atol=ATOL, rtol=RTOL):
        # Wrong values: when later positions leak into earlier ones, name them.
        def output_with_change_at(later):
            changed = x.clone()
            if later is not None:
                changed[:, later] += 1.0
            return student_mha(changed, changed, changed, mask=mask)

        expect_causal(what, output_with_change_at, 5, atol=ATOL, rtol=RTOL, hint=variants.MASK_NOT_AS_GIVEN,
                      mistakes=mistakes, shape=want.shape)
    expect_close(what, got, want, atol=ATOL, rtol=RTOL, mistakes=mistakes)


def test_mha_padding_mask(student_mha, reference_mha, make_input, device):
    query, memory = make_input(2, 4, D_MODEL, seed=14), make_input(2, 6, D_MODEL, seed=15)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool, device=device).view(2, 1, 1, 6)
    want = reference_mha(query, memory, memory, mask)
    expect_close("MultiHeadAttention(query, memory, memory, mask=padding (2, 1, 1, 6))",
                 student_mha(query, memory, memory, mask=mask), want, atol=ATOL, rtol=RTOL,
                 mistakes=variants.mistakes(_params(reference_mha), query, memory, memory, NUM_HEADS, mask))


@pytest.mark.part("MultiHeadAttention", points=2)
def test_mha_gradients(student_mha, reference_mha, make_input):
    query, memory = make_input(2, 3, D_MODEL, seed=16), make_input(2, 4, D_MODEL, seed=17)
    grad_output = make_input(2, 3, D_MODEL, seed=18, scale=1.0)
    query.requires_grad_(True)
    reference_mha(query, memory, memory).backward(grad_output)
    got = student_mha.backward(query, memory, memory, grad_output=grad_output)
    params = _params(reference_mha)
    named = gradient_mistakes(lambda t: variants.mistakes({n: t[n] for n in params}, t["query"], memory, memory, NUM_HEADS),
                              {"query": query, **params}, grad_output)
    expect_close("gradient of the loss w.r.t. the query", got.input_grads[0], query.grad, atol=1e-4, rtol=1e-3,
                 mistakes=named["query"])
    for name, param in reference_mha.named_parameters():
        expect_close(f"gradient of {name}", got.param_grads.get(name), param.grad, atol=1e-4, rtol=1e-3,
                     mistakes=named[name])


def test_mha_dropout_is_off_in_eval_mode(student, reference_mha, make_input, device):
    module = student.new_like(reference_mha, "MultiHeadAttention", D_MODEL, NUM_HEADS, dropout=0.5)
    module.method("eval")
    x = make_input(2, 5, D_MODEL, seed=19)
    expect_close("MultiHeadAttention(dropout=0.5) in eval mode", module(x, x, x), reference_mha(x, x, x),
                 atol=ATOL, rtol=RTOL, mistakes=variants.mistakes(_params(reference_mha), x, x, x, NUM_HEADS))


def test_mha_follows_the_input_device(student_mha, make_input, device):
    x = make_input(1, 2, D_MODEL, seed=20)
    expect_tensor("MultiHeadAttention output", student_mha(x, x, x), device=device)


def test_mha_rejects_indivisible_model_dimension(student):
    expect_raises(ValueError, "MultiHeadAttention(d_model=10, num_heads=3)",
                  lambda: student.new("MultiHeadAttention", 10, 3))
