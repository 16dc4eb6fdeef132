import pytest
import torch.nn.functional as F

from grader.suite import (
    StudentError,
    expect_close,
    expect_computes_with,
    expect_contract_parameters,
    expect_follows_device,
    expect_tensor,
    gradient_mistakes,
    seed_reference,
)
from reference.attention import SelfAttention
from reference.hidden.a01 import variants
from reference.hidden.a01.conftest import D_IN, D_OUT

pytestmark = pytest.mark.part("SelfAttention")

# Three projections, a softmax and a matmul in float32: a correct result differs by ~1e-6;
# the mistakes differ by more than 1e-2.
ATOL, RTOL = 1e-5, 1e-4


def _params(module):
    return {name: p.detach() for name, p in module.named_parameters()}


def mistakes(student, module, x) -> dict:
    """The named variants, with the student's own scaled_dot_product_attention on the
    reference projections before the projection mix-ups: SelfAttention may call it, so a
    bug there shows here too (and is named in that part)."""
    params = _params(module)

    def own_sdpa():
        q, k, v = (F.linear(x, params[f"{name}.weight"], params.get(f"{name}.bias"))
                   for name in ("W_query", "W_key", "W_value"))
        try:
            got = student.call("scaled_dot_product_attention", q, k, v)
        except StudentError:
            return None  # it does not even run here: it explains nothing
        return got[0] if isinstance(got, (tuple, list)) and len(got) == 2 else None

    table = variants.self_attention_mistakes(params, x)
    projection_mixups = {hint: table.pop(hint) for hint in (variants.QUERY_KEY_SWAPPED, variants.VALUE_PROJECTION)}
    return {**table, variants.OWN_SDPA_WRONG: own_sdpa, **projection_mixups}


def test_self_attention_has_the_contract_parameters(student, make_input, device):
    for bias in (False, True):
        seed_reference(2)
        reference = SelfAttention(D_IN, D_OUT, qkv_bias=bias).to(device)
        expect_contract_parameters(f"SelfAttention(qkv_bias={bias})", student.new("SelfAttention", D_IN, D_OUT, qkv_bias=bias),
                          reference, names_hint="use W_query, W_key, W_value = nn.Linear(d_in, d_out, bias=qkv_bias)",
                          shape_hint="a parameter has the wrong shape: nn.Linear(d_in, d_out)")
        # The names are the student process's word: the module must compute with them.
        x = make_input(2, 4, D_IN, seed=66)
        module = student.new_like(reference, "SelfAttention", D_IN, D_OUT, qkv_bias=bias)
        expect_computes_with(f"SelfAttention(qkv_bias={bias})(x)", module, reference, lambda: module(x))


@pytest.mark.part("SelfAttention", points=3)
def test_self_attention_values(student, student_self_attention, reference_self_attention, make_input):
    x = make_input(2, 5, D_IN, seed=60)
    got = student_self_attention(x)
    expect_tensor("SelfAttention(x: (2, 5, 6))", got, shape=(2, 5, D_OUT))
    expect_close("SelfAttention(x)", got, reference_self_attention(x), atol=ATOL, rtol=RTOL,
                 mistakes=mistakes(student, reference_self_attention, x))


def test_self_attention_with_bias(student, make_input, device):
    seed_reference(1)
    reference = SelfAttention(D_IN, D_OUT, qkv_bias=True).to(device)
    module = student.new_like(reference, "SelfAttention", D_IN, D_OUT, qkv_bias=True)
    x = make_input(2, 4, D_IN, seed=61)
    expect_close("SelfAttention(qkv_bias=True)(x)", module(x), reference(x), atol=ATOL, rtol=RTOL,
                 mistakes=mistakes(student, reference, x))


def test_self_attention_batch_and_length_of_one(student, student_self_attention, reference_self_attention, make_input):
    x = make_input(1, 1, D_IN, seed=62)
    expect_close("SelfAttention(x: (1, 1, 6))", student_self_attention(x), reference_self_attention(x),
                 atol=ATOL, rtol=RTOL)


@pytest.mark.part("SelfAttention", points=2)
def test_self_attention_gradients(student_self_attention, reference_self_attention, make_input):
    x = make_input(2, 3, D_IN, seed=63).requires_grad_(True)
    grad_output = make_input(2, 3, D_OUT, seed=64, scale=1.0)
    reference_self_attention(x).backward(grad_output)
    got = student_self_attention.backward(x, grad_output=grad_output)
    params = _params(reference_self_attention)
    named = gradient_mistakes(lambda t: variants.self_attention_mistakes({n: t[n] for n in params}, t["x"]),
                              {"x": x, **params}, grad_output)
    expect_close("gradient of the loss w.r.t. x", got.input_grads[0], x.grad, atol=1e-4, rtol=1e-3,
                 mistakes=named["x"])
    for name, param in reference_self_attention.named_parameters():
        expect_close(f"gradient of {name}", got.param_grads.get(name), param.grad, atol=1e-4, rtol=1e-3,
                     mistakes=named[name])


def test_self_attention_follows_the_input_device(student, make_input, device):
    x = make_input(1, 2, D_IN, seed=65)

    def output_on(where):
        module = student.new("SelfAttention", D_IN, D_OUT)
        module.method("to", where)
        return module(x.to(where))

    expect_follows_device("SelfAttention(x)", output_on, device, shape=(1, 2, D_OUT))
