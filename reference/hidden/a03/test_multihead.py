import pytest
import torch

from grader.suite import (
    CheckFailed,
    DropoutHints,
    expect_causal,
    expect_close,
    expect_computes_with,
    expect_contract_parameters,
    expect_dropout,
    expect_follows_device,
    expect_new_draws,
    expect_no_dropout_at_zero,
    expect_raises,
    expect_tensor,
    gradient_mistakes,
    in_eval_mode,
    is_close,
    materialized,
    seed_reference,
    weights_behind,
)
from reference.hidden.a03 import variants
from reference.hidden.a03.conftest import D_MODEL, NUM_HEADS
from reference.multihead import MultiHeadAttention

pytestmark = pytest.mark.part("MultiHeadAttention")

# float32 through four projections and a softmax: errors of a correct implementation
# are ~1e-6 here; the mistakes differ by more than 1e-2.
ATOL, RTOL = 1e-5, 1e-4
# Attention weights recovered from an output (W_o undone, then a least-squares solve against
# 6 value vectors of width 8 per head): float32 rounding of outputs up to ~10 becomes up to
# ~1e-4 in the weights, which lie in [0, 2].
WEIGHTS_ATOL, WEIGHTS_RTOL = 1e-3, 1e-3


def _params(module):
    return {name: p.detach() for name, p in module.named_parameters()}


def test_mha_has_the_contract_parameters(student, make_input, device):
    for bias in (True, False):
        seed_reference(2)
        reference = MultiHeadAttention(D_MODEL, NUM_HEADS, bias=bias).to(device)
        x = make_input(2, 4, D_MODEL, seed=21)
        fresh = student.new("MultiHeadAttention", D_MODEL, NUM_HEADS, bias=bias)
        fresh.method("to", device)
        expect_contract_parameters(f"MultiHeadAttention(bias={bias})", materialized(fresh, lambda: fresh(x, x, x)),
                          reference, names_hint="use W_q, W_k, W_v, W_o = nn.Linear(d_model, d_model, bias=bias)")
        # The names are the student process's word: the module must compute with them.
        module = in_eval_mode(student.new_like(reference, "MultiHeadAttention", D_MODEL, NUM_HEADS, bias=bias))
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
    inputs = {"query": make_input(2, 3, D_MODEL, seed=16).requires_grad_(True),
              "key": make_input(2, 4, D_MODEL, seed=17).requires_grad_(True),
              "value": make_input(2, 4, D_MODEL, seed=15).requires_grad_(True)}
    grad_output = make_input(2, 3, D_MODEL, seed=18, scale=1.0)
    reference_mha(*inputs.values()).backward(grad_output)
    got = student_mha.backward(*inputs.values(), grad_output=grad_output)
    params = _params(reference_mha)
    named = gradient_mistakes(lambda t: variants.mistakes({n: t[n] for n in params}, t["query"], t["key"], t["value"],
                                                          NUM_HEADS), {**inputs, **params}, grad_output)
    for i, (name, tensor) in enumerate(inputs.items()):
        grad = got.input_grads[i] if i < len(got.input_grads) else None
        if grad is None or isinstance(grad, torch.Tensor) and grad.shape == tensor.shape and not bool(grad.any()):
            raise CheckFailed(f"MultiHeadAttention(query, key, value): no gradient reached the {name}",
                              variants.INPUT_DETACHED)
        expect_close(f"gradient of the loss w.r.t. the {name}", grad, tensor.grad, atol=1e-4, rtol=1e-3,
                     mistakes=named[name])
    for name, param in reference_mha.named_parameters():
        expect_close(f"gradient of {name}", got.param_grads.get(name), param.grad, atol=1e-4, rtol=1e-3,
                     mistakes=named[name])


def test_mha_dropout_is_off_in_eval_mode(student, reference_mha, make_input, device):
    module = student.new_like(reference_mha, "MultiHeadAttention", D_MODEL, NUM_HEADS, dropout=0.5)
    module.method("eval")
    x = make_input(2, 5, D_MODEL, seed=19)
    expect_close("MultiHeadAttention(dropout=0.5) in eval mode", module(x, x, x), reference_mha(x, x, x),
                 atol=ATOL, rtol=RTOL, mistakes=variants.mistakes(_params(reference_mha), x, x, x, NUM_HEADS))


@pytest.mark.part("MultiHeadAttention", points=2)
def test_mha_dropout_zeroes_attention_weights_in_training_mode(student, reference_mha, make_input, seed_student):
    # Judged against the same module in eval mode, through the attention weights behind its
    # output (grader.suite.dropout): any correct way of dropping passes, and a mistake in the
    # weights themselves is in both, graded by the value tests.
    x = make_input(4, 6, D_MODEL, seed=22)
    outputs, again = {}, {}
    for p in (0.0, 0.5):
        module = student.new_like(reference_mha, "MultiHeadAttention", D_MODEL, NUM_HEADS, dropout=p)
        what = f"MultiHeadAttention(dropout={p})(x, x, x)"
        seed_student(23)
        train = expect_tensor(f"{what} in training mode", module(x, x, x), shape=x.shape, floating=True)
        again[p] = module(x, x, x)  # the next call drops other units (expect_new_draws)
        module.method("eval")
        outputs[p] = train, expect_tensor(f"{what} in eval mode", module(x, x, x), shape=x.shape, floating=True)
    expect_no_dropout_at_zero("MultiHeadAttention(dropout=0.0)", *outputs[0.0], atol=ATOL, rtol=RTOL)
    # Kept: the same weights with dropout=0.0, in eval mode; this module's own eval mode is another test's.
    train, kept = outputs[0.5][0], outputs[0.0][1]
    what = "MultiHeadAttention(dropout=0.5) in training mode"
    params = _params(reference_mha)
    values = variants.head_values(params, x, NUM_HEADS)
    weights = weights_behind(variants.heads_behind(params, kept, NUM_HEADS), values, atol=ATOL, rtol=RTOL)
    if weights is None:  # not W_o of weighted sums of W_v(x) (the value tests' to grade): only a change shows
        if is_close(train, kept, atol=ATOL, rtol=RTOL):
            raise CheckFailed(f"{what}: the output is the one without dropout", variants.DROPOUT_MISSING)
    else:
        dropped = weights_behind(variants.heads_behind(params, train, NUM_HEADS), values, atol=ATOL, rtol=RTOL)
        expect_dropout(f"{what}: the attention weights behind its output", dropped, weights, 0.5,
                       atol=WEIGHTS_ATOL, rtol=WEIGHTS_RTOL,
                       named=DropoutHints(missing=variants.DROPOUT_MISSING, misplaced=variants.DROPOUT_MISPLACED),
                       elsewhere={variants.DROPOUT_ON_OUTPUT: (train, kept)})
    expect_new_draws(what, train, again[0.5], kept, atol=ATOL, rtol=RTOL)


def test_mha_follows_the_input_device(student, make_input, device):
    x = make_input(1, 2, D_MODEL, seed=20)
    causal = torch.ones(1, 1, 2, 2, dtype=torch.bool).tril()  # a mask too: code may move it elsewhere

    def output_on(where):
        module = student.new("MultiHeadAttention", D_MODEL, NUM_HEADS)
        module.method("to", where)
        return module(*(x.to(where),) * 3, causal.to(where))

    expect_follows_device("MultiHeadAttention(x, x, x, mask)", output_on, device, shape=(1, 2, D_MODEL))


def test_mha_rejects_indivisible_model_dimension(student):
    expect_raises(ValueError, "MultiHeadAttention(d_model=10, num_heads=3)",
                  lambda: student.new("MultiHeadAttention", 10, 3))
