"""The dropout checks (grader/suite/dropout.py) and the checks of parameters beside the
contract's (grader/suite/contract_parameters.py): what passes for every correct way to drop,
and what each mistake is named."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from grader.core import hints
from grader.sandbox.errors import StudentException
from grader.suite import (
    CheckFailed,
    DropoutHints,
    expect_dropout,
    expect_new_draws,
    expect_no_dropout_at_zero,
    expect_replaced_pieces_written,
    weights_behind,
    without_unexpected_biases,
)

NAMED = DropoutHints(missing="missing", misplaced="misplaced")
KEPT = 1 + torch.rand(40, 50, generator=torch.Generator().manual_seed(0))  # nothing near zero


def dropped(how: str, p: float = 0.5, seed: int = 1) -> torch.Tensor:
    torch.manual_seed(seed)
    return {"nn.Dropout": lambda: nn.Dropout(p)(KEPT), "F.dropout": lambda: F.dropout(KEPT, p),
            "bernoulli": lambda: KEPT * torch.bernoulli(torch.full_like(KEPT, 1 - p)) / (1 - p),
            "rand": lambda: KEPT * (torch.rand(KEPT.shape) >= p) / (1 - p),
            "unscaled": lambda: KEPT * (torch.rand(KEPT.shape) >= p),
            "rate 0.1": lambda: nn.Dropout(0.1)(KEPT) * (1 - 0.1) / (1 - p)}[how]()


@pytest.mark.parametrize("how", ["nn.Dropout", "F.dropout", "bernoulli", "rand"])
def test_every_correct_way_to_drop_passes(how):
    expect_dropout("f(x)", dropped(how), KEPT, 0.5, atol=1e-6, rtol=1e-6, named=NAMED)


@pytest.mark.parametrize(("got", "hint"), [
    (KEPT.clone(), "missing"),
    (dropped("unscaled"), hints.DROPOUT_UNSCALED),
    (dropped("rate 0.1"), hints.DROPOUT_RATE_IGNORED),
    (KEPT * 2, hints.DROPOUT_RATE_IGNORED),  # scaled, but nothing dropped: a rate of 0
    (dropped("rand") + 1, "misplaced"),
], ids=["nothing dropped", "unscaled", "another rate", "scaled, no zeros", "other values"])
def test_each_mistake_is_named(got, hint):
    with pytest.raises(CheckFailed) as failure:
        expect_dropout("f(x)", got, KEPT, 0.5, atol=1e-6, rtol=1e-6, named=NAMED)
    assert failure.value.hint == hint


def test_dropout_where_another_value_shows_it_is_named_there():
    # Nothing of the kind kept is found behind the output, but the output itself is dropped.
    output = torch.randn(6, 7)
    torch.manual_seed(3)
    with pytest.raises(CheckFailed) as failure:
        expect_dropout("f(x)", None, KEPT, 0.5, atol=1e-6, rtol=1e-6, named=NAMED,
                       elsewhere={"on the output": (nn.Dropout(0.5)(output), output),
                                  "undropped elsewhere": (KEPT, KEPT)})
    assert failure.value.hint == "on the output"


def test_a_scale_of_the_students_own_dropout_is_accepted_when_given():
    expect_dropout("f(x)", dropped("unscaled"), KEPT, 0.5, atol=1e-6, rtol=1e-6, named=NAMED, scales=(1.0,))


def test_the_shape_of_a_dropped_value_is_checked_before_anything_is_computed():
    with pytest.raises(CheckFailed, match="wrong shape"):
        expect_dropout("f(x)", torch.zeros(400000, 1, 1), KEPT, 0.5, atol=1e-6, rtol=1e-6, named=NAMED)


def test_a_rate_of_its_own_shows_at_zero():
    expect_no_dropout_at_zero("f", KEPT, KEPT.clone(), atol=1e-6, rtol=0)
    with pytest.raises(CheckFailed) as failure:
        expect_no_dropout_at_zero("f", nn.Dropout(0.1)(KEPT), KEPT, atol=1e-6, rtol=0)
    assert failure.value.hint == hints.DROPOUT_RATE_IGNORED


def module_dropout(how: str, p: float = 0.5):
    """A module's dropout as students write it: a function of no arguments dropping KEPT."""
    generator = torch.Generator().manual_seed(0)  # made once, as in __init__: it draws on
    return {"nn.Dropout": lambda: nn.Dropout(p)(KEPT), "F.dropout": lambda: F.dropout(KEPT, p),
            "rand": lambda: KEPT * (torch.rand(KEPT.shape) >= p) / (1 - p),
            "own generator, made once": lambda: KEPT * (torch.rand(KEPT.shape, generator=generator) >= p) / (1 - p),
            "manual_seed in forward": lambda: (torch.manual_seed(1337), nn.Dropout(p)(KEPT))[1],
            "generator made in forward": lambda: KEPT * (
                torch.rand(KEPT.shape, generator=torch.Generator().manual_seed(1337)) >= p) / (1 - p)}[how]


def called_twice(how: str, p: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """Two calls in a row, the global generator seeded before the first, as the suites do."""
    drop = module_dropout(how, p)
    torch.manual_seed(7)
    return drop(), drop()


@pytest.mark.parametrize("how", ["nn.Dropout", "F.dropout", "rand", "own generator, made once"])
def test_dropout_that_draws_on_drops_other_units_on_the_next_call(how):
    expect_new_draws("f(x)", *called_twice(how), KEPT, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("how", ["manual_seed in forward", "generator made in forward"])
def test_dropout_with_a_fixed_seed_is_named(how):
    first, again = called_twice(how)
    expect_dropout("f(x)", first, KEPT, 0.5, atol=1e-6, rtol=1e-6, named=NAMED)  # one call looks right
    with pytest.raises(CheckFailed) as failure:
        expect_new_draws("f(x)", first, again, KEPT, atol=1e-6, rtol=1e-6)
    assert failure.value.hint == hints.DROPOUT_SAME_UNITS


@pytest.mark.parametrize("how", ["nn.Dropout", "manual_seed in forward"])
def test_an_output_that_drops_nothing_is_not_asked_to_change(how):
    # p=0, or dropout missing (which the dropout checks name): the same output twice is right.
    expect_new_draws("f(x)", *called_twice(how, p=0.0), KEPT, atol=1e-6, rtol=1e-6)


def test_the_second_calls_value_is_checked_before_it_is_compared():
    first, _ = called_twice("nn.Dropout")
    with pytest.raises(CheckFailed, match="wrong shape"):
        expect_new_draws("f(x)", first, torch.zeros(3), KEPT, atol=1e-6, rtol=1e-6)
    with pytest.raises(CheckFailed, match="expected a tensor"):
        expect_new_draws("f(x)", first, None, KEPT, atol=1e-6, rtol=1e-6)


def test_the_weights_behind_an_attention_output_are_recovered():
    generator = torch.Generator().manual_seed(4)
    values = torch.randn(2, 5, 8, generator=generator)
    weights = torch.softmax(torch.randn(2, 3, 5, generator=generator), dim=-1)
    assert torch.allclose(weights_behind(weights @ values, values, atol=1e-5), weights.double(), atol=1e-5)
    # An output dropped element by element is no weighted sum of the values.
    masked = (weights @ values) * (torch.rand(2, 3, 8, generator=generator) >= 0.5)
    assert weights_behind(masked, values, atol=1e-5, rtol=1e-4) is None
    assert weights_behind((1, 2), values, atol=1e-5) is None
    assert weights_behind(torch.zeros(2, 3, 9), values, atol=1e-5) is None  # another width: never solved


# ---- parameters beside the contract's ------------------------------------------------------------


class Local:
    """A student's module as the remote API exposes it, computing here; ``new`` builds the
    student's classes by name (missing: not found; a stub: NotImplementedError)."""

    def __init__(self, module: nn.Module, classes: dict | None = None):
        self.module, self.classes = module, classes or {}

    def inspect(self) -> dict:
        return {"module": True, "parameters": {n: list(p.shape) for n, p in self.module.named_parameters()},
                "uninitialized": []}

    def load_parameters(self, parameters: dict) -> None:
        state = self.module.state_dict()
        state.update(parameters)
        self.module.load_state_dict(state, strict=True)

    def new(self, name: str, *args):
        if name not in self.classes:
            raise StudentException(name, "NotImplementedError", f"{name}.__init__: see the README", "", stub=True)
        return Local(self.classes[name](*args))


class FeedForward(nn.Module):
    def __init__(self, d: int = 4):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d, 8), nn.Linear(8, d)


class Layer(nn.Module):
    def __init__(self, ffn: nn.Module):
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.ffn = ffn


SEQUENTIAL = lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))  # noqa: E731


def test_an_inline_piece_whose_class_is_not_written_costs_its_names_in_the_part_that_holds_it():
    layer = Local(Layer(SEQUENTIAL()))
    with pytest.raises(CheckFailed) as failure:
        expect_replaced_pieces_written("Layer(4)", layer, layer, Layer(FeedForward()), {"FeedForward": (4,)},
                                       names_hint="use ffn = FeedForward(d)")
    assert "ffn: the contract names linear1, linear2; you have 0, 2" in failure.value.hint
    assert "ffn stands for your FeedForward, which is not written yet" in failure.value.hint


@pytest.mark.parametrize("ffn, classes", [
    (FeedForward, {}),  # the contract's names: nothing to replace
    (SEQUENTIAL, {"FeedForward": FeedForward}),  # written to the contract: the layer's choice is graded on its wiring
    (SEQUENTIAL, {"FeedForward": lambda d: nn.Sequential(nn.Linear(d, 8), nn.ReLU(), nn.Linear(8, d))}),
], ids=["contract names", "class written, piece inline", "class itself a Sequential"])
def test_a_piece_whose_class_is_written_costs_nothing_here(ffn, classes):
    layer = Local(Layer(ffn()), classes)
    expect_replaced_pieces_written("Layer(4)", layer, layer, Layer(FeedForward()), {"FeedForward": (4,)},
                                   names_hint="use ffn = FeedForward(d)")


class Head(nn.Module):
    def __init__(self, bias: bool):
        super().__init__()
        self.lm_head = nn.Linear(4, 6, bias=bias)


def test_a_bias_the_contract_leaves_out_is_loaded_as_zero():
    student, reference = Local(Head(bias=True)), Head(bias=False)
    student.load_parameters(dict(reference.named_parameters()))
    without_unexpected_biases(student, reference)
    x = torch.randn(3, 4)
    assert torch.equal(student.module.lm_head.bias, torch.zeros(6))
    assert torch.allclose(student.module.lm_head(x), reference.lm_head(x))
