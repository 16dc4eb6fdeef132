"""The mistake variants of assignments 01 and 02: with default arguments each equals the
reference, and each mistake is told apart from the reference and from the others on
inputs like the hidden suites' (otherwise a hint could name the wrong mistake)."""

from __future__ import annotations

import itertools

import pytest
import torch

from reference.attention import SelfAttention, attention_scores, scaled_dot_product_attention, softmax
from reference.hidden.a01 import variants as v01
from reference.hidden.a02 import variants as v02
from reference.masks import CausalSelfAttention, causal_mask, dropout, padding_mask

# Defaults differ from the reference only by rounding: torch.softmax vs the reference's own.
TOL = 1e-6
# Mistakes must differ from the reference and from each other by far more than the suites'
# tolerances (atol 1e-5, rtol 1e-4).
APART = 1e-3


def randn(*shape: int, seed: int, scale: float = 2.0, dtype=torch.float32) -> torch.Tensor:
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def close(a: torch.Tensor, b: torch.Tensor, tol: float = TOL) -> bool:
    return torch.allclose(a.double(), b.double(), atol=tol, rtol=tol, equal_nan=True)


def params(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach() for name, p in module.named_parameters()}


def assert_all_apart(values: dict[str, torch.Tensor], want: torch.Tensor) -> None:
    values = {name: value() if callable(value) else value for name, value in values.items()}
    values = {name: value for name, value in values.items() if value is not None}
    for name, value in values.items():
        assert value.shape != want.shape or not close(value, want, APART), f"{name} equals the reference"
    for (a, x), (b, y) in itertools.combinations(values.items(), 2):
        assert x.shape != y.shape or not close(x, y, APART), f"{a} and {b} coincide"


# ---- 01 --------------------------------------------------------------------------------------


def test_attention_scores_default_is_the_reference():
    q, k = randn(2, 3, 5, 8, seed=1), randn(2, 3, 7, 8, seed=2)
    assert close(v01.attention_scores(q, k), attention_scores(q, k))
    assert_all_apart(v01.scores_mistakes(q, k), attention_scores(q, k))


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_default_is_the_reference(dim):
    x = randn(4, 5, 7, seed=3)
    assert close(v01.softmax(x, dim), softmax(x, dim=dim))


def test_softmax_default_is_the_reference_on_large_inputs_and_minus_inf():
    inf = float("inf")
    large = torch.tensor([[1e4, 1e4 - 1.0, 0.0, 5e3], [-1e4, -1e4 + 2.0, -1e4 + 1.0, -1e4 + 0.5]])
    with_inf = torch.tensor([[0.5, -inf, 2.0, -inf], [-inf, -inf, -inf, 3.0]])
    for x in (large, with_inf):
        assert close(v01.softmax(x), softmax(x))


def test_softmax_mistakes_are_apart_and_overflow_where_expected():
    x = randn(6, 6, seed=4)
    assert_all_apart({name: value for name, value in v01.softmax_mistakes(x, -1, None).items()
                      if name not in (v01.NO_MAX_SUBTRACTION, v01.GLOBAL_MAX)}, softmax(x))
    large = torch.tensor([[1e4, 1e4 - 1.0, 0.0], [-1e4, -1e4 + 2.0, -1e4 + 1.0]])
    table = v01.softmax_mistakes(large, -1, None)
    assert torch.isnan(table[v01.NO_MAX_SUBTRACTION]()[0]).any()
    assert torch.isnan(table[v01.GLOBAL_MAX]()[1]).all() and torch.isfinite(table[v01.GLOBAL_MAX]()[0]).all()


def test_softmax_wrong_dim_is_the_one_nearest_to_the_student():
    x = randn(4, 5, 7, seed=5)
    for wrong in (0, 2):
        assert close(v01.softmax_mistakes(x, 1, softmax(x, dim=wrong))[v01.SOFTMAX_WRONG_DIM](), softmax(x, dim=wrong))


@pytest.mark.parametrize("masked", [False, True])
def test_attention_default_is_the_reference(masked):
    q, k, v = randn(2, 5, 8, seed=6), randn(2, 7, 8, seed=7), randn(2, 7, 6, seed=8)
    padding = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 0]], dtype=torch.bool).view(2, 1, 7)
    mask = padding if masked else None
    want_output, want_weights = scaled_dot_product_attention(q, k, v, mask)
    output, weights = v01.attention(q, k, v, mask)
    assert close(output, want_output) and close(weights, want_weights)
    assert_all_apart(v01.attention_mistakes(q, k, v, mask, index=0), want_output)
    assert_all_apart(v01.attention_mistakes(q, k, v, mask, index=1), want_weights)


@pytest.mark.parametrize("bias", [False, True])
def test_self_attention_default_is_the_reference(bias):
    torch.manual_seed(0)
    module = SelfAttention(6, 8, qkv_bias=bias)
    x = randn(2, 5, 6, seed=9)
    with torch.no_grad():
        want = module(x)
    assert close(v01.self_attention(params(module), x), want)
    assert_all_apart(v01.self_attention_mistakes(params(module), x), want)


# ---- 02 --------------------------------------------------------------------------------------


@pytest.mark.parametrize("T", [1, 5])
def test_causal_mask_default_is_the_reference(T):
    assert torch.equal(v02.causal_mask(T), causal_mask(T))


def test_causal_mask_mistakes_are_apart():
    assert_all_apart(v02.causal_mask_mistakes(5), causal_mask(5))


@pytest.mark.parametrize("pad_idx", [0, 3])
def test_padding_mask_default_is_the_reference(pad_idx):
    tokens = torch.tensor([[0, 4, 3, 3], [2, 0, 1, 3]])
    assert torch.equal(v02.padding_mask(tokens, pad_idx), padding_mask(tokens, pad_idx))
    assert_all_apart(v02.padding_mask_mistakes(tokens, pad_idx), padding_mask(tokens, pad_idx))


@pytest.mark.parametrize("p", [0.0, 0.2, 0.5, 1.0])
@pytest.mark.parametrize("training", [True, False])
def test_dropout_default_is_the_reference_given_the_same_generator(p, training):
    x = randn(30, 40, seed=10)
    got = v02.dropout(x, p, training, torch.Generator().manual_seed(5))
    assert torch.equal(got, dropout(x, p, training, torch.Generator().manual_seed(5)))


def test_dropout_diagnosis_names_each_mistake_and_passes_the_reference():
    x = 0.5 + torch.rand(200, 250, generator=torch.Generator().manual_seed(11))
    for p in (0.2, 0.4):
        def run(mistake=None):
            return v02.dropout(x, p, generator=torch.Generator().manual_seed(12), mistake=mistake)

        assert v02.diagnose_dropout(x, run(), p) is None
        assert v02.diagnose_dropout(x, run("no_scaling"), p) == v02.DROPOUT_NO_SCALING
        assert v02.diagnose_dropout(x, run("scaled_by_keep"), p) == v02.DROPOUT_SCALED_BY_KEEP
        assert v02.diagnose_dropout(x, run("p_as_keep"), p) == v02.DROPOUT_P_AS_KEEP
        assert v02.diagnose_dropout(x, x, p) == v02.DROPOUT_NOTHING_DROPPED
        low, high = v02.zero_fraction_bounds(p, x.numel())
        assert low <= float((run() == 0).float().mean()) <= high


def test_dropout_in_eval_mistake_is_random_at_evaluation():
    x = randn(10, 10, seed=13)
    assert not torch.equal(v02.dropout(x, 0.5, training=False, mistake="in_eval"), x)


@pytest.mark.parametrize("T", [1, 4, 6])
@pytest.mark.parametrize("bias", [False, True])
def test_causal_self_attention_default_is_the_reference(T, bias):
    torch.manual_seed(0)
    module = CausalSelfAttention(6, 8, 6, qkv_bias=bias)
    x = randn(2, T, 6, seed=14)
    with torch.no_grad():
        want = module(x)
    assert close(v02.causal_self_attention(params(module), x), want)
    if T > 1:
        assert_all_apart(v02.causal_self_attention_mistakes(params(module), x), want)
