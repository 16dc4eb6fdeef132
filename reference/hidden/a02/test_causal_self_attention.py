import pytest
import torch

from grader.suite import (
    CheckFailed,
    buffer_of,
    DropoutHints,
    StudentError,
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
    seed_reference,
    weights_behind,
)
from reference.hidden.a02 import variants
from reference.hidden.a02.conftest import CONTEXT, D_IN, D_OUT
from reference.masks import CausalSelfAttention

pytestmark = pytest.mark.part("CausalSelfAttention")

# Three projections, a softmax and a matmul in float32: a correct result differs by ~1e-6;
# the mistakes differ by more than 1e-2 (or by nan rows where a mask blocks everything).
ATOL, RTOL = 1e-5, 1e-4
# Attention weights recovered from an output (a least-squares solve against 6 value vectors
# of width 8): float32 rounding of the output becomes up to ~1e-4 in the weights, in [0, 2].
WEIGHTS_ATOL, WEIGHTS_RTOL = 1e-3, 1e-3


def _params(module):
    return {name: p.detach() for name, p in module.named_parameters()}


def expect_csa(what, got, reference, x):
    expect_close(what, got, reference(x), atol=ATOL, rtol=RTOL,
                 mistakes=variants.causal_self_attention_mistakes(_params(reference), x))


def test_csa_has_the_contract_parameters(student, make_input, device):
    for bias in (False, True):
        seed_reference(2)
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
        module = in_eval_mode(student.new_like(reference, "CausalSelfAttention", D_IN, D_OUT, CONTEXT, qkv_bias=bias))
        expect_computes_with(f"CausalSelfAttention(qkv_bias={bias})(x)", module, reference, lambda: module(x))


def test_csa_mask_is_a_registered_buffer(student, reference_csa, make_input):
    got = student.new("CausalSelfAttention", D_IN, D_OUT, CONTEXT).inspect()
    if "mask" not in got["buffers"]:
        raise CheckFailed(f"CausalSelfAttention buffers: got {sorted(got['buffers'])}, expected a buffer named "
                          "'mask'", variants.MASK_NOT_A_BUFFER)
    # Which buffers a module has is the student process's word; what it computes is checked:
    # loaded with its mask transposed (the future instead of the past), the module's output
    # must change. Whether the output is right is the value tests' to grade.
    module = in_eval_mode(student.new_like(reference_csa, "CausalSelfAttention", D_IN, D_OUT, CONTEXT))
    mask, load = buffer_of(module, "mask")
    if not (isinstance(mask, torch.Tensor) and mask.dim() >= 2 and tuple(mask.shape[-2:]) == (CONTEXT, CONTEXT)):
        raise CheckFailed(f"CausalSelfAttention's buffer mask: expected the ({CONTEXT}, {CONTEXT}) causal mask",
                          variants.MASK_NOT_A_BUFFER)
    x = make_input(2, CONTEXT, D_IN, seed=102)
    what = "CausalSelfAttention(x) loaded with its mask transposed"
    before = expect_tensor("CausalSelfAttention(x)", module(x), shape=(2, CONTEXT, D_OUT))
    load(mask.transpose(-2, -1).contiguous())
    if torch.equal(before, expect_tensor(what, module(x), shape=(2, CONTEXT, D_OUT))):
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
    seed_reference(1)
    reference = CausalSelfAttention(D_IN, D_OUT, CONTEXT, qkv_bias=True).to(device)
    module = in_eval_mode(student.new_like(reference, "CausalSelfAttention", D_IN, D_OUT, CONTEXT, qkv_bias=True))
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
            and not torch.allclose(second.cpu(), first.cpu(), rtol=0, atol=0, equal_nan=True)  # NaN: a mask's
        return first if differs else None

    mistakes = {variants.CSA_DROPOUT_IN_EVAL: random_again,
                **variants.causal_self_attention_mistakes(_params(reference_csa), x)}
    expect_close("CausalSelfAttention(dropout=0.5) in eval mode", first, reference_csa(x), atol=ATOL, rtol=RTOL,
                 mistakes=mistakes)


@pytest.mark.part("CausalSelfAttention", points=2)
def test_csa_dropout_zeroes_attention_weights_in_training_mode(student, reference_csa, make_input, seed_student):
    # Judged against the same module in eval mode, through the attention weights behind its
    # output (grader.suite.dropout): any correct way of dropping passes, and a mistake in
    # the weights themselves is in both, graded by the value tests.
    x = make_input(8, CONTEXT, D_IN, seed=98)
    outputs, again = {}, {}
    for p in (0.0, 0.5):
        module = student.new_like(reference_csa, "CausalSelfAttention", D_IN, D_OUT, CONTEXT, dropout=p)
        seed_student(99)
        what = f"CausalSelfAttention(dropout={p})(x: (8, {CONTEXT}, {D_IN}))"
        train = expect_tensor(f"{what} in training mode", module(x), shape=(8, CONTEXT, D_OUT), floating=True)
        again[p] = module(x)  # the next call drops other units (expect_new_draws)
        module.method("eval")
        outputs[p] = train, expect_tensor(f"{what} in eval mode", module(x), shape=(8, CONTEXT, D_OUT), floating=True)
    expect_no_dropout_at_zero("CausalSelfAttention(dropout=0.0)", *outputs[0.0], atol=ATOL, rtol=RTOL)
    # Kept: the same weights with dropout=0.0, in eval mode; this module's own eval mode is another test's.
    train, kept = outputs[0.5][0], outputs[0.0][1]
    what = "CausalSelfAttention(dropout=0.5) in training mode"
    values = variants.value_vectors(_params(reference_csa), x)
    weights = weights_behind(kept, values, atol=ATOL, rtol=RTOL)
    if weights is None:  # no weighted sum of W_value(x) (the value tests' to grade): only a change shows
        if is_close(train, kept, atol=ATOL, rtol=RTOL):
            raise CheckFailed(f"{what}: the output is the one without dropout", variants.CSA_NO_DROPOUT)
    else:
        dropped = weights_behind(train, values, atol=ATOL, rtol=RTOL)
        expect_dropout(f"{what}: the attention weights behind its output", dropped, weights, 0.5,
                       atol=WEIGHTS_ATOL, rtol=WEIGHTS_RTOL, scales=_own_dropout_scale(student, x.device),
                       named=DropoutHints(missing=variants.CSA_NO_DROPOUT, misplaced=variants.CSA_DROPOUT_MISPLACED),
                       elsewhere={variants.CSA_DROPOUT_ON_OUTPUT: (train, kept)})
    expect_new_draws(what, train, again[0.5], kept, atol=ATOL, rtol=RTOL)


def _own_dropout_scale(student, device) -> tuple[float, ...]:
    """How the student's own dropout (the contract lets CausalSelfAttention call it) scales
    what it keeps at p=0.5, when that is not 2: its mistake costs points in dropout only."""
    try:
        got = student.call("dropout", torch.ones(64, device=device), 0.5)
    except StudentError:
        return ()
    if not (isinstance(got, torch.Tensor) and got.shape == (64,) and got.is_floating_point()):
        return ()
    kept = got.detach().double().cpu()[got.detach().cpu() != 0]
    if kept.numel() == 0 or not bool(torch.isfinite(kept).all()) or not bool((kept == kept[0]).all()):
        return ()
    return (float(kept[0]),)


def test_csa_follows_the_input_device(student, make_input, device):
    x = make_input(1, 3, D_IN, seed=100)

    def output_on(where):
        module = student.new("CausalSelfAttention", D_IN, D_OUT, CONTEXT)
        module.method("to", where)
        return module(x.to(where))

    expect_follows_device("CausalSelfAttention(x)", output_on, device, shape=(1, 3, D_OUT))
