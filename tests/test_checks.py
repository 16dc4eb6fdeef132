"""The checks hidden suites use: what they accept, and the message and hint when they fail."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from torch import nn

from grader.core import hints
from grader.sandbox.errors import StudentException
from grader.suite.checks import (
    CheckFailed,
    describe_difference,
    expect_causal,
    expect_close,
    expect_computes_with,
    expect_contract_parameters,
    expect_derivative,
    expect_equal,
    expect_follows_device,
    expect_named_tensors,
    expect_raises,
    expect_tensor,
    expect_token_ids,
    gradient_mistakes,
    names_mismatch,
)


class FakeRemote:
    """Stands for a student's module: inspect() as the child answers it."""

    def __init__(self, module: nn.Module):
        self._module = module

    def inspect(self) -> dict:
        return {"module": True, "parameters": {name: list(p.shape) for name, p in self._module.named_parameters()}}


class Contract(nn.Module):
    def __init__(self, width: int = 3):
        super().__init__()
        self.W_q = nn.Linear(width, 3)


def check(student: nn.Module, **kwargs) -> None:
    expect_contract_parameters("M()", FakeRemote(student), Contract(), names_hint="use W_q", **kwargs)


def test_matching_parameters_pass():
    check(Contract())


def test_a_renamed_submodule_names_missing_and_unexpected():
    renamed = nn.Module()
    renamed.query = nn.Linear(3, 3)
    with pytest.raises(CheckFailed) as failure:
        check(renamed)
    assert failure.value.hint == "the contract names W_q; you have query: use W_q"
    assert failure.value.message == "M() parameters: the contract names W_q; you have query"


class SequentialFeedForward(nn.Module):
    """The tutorial habit: the two layers in an nn.Sequential, not linear1 and linear2."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))


def test_a_names_mismatch_deep_in_a_transformer_is_said_once_and_bounded():
    from reference.layers import Transformer

    def transformer() -> nn.Module:
        return Transformer(11, 11, d_model=8, num_heads=2, num_encoder_layers=6, num_decoder_layers=6, d_ff=16)

    student = transformer()
    for layer in [*student.encoder_layers, *student.decoder_layers]:
        layer.ffn = SequentialFeedForward(8, 16)
    with pytest.raises(CheckFailed) as failure:
        expect_contract_parameters("Transformer()", FakeRemote(student), transformer(), names_hint="see the table")
    assert failure.value.hint == ("decoder_layers.0.ffn, decoder_layers.1.ffn, and 10 more: the contract names "
                                  "linear1, linear2; you have net.0, net.2: see the table")
    assert len(failure.value.message) < 300


class _CountedNames(list):
    """A list of names that counts how often it is gone through."""

    passes = 0

    def __iter__(self):
        type(self).passes += 1
        return super().__iter__()


def test_the_students_names_are_gone_through_a_fixed_number_of_times_however_many_and_deep_they_are():
    # The student's process chooses its names: a megabyte of deep ones, each looked for in every
    # other at every depth, took 37 s of the trusted side's CPU for one Block (its bound is 30 s).
    deep = ".".join(f"m{depth}" for depth in range(100))
    yours = _CountedNames([*(f"{deep}.p{index}" for index in range(2000)), "attn.W_q.weight"])
    said = names_mismatch(["attn.W_q.weight", "attn.W_k.weight", "mlp.weight"], yours)
    assert said == "the contract names mlp; you have m0; attn: missing W_k"
    assert _CountedNames.passes <= 3


@pytest.mark.parametrize("contract, yours, said", [
    (["W_o.weight"], ["W_o.weight", "W_o.bias"], "W_o: unexpected bias"),  # bias=False ignored@pytest.mark.parametrize("contract, yours, said", [
    (["W_o.weight"], ["W_o.weight", "W_o.bias"], "W_o: unexpected bias"),  # bias=False ignored
    (["W_q.weight", "W_k.weight", "W_v.weight", "W_o.weight"], ["qkv.weight", "W_o.weight"],  # one fused projection
     "the contract names W_k, W_q, W_v; you have qkv"),
    (["weight", "bias"], ["gamma", "beta"], "the contract names bias, weight; you have beta, gamma"),  # own LayerNorm
    (["attn.W_q.weight", "attn.W_k.weight"], ["attn.W_q.weight"], "attn: missing W_k"),
    ([f"layers.{i}.linear{j}.weight" for i in range(20) for j in range(9)], ["weight"],  # nothing shared: bounded
     "the contract names layers.0, layers.1, layers.10, layers.11, layers.12, layers.13, and 14 more; you have weight"),
    # Karpathy's names for a block's pieces: the sub-trees differ from their top, said there.
    (["attn.heads.0.key.weight", "attn.heads.1.key.weight", "mlp.fc.weight", "ln1.weight"],
     ["sa.heads.0.key.weight", "sa.heads.1.key.weight", "ffwd.net.0.weight", "ln1.weight"],
     "the contract names attn, mlp; you have ffwd, sa"),
])
def test_names_mismatches_are_grouped_where_the_names_part(contract, yours, said):
    assert names_mismatch(contract, yours) == said


def test_a_wrong_shape_gets_the_shape_hint_and_says_which():
    with pytest.raises(CheckFailed) as failure:
        check(Contract(width=4), shape_hint="check the sizes")
    assert failure.value.hint == "check the sizes"
    assert "W_q.weight: got [3, 4], expected [3, 3]" in failure.value.message


def test_a_known_extra_parameter_gets_its_own_hint():
    student = Contract()
    student.mask = nn.Parameter(torch.ones(2, 2))
    with pytest.raises(CheckFailed) as failure:
        check(student, unexpected_hints={"mask": "register mask as a buffer"})
    assert failure.value.hint == "register mask as a buffer"
    check(student, ignore=("mask",))  # ignored names do not count


def test_expect_close_names_the_mistake_the_value_matches():
    want = torch.tensor([1.0, 2.0])
    with pytest.raises(CheckFailed) as failure:
        expect_close("f(x)", want * 2, want, atol=1e-6, mistakes={"doubled": lambda: want * 2, "negated": -want})
    assert failure.value.hint == "doubled" and "max abs error 2" in failure.value.message


def test_expect_close_reports_nan_where_the_reference_is_finite():
    with pytest.raises(CheckFailed, match="contain nan"):
        expect_close("f(x)", torch.tensor([float("nan"), 1.0]), torch.tensor([0.0, 1.0]), atol=1e-6)


def test_a_reported_gradient_must_be_the_derivative_of_the_loss():
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    grad = 2 * x  # of (x ** 2).sum()
    direction = grad / grad.norm()

    def loss_at(t: float) -> float:
        return float(((x + t * direction) ** 2).sum())

    expect_derivative("sum of squares", float(grad.norm()), loss_at, step=1e-3)
    with pytest.raises(CheckFailed, match="changes at a rate of"):
        expect_derivative("sum of squares", 2 * float(grad.norm()), loss_at, step=1e-3, hint="cut")
    with pytest.raises(CheckFailed):  # a loss that does not move at all
        expect_derivative("constant", 1.0, lambda t: 5.0, step=1e-3)


# ---- expect_tensor: what the student gets when the value is not even the right kind ----------


@pytest.mark.parametrize("got, kind", [
    ((torch.ones(2), torch.ones(2)), "a tuple of 2"),
    (None, "None (did you forget to return?)"),
    ([1.0, 2.0], "list"),
])
def test_expect_tensor_names_what_came_back_instead(got, kind):
    with pytest.raises(CheckFailed) as failure:
        expect_tensor("f(x)", got, hint="return the tensor")
    assert failure.value.message == f"f(x): expected a tensor, got {kind}"
    assert failure.value.hint == "return the tensor"


@pytest.mark.parametrize("got, hint", [
    ((torch.ones(2, 3), torch.ones(2, 2)), hints.RETURNS_SEVERAL),
    ([torch.ones(3)], hints.RETURNS_SEVERAL),
    (None, hints.RETURNS_NONE),
    ({"x": 1}, None),  # nothing to say about it
    ((1, 2), None),
])
def test_a_value_that_is_not_a_tensor_is_named_when_it_says_why(got, hint):
    with pytest.raises(CheckFailed) as failure:
        expect_tensor("f(x)", got, shape=(2, 3))
    assert failure.value.hint == hint


def test_expect_tensor_checks_shape_then_dtype_then_device():
    x = torch.zeros(2, 3)
    assert expect_tensor("f(x)", x, shape=(2, 3), dtype=torch.float32, device="cpu") is x
    with pytest.raises(CheckFailed, match=r"wrong shape: got \(2, 3\), expected \(3, 2\)"):
        expect_tensor("f(x)", x, shape=(3, 2), dtype=torch.int64)
    with pytest.raises(CheckFailed, match="wrong dtype: got float32, expected bool"):
        expect_tensor("f(x)", x, shape=(2, 3), dtype=torch.bool)
    with pytest.raises(CheckFailed, match="on the wrong device: got cpu, expected meta"):
        expect_tensor("f(x)", x, device="meta")


# ---- expect_close and expect_equal -------------------------------------------------------------


def test_expect_close_accepts_values_within_atol_plus_rtol():
    want = torch.tensor([64.0, 0.0])  # the tolerance at 64 is 0.125 + 64 / 128 = 0.625
    expect_close("f(x)", want + torch.tensor([0.5, 0.0625]), want, atol=0.125, rtol=1 / 128)
    with pytest.raises(CheckFailed, match=r"max abs error 0\.75 at index \[0\]"):
        expect_close("f(x)", want + torch.tensor([0.75, 0.0]), want, atol=0.125, rtol=1 / 128)


def test_a_wrong_shape_is_still_named_when_a_mistake_produces_it():
    want = torch.ones(2, 3)
    transposed = torch.ones(3, 2)
    with pytest.raises(CheckFailed) as failure:
        expect_close("f(x)", transposed, want, atol=1e-6, mistakes={"transposed": transposed, "other": want})
    assert "wrong shape" in failure.value.message and failure.value.hint == "transposed"


def test_a_right_shape_in_the_wrong_dtype_fails_on_the_dtype():
    with pytest.raises(CheckFailed, match="wrong dtype: got float64, expected float32"):
        expect_close("f(x)", torch.ones(2, dtype=torch.float64), torch.ones(2), atol=1e-3)


def test_no_hint_when_no_mistake_matches():
    with pytest.raises(CheckFailed) as failure:
        expect_close("f(x)", torch.zeros(2), torch.ones(2), atol=1e-6, mistakes={"negated": -torch.ones(2)})
    assert failure.value.hint is None


def test_expect_equal_is_exact_for_masks_and_ids():
    mask = torch.tensor([True, False])
    expect_equal("mask", mask.clone(), mask)
    with pytest.raises(CheckFailed) as failure:
        expect_equal("mask", ~mask, mask, mistakes={"inverted": ~mask})
    assert failure.value.hint == "inverted"
    with pytest.raises(CheckFailed):
        expect_equal("ids", torch.tensor([1, 2]), torch.tensor([1, 3]))


# ---- describe_difference: the one line a student reads -----------------------------------------


def test_describe_difference_points_at_the_largest_error():
    want = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
    got = want + torch.tensor([[0.0, 0.1], [-0.5, 0.0]])
    assert describe_difference(got, want) == ("values differ from the reference: max abs error 0.5 at index [1, 0] "
                                              "(got 1.5, expected 2)")


def test_describe_difference_names_a_non_finite_value_where_the_reference_is_finite():
    message = describe_difference(torch.tensor([0.0, float("inf")]), torch.tensor([0.0, 1.0]))
    assert message == "your values contain inf where the reference is finite (first at index (1,): expected 1)"


def test_describe_difference_counts_a_missing_minus_inf_as_the_largest_error():
    want = torch.tensor([float("-inf"), 0.0])
    message = describe_difference(torch.tensor([0.0, 0.5]), want)
    assert "max abs error inf at index [0]" in message and "expected -inf" in message


def test_describe_difference_of_scalars():
    assert "max abs error 1 at index []" in describe_difference(torch.tensor(2.0), torch.tensor(1.0))


# ---- expect_raises: argument checks across the boundary ----------------------------------------


def raising(type_name: str, message: str = "bad", stub: bool = False):
    def call():
        raise StudentException("f()", type_name, message, "", stub=stub)
    return call


def test_expect_raises_passes_on_the_named_type():
    expect_raises(ValueError, "f(bad)", raising("ValueError"))


def test_a_bare_assert_gets_the_value_error_hint():
    with pytest.raises(CheckFailed) as failure:
        expect_raises(ValueError, "f(bad)", raising("AssertionError", "d_model % heads"))
    assert failure.value.message == "f(bad): expected ValueError, but your code raised AssertionError: d_model % heads"
    assert "bare assert" in failure.value.hint


def test_another_exception_type_fails_without_the_assert_hint():
    with pytest.raises(CheckFailed) as failure:
        expect_raises(ValueError, "f(bad)", raising("TypeError"))
    assert failure.value.hint is None


def test_nothing_raised_fails():
    with pytest.raises(CheckFailed, match="expected ValueError, but nothing was raised"):
        expect_raises(ValueError, "f(bad)", lambda: None)


def test_an_unimplemented_stub_propagates_so_the_part_says_not_implemented():
    with pytest.raises(StudentException) as raised:
        expect_raises(ValueError, "f(bad)", raising("NotImplementedError", stub=True))
    assert raised.value.stub


def test_a_not_implemented_error_of_torchs_is_the_wrong_exception_not_a_stub():
    with pytest.raises(CheckFailed, match="expected ValueError, but your code raised NotImplementedError"):
        expect_raises(ValueError, "f(bad)", raising("NotImplementedError", "\"lt_cpu\" not implemented for 'Bool'"))


# ---- expect_computes_with: the names a module reports are the ones it uses ---------------------


class LocalRemote(FakeRemote):
    """A student's module as the remote API exposes it, computing here."""

    def load_parameters(self, parameters: dict) -> None:
        self._module.load_state_dict(parameters, strict=True)

    @contextmanager
    def holding(self, parameters: dict) -> Iterator[None]:
        self.load_parameters(parameters)
        yield


def test_a_module_that_computes_with_its_parameters_passes():
    module = Contract()
    x = torch.randn(2, 3)
    expect_computes_with("M()", LocalRemote(module), Contract(), lambda: module.W_q(x))


def test_a_module_whose_output_ignores_its_parameters_fails():
    module = Contract()
    frozen = torch.randn(2, 3)  # computed once: what a module holding hidden copies would return
    with pytest.raises(CheckFailed, match="stays the same") as failure:
        expect_computes_with("M()", LocalRemote(module), Contract(), lambda: frozen.clone())
    assert "compute with the parameters it holds" in failure.value.hint


class Attention(nn.Module):
    """The contract's three projections, with biases."""

    def __init__(self, queries_from: str = "W_q"):
        super().__init__()
        self.W_q, self.W_k, self.W_v = (nn.Linear(4, 4) for _ in range(3))
        self.queries_from = queries_from

    def forward(self, x):
        q, k, v = getattr(self, self.queries_from)(x), self.W_k(x), self.W_v(x)
        return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


def test_a_submodule_whose_parameters_change_nothing_is_named_alone():
    # Queries computed with the value projection: W_q is never called, though all of them
    # changing at once changes the output.
    module, x = Attention(queries_from="W_v"), torch.randn(2, 3, 4)
    with pytest.raises(CheckFailed, match="only W_q's parameters change") as failure:
        expect_computes_with("A(x)", LocalRemote(module), Attention(), lambda: module(x))
    assert failure.value.hint == hints.UNUSED_PARAMETERS.format(module="W_q")


def test_an_unused_submodule_that_is_a_named_mistake_says_so_with_its_evidence():
    # No output projection: the value tests name the mistake, and so does this check.
    module, x = Attention(queries_from="W_v"), torch.randn(2, 3, 4)
    named = hints.Mistake("queries from the value projection", "a projection used twice")
    with pytest.raises(CheckFailed) as failure:
        expect_computes_with("A(x)", LocalRemote(module), Attention(), lambda: module(x), unused={"W_q": named})
    assert (failure.value.hint, failure.value.mistake) == (named, "a projection used twice")


def test_a_key_bias_that_a_softmax_undoes_is_no_unused_submodule():
    # Alone, W_k's bias shifts every score of a row alike: with its weight, W_k changes the output.
    module, x = Attention(), torch.randn(2, 3, 4)
    expect_computes_with("A(x)", LocalRemote(module), Attention(), lambda: module(x))


def test_a_piece_graded_as_a_part_of_its_own_is_not_checked_here():
    module, x = Attention(queries_from="W_v"), torch.randn(2, 3, 4)
    expect_computes_with("A(x)", LocalRemote(module), Attention(), lambda: module(x), pieces=("W_q",))


def test_a_forward_that_raises_is_left_to_the_value_tests():
    def forward():
        raise StudentException("M()", "RuntimeError", "shape mismatch", "")
    expect_computes_with("M()", LocalRemote(Contract()), Contract(), forward)


# ---- mistakes behind a representation: named with it, at once -----------------------------------

CAUSAL = torch.ones(4, 4, dtype=torch.bool).tril()
MASK_MISTAKES = {"mask inverted: True marks the future": ~CAUSAL, "triu": CAUSAL.T.clone()}


def _mask_hint(got: torch.Tensor) -> CheckFailed:
    with pytest.raises(CheckFailed) as failure:
        expect_equal("causal_mask(4)", got, CAUSAL, mistakes=MASK_MISTAKES)
    return failure.value


def test_a_float_mask_with_one_for_blocked_names_the_dtype_and_the_inversion():
    # The tutorial habit: torch.triu(torch.ones(T, T), diagonal=1), 1 = blocked.
    failure = _mask_hint(torch.triu(torch.ones(4, 4), diagonal=1))
    assert "wrong dtype" in failure.message
    assert failure.hint == "wrong dtype (float32, expected bool) and mask inverted: True marks the future"


def test_a_right_mask_as_float_says_the_values_are_right():
    failure = _mask_hint(torch.tril(torch.ones(4, 4)))
    assert failure.hint == ("the values are right, but in the wrong representation: "
                            "wrong dtype (float32, expected bool)")


def test_a_mask_with_leading_singleton_dimensions_names_the_shape_and_the_mistake():
    # GPT-style: self.register_buffer("bias", torch.tril(...).view(1, 1, T, T)), read as blocked.
    failure = _mask_hint((~CAUSAL).view(1, 1, 4, 4))
    assert "wrong shape" in failure.message
    assert failure.hint == "wrong shape ((1, 1, 4, 4), expected (4, 4)) and mask inverted: True marks the future"
    assert "values are right" in _mask_hint(CAUSAL.view(1, 1, 4, 4)).hint


def test_an_additive_float_mask_is_read_as_one():
    # The annotated-transformer habit: 0 where attending, -inf (or -1e9) where blocked.
    additive = torch.zeros(4, 4).masked_fill(~CAUSAL, float("-inf"))
    assert "additive float32 mask" in _mask_hint(additive).hint
    assert "values are right" in _mask_hint(additive).hint
    inverted = torch.zeros(4, 4).masked_fill(CAUSAL, -1e9)
    assert _mask_hint(inverted).hint.endswith("and mask inverted: True marks the future")


def test_both_representation_differences_are_named_together():
    failure = _mask_hint(torch.triu(torch.ones(4, 4), diagonal=1)[None, None])
    assert failure.hint == ("wrong dtype (float32, expected bool) and wrong shape ((1, 1, 4, 4), expected (4, 4)) "
                            "and mask inverted: True marks the future")


def test_a_representation_behind_no_known_mistake_gets_no_hint():
    assert _mask_hint(torch.ones(4, 4)).hint is None
    assert _mask_hint(torch.ones(3, 5, dtype=torch.bool)).hint is None


# ---- expect_causal: leaks named by position -----------------------------------------------------


def changed_at(function, x: torch.Tensor):
    def output(later):
        changed = x.clone()
        if later is not None:
            changed[:, later] += 1.0
        return function(changed)
    return output


def test_a_causal_function_passes():
    x = torch.randn(2, 5, 3)
    running_mean = lambda v: v.cumsum(1) / torch.arange(1, 6).view(1, 5, 1)  # noqa: E731
    expect_causal("f(x)", changed_at(running_mean, x), 5, atol=1e-6, hint="mask")


def test_every_leaking_pair_is_counted_and_the_first_named():
    x = torch.randn(2, 5, 3)
    mean_of_all = lambda v: v.mean(1, keepdim=True).expand_as(v)  # noqa: E731
    with pytest.raises(CheckFailed) as failure:
        expect_causal("f(x)", changed_at(mean_of_all, x), 5, atol=1e-6, hint="mask the future")
    seen = "position 0 sees position 1, position 0 sees position 2, position 0 sees position 3 (and 7 more)"
    assert failure.value.hint == f"future positions are visible: {seen}; mask the future"


def test_a_single_leak_is_named_exactly():
    def leaks_one(v):
        out = v.clone()
        out[:, 1] = out[:, 1] + v[:, 3]  # position 1 reads position 3
        return out
    with pytest.raises(CheckFailed, match="position 1 sees position 3$"):
        expect_causal("f(x)", changed_at(leaks_one, torch.randn(1, 4, 2)), 4, atol=1e-6, hint="")
    with pytest.raises(CheckFailed) as failure:
        expect_causal("f(x)", changed_at(leaks_one, torch.randn(1, 4, 2)), 4, atol=1e-6, hint="h")
    assert failure.value.hint == "future positions are visible: position 1 sees position 3; h"


@pytest.mark.parametrize(("returned", "hint"), [
    ((torch.zeros(1, 4, 2), torch.zeros(1, 4, 4)), hints.RETURNS_SEVERAL),  # (output, weights): nothing to see
    (None, hints.RETURNS_NONE),
    (torch.zeros(4, 2), None),  # no batch: position 1 is no position
])
def test_no_tensor_with_the_positions_along_dimension_1_fails_with_what_came_back(returned, hint):
    with pytest.raises(CheckFailed) as failure:
        expect_causal("f(x)", lambda later: returned, 4, atol=1e-6, hint="h")
    assert failure.value.hint == hint


def test_an_output_that_changes_shape_with_the_input_fails():
    shapes = iter([(1, 4, 2), (1, 4, 2), (1, 4, 3)])
    with pytest.raises(CheckFailed, match="wrong shape"):
        expect_causal("f(x)", lambda later: torch.zeros(next(shapes)), 4, atol=1e-6, hint="h")


def test_an_output_of_another_shape_than_the_contracts_fails_uncompared():
    compared = []

    def leaks_everywhere(later):  # (1, 4, 1000) where the contract's output is (1, 4, 2)
        compared.append(later)
        return torch.rand(1, 4, 1000)
    with pytest.raises(CheckFailed, match="wrong shape"):
        expect_causal("f(x)", leaks_everywhere, 4, atol=1e-6, hint="h", shape=(1, 4, 2))
    assert compared == [None]


# ---- values from the student's process, checked before the grader computes with them ------------


def test_token_ids_in_the_vocabulary_pass_and_come_back():
    ids = torch.tensor([[0, 5], [3, 1]])
    assert expect_token_ids("generate(...)", ids, 6, shape=(2, 2)) is ids


@pytest.mark.parametrize("bad", [-1, 6, 3_000_000])
def test_a_token_id_outside_the_vocabulary_is_named_with_where_it_is(bad):
    with pytest.raises(CheckFailed) as failure:
        expect_token_ids("generate(...)", torch.tensor([[0, 5], [bad, 1]]), 6)
    assert failure.value.message == f"generate(...): token id {bad} (at index [1, 0]) is outside the vocabulary (0..5)"
    assert failure.value.hint == "token ids index the vocabulary: each is in 0..5"


def test_token_ids_are_a_long_tensor_first():
    with pytest.raises(CheckFailed, match="wrong dtype: got float32, expected int64"):
        expect_token_ids("generate(...)", torch.zeros(2, 2), 6)


LIKE = {"w": torch.zeros(2, 3), "b": torch.zeros(3, dtype=torch.float64)}


def test_named_tensors_of_the_expected_shapes_come_back_in_the_expected_dtypes():
    got = expect_named_tensors("state", {"w": torch.ones(2, 3, dtype=torch.float16), "b": torch.ones(3)}, LIKE)
    assert got["w"].dtype == torch.float32 and got["b"].dtype == torch.float64
    assert expect_named_tensors("state", {**LIKE, "mask": torch.ones(4)}, LIKE, others_allowed=True).keys() == {"w", "b"}


@pytest.mark.parametrize(("got", "said"), [
    ([torch.zeros(2, 3)], "expected tensors by name (a dict), got list"),
    ({"w": torch.zeros(2, 3)}, "the names are not the expected ones: missing b"),
    ({**LIKE, "extra": torch.zeros(1)}, "the names are not the expected ones: unexpected extra"),
    ({"w": torch.zeros(400000, 1, 1), "b": torch.zeros(3)}, "w: got (400000, 1, 1) (float32), expected (2, 3) (float32)"),
    ({"w": torch.zeros(2, 3, dtype=torch.long), "b": torch.zeros(3)}, "w: got (2, 3) (int64), expected (2, 3) (float32)"),
    ({"w": None, "b": torch.zeros(3)}, "w: got None (did you forget to return?), expected (2, 3) (float32)"),
])
def test_named_tensors_of_other_names_shapes_or_kinds_fail_with_what_differs(got, said):
    with pytest.raises(CheckFailed) as failure:
        expect_named_tensors("state", got, LIKE, hint="name them as the contract says")
    assert failure.value.message == f"state: {said}"
    assert failure.value.hint == "name them as the contract says"


def test_a_leak_a_named_mistake_explains_gets_that_mistakes_hint_once():
    x = torch.randn(2, 4, 3)
    mean_of_all = lambda v: v.mean(1, keepdim=True).expand_as(v)  # noqa: E731
    with pytest.raises(CheckFailed) as failure:
        expect_causal("f(x)", changed_at(mean_of_all, x), 4, atol=1e-6, hint="mask the future",
                      mistakes={"not masked at all": lambda: mean_of_all(x), "other": torch.zeros(2, 4, 3)})
    assert failure.value.hint == "not masked at all"
    assert "position 0 sees position 1" in failure.value.message


# ---- the rubric's evidence: the contract's mistake whose value the student's matched -------

DOUBLED = hints.Mistake("values doubled: divide by 2", "values doubled")


@pytest.mark.parametrize("got, mistakes, hint, evidence", [
    ("doubled", {DOUBLED: lambda: 2 * torch.ones(2)}, DOUBLED, "values doubled"),  # a contract mistake matched
    ("doubled", {"doubled (not in the contract)": 2 * torch.ones(2)}, "doubled (not in the contract)", None),
    ("zeros", {DOUBLED: 2 * torch.ones(2)}, None, None),  # a check that matched nothing carries nothing
])
def test_a_check_carries_the_contract_words_of_the_mistake_it_matched(got, mistakes, hint, evidence):
    value = {"doubled": 2 * torch.ones(2), "zeros": torch.zeros(2)}[got]
    with pytest.raises(CheckFailed) as failure:
        expect_close("f(x)", value, torch.ones(2), atol=1e-6, mistakes=mistakes)
    assert (failure.value.hint, failure.value.mistake) == (hint, evidence)


def test_a_failure_told_again_in_other_words_keeps_its_evidence():
    # A suite that says where the values differ (a row, a parameter) rewords the failure.
    with pytest.raises(CheckFailed) as failure:
        expect_close("f(x)", 2 * torch.ones(2), torch.ones(2), atol=1e-6, mistakes={DOUBLED: 2 * torch.ones(2)})
    told = failure.value.reworded("f(x): row 0 is [2, 2], expected [1, 1]")
    assert (told.message, told.hint, told.mistake, told.flags) == (
        "f(x): row 0 is [2, 2], expected [1, 1]", DOUBLED, "values doubled", failure.value.flags)


def test_a_mistake_named_with_another_fault_is_no_evidence_for_it():
    # The shape is wrong too: two faults, not one mistake's value.
    inverted = hints.Mistake("mask inverted: True marks the future", "mask inverted")
    with pytest.raises(CheckFailed) as failure:
        expect_equal("mask", (~CAUSAL).view(1, 1, 4, 4), CAUSAL, mistakes={inverted: ~CAUSAL})
    assert failure.value.hint.endswith("and mask inverted: True marks the future") and failure.value.mistake is None
    with pytest.raises(CheckFailed) as failure:  # a value of the mistake's own shape is its value
        expect_close("f(x)", torch.ones(3, 2), torch.ones(2, 3), atol=1e-6, mistakes={DOUBLED: torch.ones(3, 2)})
    assert failure.value.mistake == "values doubled"


def test_expect_causal_carries_the_evidence_of_the_mistake_the_unchanged_output_matches():
    leaky = torch.arange(4.0).view(1, 4).expand(1, 4).clone()

    def output(change_at):  # every position sees the sum of the whole input
        x = torch.arange(4.0) + (0.0 if change_at is None else (torch.arange(4) == change_at).float())
        return x.sum().expand(1, 4).clone()
    future = hints.Mistake("no causal mask", "future positions visible (no causal mask)")
    with pytest.raises(CheckFailed) as failure:
        expect_causal("f(x)", output, 4, atol=1e-6, hint="mask it", mistakes={future: lambda: output(None)})
    assert failure.value.mistake == "future positions visible (no causal mask)"
    with pytest.raises(CheckFailed) as failure:
        expect_causal("f(x)", output, 4, atol=1e-6, hint="mask it", mistakes={future: leaky})
    assert failure.value.mistake is None and "mask it" in failure.value.hint


def test_gradient_mistakes_are_the_gradients_of_each_mistakes_output():
    w, x = torch.randn(3, 3), torch.randn(2, 3)
    grad_output = torch.randn(2, 3)
    named = gradient_mistakes(lambda t: {DOUBLED: lambda: 2 * (t["x"] @ t["w"]), "student's own": lambda: x @ w},
                              {"x": x, "w": w}, grad_output)
    assert torch.allclose(named["w"][DOUBLED](), 2 * x.T @ grad_output)
    assert torch.allclose(named["x"][DOUBLED](), 2 * grad_output @ w.T)
    assert named["w"]["student's own"]() is None  # not computed from the tensors: it matches nothing
    with pytest.raises(CheckFailed) as failure:  # and a gradient check names the mistake with its evidence
        expect_close("gradient of w", 2 * x.T @ grad_output, x.T @ grad_output, atol=1e-5, mistakes=named["w"])
    assert (failure.value.hint, failure.value.mistake) == (DOUBLED, "values doubled")


# ---- expect_follows_device: on a grader without a GPU, the meta device shows a fixed one ---------


def _raising(message: str, type_name: str = "RuntimeError"):
    def run(where):
        raise StudentException("f(x)", type_name, message, "")
    return run


def test_an_output_on_the_inputs_device_passes():
    x = torch.randn(2, 3)
    expect_follows_device("f(x)", lambda where: (x.to(where) * 2), torch.device("cpu"), shape=(2, 3))


def test_an_output_made_on_the_cpu_fails_on_meta_with_the_fixed_device_hint():
    with pytest.raises(CheckFailed, match="on the wrong device: got cpu, expected meta") as failure:
        expect_follows_device("f(x)", lambda where: torch.zeros(2, 3), torch.device("cpu"), shape=(2, 3))
    assert failure.value.hint == hints.FIXED_DEVICE


def test_a_tensor_of_another_device_met_inside_the_code_fails_with_the_fixed_device_hint():
    run = _raising("Tensor on device cpu is not on the expected device meta!")
    with pytest.raises(CheckFailed, match="its input on the meta device") as failure:
        expect_follows_device("f(x)", run, torch.device("cpu"), shape=(2, 3))
    assert failure.value.hint == hints.FIXED_DEVICE


def test_code_that_needs_values_is_judged_on_the_real_device():
    seen = []

    def run(where):  # .item() cannot run on meta: an honest step, judged where it can run
        seen.append(where.type)
        if where.type == "meta":
            raise StudentException("f(x)", "RuntimeError", "Tensor.item() cannot be called on meta tensors", "")
        return torch.zeros(2, 3, device=where)
    expect_follows_device("f(x)", run, torch.device("cpu"), shape=(2, 3))
    assert seen == ["meta", "cpu"]


def test_an_output_of_another_shape_on_meta_is_judged_on_the_real_device():
    # .tolist() on meta reads zeros: a loop that stops on a value may stop elsewhere there.
    seen = []

    def run(where):
        seen.append(where.type)
        return torch.zeros(2, 3 if where.type == "cpu" else 5, device=where)
    expect_follows_device("f(x)", run, torch.device("cpu"), shape=(2, 3))
    assert seen == ["meta", "cpu"]


def test_on_meta_a_move_to_the_cpu_arrives_as_zeros_and_shows_where_it_goes():
    from grader.sandbox._child import _OnTheInputsDevice

    x = torch.ones(2, 3, device="meta")
    with _OnTheInputsDevice():
        moved = x.cpu()
        assert (moved.device.type, moved.shape, x.to("cpu", torch.float64).dtype) == ("cpu", x.shape, torch.float64)
        assert torch.equal(torch.ones(2, 3).copy_(x), torch.zeros(2, 3))
        assert x.tolist() == [[0.0] * 3] * 2  # a value read: zeros, and no error
        assert x.to(torch.float64).device.type == "meta"  # not a move
        for mixed in (lambda: torch.cat([moved, x]), lambda: x.clone().masked_fill_(moved > 0, 0.0),
                      lambda: x.gather(1, torch.zeros(2, 1, dtype=torch.long))):
            with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
                mixed()


def test_a_stub_propagates_so_the_part_says_not_implemented():
    with pytest.raises(StudentException):
        expect_follows_device("f(x)", _raising("f: see README", "NotImplementedError"), torch.device("cpu"),
                              shape=(2, 3))


def test_the_shape_counts_too_and_a_pair_is_checked_whole():
    with pytest.raises(CheckFailed, match="wrong shape"):
        expect_follows_device("f(x)", lambda where: torch.zeros(3, 2, device=where), torch.device("cpu"), shape=(2, 3))
    pair = lambda where: (torch.zeros(2, 3, device=where), torch.zeros(2, 2))  # noqa: E731
    with pytest.raises(CheckFailed, match="expected meta"):
        expect_follows_device("f(x)", pair, torch.device("cpu"), shape=((2, 3), (2, 2)))
    with pytest.raises(CheckFailed, match="expected 2 tensors") as failure:
        expect_follows_device("f(x)", lambda where: torch.zeros(2, 3, device=where), torch.device("cpu"),
                              shape=((2, 3), (2, 2)))
    assert failure.value.hint is None
