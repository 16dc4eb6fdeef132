"""The checks hidden suites use: what they accept, and the message and hint when they fail."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from grader.checks import CheckFailed, expect_close, expect_contract_parameters, expect_derivative


class FakeRemote:
    """Stands for a student's module: inspect() as the child answers it."""

    def __init__(self, module: nn.Module):
        self._module = module

    def inspect(self) -> dict:
        return {"parameters": {name: list(p.shape) for name, p in self._module.named_parameters()}}


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
    assert failure.value.hint == "missing ['W_q.bias', 'W_q.weight'], unexpected ['query.bias', 'query.weight']: use W_q"


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
