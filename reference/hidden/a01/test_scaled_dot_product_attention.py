import math

import pytest
import torch

from grader.suite import CheckFailed, StudentError, expect_close, expect_follows_device, expect_tensor, gradient_mistakes
from reference.attention import scaled_dot_product_attention
from reference.hidden.a01 import variants
from reference.hidden.a01.conftest import D_K, D_V

pytestmark = pytest.mark.part("scaled_dot_product_attention")

# A matmul, a softmax and a matmul in float32: a correct result differs by ~1e-6; every
# mistake below changes weights by more than 1e-2.
ATOL, RTOL = 1e-5, 1e-4
T_Q, T_K = 5, 7


def expect_pair(what, got, q, k, v, *, shapes: bool = False):
    """``got`` is ``(output, weights)`` (with the reference's shapes if ``shapes``)."""
    out_shape, weight_shape = (*q.shape[:-1], v.size(-1)), (*q.shape[:-1], k.size(-2))
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        raise CheckFailed(f"{what}: expected a tuple (output, weights), got {_kind(got)}", variants.NOT_A_PAIR)
    output, weights = got
    if all(isinstance(t, torch.Tensor) for t in got) and out_shape != weight_shape \
            and (tuple(output.shape), tuple(weights.shape)) == (weight_shape, out_shape):
        raise CheckFailed(f"{what}: got (weights, output), expected (output, weights)", variants.RETURN_ORDER)
    if shapes:
        expect_tensor(f"{what}[0] (output)", output, shape=out_shape)
        expect_tensor(f"{what}[1] (weights)", weights, shape=weight_shape)
    return output, weights


def _kind(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a single tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    if value is None:
        return "None (did you forget to return?)"
    return getattr(value, "type_name", type(value).__name__)


def mistakes(student, q, k, v, mask=None, *, index: int) -> dict:
    """The named variants, then (last) the student's own attention_scores and softmax put
    together correctly: scaled_dot_product_attention may call them, so a bug there shows here.
    Each piece's result is used only in the shape of the scores, (..., T_q, T_k): nothing the
    student's process returns is broadcast against the grader's tensors."""
    scores_shape = (*q.shape[:-1], k.size(-2))

    def shaped(value):
        return value if isinstance(value, torch.Tensor) and value.shape == scores_shape else None

    def own_pieces():
        try:
            scores = shaped(student.call("attention_scores", q, k))
            if scores is None:
                return None  # not the scores: they explain nothing
            scores = scores / math.sqrt(q.size(-1))
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = shaped(student.call("softmax", scores, dim=-1))
            if weights is None:
                return None
            return weights if index == 1 else weights @ v
        except (StudentError, RuntimeError, TypeError):
            return None  # the pieces do not even run here: they explain nothing

    return {**variants.attention_mistakes(q, k, v, mask, index=index), variants.OWN_PIECES_WRONG: own_pieces}


def expect_attention(student, what, got, q, k, v, mask=None):
    """Weights first (they show a scaling or masking mistake most plainly), then the output."""
    output, weights = expect_pair(what, got, q, k, v)
    want_output, want_weights = scaled_dot_product_attention(q, k, v, mask)
    expect_close(f"{what} weights", weights, want_weights, atol=ATOL, rtol=RTOL,
                 mistakes=mistakes(student, q, k, v, mask, index=1))
    expect_close(f"{what} output", output, want_output, atol=ATOL, rtol=RTOL,
                 mistakes=mistakes(student, q, k, v, mask, index=0))


def test_sdpa_returns_output_and_weights(student, make_input):
    q, k, v = make_input(2, T_Q, D_K, seed=30), make_input(2, T_K, D_K, seed=31), make_input(2, T_K, D_V, seed=32)
    expect_pair("scaled_dot_product_attention(q: (2, 5, 8), k: (2, 7, 8), v: (2, 7, 6))",
                student.call("scaled_dot_product_attention", q, k, v), q, k, v, shapes=True)


@pytest.mark.part("scaled_dot_product_attention", points=2)
def test_sdpa_weights(student, make_input):
    q, k, v = make_input(2, T_Q, D_K, seed=33), make_input(2, T_K, D_K, seed=34), make_input(2, T_K, D_V, seed=35)
    _, weights = expect_pair("scaled_dot_product_attention(q, k, v)",
                             student.call("scaled_dot_product_attention", q, k, v), q, k, v)
    expect_close("scaled_dot_product_attention(q, k, v) weights", weights, scaled_dot_product_attention(q, k, v)[1],
                 atol=ATOL, rtol=RTOL, mistakes=mistakes(student, q, k, v, index=1))


@pytest.mark.part("scaled_dot_product_attention", points=2)
def test_sdpa_output(student, make_input):
    q, k, v = make_input(2, T_Q, D_K, seed=36), make_input(2, T_K, D_K, seed=37), make_input(2, T_K, D_V, seed=38)
    output, _ = expect_pair("scaled_dot_product_attention(q, k, v)",
                            student.call("scaled_dot_product_attention", q, k, v), q, k, v)
    expect_close("scaled_dot_product_attention(q, k, v) output", output, scaled_dot_product_attention(q, k, v)[0],
                 atol=ATOL, rtol=RTOL, mistakes=mistakes(student, q, k, v, index=0))


def test_sdpa_with_head_dimensions(student, make_input):
    x = make_input(2, 3, 4, D_K, seed=39)
    expect_attention(student, "scaled_dot_product_attention(x, x, x: (2, 3, 4, 8))",
                     student.call("scaled_dot_product_attention", x, x, x), x, x, x)


def test_sdpa_batch_and_length_of_one(student, make_input):
    q, k, v = make_input(1, 1, D_K, seed=40), make_input(1, 1, D_K, seed=41), make_input(1, 1, D_V, seed=42)
    expect_attention(student, "scaled_dot_product_attention(q, k, v: length 1)",
                     student.call("scaled_dot_product_attention", q, k, v), q, k, v)


@pytest.mark.part("scaled_dot_product_attention", points=2)
def test_sdpa_causal_mask(student, make_input, device):
    q, k, v = make_input(2, T_Q, D_K, seed=43), make_input(2, T_Q, D_K, seed=44), make_input(2, T_Q, D_V, seed=45)
    mask = torch.tril(torch.ones(T_Q, T_Q, dtype=torch.bool, device=device))
    expect_attention(student, "scaled_dot_product_attention(q, k, v, mask=causal (5, 5))",
                     student.call("scaled_dot_product_attention", q, k, v, mask=mask), q, k, v, mask)


@pytest.mark.part("scaled_dot_product_attention", points=2)
def test_sdpa_padding_mask(student, make_input, device):
    # Every row keeps some keys and drops some, under the mask and under its inverse, so no
    # variant has a fully masked row.
    q, k, v = make_input(2, T_Q, D_K, seed=46), make_input(2, T_K, D_K, seed=47), make_input(2, T_K, D_V, seed=48)
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 0]], dtype=torch.bool, device=device).view(2, 1, T_K)
    expect_attention(student, "scaled_dot_product_attention(q, k, v, mask=padding (2, 1, 7))",
                     student.call("scaled_dot_product_attention", q, k, v, mask), q, k, v, mask)


def test_sdpa_gradients(student, make_input):
    q, k, v = make_input(2, T_Q, D_K, seed=49), make_input(2, T_K, D_K, seed=50), make_input(2, T_K, D_V, seed=51)
    grad_output = make_input(2, T_Q, D_V, seed=52, scale=1.0)
    for tensor in (q, k, v):
        tensor.requires_grad_(True)
    output, weights = scaled_dot_product_attention(q, k, v)
    output.backward(grad_output)
    got = student.backward("scaled_dot_product_attention", q, k, v, grad_output=(grad_output, torch.zeros_like(weights)))
    # The same return convention as every other test: gradients of a lone output do not count.
    expect_pair("scaled_dot_product_attention(q, k, v)", got.output, q, k, v, shapes=True)
    named = gradient_mistakes(lambda t: variants.attention_mistakes(t["q"], t["k"], t["v"], None, index=0),
                              {"q": q, "k": k, "v": v}, grad_output)
    # Backward through two matmuls and a softmax in float32: rounding ~1e-6.
    for name, tensor, grad in zip("qkv", (q, k, v), got.input_grads):
        expect_close(f"gradient of the output w.r.t. {name}", grad, tensor.grad, atol=1e-4, rtol=1e-3,
                     mistakes=named[name])


def test_sdpa_follows_the_input_device(student, make_input, device):
    q = make_input(1, 2, D_K, seed=53)
    expect_follows_device("scaled_dot_product_attention(q, q, q)",
                          lambda where: student.call("scaled_dot_product_attention", *(q.to(where),) * 3), device,
                          shape=((1, 2, D_K), (1, 2, 2)))
